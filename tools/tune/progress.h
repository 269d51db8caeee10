// The tuning clock and the progress line: seconds spent against the budget
// (with those of earlier runs on --resume), the stop flag SIGINT and
// SIGTERM set, and the one-line status on stderr.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace tune {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Set by SIGINT and SIGTERM: every loop of the search stops, and no record is written.
inline volatile std::sig_atomic_t g_stop = 0;
inline void on_signal(int) { g_stop = 1; }

// "12m05s" or "1h02m".
inline std::string fmt_time(double s) {
    char buf[32];
    int t = (int)std::lround(std::max(0.0, s));
    if (t >= 3600) std::snprintf(buf, sizeof(buf), "%dh%02dm", t / 3600, t / 60 % 60);
    else std::snprintf(buf, sizeof(buf), "%dm%02ds", t / 60, t % 60);
    return buf;
}

struct Progress {
    double budget = 0, spent0 = 0;  // spent0: seconds from earlier runs (--resume)
    Clock::time_point start = Clock::now();
    bool tty = isatty(2);
    double spent() const { return spent0 + seconds_since(start); }
    void show(const std::string &task, int candidates, double best, double hand, const std::string &what) {
        double s = spent(), frac = std::min(1.0, s / budget);
        int filled = (int)(frac * 24);
        std::string bar(filled, '#');
        bar += std::string(24 - filled, '.');
        char line[320];
        std::snprintf(line, sizeof(line), "[%s] %3.0f%% %s/%s ETA %s | %-22s | %3d cand | best %.4g ms (hand %.4g, %.2fx) %s",
                      bar.c_str(), frac * 100, fmt_time(s).c_str(), fmt_time(budget).c_str(),
                      fmt_time(budget - s).c_str(), task.c_str(), candidates, best, hand,
                      best > 0 ? hand / best : 0.0, what.c_str());
        if (tty) std::fprintf(stderr, "\r\033[K%s", line);
        else std::fprintf(stderr, "%s\n", line);
        std::fflush(stderr);
    }
    void done_line() {
        if (tty) std::fprintf(stderr, "\n");
    }
};

}  // namespace tune

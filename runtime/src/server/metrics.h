// Internal: what GET /metrics of `halformer serve` counts (requests by
// status, tokens, cancellations), the gauges and the engine's counters
// (batches, splits, joins) it reads off the server, and their Prometheus
// text (metrics.cpp).
#pragma once

#include "halformer/engine.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>

namespace halformer::serving {

// Prometheus text exposition: counters, gauges, latency histograms.
class Histogram {
public:
    void add(double seconds);
    void write(std::ostream &o, const char *name, const char *help) const;

private:
    static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                         0.5,   1,    2.5,   5,    10,  30};
    std::array<int64_t, 12> bucket_{};
    int64_t count_ = 0;
    double sum_ = 0;
};

struct Gauges {
    EngineStats engine;
    int inflight = 0, connections = 0, idle_connections = 0;
    bool draining = false;
};

class Metrics {
public:
    void request(int status);
    void finished(double seconds, double first_token_seconds, int in_tokens, int out_tokens);
    void cancelled();
    std::string text(const Gauges &g) const;

private:
    mutable std::mutex mu_;
    std::map<int, int64_t> by_status_;
    Histogram duration_, first_token_;
    int64_t in_tokens_ = 0, out_tokens_ = 0, cancelled_ = 0;
};

}  // namespace halformer::serving

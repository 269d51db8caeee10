// Helpers shared by the halformer serve tests: the committed translator,
// a mix of requests and their answers alone, raw sockets, the fixture.
#pragma once

#include "halformer/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <cstdlib>
#include <fstream>
#include <netinet/in.h>
#include <random>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace serve_test {

using namespace halformer;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline const std::string kModel = std::string(HALFORMER_SOURCE_DIR) + "/models/en-de";

inline const char *kSentences[] = {
    "Open the file.",
    "Show hidden files",
    "The window is too small.",
    "Save the document before you close the program.",
    "Where is the nearest train station?",
    "Click the button to continue.",
    "The printer is not connected to the computer.",
    "Please enter your password again.",
    "This folder contains no images.",
    "Delete the selected messages from the server and empty the trash when the download has finished.",
    "Yes",
    "How many users can log in at the same time?",
    "The settings will be applied after a restart of the application.",
    "Copy",
    "Select a language for the user interface.",
    "An error occurred while reading the file from the disk.",
};

// The i-th request of the mix: text, options, and the same as GenerateOptions.
struct Mixed {
    json body;
    std::string text;
    GenerateOptions options;
};

inline Mixed mixed(int i) {
    Mixed m;
    m.text = kSentences[i % 16];
    m.body = {{"text", m.text}};
    switch ((i / 16) % 4) {
    case 0: break;  // greedy, the server's default limit
    case 1:
        m.body["beam"] = 4;
        m.body["n_best"] = 2;
        m.options.beam = 4;
        m.options.n_best = 2;
        break;
    case 2:
        m.body["sample"] = true;
        m.body["top_k"] = 5;
        m.body["seed"] = 1000 + i;
        m.options.sample = true;
        m.options.top_k = 5;
        m.options.seed = 1000 + i;
        break;
    case 3:
        m.body["max_new_tokens"] = 4;  // cut short
        m.options.max_new_tokens = 4;
        break;
    }
    return m;
}

// The answer the same request gets alone: Model::generate on one input.
inline json alone(Model &model, const Mixed &m) {
    Sequence ids = model.tokenizer().encode(m.text);
    GenerateOptions o = m.options;
    if (o.max_new_tokens == -1) o.max_new_tokens = std::min({2 * (int)ids.size() + 10, 256, 128});
    auto hyps = model.generate({ids}, o)[0];
    json out;
    out["ids"] = hyps[0].tokens;
    out["score"] = hyps[0].score;
    json alt = json::array();
    for (size_t k = 1; k < hyps.size(); k++) alt.push_back(hyps[k].tokens);
    out["alternatives"] = alt;
    out["text"] = model.text_of(hyps[0].tokens);
    return out;
}

// Tokens, text and alternatives equal the request alone; the score equals
// it within 1e-5 relative (a beam's sums run over batches of other sizes).
inline bool same_answer(const json &got, const json &ref) {
    if (!got.contains("ids") || got["ids"] != ref["ids"] || got["text"] != ref["text"]) return false;
    const double a = got["score"].get<double>(), b = ref["score"].get<double>();
    if (std::abs(a - b) > 1e-5 * std::max(1.0, std::abs(b))) return false;
    json alt = json::array();
    for (auto &a : got["alternatives"]) alt.push_back(a["ids"]);
    return alt == ref["alternatives"];
}

inline double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, (size_t)(p * (double)(v.size() - 1) + 0.5))];
}

inline int env_int(const char *name, int def) {
    const char *e = std::getenv(name);
    return e && *e ? std::atoi(e) : def;
}

// A raw connection, for clients httplib will not play (slow, stalled, killed).
inline int connect_to(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, (sockaddr *)&a, sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

inline std::string raw_request(const std::string &body) {
    return "POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Reads until the peer closes, `until` arrives, or `seconds` pass.
inline std::string read_all(int fd, double seconds, const char *until = "\r\n0\r\n\r\n") {
    timeval tv{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out;
    char buf[4096];
    const auto t0 = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0) break;
        if (n > 0) out.append(buf, (size_t)n);
        if (out.find(until) != std::string::npos) break;  // by default: the end of a chunked answer
    }
    return out;
}

inline std::string repeat(const std::string &s, int n) {
    std::string out;
    for (int i = 0; i < n; i++) out += s;
    return out;
}

inline double metric(const std::string &text, const std::string &name) {
    auto at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::atof(text.c_str() + at + name.size() + 2);
}

// Holds a server's running batches at the start of their next step until
// opened (ServerOptions::on_step = gate.hook()). A test that needs a batch
// still running when it sends the next request holds it here instead of
// sleeping against the request's length, a race a faster CPU wins. A held
// worker gives up after 60 s (a failed test must not hang the suite).
class Gate {
public:
    std::function<void()> hook() {
        return [this] {
            std::unique_lock<std::mutex> lock(mu_);
            held_++;
            cv_.notify_all();
            cv_.wait_for(lock, std::chrono::seconds(60), [&] { return open_; });
            held_--;
        };
    }
    // Returns once a worker is held (20 s at most: false if none came).
    bool wait_held() {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return held_ > 0; });
    }
    void open() {
        std::lock_guard<std::mutex> lock(mu_);
        open_ = true;
        cv_.notify_all();
    }
    // Holds the next steps again (a worker already past the gate runs its
    // current step to its end).
    void close() {
        std::lock_guard<std::mutex> lock(mu_);
        open_ = false;
    }
    ~Gate() { open(); }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int held_ = 0;
    bool open_ = false;
};

// Until cond() holds, 20 s at most; returns cond().
template <typename F>
bool wait_until(F &&cond) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!cond() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return cond();
}

// Waits (20 s at most) until the server's metric reaches at_least.
inline void wait_for_metric(Server &server, const char *name, double at_least) {
    const auto t0 = std::chrono::steady_clock::now();
    while (metric(server.metrics(), name) < at_least &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_GE(metric(server.metrics(), name), at_least) << name;
}

class Serve : public testing::Test {
protected:
    static void SetUpTestSuite() { model = new Model(Model::load(kModel)); }
    static void TearDownTestSuite() {
        delete model;
        model = nullptr;
    }
    static Model *model;
};
inline Model *Serve::model = nullptr;

struct Result {
    int status = 0;  // 0: no answer (error says why)
    json body;
    double seconds = 0;
    std::string error;
};

inline Result post(httplib::Client &c, const std::string &body) {
    Result r;
    const auto t0 = Clock::now();
    auto res = c.Post("/v1/generate", body, "application/json");
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!res) {
        r.error = httplib::to_string(res.error());
        return r;
    }
    r.status = res->status;
    r.body = json::parse(res->body, nullptr, false);
    return r;
}

}  // namespace serve_test

// The counters and histograms of GET /metrics (metrics.h) and their
// Prometheus text.
#include "metrics.h"

#include <sstream>

namespace halformer::serving {

void Histogram::add(double seconds) {
    for (size_t i = 0; i < kBuckets.size(); i++) {
        if (seconds <= kBuckets[i]) bucket_[i]++;
    }
    count_++;
    sum_ += seconds;
}

void Histogram::write(std::ostream &o, const char *name, const char *help) const {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < kBuckets.size(); i++) {
        o << name << "_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_[i] << "\n";
    }
    o << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
      << name << "_sum " << sum_ << "\n"
      << name << "_count " << count_ << "\n";
}

void Metrics::request(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    by_status_[status]++;
}

void Metrics::finished(double seconds, double first_token_seconds, int in_tokens, int out_tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    duration_.add(seconds);
    if (first_token_seconds >= 0) first_token_.add(first_token_seconds);
    in_tokens_ += in_tokens;
    out_tokens_ += out_tokens;
}

void Metrics::cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_++;
}

std::string Metrics::text(const Gauges &g) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream o;
    o << "# HELP halformer_requests_total Requests answered, by HTTP status.\n"
         "# TYPE halformer_requests_total counter\n";
    for (auto &[s, n] : by_status_) o << "halformer_requests_total{code=\"" << s << "\"} " << n << "\n";
    auto one = [&o](const char *name, const char *type, const char *help, auto value) {
        o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
          << name << " " << value << "\n";
    };
    one("halformer_input_tokens_total", "counter", "Input tokens of answered generations.", in_tokens_);
    one("halformer_generated_tokens_total", "counter", "Tokens generated for answered generations.",
        out_tokens_);
    one("halformer_cancelled_total", "counter", "Generations whose client went away before the answer.",
        cancelled_);
    const EngineStats &e = g.engine;
    one("halformer_batches_total", "counter", "Batches run.", e.batches);
    one("halformer_batch_splits_total", "counter", "Batches that failed whole and ran their requests alone.",
        e.splits);
    one("halformer_batched_requests_total", "counter", "Generations run in those batches.", e.batched + e.joined);
    one("halformer_joined_requests_total", "counter", "Generations that joined a running batch at its next step.",
        e.joined);
    one("halformer_queue_depth", "gauge", "Generations waiting for a batch.", e.waiting);
    one("halformer_batches_running", "gauge", "Batches running now.", e.running);
    one("halformer_requests_in_flight", "gauge", "Accepted requests not yet answered.", g.inflight);
    one("halformer_connections_open", "gauge", "Open client connections.", g.connections);
    one("halformer_connections_idle", "gauge", "Open connections waiting for a request (no thread held).",
        g.idle_connections);
    one("halformer_draining", "gauge", "1 once shutdown began.", g.draining ? 1 : 0);
    duration_.write(o, "halformer_request_duration_seconds", "Generations, arrival to answer.");
    first_token_.write(o, "halformer_time_to_first_token_seconds",
                       "Greedy and sampled generations, arrival to their first token.");
    return o.str();
}

}  // namespace halformer::serving

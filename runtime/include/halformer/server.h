// An HTTP/JSON server over one loaded Model (`halformer serve`).
//
//   POST /v1/generate     {"ids": [5, 6, 7]} or {"text": "..."} and the
//                         decoding options of `halformer generate` (beam,
//                         n_best, length_penalty, max_new_tokens, sample,
//                         temperature, top_k, top_p, seed), "stop" (strings)
//                         and "stream" → {"ids", "text", "score",
//                         "alternatives", "finish_reason", "input_tokens",
//                         "output_tokens", "queue_ms", "first_token_ms",
//                         "total_ms"}; with "stream": true, server-sent
//                         events: {"ids": [id], "text": piece} per token,
//                         then the whole answer with "done": true
//   POST /v1/completions  OpenAI's completions API (serve/request.h lists
//                         the arguments), streaming or not
//   GET  /v1/models       OpenAI's model list: this server's one model
//   GET  /health          {"status": "ok" | "draining", ...}
//   GET  /metrics         Prometheus text: requests by status, tokens, queue
//                         depth, batches, connections, latency histograms
//
// Requests are batched: a batch worker takes every waiting request whose
// options can share a batch (up to max_batch), runs them as one generate()
// call, and answers each as soon as it is done (a finished input leaves the
// batch; a short request does not wait for the long ones of its batch).
// With `join` (the default), a request that arrives while a batch it can
// share runs joins it at its next step (continuous batching: its prompt is
// prefilled in chunks beside the rows decoding, its KV cache in blocks of
// the batch's paged cache). `workers` batches run at once, each in its own
// Model session, so a long batch does not hold new requests back. Every answer's tokens and text
// equal the same request run alone (per-request seeds and limits); a beam
// score may differ from the request alone in its last bits (float32 sums
// over a batch of another size), by at most 1e-5 relative.
//
// Connections: an idle connection holds no thread (it waits in one epoll
// set); a request being read or answered holds one of http_threads; past
// max_connections open sockets a new one is answered 503 and closed.
// Requests pipelined on one connection are answered in order; HTTP/1.0
// gets answers with a length (or, streaming, until the close), never chunks.
//
// Limits: a body past max_body is 413; an input past the token limit 413;
// a malformed or wrong request 400 with {"error": "..."} (OpenAI's
// {"error": {"message", "type", "param", "code"}} on /v1/completions); when
// max_queue requests wait, 503. A client that disconnects cancels its
// request (it leaves its batch at the next step). An answer's status is sent
// when it is done: a generation that fails after acceptance is a 500 (a
// streamed answer has sent 200 already: its last event is the error). A
// batch that fails whole, e.g. past the model's memory budget, first runs
// each of its requests alone. shutdown() stops accepting, closes idle
// connections at once, answers every request already accepted, then returns.
#pragma once

#include "halformer/engine.h"
#include "halformer/model.h"

#include <cstddef>
#include <memory>
#include <functional>
#include <string>
#include <vector>

namespace halformer {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                 // 0: any free port (see Server::port())
    // The engine's: batches at once (workers: Model sessions), requests per
    // batch, waiting requests (past max_queue: 503), how long a worker lets
    // a batch fill, joins at the next step and their fairness bound, and
    // on_step (tests hold a running batch at a gate rather than race it
    // with a sleep). A server runs 2 workers and waits 2 ms for a batch.
    EngineOptions engine = server_engine();
    size_t max_body = 1 << 20;       // bytes; past it: 413
    int max_input_tokens = 0;        // 0: the model's max_positions
    int max_new_tokens = 256;        // the most one request may ask for
    int http_threads = 128;          // requests read or answered at once (idle connections hold none)
    int max_connections = 1024;      // open connections; past it a new one gets 503
    int read_timeout_s = 10;         // a request stalled this long is cut; an idle connection closed
    std::string model_name = "halformer";  // the model's id in the OpenAI API
    bool log = false;                // one line per request on stderr
    // Who may call. Empty: anyone who reaches the port. Otherwise every
    // request but GET /health carries "Authorization: Bearer KEY" with one
    // of these keys (compared in constant time), or is answered 401 in the
    // OpenAI API's error shape.
    std::vector<std::string> api_keys;
    // HTTPS: a PEM certificate (chain) and its private key, both or neither;
    // checked when the server is made (a clear error naming the file).
    std::string ssl_cert, ssl_key;

    static EngineOptions server_engine() {
        EngineOptions e;
        e.workers = 2;
        e.batch_wait_ms = 2.0;
        return e;
    }
};

class Server {
public:
    // The model must outlive the server; its max_sessions is raised to
    // `workers` if lower (CPU).
    Server(Model &model, const ServerOptions &options);
    ~Server();  // shutdown()
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;

    // Binds and starts serving in background threads; throws Error if the
    // address cannot be bound. Returns the port.
    int start();
    int port() const;
    // Stops accepting; requests already accepted are answered; returns when
    // all are. Safe to call twice.
    void shutdown();
    // The /metrics text.
    std::string metrics() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace halformer

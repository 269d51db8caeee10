// halformer::Server: cpp-httplib for HTTP, nlohmann-json for JSON, one
// Engine (engine.h) over one Model (server.h).
// This file: the helpers the server's files share, Server::Impl's
// construction and the public functions; a Job as the engine's request is
// in jobs.cpp, the HTTP handlers in routes.cpp (server_impl.h).
#include "openai.h"
#include "server_impl.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

namespace halformer {

namespace serving {

double ms_since(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// Any text in an answer (a message, a detokenized output) goes out as valid
// UTF-8: a stray byte becomes U+FFFD instead of a throw from dump().
std::string to_body(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string &msg) { return to_body(json{{"error", msg}}); }

namespace {

// Whether `given` is one of `keys`: every key compared over its whole
// length whatever `given` is, so the time taken tells nothing of how much of
// a key a guess got right.
bool is_api_key(const std::string &given, const std::vector<std::string> &keys) {
    unsigned found = 0;
    for (const std::string &k : keys) {
        unsigned diff = given.size() != k.size() ? 1u : 0u;
        for (size_t i = 0; i < k.size(); i++) {
            diff |= (unsigned char)k[i] ^ (unsigned char)(i < given.size() ? given[i] : 0);
        }
        found |= diff == 0 ? 1u : 0u;
    }
    return found != 0;
}

// The key of an "Authorization: Bearer KEY" header ("" when it has none;
// the scheme's name in any case, RFC 6750).
std::string bearer_key(const std::string &header) {
    size_t at = 0;
    while (at < header.size() && header[at] == ' ') at++;
    static const char scheme[] = "bearer";
    for (size_t i = 0; i < 6; i++, at++) {
        if (at >= header.size() || std::tolower((unsigned char)header[at]) != scheme[i]) return "";
    }
    if (at >= header.size() || header[at] != ' ') return "";
    while (at < header.size() && header[at] == ' ') at++;
    size_t end = header.size();
    while (end > at && header[end - 1] == ' ') end--;
    return header.substr(at, end - at);
}

// Keys a client can send in a header: not empty, no space or control character.
void check_api_keys(const std::vector<std::string> &keys) {
    for (const std::string &k : keys) {
        if (k.empty()) throw Error("serve: an API key must not be empty");
        for (const char c : k) {
            if ((unsigned char)c <= ' ' || c == 0x7f) {
                throw Error("serve: an API key holds a space or a control character (it could not be sent in a header)");
            }
        }
    }
}

}  // namespace

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace serving

Server::Impl::Impl(Model &m, const ServerOptions &o) : model(m), opt(o) {
    limits.max_input_tokens = o.max_input_tokens;
    limits.max_new_tokens = o.max_new_tokens;
    if (m.has_tokenizer()) {
        tok = &m.tokenizer();
        encode = [t = tok](const std::string &text) { return t->encode(text); };
    }
}

const Sequence *Server::Impl::prompt_of(const Job &job) const {
    return model.config().architecture == Architecture::Decoder ? &job.req.ids : nullptr;
}

// With API keys, before a request's body is read: every request but GET
// /health needs one of the keys, else 401, and the connection is closed
// after the answer (the unread body is not the next request).
httplib::Server::HandlerResponse Server::Impl::authorize(const httplib::Request &req, httplib::Response &res) {
    if (req.method == "GET" && req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string given = bearer_key(req.get_header_value("Authorization"));
    if (is_api_key(given, opt.api_keys)) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");
    res.set_content(openai_error(401,
                                 given.empty() ? "no API key: send \"Authorization: Bearer KEY\""
                                               : "the API key is not one of this server's",
                                 "", "invalid_api_key"),
                    "application/json");
    metrics.request(401);
    serve::HttpServer::close_after_answer();
    return httplib::Server::HandlerResponse::Handled;
}

void Server::Impl::answer(httplib::Response &res, int status, const std::string &body) {
    res.status = status;
    res.set_content(body, "application/json");
    metrics.request(status);
}

Server::Server(Model &model, const ServerOptions &options) : impl_(std::make_unique<Impl>(model, options)) {
    const ServerOptions &o = options;
    if (o.http_threads < 1 || o.max_new_tokens < 1 || o.max_connections < 1 || o.read_timeout_s < 1) {
        throw Error("serve: http_threads, max_connections, read_timeout_s and max_new_tokens must be >= 1");
    }
    if (o.model_name.empty()) throw Error("serve: the model name must not be empty");
    // (An engine without workers runs only when its caller steps it.)
    if (o.engine.workers < 1) throw Error("serve: workers must be >= 1");
    Impl &s = *impl_;
    s.engine = std::make_unique<Engine>(model, o.engine);  // (it checks its own options)
    serve::HttpLimits hl;
    hl.threads = o.http_threads;
    hl.max_connections = o.max_connections;
    hl.idle_timeout_s = o.read_timeout_s;
    hl.read_timeout_s = o.read_timeout_s;
    hl.write_timeout_s = o.read_timeout_s;
    hl.tls_cert = o.ssl_cert;
    hl.tls_key = o.ssl_key;
    check_api_keys(o.api_keys);
    try {
        s.http = std::make_unique<serve::HttpServer>(hl);
    } catch (const std::runtime_error &e) {
        throw Error(e.what());
    }
    auto &http = *s.http;
    // Remember the listening socket: httplib listens with a backlog of 5,
    // and a burst of clients past it would see resets (start() raises it).
    http.set_socket_options([&s](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restart on the same port at once
        s.listen_fd = sock;
    });
    http.set_payload_max_length(o.max_body);
    if (!o.api_keys.empty()) {
        http.set_pre_routing_handler(
            [&s](const httplib::Request &req, httplib::Response &res) { return s.authorize(req, res); });
    }
    http.Post("/v1/generate", [&s](const httplib::Request &req, httplib::Response &res) { s.generate(req, res); });
    http.Post("/v1/completions",
              [&s](const httplib::Request &req, httplib::Response &res) { s.completions(req, res); });
    http.Post("/v1/chat/completions",
              [&s](const httplib::Request &req, httplib::Response &res) { s.chat_completions(req, res); });
    for (const char *path : {"/v1/generate", "/v1/completions", "/v1/chat/completions"}) {
        http.Get(path, [&s](const httplib::Request &, httplib::Response &res) {
            s.answer(res, 405, error_body("use POST with a JSON body"));
        });
    }
    http.Get("/v1/models", [&s](const httplib::Request &, httplib::Response &res) {
        s.answer(res, 200, to_body(json{{"object", "list"}, {"data", json::array({s.model_object()})}}));
    });
    http.Get("/v1/models/(.+)", [&s](const httplib::Request &req, httplib::Response &res) {
        if (req.matches[1] == s.opt.model_name) return s.answer(res, 200, to_body(s.model_object()));
        res.status = 404;
        res.set_content(openai_error(404, "the model '" + std::string(req.matches[1]) + "' does not exist", "model",
                                     "model_not_found"),
                        "application/json");
        s.metrics.request(404);
    });
    http.Get("/health", [&s](const httplib::Request &, httplib::Response &res) {
        res.set_content(s.health(), "application/json");
    });
    http.Get("/metrics", [&s](const httplib::Request &, httplib::Response &res) {
        res.set_content(s.metrics_text(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([&s](const httplib::Request &, httplib::Response &res) {
        if (!res.body.empty()) return;
        // httplib's own answers to a request it could not read whole (the
        // handlers' errors have a body): the rest of the connection's bytes
        // are not requests.
        if (res.status == 400 || res.status == 413 || res.status == 414 || res.status == 431) {
            res.set_header("Connection", "close");
            serve::HttpServer::close_after_answer();
        }
        const char *what = res.status == 413 ? "the request body is too large"
                           : res.status == 404 ? "no such endpoint (POST /v1/generate, POST /v1/completions, POST /v1/chat/completions, "
                                                 "GET /v1/models, GET /health, GET /metrics)"
                                               : "bad request";
        res.set_content(error_body(what), "application/json");
        s.metrics.request(res.status);
    });
    http.set_exception_handler([&s](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception &e) {
            what = e.what();
        } catch (...) {
        }
        s.answer(res, 500, error_body(what));
    });
    if (o.log) {
        http.set_logger([](const httplib::Request &req, const httplib::Response &res) {
            std::fprintf(stderr, "serve: %s %s %d (%zu bytes in)\n", req.method.c_str(), req.path.c_str(), res.status,
                         req.body.size());
        });
    }
}

Server::~Server() {
    shutdown();
    impl_->engine->stop();  // (never started: nothing was queued)
}

int Server::start() {
    Impl &s = *impl_;
    if (s.started) return s.bound_port;
    const ServerOptions &o = s.opt;
    if (o.port == 0) {
        s.bound_port = s.http->bind_to_any_port(o.host);
        if (s.bound_port < 0) throw Error("serve: cannot bind " + o.host + " to any port");
    } else {
        if (!s.http->bind_to_port(o.host, o.port)) {
            throw Error("serve: cannot bind " + o.host + ":" + std::to_string(o.port) +
                        " (in use, or not an address of this machine)");
        }
        s.bound_port = o.port;
    }
    if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
    s.listener = std::thread([&s] { s.http->listen_after_bind(); });
    s.started = true;
    // Until listen runs, stop() would not stop it.
    for (int i = 0; i < 5000 && !s.http->is_running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return s.bound_port;
}

int Server::port() const { return impl_->bound_port; }

void Server::shutdown() {
    Impl &s = *impl_;
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (!s.started || s.stopped) return;
    // New requests get 503 from now on and idle connections close at once;
    // the accepted ones are answered in full (httplib cuts a streamed answer
    // short once stopped, so stop() waits for them); then the port is closed.
    s.draining = true;
    s.http->drain();
    {
        std::unique_lock<std::mutex> q(s.imu);
        s.drained.wait(q, [&] { return s.inflight == 0; });
    }
    s.http->close_all();
    s.http->stop();
    if (s.listener.joinable()) s.listener.join();
    s.engine->stop();
    s.stopped = true;
}

std::string Server::metrics() const { return impl_->metrics_text(); }

}  // namespace halformer

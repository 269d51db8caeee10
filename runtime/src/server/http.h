// Internal: the connection layer under `halformer serve`. cpp-httplib parses
// requests and writes answers; this class decides which thread serves which
// socket (httplib's own loop gives every connection a thread from accept to
// close, so idle keep-alive sockets past the thread count stall everyone).
//
//   * An idle connection holds no thread: a new or kept-alive socket waits in
//     one epoll set (the "parked" connections) and goes to the thread pool
//     only once bytes arrive; it is closed after `idle_timeout_s` idle.
//   * A request being read or answered holds one pool thread. A request
//     stalled half way is cut after the read timeout.
//   * Past `max_connections` open sockets a new one is answered 503 and
//     closed (each socket is a file descriptor; the limit is documented).
//   * Requests pipelined in one write are answered in order: bytes read past
//     one request stay in the connection's buffer for the next.
//   * drain(): answers carry "Connection: close" and idle sockets close at
//     once; close_all() then stops the poller (before httplib::Server::stop).
//   * A request whose framing is broken (a bad request line, an unknown
//     HTTP version, a header past the limits, a body it cannot delimit or
//     one past max_body) is answered 400/413/414 and its connection closed
//     (RFC 9112: the bytes after it are not requests).
//   * TLS (a certificate and key given): each socket's handshake runs on a
//     pool thread before it is parked; OpenSSL reads and writes its records.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace halformer::serve {

// One client socket as httplib's Stream, with its own read buffer (or,
// over TLS, OpenSSL's).
class Connection : public httplib::Stream {
public:
    Connection(int fd, int read_timeout_ms, int write_timeout_ms, std::atomic<int> &open);
    ~Connection() override;  // closes the socket (after TLS's close_notify)
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char *ptr, size_t size) override;
    ssize_t write(const char *ptr, size_t size) override;
    void get_remote_ip_and_port(std::string &ip, int &port) const override;
    void get_local_ip_and_port(std::string &ip, int &port) const override;
    socket_t socket() const override { return fd_; }

    // Bytes already read past the last request (a pipelined request).
    bool buffered() const;
    // TLS: the server's handshake on this socket, within the read timeout
    // (false: the client is not speaking TLS, or gave up).
    bool accept_tls(SSL_CTX *ctx);
    // The peer closed or reset its end (bytes it sent are not a close).
    bool peer_gone() const;

    // Waits up to timeout_ms for poll(2) events (POLLIN, POLLOUT).
    bool wait(short events, int timeout_ms) const;

    std::chrono::steady_clock::time_point idle_since;

private:
    int fd_;
    int read_timeout_ms_, write_timeout_ms_;
    std::atomic<int> &open_;
    SSL *ssl_ = nullptr;
    char buf_[4096];
    size_t pos_ = 0, len_ = 0;
};

struct HttpLimits {
    int threads = 128;            // requests read or answered at once
    int max_connections = 4096;   // open sockets; past it: 503 and close
    int idle_timeout_s = 10;      // an idle keep-alive socket is closed after this
    int read_timeout_s = 10;      // a request stalled this long is cut
    int write_timeout_s = 10;
    std::string tls_cert, tls_key;  // PEM files: HTTPS (both or neither)
};

class HttpServer : public httplib::Server {
public:
    explicit HttpServer(const HttpLimits &limits);
    ~HttpServer() override;

    // New answers close their connection; idle connections close now.
    void drain();
    // Closes every idle connection and stops handing sockets to the pool;
    // a connection still answering closes when its answer is written.
    void close_all();
    int open_connections() const { return open_.load(); }
    int idle_connections() const;

    // For a handler: the connection of the request this thread is serving
    // went away (null outside a handler: false).
    static bool client_gone();
    // For the error handler: close the connection of the request this
    // thread is answering once the answer is written.
    static void close_after_answer();

private:
    bool process_and_close_socket(socket_t sock) override;
    void serve(std::shared_ptr<Connection> c);
    void park(std::shared_ptr<Connection> c);
    void poll_loop();
    void close_idle(bool all);

    HttpLimits limits_;
    SSL_CTX *tls_ = nullptr;
    std::atomic<httplib::TaskQueue *> pool_{nullptr};
    int epoll_fd_ = -1, wake_fd_ = -1;
    std::thread poller_;
    mutable std::mutex mu_;
    std::unordered_map<int, std::shared_ptr<Connection>> parked_;
    std::atomic<int> open_{0};
    std::atomic<bool> draining_{false}, closed_{false};
};

}  // namespace halformer::serve

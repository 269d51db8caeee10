#include "http.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace halformer::serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local const Connection *tl_connection = nullptr;
thread_local bool tl_close_after = false;

// OpenSSL's last error as text ("" when it has none).
std::string ssl_error_text() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char text[256];
        ERR_error_string_n(e, text, sizeof text);
        if (!out.empty()) out += "; ";
        out += text;
    }
    return out;
}

// The server's TLS context from a PEM certificate (chain) and key.
SSL_CTX *make_tls_context(const std::string &cert, const std::string &key) {
    if (cert.empty() != key.empty()) {
        throw std::runtime_error("serve: TLS needs both a certificate (--ssl-cert) and its private key (--ssl-key)");
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) throw std::runtime_error("serve: TLS: " + ssl_error_text());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    auto fail = [&](const std::string &what) {
        const std::string why = ssl_error_text();
        SSL_CTX_free(ctx);
        throw std::runtime_error("serve: " + what + (why.empty() ? "" : ": " + why));
    };
    if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
        fail("--ssl-cert " + cert + ": not a readable PEM certificate");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
        const unsigned long e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
            fail("--ssl-key " + key + " is not the key of --ssl-cert " + cert);
        }
        fail("--ssl-key " + key + ": not a readable PEM private key");
    }
    if (SSL_CTX_check_private_key(ctx) != 1) fail("--ssl-key " + key + " is not the key of --ssl-cert " + cert);
    return ctx;
}

// A socket's send and receive timeouts (TLS's handshake and records block).
void set_socket_timeouts(int fd, int read_ms, int write_ms) {
    timeval r{read_ms / 1000, (read_ms % 1000) * 1000}, w{write_ms / 1000, (write_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof r);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &w, sizeof w);
}

void ip_and_port(const sockaddr_storage &a, std::string &ip, int &port) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
        auto *in = (const sockaddr_in *)&a;
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
        auto *in = (const sockaddr_in6 *)&a;
        inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
        port = ntohs(in->sin6_port);
    }
    ip = text;
}

// The answer to a connection past the limit (written before any request is
// read: the client reads it as the answer to its first request).
std::string busy_answer() {
    const std::string body = "{\"error\":\"too many open connections to this server; retry later\"}\n";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
           "Retry-After: 1\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

Connection::Connection(int fd, int read_timeout_ms, int write_timeout_ms, std::atomic<int> &open)
    : idle_since(Clock::now()), fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms),
      open_(open) {
    open_++;
}

Connection::~Connection() {
    if (ssl_ != nullptr) {
        if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);  // close_notify, not waiting for the peer's
        SSL_free(ssl_);
    }
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    open_--;
}

bool Connection::wait(short events, int timeout_ms) const {
    pollfd p{fd_, events, 0};
    for (;;) {
        int n = ::poll(&p, 1, timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        return n > 0;
    }
}

bool Connection::buffered() const { return ssl_ != nullptr ? SSL_pending(ssl_) > 0 : pos_ < len_; }

bool Connection::accept_tls(SSL_CTX *ctx) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return false;
    set_socket_timeouts(fd_, read_timeout_ms_, write_timeout_ms_);
    const bool ok = SSL_accept(ssl_) == 1;
    ERR_clear_error();  // (a failed handshake is the client's; nothing for the next one to see)
    return ok;
}

bool Connection::is_readable() const { return buffered() || wait(POLLIN, read_timeout_ms_); }

bool Connection::is_writable() const { return wait(POLLOUT, write_timeout_ms_) && !peer_gone(); }

bool Connection::peer_gone() const {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    // Over TLS the bytes waiting may be the peer's close_notify alert: a
    // record, not a close, to the peek below; its FIN follows it.
    if (ssl_ != nullptr) {
        pollfd q{fd_, POLLRDHUP, 0};
        if (::poll(&q, 1, 0) > 0 && (q.revents & (POLLRDHUP | POLLHUP | POLLERR))) return true;
    }
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

ssize_t Connection::read(char *ptr, size_t size) {
    if (ssl_ != nullptr) {
        if (size == 0) return 0;
        if (SSL_pending(ssl_) == 0 && !wait(POLLIN, read_timeout_ms_)) return -1;
        const int n = SSL_read(ssl_, ptr, (int)std::min(size, (size_t)1 << 30));
        if (n <= 0) {
            ERR_clear_error();
            return SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
        }
        return n;
    }
    if (!buffered()) {
        if (!wait(POLLIN, read_timeout_ms_)) return -1;
        ssize_t n;
        do {
            n = ::recv(fd_, buf_, sizeof buf_, 0);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) return n;
        pos_ = 0;
        len_ = (size_t)n;
    }
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return (ssize_t)n;
}

ssize_t Connection::write(const char *ptr, size_t size) {
    if (!wait(POLLOUT, write_timeout_ms_)) return -1;
    if (ssl_ != nullptr) {
        if (size == 0) return 0;
        const int n = SSL_write(ssl_, ptr, (int)std::min(size, (size_t)1 << 30));
        if (n <= 0) ERR_clear_error();
        return n <= 0 ? -1 : n;
    }
    ssize_t n;
    do {
        n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

void Connection::get_remote_ip_and_port(std::string &ip, int &port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(fd_, (sockaddr *)&a, &len) == 0) ip_and_port(a, ip, port);
}

void Connection::get_local_ip_and_port(std::string &ip, int &port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(fd_, (sockaddr *)&a, &len) == 0) ip_and_port(a, ip, port);
}

HttpServer::HttpServer(const HttpLimits &limits) : limits_(limits) {
    if (!limits.tls_cert.empty() || !limits.tls_key.empty()) tls_ = make_tls_context(limits.tls_cert, limits.tls_key);
    const int threads = limits.threads;
    new_task_queue = [this, threads] {
        auto *pool = new httplib::ThreadPool((size_t)threads);
        pool_ = pool;
        return pool;
    };
    // What the Keep-Alive header tells clients (the idle timeout is ours).
    set_keep_alive_timeout(limits.idle_timeout_s);
    set_keep_alive_max_count(100000);
    set_read_timeout(limits.read_timeout_s, 0);
    set_write_timeout(limits.write_timeout_s, 0);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error(std::string("serve: epoll: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    poller_ = std::thread([this] { poll_loop(); });
}

HttpServer::~HttpServer() {
    close_all();
    ::close(epoll_fd_);
    ::close(wake_fd_);
    if (tls_ != nullptr) SSL_CTX_free(tls_);
}

bool HttpServer::client_gone() { return tl_connection != nullptr && tl_connection->peer_gone(); }

void HttpServer::close_after_answer() { tl_close_after = true; }

int HttpServer::idle_connections() const {
    std::lock_guard<std::mutex> lock(mu_);
    return (int)parked_.size();
}

// A new socket from httplib's accept loop (on a pool thread): it waits for
// its first request parked, like an idle one.
bool HttpServer::process_and_close_socket(socket_t sock) {
    auto c = std::make_shared<Connection>(sock, limits_.read_timeout_s * 1000, limits_.write_timeout_s * 1000, open_);
    if (open_.load() > limits_.max_connections) {
        const std::string busy = busy_answer();
        c->write(busy.data(), busy.size());
        // Close our side, then give the client a moment to read the answer
        // before unread request bytes turn the close into a reset.
        ::shutdown(sock, SHUT_WR);
        char sink[1024];
        for (int i = 0; i < 10 && c->wait(POLLIN, 100) && ::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
        }
        return false;
    }
    if (tls_ != nullptr && !c->accept_tls(tls_)) return false;
    park(std::move(c));
    return true;
}

void HttpServer::serve(std::shared_ptr<Connection> c) {
    tl_connection = c.get();
    for (;;) {
        bool closed = false;
        tl_close_after = false;
        const bool ok = process_request(*c, draining_.load(), closed, nullptr);
        if (!ok || closed || tl_close_after || draining_.load() || closed_.load()) break;
        if (!c->buffered()) {
            tl_connection = nullptr;
            c->idle_since = Clock::now();
            park(std::move(c));
            return;
        }
        // A pipelined request is already here: answer it now.
    }
    tl_connection = nullptr;
}

void HttpServer::park(std::shared_ptr<Connection> c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_.load() || draining_.load()) return;  // dropping c closes it
    const int fd = c->socket();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.fd = fd;
    parked_[fd] = std::move(c);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) parked_.erase(fd);
}

void HttpServer::poll_loop() {
    epoll_event events[64];
    auto last_sweep = Clock::now();
    while (!closed_.load()) {
        const int n = ::epoll_wait(epoll_fd_, events, 64, 200);
        for (int i = 0; i < n; i++) {
            const int fd = events[i].data.fd;
            if (fd == wake_fd_) {
                uint64_t v;
                while (::read(wake_fd_, &v, sizeof v) > 0) {
                }
                continue;
            }
            std::shared_ptr<Connection> c;
            {
                std::lock_guard<std::mutex> lock(mu_);
                auto it = parked_.find(fd);
                if (it == parked_.end()) continue;
                c = std::move(it->second);
                parked_.erase(it);
                ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
            }
            httplib::TaskQueue *pool = pool_.load();
            // Bytes (or the peer's close, which ends the connection there).
            if (pool != nullptr && !closed_.load()) pool->enqueue([this, c] { serve(c); });
        }
        if (Clock::now() - last_sweep > std::chrono::milliseconds(500)) {
            close_idle(false);
            last_sweep = Clock::now();
        }
    }
}

void HttpServer::close_idle(bool all) {
    std::vector<std::shared_ptr<Connection>> dropped;  // closed outside the lock
    {
        std::lock_guard<std::mutex> lock(mu_);
        const auto limit = Clock::now() - std::chrono::seconds(limits_.idle_timeout_s);
        for (auto it = parked_.begin(); it != parked_.end();) {
            if (all || it->second->idle_since < limit) {
                ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
                dropped.push_back(std::move(it->second));
                it = parked_.erase(it);
            } else {
                ++it;
            }
        }
    }
}

void HttpServer::drain() {
    draining_ = true;
    close_idle(true);
}

void HttpServer::close_all() {
    if (closed_.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    if (poller_.joinable()) poller_.join();
    close_idle(true);
}

}  // namespace halformer::serve

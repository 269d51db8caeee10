// halformer serve's connections (runtime/src/server/http.h): idle sockets
// hold no thread, a connection limit answered 503, shutdown closes idle
// keep-alive connections at once, pipelined requests, HTTP/1.0, and a
// failure after acceptance answered with its own status.
#include "serve_test_util.h"

using namespace serve_test;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The answers in `raw`, each with a Content-Length (none chunked).
struct Answer {
    int status = 0;
    std::string head, body;
};
std::vector<Answer> split_answers(const std::string &raw) {
    std::vector<Answer> out;
    size_t at = 0;
    while (at < raw.size()) {
        const size_t end = raw.find("\r\n\r\n", at);
        if (end == std::string::npos) break;
        Answer a;
        a.head = raw.substr(at, end + 4 - at);
        a.status = std::atoi(a.head.c_str() + 9);
        const size_t cl = a.head.find("Content-Length: ");
        if (cl == std::string::npos) break;
        const size_t len = (size_t)std::atol(a.head.c_str() + cl + 16);
        a.body = raw.substr(end + 4, len);
        at = end + 4 + len;
        out.push_back(a);
    }
    return out;
}

// Keeps `n` connections open that have each had one answer and now idle.
std::vector<int> kept_alive(int port, int n) {
    std::vector<int> fds;
    for (int i = 0; i < n; i++) {
        int fd = connect_to(port);
        EXPECT_GE(fd, 0);
        const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), (ssize_t)req.size());
        EXPECT_NE(read_all(fd, 5, "}").find("HTTP/1.1 200"), std::string::npos);
        fds.push_back(fd);
    }
    return fds;
}

// More idle connections than HTTP threads: 100 sockets that never send and
// 100 kept alive after an answer, with 8 threads. Each thread used to stay
// with its socket until the idle timeout, and everyone else waited.
TEST_F(Serve, IdleConnectionsHoldNoThread) {
    ServerOptions so;
    so.port = 0;
    so.http_threads = 8;
    so.read_timeout_s = 30;
    Server server(*model, so);
    const int port = server.start();
    std::vector<int> fds;
    for (int i = 0; i < 100; i++) fds.push_back(connect_to(port));
    for (int fd : kept_alive(port, 100)) fds.push_back(fd);
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    for (int i = 0; i < 5; i++) {
        Result r = post(c, "{\"text\": \"Open the file.\"}");
        EXPECT_EQ(r.status, 200);
        EXPECT_LT(r.seconds, 2.0) << "a request waited behind idle connections";
    }
    EXPECT_GE(metric(server.metrics(), "halformer_connections_idle"), 200);
    EXPECT_GE(metric(server.metrics(), "halformer_connections_open"), 200);
    for (int fd : fds) ::close(fd);
}

// Past max_connections a new connection is answered 503 naming why; once
// some close, new ones are served again.
TEST_F(Serve, ConnectionsPastTheLimitGet503) {
    ServerOptions so;
    so.port = 0;
    so.max_connections = 20;
    Server server(*model, so);
    const int port = server.start();
    std::vector<int> fds;
    for (int i = 0; i < 20; i++) fds.push_back(connect_to(port));
    for (int i = 0; i < 100 && metric(server.metrics(), "halformer_connections_open") < 20; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    int extra = connect_to(port);
    const std::string req = raw_request("{\"text\": \"Open the file.\"}");
    ::send(extra, req.data(), req.size(), MSG_NOSIGNAL);
    const std::string got = read_all(extra, 5, "}\n");
    ::close(extra);
    EXPECT_NE(got.find("HTTP/1.1 503"), std::string::npos) << got;
    EXPECT_NE(got.find("too many open connections"), std::string::npos) << got;
    for (int i = 0; i < 10; i++) ::close(fds[i]);
    for (int i = 0; i < 100 && metric(server.metrics(), "halformer_connections_open") > 10; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    httplib::Client c("127.0.0.1", port);
    EXPECT_EQ(post(c, "{\"text\": \"Open the file.\"}").status, 200);
    for (int i = 10; i < 20; i++) ::close(fds[i]);
}

// shutdown() with 20 idle keep-alive connections returns at once (it used
// to wait out their idle timeout), and each of them sees the close.
TEST_F(Serve, ShutdownClosesIdleConnectionsAtOnce) {
    ServerOptions so;
    so.port = 0;
    so.read_timeout_s = 30;
    auto server = std::make_unique<Server>(*model, so);
    const int port = server->start();
    std::vector<int> fds = kept_alive(port, 20);
    const auto t0 = Clock::now();
    server->shutdown();
    EXPECT_LT(seconds_since(t0), 2.0);
    for (int fd : fds) {
        char b;
        timeval tv{2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        EXPECT_EQ(::recv(fd, &b, 1, 0), 0) << "an idle connection was left open";
        ::close(fd);
    }
}

// Three requests in one write are answered in order, each as alone.
TEST_F(Serve, PipelinedRequestsAreAnsweredInOrder) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    int fd = connect_to(port);
    std::string req;
    for (int i = 0; i < 3; i++) req += raw_request(mixed(i).body.dump());
    req += "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), (ssize_t)req.size());
    std::string raw;
    std::vector<Answer> got;
    for (int k = 0; k < 50 && got.size() < 4; k++) {
        raw += read_all(fd, 0.2, "\x01");
        got = split_answers(raw);
    }
    ::close(fd);
    ASSERT_EQ(got.size(), 4u) << raw;
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(got[i].status, 200);
        EXPECT_TRUE(same_answer(json::parse(got[i].body), alone(*model, mixed(i)))) << got[i].body;
    }
    EXPECT_NE(got[3].body.find("\"status\":\"ok\""), std::string::npos);
}

// HTTP/1.0 has no chunked transfer coding: an answer has its length and the
// connection closes after it; a streamed answer runs until the close.
TEST_F(Serve, Http10AnswersHaveALengthNotChunks) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    for (const bool stream : {false, true}) {
        int fd = connect_to(port);
        const std::string body = stream ? "{\"text\": \"Open the file.\", \"stream\": true}" : "{\"text\": \"Open the file.\"}";
        const std::string req = "POST /v1/generate HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
        ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
        const auto t0 = Clock::now();
        const std::string got = read_all(fd, 10, "\x01");  // until the server closes
        EXPECT_LT(seconds_since(t0), 5.0) << "the connection was not closed after the answer";
        ::close(fd);
        EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
        EXPECT_NE(got.find(" 200 "), std::string::npos) << got;
        EXPECT_NE(got.find("Datei öffnen."), std::string::npos) << got;
        if (!stream) EXPECT_NE(got.find("Content-Length: "), std::string::npos) << got;
        if (stream) EXPECT_NE(got.find("\"done\":true"), std::string::npos) << got;
    }
}

// A generation that fails after the request was accepted (here: past the
// model's memory budget even alone) is answered 500 with the reason, not
// 200 with an error inside.
TEST_F(Serve, AFailureAfterAcceptanceIsA500) {
    model->release_memory();
    const int64_t keep = model->memory_budget();
    model->set_memory_budget(1024);
    {
        ServerOptions so;
        so.port = 0;
        Server server(*model, so);
        httplib::Client c("127.0.0.1", server.start());
        Result r = post(c, "{\"text\": \"Open the file.\"}");
        EXPECT_EQ(r.status, 500);
        ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
        EXPECT_NE(r.body["error"].get<std::string>().find("generation failed"), std::string::npos) << r.body.dump();
    }
    model->set_memory_budget(keep);
}

}  // namespace

// Who may call halformer serve and how: API keys (ServerOptions::api_keys,
// "Authorization: Bearer"), HTTPS (ServerOptions::ssl_cert/ssl_key, the
// self-signed fixture in tests/fixtures/tls), and requests whose framing is
// broken, answered once and their connection closed (RFC 9112).
#include "serve_test_util.h"

using namespace serve_test;

namespace {

const std::string kTls = std::string(HALFORMER_SOURCE_DIR) + "/tests/fixtures/tls/";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// How many HTTP answers `raw` holds (each head starts with the status line).
int count_answers(const std::string &raw) {
    int n = 0;
    for (size_t at = raw.find("HTTP/1."); at != std::string::npos; at = raw.find("HTTP/1.", at + 1)) {
        if (at == 0 || raw[at - 1] == '}' || (at >= 2 && raw.compare(at - 2, 2, "\r\n") == 0)) n++;
    }
    return n;
}

// Sends `bytes` on a fresh connection and reads until the server closes it
// (or 8 s pass): what came back and whether it closed in time.
struct Exchange {
    std::string got;
    bool closed = false;
};
Exchange send_and_read(int port, const std::string &bytes) {
    Exchange e;
    int fd = connect_to(port);
    EXPECT_GE(fd, 0);
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    const auto t0 = Clock::now();
    e.got = read_all(fd, 8, "\x01");  // until the close
    e.closed = seconds_since(t0) < 6.0;
    ::close(fd);
    return e;
}

TEST_F(Serve, ApiKeysAreRequiredAndHealthStaysOpen) {
    ServerOptions so;
    so.port = 0;
    so.api_keys = {"hf-first-key", "hf-second-key"};
    Server server(*model, so);
    const int port = server.start();
    httplib::Client c("127.0.0.1", port);
    const std::string body = "{\"text\": \"Open the file.\"}";
    auto refused = [&](const httplib::Result &r, const char *what) {
        ASSERT_TRUE(r) << what;
        EXPECT_EQ(r->status, 401) << what;
        EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer") << what;
        const json j = json::parse(r->body);
        EXPECT_EQ(j["error"]["code"], "invalid_api_key") << what << ": " << r->body;
        EXPECT_EQ(j["error"]["type"], "invalid_request_error") << what;
    };
    refused(c.Post("/v1/generate", body, "application/json"), "no key");
    refused(c.Get("/v1/models"), "no key, GET");
    refused(c.Get("/metrics"), "no key, metrics");
    for (const char *bad : {"Bearer hf-first-ke", "Bearer hf-first-keyy", "Bearer ", "Basic aGY6aGY=",
                            "hf-first-key", "Bearer HF-FIRST-KEY", "Bearerhf-first-key"}) {
        refused(c.Post("/v1/generate", httplib::Headers{{"Authorization", bad}}, body, "application/json"), bad);
    }
    for (const char *good : {"Bearer hf-first-key", "Bearer hf-second-key", "bearer hf-second-key",
                             "Bearer   hf-first-key  "}) {
        auto r = c.Post("/v1/generate", httplib::Headers{{"Authorization", good}}, body, "application/json");
        ASSERT_TRUE(r) << good;
        EXPECT_EQ(r->status, 200) << good << ": " << r->body;
        EXPECT_EQ(json::parse(r->body)["text"], "Datei öffnen.") << good;
    }
    auto health = c.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    // A refused request's body is never read as the next request: one 401,
    // then the connection is closed.
    const Exchange e = send_and_read(port, raw_request(body) + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(e.closed) << e.got;
    EXPECT_EQ(count_answers(e.got), 1) << e.got;
    EXPECT_NE(e.got.find(" 401 "), std::string::npos) << e.got;
    // The refusals are counted by status.
    auto m = c.Get("/metrics", httplib::Headers{{"Authorization", "Bearer hf-first-key"}});
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("halformer_requests_total{code=\"401\"}"), std::string::npos) << m->body;
}

TEST_F(Serve, ABadApiKeyOptionIsAClearError) {
    for (const std::string &bad : {std::string(""), std::string("two words"), std::string("tab\tkey"),
                                   std::string("new\nline")}) {
        ServerOptions so;
        so.port = 0;
        so.api_keys = {"fine", bad};
        try {
            Server server(*model, so);
            ADD_FAILURE() << "accepted the key " << json(bad).dump();
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("API key"), std::string::npos) << e.what();
        }
    }
}

// Each request whose framing is broken is answered once and its connection
// closed: the bytes after it (here a GET /health) are not a request.
TEST_F(Serve, BrokenFramingIsAnsweredOnceThenClosed) {
    ServerOptions so;
    so.port = 0;
    so.max_body = 4096;
    Server server(*model, so);
    const int port = server.start();
    const std::string next = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    struct Case {
        const char *what;
        std::string bytes;
        const char *status;
    };
    const std::vector<Case> cases = {
        {"a request line that is not one", "HELLO THERE\r\nHost: x\r\nContent-Length: 0\r\n\r\n", " 400 "},
        {"an unknown method", "BREW /health HTTP/1.1\r\nHost: x\r\n\r\n", " 400 "},
        {"HTTP/2.0", "GET /health HTTP/2.0\r\nHost: x\r\n\r\n", " 400 "},
        {"a header line past the limit", "GET /health HTTP/1.1\r\nX-Big: " + std::string(10000, 'a') + "\r\n\r\n",
         " 400 "},
        {"a bad chunk size", "POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
         " 400 "},
        {"a body past max_body",
         "POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, ' '), " 413 "},
    };
    for (const Case &c : cases) {
        const Exchange e = send_and_read(port, c.bytes + next);
        EXPECT_TRUE(e.closed) << c.what << ": the connection stayed open";
        EXPECT_EQ(count_answers(e.got), 1) << c.what << ":\n" << e.got;
        EXPECT_NE(e.got.find(c.status), std::string::npos) << c.what << ":\n" << e.got;
        EXPECT_NE(e.got.find("Connection: close"), std::string::npos) << c.what << ":\n" << e.got;
    }
    // A well-framed request with a bad body keeps its connection: the next
    // request on it is answered too.
    int fd = connect_to(port);
    const std::string two = raw_request("{not json") + next;
    ASSERT_EQ(::send(fd, two.data(), two.size(), MSG_NOSIGNAL), (ssize_t)two.size());
    std::string raw;
    for (int k = 0; k < 50 && raw.find("\"status\":\"ok\"") == std::string::npos; k++) raw += read_all(fd, 0.2, "\x01");
    ::close(fd);
    EXPECT_EQ(count_answers(raw), 2) << raw;
    EXPECT_NE(raw.find(" 400 "), std::string::npos) << raw;
    EXPECT_NE(raw.find("\"status\":\"ok\""), std::string::npos) << raw;
}

TEST_F(Serve, HttpsAnswersAndPlainHttpOnItsPortIsRefused) {
    ServerOptions so;
    so.port = 0;
    so.ssl_cert = kTls + "cert.pem";
    so.ssl_key = kTls + "key.pem";
    so.api_keys = {"hf-key"};
    Server server(*model, so);
    const int port = server.start();
    httplib::SSLClient c("127.0.0.1", port);
    c.set_ca_cert_path((kTls + "cert.pem").c_str());
    c.enable_server_certificate_verification(true);
    const std::string body = "{\"text\": \"Open the file.\"}";
    for (int i = 0; i < 3; i++) {  // (one kept-alive connection: its later requests read TLS records too)
        auto r = c.Post("/v1/generate", httplib::Headers{{"Authorization", "Bearer hf-key"}}, body,
                        "application/json");
        ASSERT_TRUE(r) << httplib::to_string(r.error()) << " (TLS: " << c.get_openssl_verify_result() << ")";
        EXPECT_EQ(r->status, 200) << r->body;
        EXPECT_EQ(json::parse(r->body)["text"], "Datei öffnen.");
    }
    auto streamed = c.Post("/v1/generate", httplib::Headers{{"Authorization", "Bearer hf-key"}},
                           "{\"text\": \"Open the file.\", \"stream\": true}", "application/json");
    ASSERT_TRUE(streamed);
    EXPECT_NE(streamed->body.find("\"done\":true"), std::string::npos) << streamed->body;
    auto refused = c.Get("/v1/models");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    // Plain HTTP on the TLS port: no answer, the connection closed, and the
    // server serves on.
    const Exchange e = send_and_read(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(e.closed);
    EXPECT_EQ(e.got.find("200"), std::string::npos) << e.got;
    auto health = c.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    // A client that trusts no such certificate refuses the server.
    httplib::SSLClient stranger("127.0.0.1", port);
    stranger.enable_server_certificate_verification(true);
    stranger.set_ca_cert_path((kTls + "other_key.pem").c_str());
    EXPECT_FALSE(stranger.Get("/health"));
}

TEST_F(Serve, BadTlsFilesAreClearErrors) {
    struct Case {
        std::string cert, key, names;
    };
    const std::vector<Case> cases = {
        {kTls + "cert.pem", "", "both"},
        {kTls + "missing.pem", kTls + "key.pem", "missing.pem"},
        {kTls + "key.pem", kTls + "key.pem", "--ssl-cert"},
        {kTls + "cert.pem", kTls + "cert.pem", "--ssl-key"},
        {kTls + "cert.pem", kTls + "other_key.pem", "is not the key of"},
    };
    for (const Case &c : cases) {
        ServerOptions so;
        so.port = 0;
        so.ssl_cert = c.cert;
        so.ssl_key = c.key;
        try {
            Server server(*model, so);
            ADD_FAILURE() << "accepted " << c.cert << " / " << c.key;
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(c.names), std::string::npos) << e.what();
        }
    }
}

}  // namespace

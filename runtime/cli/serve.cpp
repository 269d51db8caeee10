// halformer serve: one loaded model behind HTTP/JSON (halformer/server.h).
//
//   halformer serve DIR [--host 127.0.0.1] [--port 8080] [--workers 2] [--max-batch 32]
//   curl -s localhost:8080/v1/generate -d '{"text": "Open the file."}'
//   halformer serve DIR --host 0.0.0.0 --api-key-file keys.txt --ssl-cert cert.pem --ssl-key key.pem
//
// SIGTERM or SIGINT: stop accepting, answer every request already accepted,
// exit 0.
#include "common.h"

#include "halformer/server.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>
#include <pthread.h>

namespace halformer {

namespace {

// The keys of an --api-key-file: one a line, surrounding blanks trimmed.
std::vector<std::string> read_api_keys(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw Error("--api-key-file " + path + ": cannot read it");
    std::vector<std::string> keys;
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
        if (a == std::string::npos || line[a] == '#') continue;
        keys.push_back(line.substr(a, b - a + 1));
    }
    return keys;
}

}  // namespace

int cmd_serve(int argc, char **argv) {
    CLI::App app{"halformer serve: an HTTP/JSON server for one model (POST /v1/generate, the OpenAI API: POST /v1/completions and GET /v1/models; GET /health, GET /metrics)",
                 "halformer serve"};
    std::string dir;
    ServerOptions so;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (config.json, model.safetensors) or GGUF file")->required();
    app.add_option("--host", so.host, "address to listen on (default 127.0.0.1: this machine only)");
    app.add_option("--port", so.port, "port (0: any free port, printed)")->check(CLI::Range(0, 65535));
    app.add_option("--workers", so.engine.workers, "batches run at once, each in its own model session")
        ->check(at_least(1));
    app.add_option("--max-batch", so.engine.max_batch, "requests per batch")->check(at_least(1));
    app.add_option("--max-queue", so.engine.max_queue, "requests waiting at most; more get 503")->check(at_least(1));
    app.add_option("--batch-wait-ms", so.engine.batch_wait_ms, "how long a worker lets a batch fill")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--max-body", so.max_body, "request body bytes at most (413 past it)")->check(at_least(1));
    app.add_option("--max-input-tokens", so.max_input_tokens, "input tokens at most (default: max_positions)")
        ->check(at_least(0));
    app.add_option("--max-new-tokens", so.max_new_tokens, "new tokens one request may ask for at most")
        ->check(at_least(1));
    app.add_option("--http-threads", so.http_threads, "requests read or answered at once (idle connections hold none)")
        ->check(at_least(1));
    app.add_option("--max-connections", so.max_connections, "open connections at most; past it a new one gets 503")
        ->check(at_least(1));
    app.add_option("--model-name", so.model_name, "the model's id in the OpenAI API (default: the directory's name)");
    bool no_join = false;
    app.add_flag("--no-join", no_join, "a request waits for a batch to start (no joining at the next step)");
    app.add_option("--join-fair-ms", so.engine.join_fair_ms,
                   "requests join a running batch only while no request of another kind has waited this long "
                   "for a worker (0: first come, first served)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--log", so.log, "one line per request on stderr");
    std::vector<std::string> key_files;
    app.add_option("--api-key", so.api_keys,
                   "a key callers must send as \"Authorization: Bearer KEY\" (repeatable; also --api-key-file and "
                   "$HALFORMER_API_KEY, which other users of this machine cannot read off the process list)");
    app.add_option("--api-key-file", key_files, "a file of API keys, one a line (# comments, blank lines skipped)")
        ->check(CLI::ExistingFile);
    app.add_option("--ssl-cert", so.ssl_cert, "HTTPS: the server's PEM certificate (chain)")->check(CLI::ExistingFile);
    app.add_option("--ssl-key", so.ssl_key, "HTTPS: the certificate's PEM private key")->check(CLI::ExistingFile);
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    so.engine.join = !no_join;
    for (const std::string &f : key_files) {
        const std::vector<std::string> keys = read_api_keys(f);
        if (keys.empty()) throw Error("--api-key-file " + f + ": no key in the file");
        so.api_keys.insert(so.api_keys.end(), keys.begin(), keys.end());
    }
    if (const char *env = std::getenv("HALFORMER_API_KEY"); env != nullptr && *env != 0) so.api_keys.push_back(env);
    if ((so.ssl_cert.empty()) != (so.ssl_key.empty())) throw Error("serve: --ssl-cert and --ssl-key go together");
    const Device device = apply_machine_options(mo);
    // The signals are taken by sigwait below: block them before any thread
    // starts, so that every thread inherits the mask.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is a failed write, not the end of the server

    if (so.model_name == ServerOptions{}.model_name) {
        std::string name = dir;
        while (name.size() > 1 && name.back() == '/') name.pop_back();
        name = name.substr(name.find_last_of('/') + 1);
        if (!name.empty() && name != "." && name != "..") so.model_name = name;
    }
    Model model = Model::load(dir, device);
    apply_precision(mo, model);
    Server server(model, so);
    const int port = server.start();
    std::printf("halformer serve: %s (%s, \"%s\") on %s://%s:%d  (POST /v1/generate, POST /v1/completions, "
                "GET /v1/models, GET /health, GET /metrics)%s\n",
                dir.c_str(), architecture_name(model.config().architecture), so.model_name.c_str(),
                so.ssl_cert.empty() ? "http" : "https", so.host.c_str(), port,
                so.api_keys.empty() ? "" : "; an API key is required (Authorization: Bearer)");
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "halformer serve: %s: answering the requests accepted, then exiting\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.shutdown();
    std::fprintf(stderr, "halformer serve: stopped\n");
    return 0;
}

}  // namespace halformer

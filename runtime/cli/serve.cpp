// halformer serve: one loaded model behind HTTP/JSON (halformer/server.h).
//
//   halformer serve DIR [--host 127.0.0.1] [--port 8080] [--workers 2] [--max-batch 32]
//   curl -s localhost:8080/v1/generate -d '{"text": "Open the file."}'
//
// SIGTERM or SIGINT: stop accepting, answer every request already accepted,
// exit 0.
#include "common.h"

#include "halformer/server.h"

#include <csignal>
#include <cstdio>
#include <pthread.h>

namespace halformer {

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
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    so.engine.join = !no_join;
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
    std::printf("halformer serve: %s (%s, \"%s\") on http://%s:%d  (POST /v1/generate, POST /v1/completions, "
                "GET /v1/models, GET /health, GET /metrics)\n",
                dir.c_str(), architecture_name(model.config().architecture), so.model_name.c_str(), so.host.c_str(),
                port);
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

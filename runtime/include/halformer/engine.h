// halformer::Engine: one model's generation engine. Requests added from any
// thread are batched, run and answered by the engine's workers, each
// answer what generate() gives that request alone (docs/serving.md):
//   - a free worker takes the oldest waiting request and every other waiting
//     one that can share its batch (batch_key, halformer/options.h), up to
//     max_batch, after waiting batch_wait_ms for a burst to fill;
//   - with join, waiting requests of the batch's kind join it at its next
//     step (GenerateOptions::join: continuous batching), but none past an
//     older request of another kind that has waited join_fair_ms while every
//     worker is busy: that one waits for a worker, which takes it next;
//   - a batch that fails (past the memory budget) runs each request it
//     leaves unanswered alone, once, unless that request's tokens cannot be
//     taken back (EngineRequest::restart);
//   - abort() ends a waiting request at once and a running one at its
//     batch's next step.
// `halformer serve` is HTTP, streaming and metrics over one Engine; a host
// program serving its own protocol uses it the same way.
#pragma once

#include "halformer/error.h"
#include "halformer/model.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

struct EngineOptions {
    int workers = 1;             // batches at once (Model sessions: a CPU model's max_sessions is raised to it);
                                 // 0: no threads, the caller runs the engine with step()
    int max_batch = 32;          // requests a batch holds at once
    int max_queue = 256;         // waiting requests; add() past it throws EngineBusy
    double batch_wait_ms = 0;    // a worker waits this long for a batch to fill
    bool join = true;            // waiting requests join a running batch of their kind at its next step
    double join_fair_ms = 500;   // ... but not past an older request of another kind waiting this long
                                 // while every worker is busy (0: strictly first come, first served)
    // Called by a worker at the start of each step of its batch
    // (GenerateOptions::on_step): tracing, and tests that hold a batch at
    // a known step instead of racing it.
    std::function<void()> on_step;
};

// How a request ended (EngineRequest::on_done).
struct EngineResult {
    std::vector<Hypothesis> hyps;  // what generate() returns for it alone ("" error), n_best of them
    std::string error;             // why it failed; "" when it did not
    bool aborted = false;          // abort() ended it (hyps: what it had, when it was running)
    bool started = false;          // it ran in a batch (false: aborted while waiting)
};

struct EngineRequest {
    Sequence input;          // the source (encoder-decoder) or the prompt (decoder-only)
    Sequence target_prefix;  // encoder-decoder: the output continues these ids
    // Its options. Its own: seed, max_new_tokens (-1: default_new_tokens),
    // and without beams sample, temperature, top_k and top_p; the others
    // decide which requests share its batch (batch_key).
    GenerateOptions options;
    // The callbacks run on a worker thread, never under the engine's lock.
    // Each may be empty.
    std::function<void()> on_start;                // it enters a batch (again, when retried alone)
    std::function<void(int32_t)> on_token;         // each token as it is chosen (not with beams)
    std::function<bool()> stop;                    // asked before each step: true ends it with what it has
    std::function<bool()> restart;                 // before a retry alone: false when it cannot start
                                                   // over (tokens already sent); it then fails. Empty:
                                                   // it starts over unless on_token was called
    std::function<void(const EngineResult &)> on_done;  // exactly once, last
};

struct EngineStats {
    size_t waiting = 0;    // requests queued
    int running = 0;       // batches running
    int64_t batches = 0;   // batches started
    int64_t batched = 0;   // requests they started with
    int64_t joined = 0;    // requests that joined a running batch
    int64_t splits = 0;    // failed batches whose requests then ran alone
};

// add() refused the requests: the queue is full, or the engine is stopping.
struct EngineBusy : Error {
    using Error::Error;
};

class Engine {
public:
    using Id = uint64_t;
    // The model must outlive the engine. Throws Error for options out of range.
    Engine(Model &model, const EngineOptions &options = {});
    ~Engine();  // stop()
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Queues the requests, all or none (a completion's choices): their ids,
    // in order. EngineBusy when they would pass max_queue or the engine is
    // stopping.
    std::vector<Id> add(std::vector<EngineRequest> requests);
    Id add(EngineRequest request);
    // Ends a request: a waiting one leaves the queue (on_done: aborted, not
    // started); a running one leaves its batch at the next step with what
    // it has (on_done: aborted). A finished or unknown id: nothing.
    void abort(Id id);
    // With workers = 0: one turn of the engine on the calling thread (vLLM's
    // step): a batch of waiting requests starts when none runs, then one
    // step of the running batch (its joins, a prefill chunk, one decoding
    // step); every callback runs on this thread. Returns false when nothing
    // waits or runs. Error with workers > 0.
    bool step();
    EngineStats stats() const;
    const EngineOptions &options() const;
    // Takes no more requests and returns once every queued and running one
    // is answered (workers = 0: by stepping on this thread). Safe to call
    // twice.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace halformer

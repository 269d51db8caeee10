// The training loop around a Trainer: batches from train_data.h, gradient
// accumulation over micro-batches, data shards and the all-reduce of
// data-parallel training (distributed.h), validation every N steps,
// checkpoints with rotation and resume, and the final model (the weights or
// the average of the last checkpoints). It prints nothing: progress goes to
// callbacks, which `halformer train` turns into its lines and train.log.
//
//   halformer::TrainingLoopOptions o;
//   o.out = "run";  o.steps = 1000;  o.save_every = 100;
//   halformer::Trainer t = halformer::Trainer::create(config, {});
//   halformer::TrainingLoop loop(t, halformer::file_source("train.tsv", kind, limits), o);
//   loop.callbacks.on_step = [](const halformer::StepProgress &p) { ... };
//   if (loop.run() == halformer::TrainingLoop::Finished) loop.write_final_model();
//
// A step takes ceil(batch_tokens / micro_tokens) micro-batches of about
// micro_tokens padded tokens; each micro-batch is cut into max(shards, ranks)
// shards and rank r takes shards r, r + ranks, ... in turn, so one process
// with N shards sums exactly the gradients N ranks sum. Checkpoints are
// OUT/checkpoints/step_NNNNNNNN (model directories with optimizer state,
// and a copy of OUT/<tokenizer> when the config names one); their
// trainer.json's "user" object holds the data position and the time spent,
// so a resumed run continues as if uninterrupted. Only rank 0 writes files
// and calls on_step, on_validation and on_checkpoint.
#pragma once

#include "halformer/train.h"
#include "halformer/train_data.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

class Distributed;

struct TrainingLoopOptions {
    std::string out;                 // checkpoints/ and the final model go here
    int64_t steps = 0;               // train until the trainer has taken this many steps
    int64_t batch_tokens = 25000;    // target tokens per optimizer step (about)
    int64_t micro_tokens = 4096;     // padded tokens per forward pass
    int64_t pool = 100000;           // examples sorted by length together
    uint64_t data_seed = 1;          // the training batches' order
    int shards = 1;                  // shards of every micro-batch (at least the ranks)
    int64_t valid_every = 0;         // validate every N steps and at the last (0: never)
    int64_t save_every = 0;          // checkpoint every N steps (0: only at the end)
    int keep = 5;                    // checkpoints kept (at least `average`)
    int average = 0;                 // final model: the average of the last N checkpoints (N > 1)
    bool half = false;               // the final model in float16
};

// Where a run stands in its data; a checkpoint's trainer.json "user" object.
struct TrainingPosition {
    int64_t epoch = 0, batch_index = 0;  // the Batcher's position
    double elapsed = 0;                  // seconds of training before
};

struct StepProgress {
    int64_t step = 0, steps = 0;  // the step just taken (from 1) of `steps`
    double loss = 0;              // mean over the step's target tokens, all ranks
    double lr = 0;
    int64_t tokens = 0;           // target tokens of the step, all ranks
    double grad_norm = 0;         // of the mean gradient, before clipping
    double seconds = 0;           // the step's time (validation not counted)
    double valid_loss = -1;       // validated at this step: the mean NLL; else < 0
    double elapsed = 0;           // the run's seconds so far (resumed runs: with before)
    double seconds_left = 0;      // at this process's mean step time
};

struct TrainingCallbacks {
    // After every step (and its validation, if any).
    std::function<void(const StepProgress &)> on_step;
    // After a validation: the step and the mean negative log-likelihood.
    std::function<void(int64_t step, double loss)> on_validation;
    // After a checkpoint is written and old ones removed.
    std::function<void(int64_t step, const std::string &dir)> on_checkpoint;
    // Asked before every step on every rank: true ends the run after a
    // checkpoint (a signal handler's flag).
    std::function<bool()> stop;
};

struct Checkpoint {
    int64_t step = 0;
    std::string dir;
};

class TrainingLoop {
public:
    enum Outcome { Finished, Stopped };

    // Reads the validation examples (if any) into memory now, and moves the
    // training data to `from` (a resumed run's position). Throws Error.
    TrainingLoop(Trainer &trainer, std::unique_ptr<ExampleSource> train, TrainingLoopOptions opt,
                 std::unique_ptr<ExampleSource> valid = nullptr, TrainingPosition from = {});

    // Steps until options().steps or until stop(), then a checkpoint.
    // Stopped when stop() said so (also when it did during the last checkpoint).
    Outcome run();
    // Rank 0 writes OUT/config.json + model.safetensors: the average of the
    // last `average` checkpoints when average > 1 and there are two or more,
    // else the trainer's weights. Returns the number averaged (0: the
    // weights, or another rank, which writes nothing).
    size_t write_final_model();

    // Seconds of training: before (a resumed run's) plus since run() began.
    double elapsed() const;
    // The micro-batches of one step and the shards of one micro-batch.
    int accumulation() const { return accumulate_; }
    int shards() const { return nshards_; }
    const TrainingLoopOptions &options() const { return opt_; }

    TrainingCallbacks callbacks;

    // OUT/checkpoints/step_N directories holding a trainer.json, by N.
    static std::vector<Checkpoint> checkpoints(const std::string &out);
    // The last of them; Error "OUT/checkpoints: no checkpoint to resume from".
    static Checkpoint latest_checkpoint(const std::string &out);
    // A checkpoint's data position (zeros for what its trainer.json lacks).
    static TrainingPosition position(const std::string &checkpoint_dir);

private:
    bool next_batch(Batch &b);
    StepStats accumulate_gradients();
    void take_step();
    double validate();
    void save_checkpoint();
    void remove_old_checkpoints();

    Trainer &trainer_;
    TrainingLoopOptions opt_;
    Distributed &dist_;
    Batcher batches_;
    std::vector<std::vector<Example>> valid_;  // held in memory: a dev set is small
    int accumulate_ = 1, nshards_ = 1;
    double elapsed_before_ = 0;
    int64_t first_step_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace halformer

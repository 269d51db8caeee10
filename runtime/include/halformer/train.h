// Training a model with the generated kernels: the paper's recipe (section
// 5): teacher forcing with the target shifted right, label-smoothed
// cross-entropy (ε_ls = 0.1) over non-pad targets, dropout (0.1) on every
// sub-layer output before the residual add and on the embedding sums, Adam
// (β1 = 0.9, β2 = 0.98, ε = 1e-9) with lr = d_model^-0.5 · min(step^-0.5,
// step · warmup^-1.5), optional global-norm clipping and L2 weight decay.
//
//   halformer::TrainOptions opt;                      // the paper's defaults
//   auto t = halformer::Trainer::create(config, opt);  // or ::from_model(dir, opt)
//   for (auto &batch : batches) {
//       t.zero_grad();
//       auto s = t.forward_backward(batch.examples);   // gradients of the summed loss
//       t.step(s.tokens);                              // Adam over loss / tokens
//   }
//   t.save("ckpt");   // a model directory `halformer generate` loads, + optimizer state
//
// Parameters, gradients and Adam's moments are four flat float32 buffers with
// one layout (llm.c's scheme): the optimizer, the gradient norm and the
// all-reduce of data-parallel training are each one call over a buffer.
// Every arithmetic step is a generated kernel (generators/*_backward_*,
// cross_entropy, dropout, adam, ...); this class lays out buffers and calls
// them. The examples' conventions (train_data.h): encoder-decoder examples
// hold the target without bos/eos (the decoder reads [bos] + tgt and
// predicts tgt + [eos]); decoder-only examples are one sequence (the model
// reads seq[:-1] and predicts seq[1:]); encoder-only examples carry one
// label per source token (a classification head of `head_rows` rows).
#pragma once

#include "halformer/config.h"
#include "halformer/device.h"
#include "halformer/model.h"
#include "halformer/train_data.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

struct TrainOptions {
    float label_smoothing = 0.1f;
    float dropout = 0.1f;
    int warmup_steps = 4000;
    float lr_scale = 1.0f;  // multiplies the schedule (the paper: 1)
    float beta1 = 0.9f, beta2 = 0.98f, adam_eps = 1e-9f;
    float clip_norm = 0.0f;     // global-norm clipping of the mean gradient; 0: off
    float weight_decay = 0.0f;  // L2, as torch.optim.Adam's weight_decay
    uint64_t seed = 1;          // initialisation and dropout masks
    int head_rows = 0;          // encoder-only: label count of the new head
};

// The learning rate of optimizer step `step` (from 1).
double learning_rate(const Config &c, const TrainOptions &o, int64_t step);

struct StepStats {
    double loss = 0;     // summed over counted target tokens (not divided)
    int64_t tokens = 0;  // counted target tokens
};

class Trainer {
public:
    // A new model of `config` with fresh weights (Xavier-uniform matrices,
    // N(0, d^-1/2) embeddings, unit norms, zero biases; the encoder-decoder's
    // source and target embeddings shared when the vocabularies match, the
    // output projection tied to the target embedding; final norms with
    // pre-LN), seeded by opt.seed.
    static Trainer create(const Config &config, const TrainOptions &opt, Device device = Device::CPU);
    // Fine-tuning: every tensor of a model directory, as it is (F16/BF16
    // converted to float32).
    static Trainer from_model(const std::string &dir, const TrainOptions &opt, Device device = Device::CPU);
    // A checkpoint written by save(): weights, Adam's moments and the step
    // counters, so that training continues exactly as if uninterrupted.
    static Trainer resume(const std::string &dir, const TrainOptions &opt, Device device = Device::CPU);
    Trainer(Trainer &&) noexcept;
    Trainer &operator=(Trainer &&) noexcept;
    ~Trainer();

    const Config &config() const;
    const TrainOptions &options() const;
    int64_t parameter_count() const;
    // Optimizer steps taken (the schedule's step of the next update is +1).
    int64_t steps() const;

    // Forward and backward over one batch (dropout on); gradients are ADDED
    // to the gradient buffer (call zero_grad() first; several calls
    // accumulate). Throws Error on bad tokens or lengths, naming the example.
    StepStats forward_backward(const std::vector<Example> &batch);
    // The loss with dropout off and no gradients (validation); with
    // label_smoothing < 0 the options' smoothing, with 0 the plain negative
    // log-likelihood (whose mean gives the perplexity).
    StepStats evaluate(const std::vector<Example> &batch, float label_smoothing = -1);
    void zero_grad();
    // One Adam update with the mean gradient over `tokens` target tokens
    // (the sum of every forward_backward since zero_grad, possibly over
    // several processes), clipped if clip_norm > 0. Returns the learning
    // rate used; grad_norm() gives the norm of the mean gradient before
    // clipping.
    double step(int64_t tokens);
    double grad_norm() const;

    // Runs f over the flat gradient buffer's host copy (fetched from the
    // device first and uploaded after, on a GPU): data-parallel training
    // sums it across processes between forward_backward and step.
    void reduce_gradients(const std::function<void(float *, size_t)> &f);
    size_t size() const;
    // One tensor's gradient (row-major, its shape), times `scale`; for tests.
    std::vector<float> gradient(const std::string &name, double scale = 1.0) const;
    std::vector<float> parameter(const std::string &name) const;
    std::vector<std::string> parameter_names() const;

    // Writes DIR/config.json, DIR/model.safetensors (float32, or float16
    // with half = true) and, unless weights_only, DIR/optimizer.safetensors
    // and DIR/trainer.json. Files are written under temporary names and
    // renamed, so a crash never leaves a half-written checkpoint. Extra
    // key/values (data position, ...) go into trainer.json's "user" object.
    void save(const std::string &dir, bool weights_only = false, bool half = false,
              const std::string &user_json = "{}") const;
    // The "user" object of a checkpoint's trainer.json ("{}" if none).
    static std::string checkpoint_user_json(const std::string &dir);

    // A Model that runs on the current weights (shared, not copied: it
    // sees every later update). For decoding during and after training.
    Model &model();

    struct Impl;

private:
    friend void average_checkpoints(const std::vector<std::string> &, const std::string &, bool);
    explicit Trainer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Averages the weights of model directories (the paper averages the last 5
// checkpoints) into `out` (config.json + model.safetensors). The models must
// have the same config and tensors; errors name the first that differs.
void average_checkpoints(const std::vector<std::string> &dirs, const std::string &out, bool half = false);

}  // namespace halformer

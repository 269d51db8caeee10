// The training loop (halformer/training_loop.h) on a tiny encoder-decoder:
// k micro-batches (or shards) make the same update as one batch of the same
// examples, checkpoints rotate to exactly N, a stopped and resumed run is
// bit-identical to an uninterrupted one, the callbacks see every step,
// validation and checkpoint, and checkpoint positions are read back.
#include "halformer/error.h"
#include "halformer/train.h"
#include "halformer/training_loop.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

Device test_device() {
    const char *e = std::getenv("HALFORMER_DEVICE");
    return e ? parse_device(e) : Device::CPU;
}

// d_model 32: at 16 the OpenCL training kernels give wrong gradients (the
// CPU's are right), which this suite is not about.
Config tiny_config() {
    Config c;
    c.d_model = 32;
    c.num_heads = 2;
    c.d_ff = 64;
    c.num_encoder_layers = c.num_decoder_layers = 1;
    c.src_vocab_size = c.tgt_vocab_size = 11;
    c.max_positions = 16;
    return c;
}

class VectorSource : public ExampleSource {
public:
    explicit VectorSource(std::vector<Example> examples) : examples_(std::move(examples)) {}
    bool next(Example &out) override {
        if (pos_ == examples_.size()) return false;
        out = examples_[pos_++];
        return true;
    }
    void rewind() override { pos_ = 0; }

private:
    std::vector<Example> examples_;
    size_t pos_ = 0;
};

// n examples of ids 3..10: lengths in [min_len, max_len] (mt19937_64 is
// fully specified; the modulo is ours).
std::vector<Example> examples(int n, int min_len, int max_len, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Example> out(n);
    for (int i = 0; i < n; i++) {
        out[i].src.resize(min_len + rng() % (max_len - min_len + 1));
        out[i].tgt.resize(min_len + rng() % (max_len - min_len + 1));
        for (int32_t &id : out[i].src) id = int32_t(3 + rng() % 8);
        for (int32_t &id : out[i].tgt) id = int32_t(3 + rng() % 8);
        out[i].line = i + 1;
    }
    return out;
}

std::unique_ptr<ExampleSource> source(std::vector<Example> v) { return std::make_unique<VectorSource>(std::move(v)); }

// Every parameter, in parameter_names() order.
std::map<std::string, std::vector<float>> parameters(const Trainer &t) {
    std::map<std::string, std::vector<float>> p;
    for (const std::string &n : t.parameter_names()) p[n] = t.parameter(n);
    return p;
}

// The step_* entries of DIR/checkpoints, sorted.
std::vector<std::string> step_dirs(const std::string &out) {
    std::vector<std::string> v;
    if (!fs::exists(out + "/checkpoints")) return v;
    for (auto &e : fs::directory_iterator(out + "/checkpoints")) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) == 0) v.push_back(n);
    }
    std::sort(v.begin(), v.end());
    return v;
}

// What the callbacks saw.
struct Seen {
    std::vector<StepProgress> steps;
    std::vector<std::pair<int64_t, double>> validations;
    std::vector<std::pair<int64_t, std::string>> checkpoints;
};

void record(TrainingLoop &loop, Seen &seen) {
    loop.callbacks.on_step = [&seen](const StepProgress &p) { seen.steps.push_back(p); };
    loop.callbacks.on_validation = [&seen](int64_t s, double l) { seen.validations.push_back({s, l}); };
    loop.callbacks.on_checkpoint = [&seen](int64_t s, const std::string &d) { seen.checkpoints.push_back({s, d}); };
}

class TrainingLoopTest : public testing::Test {
protected:
    void SetUp() override {
        dir = (fs::temp_directory_path() / ("halformer_loop_" + std::to_string(::getpid()) + "_" +
                                            testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string();
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }

    TrainingLoopOptions options(const std::string &name, int64_t steps) const {
        TrainingLoopOptions o;
        o.out = dir + "/" + name;
        o.steps = steps;
        return o;
    }
    std::string dir;
};

// ---- Accumulation and shards ----

// One optimizer step over the same 8 examples (src and tgt of 4 tokens):
// `micro` padded tokens a micro-batch, `shards` shards each. Returns the
// step's report; `delta` gets every parameter's change.
StepProgress one_step(const TrainingLoopOptions &base, int64_t micro, int shards, int want_accumulation,
                      std::map<std::string, std::vector<float>> &delta) {
    TrainOptions opt;
    opt.dropout = 0;
    opt.warmup_steps = 1;
    opt.lr_scale = 40;   // lr 10 at step 1: changes well above the weights' rounding
    opt.adam_eps = 1.0;  // the first Adam update ≈ lr·g: linear in the gradient, no sign(g)
    Trainer t = Trainer::create(tiny_config(), opt, test_device());
    const auto before = parameters(t);
    TrainingLoopOptions o = base;
    o.batch_tokens = 40;
    o.micro_tokens = micro;
    o.shards = shards;
    TrainingLoop loop(t, source(examples(8, 4, 4, 11)), o);
    EXPECT_EQ(loop.accumulation(), want_accumulation);
    Seen seen;
    record(loop, seen);
    EXPECT_EQ(loop.run(), TrainingLoop::Finished);
    EXPECT_EQ(t.steps(), 1);
    EXPECT_EQ(seen.steps.size(), 1u);
    const auto after = parameters(t);
    for (auto &[name, w] : after) {
        std::vector<float> d(w.size());
        for (size_t i = 0; i < w.size(); i++) d[i] = w[i] - before.at(name)[i];
        delta[name] = d;
    }
    return seen.steps.empty() ? StepProgress{} : seen.steps[0];
}

// ‖a − b‖ / ‖b‖ over every parameter.
double relative_difference(const std::map<std::string, std::vector<float>> &a,
                           const std::map<std::string, std::vector<float>> &b) {
    double num = 0, den = 0;
    for (auto &[name, x] : a) {
        const std::vector<float> &y = b.at(name);
        for (size_t i = 0; i < x.size(); i++) {
            num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
            den += double(y[i]) * y[i];
        }
    }
    EXPECT_GT(den, 0) << "the step changed nothing";
    return std::sqrt(num / den);
}

TEST_F(TrainingLoopTest, AccumulationAndShardsMakeTheUpdateOfOneBatch) {
    std::map<std::string, std::vector<float>> whole, micro, sharded;
    // 40 tokens: the 8 examples in one batch (8 × 5 target tokens with eos).
    const StepProgress a = one_step(options("whole", 1), 40, 1, 1, whole);
    // 10 tokens: 4 micro-batches of 2 examples.
    const StepProgress b = one_step(options("micro", 1), 10, 1, 4, micro);
    // One batch, in 4 shards of 2 examples.
    const StepProgress c = one_step(options("sharded", 1), 40, 4, 1, sharded);
    for (const StepProgress *p : {&b, &c}) {
        EXPECT_EQ(p->tokens, 40);
        EXPECT_EQ(p->tokens, a.tokens);
        EXPECT_NEAR(p->loss, a.loss, 1e-6 * a.loss);
        EXPECT_NEAR(p->grad_norm, a.grad_norm, 1e-5 * a.grad_norm);
        EXPECT_EQ(p->lr, a.lr);
    }
    EXPECT_LT(relative_difference(micro, whole), 1e-5);  // measured: 1.3e-7 to 2e-7 (CPU variants, OpenCL)
    EXPECT_LT(relative_difference(sharded, whole), 1e-5);
}

// ---- Checkpoints ----

TEST_F(TrainingLoopTest, RotationKeepsExactlyN) {
    TrainOptions opt;
    Trainer t = Trainer::create(tiny_config(), opt, test_device());
    TrainingLoopOptions o = options("run", 7);
    o.batch_tokens = o.micro_tokens = 20;
    o.save_every = 2;
    o.keep = 2;
    TrainingLoop loop(t, source(examples(16, 2, 5, 3)), o);
    Seen seen;
    record(loop, seen);
    ASSERT_EQ(loop.run(), TrainingLoop::Finished);
    // Every 2 steps but the last, then the last.
    std::vector<int64_t> steps;
    for (auto &[s, d] : seen.checkpoints) {
        steps.push_back(s);
        EXPECT_EQ(d, o.out + "/checkpoints/step_" + std::string(8 - std::to_string(s).size(), '0') + std::to_string(s));
    }
    EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 6, 7}));
    EXPECT_EQ(step_dirs(o.out), (std::vector<std::string>{"step_00000006", "step_00000007"}));
    ASSERT_EQ(TrainingLoop::checkpoints(o.out).size(), 2u);
    EXPECT_EQ(TrainingLoop::checkpoints(o.out)[0].step, 6);
    EXPECT_EQ(TrainingLoop::latest_checkpoint(o.out).step, 7);
    EXPECT_EQ(loop.write_final_model(), 0u);  // average 0: the weights
    EXPECT_TRUE(fs::exists(o.out + "/config.json"));
    EXPECT_TRUE(fs::exists(o.out + "/model.safetensors"));
    EXPECT_FALSE(fs::exists(o.out + "/trainer.json"));
}

TEST_F(TrainingLoopTest, AveragingKeepsItsCheckpointsAndWritesTheAverage) {
    TrainOptions opt;
    Trainer t = Trainer::create(tiny_config(), opt, test_device());
    TrainingLoopOptions o = options("run", 7);
    o.batch_tokens = o.micro_tokens = 20;
    o.save_every = 2;
    o.keep = 2;
    o.average = 3;  // keeps max(keep, average)
    TrainingLoop loop(t, source(examples(16, 2, 5, 3)), o);
    ASSERT_EQ(loop.run(), TrainingLoop::Finished);
    EXPECT_EQ(step_dirs(o.out), (std::vector<std::string>{"step_00000004", "step_00000006", "step_00000007"}));
    EXPECT_EQ(loop.write_final_model(), 3u);
    // The average of the three, tensor by tensor.
    std::vector<std::map<std::string, std::vector<float>>> ck;
    for (const char *s : {"4", "6", "7"}) {
        ck.push_back(parameters(Trainer::from_model(o.out + "/checkpoints/step_0000000" + s, opt, test_device())));
    }
    const auto avg = parameters(Trainer::from_model(o.out, opt, test_device()));
    for (auto &[name, w] : avg) {
        for (size_t i = 0; i < w.size(); i++) {
            const double want = (double(ck[0][name][i]) + ck[1][name][i] + ck[2][name][i]) / 3;
            ASSERT_NEAR(w[i], want, 1e-6 * (1 + std::fabs(want))) << name << "[" << i << "]";
        }
    }
}

// ---- Resume ----

struct FullRun {
    std::vector<StepProgress> steps;
    std::map<std::string, std::vector<float>> weights;
};

TrainOptions resume_options() {
    TrainOptions opt;
    opt.dropout = 0.1f;  // the masks must be re-created exactly too
    opt.warmup_steps = 4;
    opt.seed = 5;
    return opt;
}

TrainingLoopOptions resume_loop_options(TrainingLoopOptions o) {
    o.batch_tokens = 40;
    o.micro_tokens = 20;  // 2 micro-batches a step
    o.pool = 10;          // several pools an epoch; 8 steps cross epochs
    o.data_seed = 9;
    return o;
}

TEST_F(TrainingLoopTest, StoppedAndResumedRunIsBitIdentical) {
    const auto data = examples(30, 2, 6, 21);
    FullRun full;
    {
        Trainer t = Trainer::create(tiny_config(), resume_options(), test_device());
        TrainingLoop loop(t, source(data), resume_loop_options(options("full", 8)));
        Seen seen;
        record(loop, seen);
        ASSERT_EQ(loop.run(), TrainingLoop::Finished);
        full = {seen.steps, parameters(t)};
    }
    const TrainingLoopOptions part = resume_loop_options(options("part", 8));
    {
        Trainer t = Trainer::create(tiny_config(), resume_options(), test_device());
        TrainingLoop loop(t, source(data), part);
        loop.callbacks.stop = [&t] { return t.steps() >= 3; };
        ASSERT_EQ(loop.run(), TrainingLoop::Stopped);
        EXPECT_EQ(t.steps(), 3);
    }
    const Checkpoint last = TrainingLoop::latest_checkpoint(part.out);
    EXPECT_EQ(last.step, 3);
    const TrainingPosition at = TrainingLoop::position(last.dir);
    EXPECT_GT(at.epoch + at.batch_index, 0);  // 6 batches read
    EXPECT_GT(at.elapsed, 0);
    Trainer t = Trainer::resume(last.dir, resume_options(), test_device());
    TrainingLoop loop(t, source(data), part, nullptr, at);
    Seen seen;
    record(loop, seen);
    ASSERT_EQ(loop.run(), TrainingLoop::Finished);
    ASSERT_EQ(full.steps.size(), 8u);
    ASSERT_EQ(seen.steps.size(), 5u);
    for (size_t i = 0; i < 5; i++) {
        const StepProgress &want = full.steps[3 + i], &got = seen.steps[i];
        EXPECT_EQ(got.step, want.step);
        EXPECT_EQ(got.loss, want.loss) << "step " << want.step;
        EXPECT_EQ(got.tokens, want.tokens) << "step " << want.step;
        EXPECT_EQ(got.grad_norm, want.grad_norm) << "step " << want.step;
        EXPECT_EQ(got.lr, want.lr) << "step " << want.step;
    }
    EXPECT_GE(seen.steps[0].elapsed, at.elapsed);  // the time before counts
    EXPECT_TRUE(parameters(t) == full.weights) << "resumed weights differ from the uninterrupted run's";
}

// ---- Callbacks ----

TEST_F(TrainingLoopTest, CallbacksSeeEveryStepValidationAndCheckpoint) {
    TrainOptions opt;
    Trainer t = Trainer::create(tiny_config(), opt, test_device());
    TrainingLoopOptions o = options("run", 5);
    o.batch_tokens = 20;
    o.micro_tokens = 10;  // 2 micro-batches of 2 examples (4 + 1 target tokens each)
    o.valid_every = 2;
    const auto valid = examples(6, 3, 3, 99);
    TrainingLoop loop(t, source(examples(8, 4, 4, 1)), o, source(valid));
    Seen seen;
    record(loop, seen);
    ASSERT_EQ(loop.run(), TrainingLoop::Finished);
    ASSERT_EQ(seen.steps.size(), 5u);
    for (size_t i = 0; i < 5; i++) {
        const StepProgress &p = seen.steps[i];
        EXPECT_EQ(p.step, (int64_t)i + 1);
        EXPECT_EQ(p.steps, 5);
        EXPECT_EQ(p.tokens, 20);
        EXPECT_EQ(p.lr, learning_rate(t.config(), opt, p.step));
        EXPECT_GT(p.loss, 0);
        EXPECT_GT(p.grad_norm, 0);
        EXPECT_GE(p.seconds, 0);
        if (i) {
            EXPECT_GE(p.elapsed, seen.steps[i - 1].elapsed);
        }
        EXPECT_EQ(p.valid_loss >= 0, p.step == 2 || p.step == 4 || p.step == 5) << "step " << p.step;
    }
    EXPECT_EQ(seen.steps.back().seconds_left, 0);
    ASSERT_EQ(seen.validations.size(), 3u);
    EXPECT_EQ(seen.validations[0].first, 2);
    EXPECT_EQ(seen.validations[2].first, 5);
    EXPECT_EQ(seen.validations[2].second, seen.steps[4].valid_loss);
    // The last validation ran on the final weights: the plain NLL per token.
    StepStats s = t.evaluate(valid, 0.0f);
    EXPECT_NEAR(seen.validations[2].second, s.loss / s.tokens, 1e-5 * s.loss / s.tokens);
    ASSERT_EQ(seen.checkpoints.size(), 1u);  // no save_every: the last step's only
    EXPECT_EQ(seen.checkpoints[0].first, 5);
}

TEST_F(TrainingLoopTest, StopEndsTheRunWithACheckpoint) {
    TrainOptions opt;
    Trainer t = Trainer::create(tiny_config(), opt, test_device());
    TrainingLoopOptions o = options("run", 100);
    o.batch_tokens = o.micro_tokens = 20;
    TrainingLoop loop(t, source(examples(8, 4, 4, 1)), o);
    Seen seen;
    record(loop, seen);
    int asked = 0;
    loop.callbacks.stop = [&] { return ++asked > 2; };
    EXPECT_EQ(loop.run(), TrainingLoop::Stopped);
    EXPECT_EQ(seen.steps.size(), 2u);
    ASSERT_EQ(seen.checkpoints.size(), 1u);
    EXPECT_EQ(seen.checkpoints[0].first, 2);
    EXPECT_EQ(step_dirs(o.out), (std::vector<std::string>{"step_00000002"}));
}

// ---- Errors and checkpoint metadata ----

TEST_F(TrainingLoopTest, NoExamplesIsAnError) {
    Trainer t = Trainer::create(tiny_config(), {}, test_device());
    TrainingLoop loop(t, source({}), options("run", 1));
    try {
        loop.run();
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("no examples"), std::string::npos) << e.what();
    }
}

TEST_F(TrainingLoopTest, PositionIsReadFromTrainerJson) {
    Trainer t = Trainer::create(tiny_config(), {}, test_device());
    try {
        TrainingLoop::latest_checkpoint(dir);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(std::string(e.what()), dir + "/checkpoints: no checkpoint to resume from");
    }
    // A value that spells a key ahead of the key itself: a string search
    // would read 7.
    t.save(dir + "/checkpoints/step_00000012", false, false,
           "{\"tag\": \"epoch\", \"x\": 7, \"epoch\": 3, \"batch_index\": 41, \"elapsed\": 12.25}");
    t.save(dir + "/checkpoints/step_00000003", false, false, "{}");
    t.save(dir + "/checkpoints/step_junk", true);  // no trainer.json: not a checkpoint
    EXPECT_EQ(TrainingLoop::latest_checkpoint(dir).step, 12);
    EXPECT_EQ(TrainingLoop::checkpoints(dir).size(), 2u);
    TrainingPosition p = TrainingLoop::position(dir + "/checkpoints/step_00000012");
    EXPECT_EQ(p.epoch, 3);
    EXPECT_EQ(p.batch_index, 41);
    EXPECT_EQ(p.elapsed, 12.25);
    p = TrainingLoop::position(dir + "/checkpoints/step_00000003");
    EXPECT_EQ(p.epoch, 0);
    EXPECT_EQ(p.batch_index, 0);
    t.save(dir + "/bad", false, false, "{\"epoch\": \"3\"}");
    EXPECT_THROW(TrainingLoop::position(dir + "/bad"), Error);
}

}  // namespace

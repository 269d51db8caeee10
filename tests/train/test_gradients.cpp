// The whole model's gradients against PyTorch autograd, and the optimizer
// against torch.optim.Adam with the paper's LambdaLR schedule, on fixtures
// made by tests/make_train_fixtures.py (Debian's python3-torch).
#include "halformer/device.h"
#include "halformer/json.h"
#include "halformer/safetensors.h"
#include "halformer/train.h"

#include "hf_adam.h"
#include "hf_sum_squares.h"

#include <gtest/gtest.h>

#include <HalideBuffer.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace halformer;

namespace {

const std::string kDir = std::string(HALFORMER_FIXTURES) + "/train/";

// The device the suite trains on (HALFORMER_DEVICE: cpu, opencl, cuda).
Device test_device() {
    const char *e = std::getenv("HALFORMER_DEVICE");
    return e ? parse_device(e) : Device::CPU;
}

std::string read(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

std::vector<Sequence> sequences(const json::Value &v) {
    std::vector<Sequence> out;
    for (auto &s : v.array) {
        Sequence q;
        for (auto &x : s.array) q.push_back((int32_t)x.number);
        out.push_back(q);
    }
    return out;
}

// ‖a − b‖ / ‖b‖
double rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class ModelGradients : public testing::TestWithParam<std::string> {};

// Every parameter's gradient of the mean label-smoothed loss, for all three
// architectures, pre-LN and post-LN, with padding, a length-1 source and a
// length-1 target.
TEST_P(ModelGradients, MatchPyTorchAutograd) {
    const std::string dir = kDir + GetParam();
    TrainOptions opt;
    opt.dropout = 0;
    Trainer t = Trainer::from_model(dir, opt, test_device());
    json::Value b = json::parse(read(dir + "/batch.json"), "batch.json");
    auto src = sequences(*b.find("src")), tgt = sequences(*b.find("tgt"));
    std::vector<Example> batch(src.size());
    for (size_t i = 0; i < src.size(); i++) {
        batch[i].src = src[i];
        if (!tgt.empty()) batch[i].tgt = tgt[i];
    }
    t.zero_grad();
    StepStats s = t.forward_backward(batch);
    ASSERT_EQ(s.tokens, (int64_t)b.find("tokens")->number);
    const double loss = b.find("loss")->number;
    EXPECT_NEAR(s.loss / s.tokens, loss, 1e-5 * loss);
    // Evaluation gives the same loss and leaves the gradients alone.
    StepStats e = t.evaluate(batch);
    EXPECT_NEAR(e.loss, s.loss, 1e-6 * s.loss);

    SafeTensors grads(dir + "/grads.safetensors");
    int checked = 0;
    double worst = 0;
    std::string worst_name;
    for (auto &info : grads.tensors()) {
        std::vector<float> mine = t.gradient(info.name, 1.0 / s.tokens);
        ASSERT_EQ((int64_t)mine.size(), info.numel()) << info.name;
        const double r = rel(mine.data(), grads.f32(info), mine.size());
        EXPECT_LE(r, 1e-4) << info.name;
        if (r > worst) {
            worst = r;
            worst_name = info.name;
        }
        checked++;
    }
    EXPECT_EQ(checked, (int)t.parameter_names().size());
    std::printf("%s: %d gradients, worst relative error %.2e (%s)\n", GetParam().c_str(), checked, worst,
                worst_name.c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelGradients,
                         testing::Values("ed_post_relu", "ed_pre_gelu", "dec_pre_gelu_learned", "dec_post_tanh",
                                         "enc_head"));

// Ten steps of torch.optim.Adam (β = 0.9, 0.98, ε = 1e-9) under LambdaLR with
// the paper's schedule, from recorded gradients (zeros, a 1e6 outlier, a
// 1e-12 one): the schedule's rates, and the parameters after every step;
// again with global-norm clipping (clip_grad_norm_, max 1) and L2 decay.
TEST(Optimizer, TenStepsMatchTorchAdamWithLambdaLR) {
    const std::string dir = kDir + "adam";
    json::Value sched = json::parse(read(dir + "/schedule.json"), "schedule.json");
    Config c;
    c.d_model = (int)sched.find("d_model")->number;
    TrainOptions o;
    o.warmup_steps = (int)sched.find("warmup")->number;
    for (size_t s = 0; s < sched.find("lr")->array.size(); s++) {
        EXPECT_NEAR(learning_rate(c, o, (int64_t)s + 1), sched.find("lr")->array[s].number, 1e-9);
    }
    for (bool clip_wd : {false, true}) {
        SafeTensors init(dir + "/params.safetensors");
        // One flat buffer: a | b | c, as the trainer lays tensors out.
        std::vector<std::string> names;
        std::vector<float> p;
        for (auto &ti : init.tensors()) {
            names.push_back(ti.name);
            const float *d = init.f32(ti);
            p.insert(p.end(), d, d + ti.numel());
        }
        const int P = (int)p.size();
        Halide::Runtime::Buffer<float> pb(p.data(), P), g(P), m(P), v(P);
        m.fill(0);
        v.fill(0);
        for (int step = 1; step <= 10; step++) {
            SafeTensors gs(dir + "/grads_" + std::to_string(step) + ".safetensors");
            int off = 0;
            for (auto &n : names) {
                const TensorInfo *ti = gs.find(n);
                std::memcpy(g.data() + off, gs.f32(*ti), ti->numel() * 4);
                off += (int)ti->numel();
            }
            float scale = 1;
            if (clip_wd) {
                Halide::Runtime::Buffer<double> sq = Halide::Runtime::Buffer<double>::make_scalar();
                ASSERT_EQ(hf_sum_squares(g, sq), 0);
                const double coef = 1.0 / (std::sqrt(sq()) + 1e-6);
                if (coef < 1) scale = (float)coef;
            }
            const double lr = learning_rate(c, o, step);
            ASSERT_EQ(hf_adam(pb, g, m, v, (float)lr, 0.9f, 0.98f, 1e-9f, (float)(1 - std::pow(0.9, step)),
                              (float)(1 - std::pow(0.98, step)), scale, clip_wd ? 0.01f : 0.0f, pb, m, v),
                      0);
            SafeTensors after(dir + (clip_wd ? "/after_clip_wd_" : "/after_") + std::to_string(step) + ".safetensors");
            off = 0;
            for (auto &n : names) {
                const TensorInfo *ti = after.find(n);
                EXPECT_LE(rel(pb.data() + off, after.f32(*ti), ti->numel()), 1e-5)
                    << n << " after step " << step << (clip_wd ? " (clip, wd)" : "");
                off += (int)ti->numel();
            }
        }
    }
}

// The trainer's own step: on a fixed batch the loss falls, the parameters
// move by about the learning rate (Adam's first step is ±lr per weight),
// and a checkpoint round trip reproduces the next step exactly.
TEST(Trainer, StepsLowerTheLossAndResumeExactly) {
    const std::string dir = kDir + "ed_pre_gelu";
    TrainOptions opt;
    opt.dropout = 0.1f;
    opt.warmup_steps = 10;
    opt.lr_scale = 2.0f;
    Trainer t = Trainer::from_model(dir, opt, test_device());
    json::Value b = json::parse(read(dir + "/batch.json"), "batch.json");
    auto src = sequences(*b.find("src")), tgt = sequences(*b.find("tgt"));
    std::vector<Example> batch(src.size());
    for (size_t i = 0; i < src.size(); i++) batch[i] = {src[i], tgt[i], 0};
    const double first = t.evaluate(batch).loss;
    auto before = t.parameter("decoder.layers.0.linear1.weight");
    for (int i = 0; i < 5; i++) {
        t.zero_grad();
        StepStats s = t.forward_backward(batch);
        t.step(s.tokens);
    }
    EXPECT_EQ(t.steps(), 5);
    const double after = t.evaluate(batch).loss;
    EXPECT_LT(after, first * 0.9) << "5 steps on one batch should fit it";
    auto moved = t.parameter("decoder.layers.0.linear1.weight");
    double max_move = 0;
    for (size_t i = 0; i < moved.size(); i++) max_move = std::max(max_move, (double)std::abs(moved[i] - before[i]));
    EXPECT_GT(max_move, 0.0);
    EXPECT_LT(max_move, 5 * 2 * learning_rate(t.config(), opt, 5) * 1.5);

    const std::string ckpt = testing::TempDir() + "/halformer_resume_ckpt";
    t.save(ckpt, false, false, "{\"note\": \"test\"}");
    EXPECT_NE(Trainer::checkpoint_user_json(ckpt).find("\"note\""), std::string::npos);
    Trainer r = Trainer::resume(ckpt, opt, test_device());
    EXPECT_EQ(r.steps(), 5);
    for (Trainer *x : {&t, &r}) {
        x->zero_grad();
        StepStats s = x->forward_backward(batch);
        x->step(s.tokens);
    }
    for (auto &name : t.parameter_names()) {
        EXPECT_EQ(t.parameter(name), r.parameter(name)) << name << ": resumed training differs";
    }
    // The checkpoint is a model directory the runtime loads.
    Model m = Model::load(ckpt);
    EXPECT_EQ(m.parameter_count(), t.parameter_count());
}

TEST(Trainer, BadExamplesNameTheProblem) {
    TrainOptions opt;
    Trainer t = Trainer::from_model(kDir + "ed_post_relu", opt, test_device());
    std::vector<Example> bad{{{5, 6}, {7, 99}, 12}};
    try {
        t.forward_backward(bad);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("line 12"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
    }
    std::vector<Example> too_long{{Sequence(30, 5), {7}, 3}};
    EXPECT_THROW(t.forward_backward(too_long), Error);
    EXPECT_THROW(t.forward_backward({}), Error);
    EXPECT_THROW(t.step(0), Error);
}

}  // namespace

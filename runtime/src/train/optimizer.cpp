// The optimizer step: the mean gradient's norm (clipped as
// clip_grad_norm_), Adam with the paper's learning rate schedule, and the
// gradient buffer between steps.
#include "trainer_impl.h"

#include <cmath>

namespace halformer {

double learning_rate(const Config &c, const TrainOptions &o, int64_t step) {
    const double s = (double)std::max<int64_t>(step, 1), w = (double)std::max(o.warmup_steps, 1);
    return o.lr_scale * std::pow((double)c.d_model, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

void Trainer::zero_grad() {
    Impl &t = *impl_;
    Session &k = t.mi();
    DeviceScope scope(k.dev.get());
    View g(t.grads.get(), {{(int)t.P, 1}});
    k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(g.get(), g.get(), 0.0f, 0.0f, g.get()); });
    t.grads_dirty = false;
}

double Trainer::step(int64_t tokens) {
    Impl &t = *impl_;
    Session &k = t.mi();
    DeviceScope scope(k.dev.get());
    if (tokens <= 0) throw Error("optimizer step over " + std::to_string(tokens) + " target tokens");
    View g(t.grads.get(), {{(int)t.P, 1}}), p(t.params.get(), {{(int)t.P, 1}}), m(t.m1.get(), {{(int)t.P, 1}}),
        v(t.m2.get(), {{(int)t.P, 1}});
    ScalarOut<double> sq;
    k.run("sum_squares", [&] { return HF_PICK(k.device(), hf_sum_squares)(g.get(), sq.get()); });
    // The mean gradient is grads / tokens; clip its norm as clip_grad_norm_.
    t.last_norm = std::sqrt(sq.read()) / (double)tokens;
    double clip = 1.0;
    if (t.opt.clip_norm > 0) {
        const double coef = t.opt.clip_norm / (t.last_norm + 1e-6);
        if (coef < 1.0) clip = coef;
    }
    t.steps++;
    const double lr = learning_rate(t.cfg, t.opt, t.steps);
    const float b1 = t.opt.beta1, b2 = t.opt.beta2;
    const float bias1 = (float)(1.0 - std::pow((double)b1, (double)t.steps));
    const float bias2 = (float)(1.0 - std::pow((double)b2, (double)t.steps));
    const float gscale = (float)(clip / (double)tokens);
    k.run("adam", [&] {
        return HF_PICK(k.device(), hf_adam)(p.get(), g.get(), m.get(), v.get(), (float)lr, b1, b2, t.opt.adam_eps, bias1,
                                            bias2, gscale, t.opt.weight_decay, p.get(), m.get(), v.get());
    });
    return lr;
}

double Trainer::grad_norm() const { return impl_->last_norm; }
int64_t Trainer::steps() const { return impl_->steps; }
void Trainer::reduce_gradients(const std::function<void(float *, size_t)> &f) {
    impl_->fetch(impl_->grads);
    f(impl_->grads.get(), impl_->P);
    impl_->dev().to_device(impl_->grads.get(), impl_->P * sizeof(float));
}

}  // namespace halformer

// One batch: the examples checked and laid out time-major as each
// architecture reads them (teacher forcing: the decoder reads [bos] + tgt
// and predicts tgt + [eos]), the forward pass through the stacks and the
// head's loss, and the backward pass adding this batch's gradients.
#include "trainer_impl.h"

#include <algorithm>

namespace halformer {
namespace {

std::string example_name(const Example &e, size_t i) {
    return e.line > 0 ? "example on line " + std::to_string(e.line) : "example " + std::to_string(i);
}

void check_ids(const Sequence &s, int vocab, const std::string &what, const std::string &where) {
    for (size_t t = 0; t < s.size(); t++) {
        if (s[t] < 0 || s[t] >= vocab) {
            throw Error(where + ": " + what + " id " + std::to_string(s[t]) + " at position " + std::to_string(t) +
                        " is outside [0, " + std::to_string(vocab) + ")");
        }
    }
}

// Example r's encoder input, decoder input and targets (Error naming it).
void split_example(const Config &c, int head_rows, const Example &e, size_t r, const Sequence *&src,
                   Sequence &dec_in, Sequence &dec_out) {
    const std::string where = example_name(e, r);
    const int limit = c.max_positions;
    switch (c.architecture) {
    case Architecture::EncoderDecoder:
        if (e.src.empty() || e.tgt.empty()) throw Error(where + ": empty source or target");
        check_ids(e.src, c.src_vocab_size, "source", where);
        check_ids(e.tgt, c.tgt_vocab_size, "target", where);
        if ((int)e.src.size() > limit || (int)e.tgt.size() + 1 > limit) {
            throw Error(where + ": longer than max_positions = " + std::to_string(limit) +
                        " (the target counts bos/eos: " + std::to_string(e.tgt.size() + 1) + ")");
        }
        dec_in.push_back(c.bos_id);
        dec_in.insert(dec_in.end(), e.tgt.begin(), e.tgt.end());
        dec_out = e.tgt;
        dec_out.push_back(c.eos_id);
        src = &e.src;
        break;
    case Architecture::Decoder:
        if (e.src.size() < 2) throw Error(where + ": a decoder-only example needs at least 2 tokens");
        check_ids(e.src, c.tgt_vocab_size, "token", where);
        if ((int)e.src.size() - 1 > limit) throw Error(where + ": longer than max_positions + 1");
        dec_in.assign(e.src.begin(), e.src.end() - 1);
        dec_out.assign(e.src.begin() + 1, e.src.end());
        break;
    case Architecture::Encoder:
        if (e.src.empty() || e.tgt.size() != e.src.size()) {
            throw Error(where + ": an encoder-only example needs one label per token");
        }
        check_ids(e.src, c.src_vocab_size, "source", where);
        check_ids(e.tgt, head_rows, "label", where);
        if ((int)e.src.size() > limit) throw Error(where + ": longer than max_positions");
        src = &e.src;
        dec_out = e.tgt;
        break;
    }
}

void zero(Session &k, float *p, int n) {
    View z(p, {{n, 1}});
    k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(z.get(), z.get(), 0.0f, 0.0f, z.get()); });
}

}  // namespace

void Trainer::Impl::lay_out_batch(const std::vector<Example> &batch) {
    const Config &c = cfg;
    const int R = (int)batch.size();
    std::vector<Sequence> dec_in(R), dec_out(R);
    std::vector<const Sequence *> src_ptr, dec_ptr, out_ptr;
    for (int r = 0; r < R; r++) {
        const Sequence *src = nullptr;
        split_example(c, mi().w->gen_rows, batch[r], r, src, dec_in[r], dec_out[r]);
        if (src) src_ptr.push_back(src);
        dec_ptr.push_back(c.architecture == Architecture::Encoder ? &batch[r].src : &dec_in[r]);
        out_ptr.push_back(&dec_out[r]);
    }
    // Targets time-major; −1 marks a position with no loss.
    std::vector<int32_t> out_lens;
    pad_time_major(out_ptr, -1, targets, out_lens);
    es = ds = Shape{};
    if (c.has_encoder()) {
        es.T = pad_time_major(src_ptr, c.pad_id, src_tok, src_len);
        es = Shape{es.T, R, es.T * R, src_tok.data(), src_len.data()};
    }
    if (c.has_decoder()) {
        ds.T = pad_time_major(dec_ptr, c.pad_id, tgt_tok, tgt_len);
        ds = Shape{ds.T, R, ds.T * R, tgt_tok.data(), tgt_len.data()};
    }
}

StepStats Trainer::Impl::run_batch(const std::vector<Example> &batch, bool train) {
    if (batch.empty()) throw Error("training batch is empty");
    Session &k = mi();
    DeviceScope scope(k.dev.get());
    lay_out_batch(batch);
    const bool ed = cfg.architecture == Architecture::EncoderDecoder;
    memory = nullptr;
    const float *x = nullptr;
    if (cfg.has_encoder()) x = memory = stack_forward(k.w->enc, enc_acts, es, false, nullptr, nullptr, train, 100000);
    if (cfg.has_decoder()) {
        x = stack_forward(k.w->dec, dec_acts, ds, true, ed ? memory : nullptr, ed ? &es : nullptr, train, 200000);
    }
    if (!k.w->gen_w) throw Error("this model has no output head to train");
    // Head, loss, d logits (in place of the logits).
    const int M = (cfg.has_decoder() ? ds : es).M, V = k.w->gen_rows;
    float *lg = logits.need((size_t)M * V);
    const layers::Loss loss = layers::head_loss(k, {k.w->gen_w, k.w->gen_b, V}, x, M, targets.data(),
                                                opt.label_smoothing, lg);
    if (train) backward(x, lg);
    return {loss.sum, loss.count};
}

void Trainer::Impl::backward(const float *x, const float *dlogits) {
    Session &k = mi();
    const int D = cfg.d_model, M = (cfg.has_decoder() ? ds : es).M, V = k.w->gen_rows;
    // Gradients already summed since zero_grad() wait aside; this batch's
    // are computed from zero and added at the end, so every micro-batch (and
    // every rank of a data-parallel run) contributes the same sum however
    // batches are split.
    const bool accumulate = grads_dirty;
    if (accumulate) {
        zero(k, grads_spare.need(P), (int)P);
        std::swap(grads, grads_spare);
        bind_gradients();
    }
    float *dx = bw.s_dx.need((size_t)M * D), *spare = bw.s_spare.need((size_t)M * D);
    const size_t Mmax = (size_t)std::max(es.M, ds.M);
    bw.t1 = bw.s_t1.need(Mmax * D);
    bw.t2 = bw.s_t2.need(Mmax * D);
    bw.da = bw.s_da.need(Mmax * D);
    bw.dqkv = bw.s_dqkv.need(Mmax * 3 * D);
    bw.dz = bw.s_dz.need(Mmax * cfg.d_ff);
    bw.dqc = bw.s_dqc.need(Mmax * D);
    bw.dkv_mem = bw.s_dkv_mem.need((size_t)std::max(es.M, 1) * 2 * D);
    layers::head_backward(k, {k.w->gen_w, k.w->gen_b, V}, {ggen_w, ggen_b, V}, x, M, dlogits, dx);
    const bool ed = cfg.architecture == Architecture::EncoderDecoder;
    if (ed) {
        float *dmem = bw.s_dmem.need((size_t)es.M * D), *dmem_spare = bw.s_dmem_spare.need((size_t)es.M * D);
        zero(k, dmem, es.M * D);
        stack_backward(k.w->dec, gdec, dec_acts, ds, true, memory, &es, dmem, dx, spare, 200000);
        stack_backward(k.w->enc, genc, enc_acts, es, false, nullptr, nullptr, nullptr, dmem, dmem_spare, 100000);
    } else if (cfg.has_decoder()) {
        stack_backward(k.w->dec, gdec, dec_acts, ds, true, nullptr, nullptr, nullptr, dx, spare, 200000);
    } else {
        stack_backward(k.w->enc, genc, enc_acts, es, false, nullptr, nullptr, nullptr, dx, spare, 100000);
    }
    if (accumulate) {
        View sum(grads.get(), {{(int)P, 1}}), old(grads_spare.get(), {{(int)P, 1}});
        k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(sum.get(), old.get(), 1.0f, 1.0f, sum.get()); });
    }
    grads_dirty = true;
    micro_steps++;
}

StepStats Trainer::forward_backward(const std::vector<Example> &batch) { return impl_->run_batch(batch, true); }
StepStats Trainer::evaluate(const std::vector<Example> &batch, float label_smoothing) {
    const float keep = impl_->opt.label_smoothing;
    if (label_smoothing >= 0) impl_->opt.label_smoothing = label_smoothing;
    try {
        StepStats s = impl_->run_batch(batch, false);
        impl_->opt.label_smoothing = keep;
        return s;
    } catch (...) {
        impl_->opt.label_smoothing = keep;
        throw;
    }
}


}  // namespace halformer

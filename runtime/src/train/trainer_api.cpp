// The Trainer's public side: building the flat parameter table (fresh, from
// a model directory, or from a checkpoint), one batch's forward and backward
// pass, the optimizer step, checkpoints and checkpoint averaging.
#include "trainer_impl.h"

#include "../params.h"
#include "halformer/json.h"
#include "halformer/safetensors.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace halformer {
namespace {

// The tensors ModelWeights::bind() resolves, served from the flat buffer.
class ParamSource : public TensorSource {
public:
    ParamSource(const std::vector<ParamEntry> &t, const float *base) : table_(t), base_(base) {}
    bool has(const std::string &name) const override { return find(name) != nullptr; }
    std::vector<int64_t> shape(const std::string &name) const override { return find(name)->shape; }
    const float *data(const std::string &name) override { return base_ + find(name)->offset; }
    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (auto &e : table_) out.push_back(e.name);
        return out;
    }
    std::string where() const override { return "training parameters"; }

private:
    const ParamEntry *find(const std::string &name) const {
        for (auto &e : table_) {
            if (e.name == name) return &e;
        }
        return nullptr;
    }
    const std::vector<ParamEntry> &table_;
    const float *base_;
};

// The tensors a new model has: the parameter table's fresh ones.
std::vector<ParamSpec> fresh_specs(const Config &c, const TrainOptions &o) {
    std::vector<ParamSpec> out;
    for (ParamSpec &spec : param_specs(c, o.head_rows)) {
        if (spec.fresh) out.push_back(std::move(spec));
    }
    return out;
}

bool file_exists(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

void make_dirs(const std::string &dir) {
    std::string cur;
    std::stringstream ss(dir);
    std::string part;
    if (!dir.empty() && dir[0] == '/') cur = "/";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        cur += part + "/";
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) throw Error(cur + ": cannot create directory");
    }
}

void write_text(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    if (!f) throw Error(path + ": write failed");
}

std::string read_text(const std::string &path) {
    std::ifstream f(path);
    if (!f) throw Error(path + ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Writes with a temporary name, then renames (atomic on one file system).
template <typename F>
void write_atomic(const std::string &path, F &&writer) {
    const std::string tmp = path + ".tmp";
    writer(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": cannot rename " + tmp);
}

std::string options_json(const TrainOptions &o) {
    std::ostringstream s;
    s.precision(9);
    s << "{\"label_smoothing\": " << o.label_smoothing << ", \"dropout\": " << o.dropout
      << ", \"warmup_steps\": " << o.warmup_steps << ", \"lr_scale\": " << o.lr_scale << ", \"beta1\": " << o.beta1
      << ", \"beta2\": " << o.beta2 << ", \"adam_eps\": " << o.adam_eps << ", \"clip_norm\": " << o.clip_norm
      << ", \"weight_decay\": " << o.weight_decay << ", \"seed\": " << o.seed << ", \"head_rows\": " << o.head_rows
      << "}";
    return s.str();
}

}  // namespace

// ---------------------------------------------------------------- building

void Trainer::Impl::prepare(const Config &c, Device device) {
    cfg = c;
#ifndef HALFORMER_HAS_GPU
    if (device != Device::CPU) {
        throw Error(std::string("device ") + device_name(device) +
                    ": this build has no GPU kernels (configured with HALFORMER_GPU=OFF)");
    }
#endif
    pending = std::make_unique<Model::Impl>();
    pending->w = std::make_shared<ModelWeights>();
    pending->w->cfg = c;
    pending->first = std::make_unique<Session>(pending->w, std::make_shared<MemoryBudget>());
    pending->first->set_device(device);
    session = pending->first.get();
    DeviceContext *d = session->dev.get();
    for (Scratch *x : {&params, &grads, &m1, &m2, &grads_spare, &discard, &logits, &enc_acts.arena, &dec_acts.arena,
                       &bw.s_dx, &bw.s_spare, &bw.s_t1, &bw.s_t2, &bw.s_da, &bw.s_dqkv, &bw.s_dz, &bw.s_dqc,
                       &bw.s_dkv_mem, &bw.s_dmem, &bw.s_dmem_spare, &bw.s_dhead}) {
        x->dev = d;
    }
}

void Trainer::Impl::build(const std::vector<ParamEntry> &entries) {
    table = entries;
    index.clear();
    for (size_t i = 0; i < table.size(); i++) index[table[i].name] = i;
    std::memset(grads.get(), 0, P * sizeof(float));
    for (Scratch *x : {&params, &grads, &m1, &m2}) dev().to_device(x->get(), P * sizeof(float));
    pending->w->source = std::make_unique<ParamSource>(table, params.get());
    pending->w->bind();
    model = std::make_unique<Model>(std::move(pending));
    bind_gradients();
}

// The gradients laid out as the weights: every tensor of the parameter
// table points at the same offset of the gradient buffer.
void Trainer::Impl::bind_gradients() {
    Session &k = mi();
    float *d = discard.need(std::max<size_t>(k.w->gen_rows, 1));
    GradMap map{params.get(), P, grads.get(), d};
    genc = StackW{};
    gdec = StackW{};
    genc.layers.resize(k.w->enc.layers.size());
    gdec.layers.resize(k.w->dec.layers.size());
    genc.vocab = k.w->enc.vocab;
    gdec.vocab = k.w->dec.vocab;
    ggen_w = ggen_b = nullptr;
    for (const ParamSpec &spec : param_specs(cfg)) {
        const float *w = slot_of(k.w->enc, k.w->dec, k.w->gen_w, k.w->gen_b, spec.slot);
        if (w) slot_of(genc, gdec, ggen_w, ggen_b, spec.slot) = map(w);
    }
}

namespace {

// Lays out `specs` (aliases share their target's offset), allocating the
// four flat buffers.
void layout(Trainer::Impl &t, std::vector<ParamEntry> &specs, const std::map<std::string, std::string> &alias) {
    size_t off = 0;
    std::map<std::string, size_t> where;
    for (auto &e : specs) {
        auto a = alias.find(e.name);
        if (a != alias.end() && where.count(a->second)) {
            e.offset = where[a->second];
            continue;
        }
        e.offset = off;
        where[e.name] = off;
        off += (e.numel() + 15) / 16 * 16;  // 64-byte aligned tensors
    }
    t.P = std::max<size_t>(off, 16);
    for (Scratch *s : {&t.params, &t.grads, &t.m1, &t.m2}) {
        float *p = s->need(t.P);
        std::memset(p, 0, t.P * sizeof(float));
    }
}

std::map<std::string, std::string> aliases_of(const std::vector<ParamEntry> &table) {
    std::map<std::string, std::string> alias;
    std::map<size_t, std::string> first;
    for (auto &e : table) {
        auto it = first.find(e.offset);
        if (it == first.end()) {
            first[e.offset] = e.name;
        } else {
            alias[e.name] = it->second;
        }
    }
    return alias;
}

// Reads a safetensors file's tensors into `t.params` (table in file order;
// aliases re-made from `alias` and checked equal in the file).
void load_weights(Trainer::Impl &t, const std::string &path, const std::map<std::string, std::string> &alias) {
    SafeTensors file(path);
    std::vector<ParamEntry> specs;
    for (auto &ti : file.tensors()) specs.push_back({ti.name, ti.shape, 0});
    for (auto &[a, target] : alias) {
        if (!file.find(a) || !file.find(target)) throw Error(path + ": tied tensors '" + a + "' / '" + target + "' missing");
    }
    layout(t, specs, alias);
    for (auto &e : specs) {
        if (alias.count(e.name)) continue;
        std::memcpy(t.params.get() + e.offset, file.f32(*file.find(e.name)), e.numel() * sizeof(float));
    }
    t.table = specs;
}

}  // namespace

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::Trainer(Trainer &&) noexcept = default;
Trainer &Trainer::operator=(Trainer &&) noexcept = default;
Trainer::~Trainer() = default;

Trainer Trainer::create(const Config &config, const TrainOptions &opt, Device device) {
    config.validate();
    if (config.architecture == Architecture::Encoder && opt.head_rows <= 0) {
        throw Error("training an encoder-only model needs a head: give head_rows (the label count, --labels)");
    }
    auto t = std::make_unique<Impl>();
    t->opt = opt;
    t->prepare(config, device);
    const std::vector<ParamSpec> fresh = fresh_specs(config, opt);
    std::map<std::string, std::string> alias;  // a tied name → its target
    std::vector<ParamEntry> specs;
    for (const ParamSpec &spec : fresh) {
        if (!spec.tied_to.empty()) alias[spec.name] = spec.tied_to;
        specs.push_back({spec.name, spec.shape, 0});
    }
    layout(*t, specs, alias);
    for (size_t i = 0; i < fresh.size(); i++) {
        if (!alias.count(fresh[i].name)) init_param(fresh[i], config, opt.seed, t->params.get() + specs[i].offset);
    }
    t->build(specs);
    return Trainer(std::move(t));
}

Trainer Trainer::from_model(const std::string &dir, const TrainOptions &opt, Device device) {
    auto t = std::make_unique<Impl>();
    t->opt = opt;
    t->prepare(Config::from_file(dir + "/config.json"), device);
    load_weights(*t, dir + "/model.safetensors", {});
    auto specs = t->table;
    t->build(specs);
    return Trainer(std::move(t));
}

Trainer Trainer::resume(const std::string &dir, const TrainOptions &opt, Device device) {
    const std::string state_path = dir + "/trainer.json";
    if (!file_exists(state_path)) {
        throw Error(dir + ": not a training checkpoint (no trainer.json; a model directory is fine-tuned with --init)");
    }
    json::Value st = json::parse(read_text(state_path), state_path);
    auto num = [&](const char *k) {
        const json::Value *v = st.find(k);
        if (!v || !v->is_number()) throw Error(state_path + ": field \"" + k + "\" missing or not a number");
        return v->number;
    };
    std::map<std::string, std::string> alias;
    if (const json::Value *a = st.find("aliases"); a && a->is_object()) {
        for (auto &[k, v] : a->object) alias[k] = v.string;
    }
    auto t = std::make_unique<Impl>();
    t->opt = opt;
    t->prepare(Config::from_file(dir + "/config.json"), device);
    load_weights(*t, dir + "/model.safetensors", alias);
    t->steps = (int64_t)num("steps");
    t->micro_steps = (int64_t)num("micro_steps");
    if ((size_t)num("flat_size") != t->P) {
        throw Error(state_path + ": flat_size " + std::to_string((size_t)num("flat_size")) +
                    " does not match the model's " + std::to_string(t->P));
    }
    SafeTensors moments(dir + "/optimizer.safetensors");
    for (auto [name, buf] : {std::pair{"adam.m", &t->m1}, std::pair{"adam.v", &t->m2}}) {
        const TensorInfo *ti = moments.find(name);
        if (!ti || ti->shape != std::vector<int64_t>{(int64_t)t->P}) {
            throw Error(dir + "/optimizer.safetensors: tensor '" + name + "' missing or not of shape [" +
                        std::to_string(t->P) + "]");
        }
        std::memcpy(buf->get(), moments.f32(*ti), t->P * sizeof(float));
    }
    auto specs = t->table;
    t->build(specs);
    return Trainer(std::move(t));
}

// ---------------------------------------------------------------- one batch

namespace {

int pad_time_major(const std::vector<const Sequence *> &seqs, int pad, std::vector<int32_t> &tokens,
                   std::vector<int32_t> &lens) {
    const int R = (int)seqs.size();
    int T = 0;
    for (auto *s : seqs) T = std::max(T, (int)s->size());
    tokens.assign((size_t)T * R, pad);
    lens.resize(R);
    for (int r = 0; r < R; r++) {
        lens[r] = (int)seqs[r]->size();
        for (int t = 0; t < lens[r]; t++) tokens[(size_t)t * R + r] = (*seqs[r])[t];
    }
    return T;
}

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

}  // namespace

StepStats Trainer::Impl::run_batch(const std::vector<Example> &batch, bool train) {
    if (batch.empty()) throw Error("training batch is empty");
    Session &k = mi();
    DeviceScope scope(k.dev.get());
    const Config &c = cfg;
    const int D = c.d_model, R = (int)batch.size();
    const int limit = c.max_positions;
    // Inputs and targets (time-major; target −1 marks a row with no loss).
    std::vector<Sequence> dec_in(R), dec_out(R);
    std::vector<const Sequence *> src_ptr, dec_ptr;
    for (int r = 0; r < R; r++) {
        const Example &e = batch[r];
        const std::string where = example_name(e, r);
        switch (c.architecture) {
        case Architecture::EncoderDecoder:
            if (e.src.empty() || e.tgt.empty()) throw Error(where + ": empty source or target");
            check_ids(e.src, c.src_vocab_size, "source", where);
            check_ids(e.tgt, c.tgt_vocab_size, "target", where);
            if ((int)e.src.size() > limit || (int)e.tgt.size() + 1 > limit) {
                throw Error(where + ": longer than max_positions = " + std::to_string(limit) +
                            " (the target counts bos/eos: " + std::to_string(e.tgt.size() + 1) + ")");
            }
            dec_in[r].push_back(c.bos_id);
            dec_in[r].insert(dec_in[r].end(), e.tgt.begin(), e.tgt.end());
            dec_out[r] = e.tgt;
            dec_out[r].push_back(c.eos_id);
            src_ptr.push_back(&e.src);
            break;
        case Architecture::Decoder:
            if (e.src.size() < 2) throw Error(where + ": a decoder-only example needs at least 2 tokens");
            check_ids(e.src, c.tgt_vocab_size, "token", where);
            if ((int)e.src.size() - 1 > limit) throw Error(where + ": longer than max_positions + 1");
            dec_in[r].assign(e.src.begin(), e.src.end() - 1);
            dec_out[r].assign(e.src.begin() + 1, e.src.end());
            break;
        case Architecture::Encoder:
            if (e.src.empty() || e.tgt.size() != e.src.size()) {
                throw Error(where + ": an encoder-only example needs one label per token");
            }
            check_ids(e.src, c.src_vocab_size, "source", where);
            check_ids(e.tgt, k.w->gen_rows, "label", where);
            if ((int)e.src.size() > limit) throw Error(where + ": longer than max_positions");
            src_ptr.push_back(&e.src);
            dec_out[r] = e.tgt;
            break;
        }
        dec_ptr.push_back(c.architecture == Architecture::Encoder ? &e.src : &dec_in[r]);
    }
    std::vector<const Sequence *> out_ptr;
    for (auto &s : dec_out) out_ptr.push_back(&s);
    std::vector<int32_t> out_lens;
    pad_time_major(out_ptr, -1, targets, out_lens);

    Shape es, ds;
    const float *memory = nullptr, *x = nullptr;
    if (c.has_encoder()) {
        es.T = pad_time_major(src_ptr, c.pad_id, src_tok, src_len);
        es.R = R;
        es.M = es.T * R;
        es.tokens = src_tok.data();
        es.lens = src_len.data();
        memory = stack_forward(k.w->enc, enc_acts, es, false, nullptr, nullptr, train, 100000);
        x = memory;
    }
    if (c.has_decoder()) {
        ds.T = pad_time_major(dec_ptr, c.pad_id, tgt_tok, tgt_len);
        ds.R = R;
        ds.M = ds.T * R;
        ds.tokens = tgt_tok.data();
        ds.lens = tgt_len.data();
        const bool ed = c.architecture == Architecture::EncoderDecoder;
        x = stack_forward(k.w->dec, dec_acts, ds, true, ed ? memory : nullptr, ed ? &es : nullptr, train, 200000);
    }
    const Shape &top = c.has_decoder() ? ds : es;
    const int M = top.M, V = k.w->gen_rows;
    if (!k.w->gen_w) throw Error("this model has no output head to train");

    // Head, loss, dlogits (in place).
    float *lg = logits.need((size_t)M * V);
    const layers::HeadW head{k.w->gen_w, k.w->gen_b, V};
    const layers::Loss loss = layers::head_loss(k, head, x, M, targets.data(), opt.label_smoothing, lg);
    StepStats st{loss.sum, loss.count};
    if (!train) return st;

    // Backward: the head, then the stacks in reverse. Gradients already
    // summed since zero_grad() wait aside; this batch's are computed from
    // zero and added at the end, so every micro-batch (and every rank of a
    // data-parallel run) contributes the same sum however batches are split.
    const bool accumulate = grads_dirty;
    if (accumulate) {
        float *fresh = grads_spare.need(P);
        View z(fresh, {{(int)P, 1}});
        k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(z.get(), z.get(), 0.0f, 0.0f, z.get()); });
        std::swap(grads, grads_spare);
        bind_gradients();
    }
    float *dx = bw.s_dx.need((size_t)M * D), *spare = bw.s_spare.need((size_t)M * D);
    const size_t Mmax = (size_t)std::max(es.M, ds.M);
    bw.t1 = bw.s_t1.need(Mmax * D);
    bw.t2 = bw.s_t2.need(Mmax * D);
    bw.da = bw.s_da.need(Mmax * D);
    bw.dqkv = bw.s_dqkv.need(Mmax * 3 * D);
    bw.dz = bw.s_dz.need(Mmax * c.d_ff);
    bw.dqc = bw.s_dqc.need(Mmax * D);
    bw.dkv_mem = bw.s_dkv_mem.need((size_t)std::max(es.M, 1) * 2 * D);
    layers::head_backward(k, head, {ggen_w, ggen_b, V}, x, M, lg, dx);
    if (c.has_decoder()) {
        const bool ed = c.architecture == Architecture::EncoderDecoder;
        float *dmem = nullptr, *dmem_spare = nullptr;
        if (ed) {
            dmem = bw.s_dmem.need((size_t)es.M * D);
            dmem_spare = bw.s_dmem_spare.need((size_t)es.M * D);
            View z(dmem, {{es.M * D, 1}});
            k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(z.get(), z.get(), 0.0f, 0.0f, z.get()); });
        }
        stack_backward(k.w->dec, gdec, dec_acts, ds, true, ed ? memory : nullptr, ed ? &es : nullptr, dmem, dx, spare,
                       200000);
        if (ed) stack_backward(k.w->enc, genc, enc_acts, es, false, nullptr, nullptr, nullptr, dmem, dmem_spare, 100000);
    } else {
        stack_backward(k.w->enc, genc, enc_acts, es, false, nullptr, nullptr, nullptr, dx, spare, 100000);
    }
    if (accumulate) {
        View sum(grads.get(), {{(int)P, 1}}), old(grads_spare.get(), {{(int)P, 1}});
        k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(sum.get(), old.get(), 1.0f, 1.0f, sum.get()); });
    }
    grads_dirty = true;
    micro_steps++;
    return st;
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
const Config &Trainer::config() const { return impl_->cfg; }
const TrainOptions &Trainer::options() const { return impl_->opt; }
int64_t Trainer::parameter_count() const { return impl_->model->parameter_count(); }
int64_t Trainer::steps() const { return impl_->steps; }
void Trainer::reduce_gradients(const std::function<void(float *, size_t)> &f) {
    impl_->fetch(impl_->grads);
    f(impl_->grads.get(), impl_->P);
    impl_->dev().to_device(impl_->grads.get(), impl_->P * sizeof(float));
}
size_t Trainer::size() const { return impl_->P; }
Model &Trainer::model() { return *impl_->model; }

std::vector<std::string> Trainer::parameter_names() const {
    std::vector<std::string> out;
    for (auto &e : impl_->table) out.push_back(e.name);
    return out;
}

namespace {
const ParamEntry &entry(const Trainer::Impl &t, const std::string &name) {
    auto it = t.index.find(name);
    if (it == t.index.end()) throw Error("no parameter named '" + name + "'");
    return t.table[it->second];
}
}  // namespace

std::vector<float> Trainer::gradient(const std::string &name, double scale) const {
    const ParamEntry &e = entry(*impl_, name);
    impl_->fetch(impl_->grads);
    std::vector<float> out(e.numel());
    const float *g = impl_->grads.get() + e.offset;
    for (size_t i = 0; i < out.size(); i++) out[i] = (float)(g[i] * scale);
    return out;
}

std::vector<float> Trainer::parameter(const std::string &name) const {
    const ParamEntry &e = entry(*impl_, name);
    impl_->fetch(impl_->params);
    const float *p = impl_->params.get() + e.offset;
    return std::vector<float>(p, p + e.numel());
}

// ---------------------------------------------------------------- checkpoints

void Trainer::save(const std::string &dir, bool weights_only, bool half, const std::string &user_json) const {
    Impl &t = *impl_;
    for (Scratch *x : {&t.params, &t.m1, &t.m2}) t.fetch(*x);
    make_dirs(dir);
    json::parse(user_json, "checkpoint user data");  // must be valid JSON
    std::vector<TensorRef> refs;
    for (auto &e : t.table) refs.push_back({e.name, e.shape, t.params.get() + e.offset});
    write_atomic(dir + "/model.safetensors",
                 [&](const std::string &p) { write_safetensors(p, refs, half ? DType::F16 : DType::F32); });
    write_atomic(dir + "/config.json", [&](const std::string &p) { write_text(p, t.cfg.to_json()); });
    if (weights_only) return;
    std::vector<TensorRef> moments{{"adam.m", {(int64_t)t.P}, t.m1.get()}, {"adam.v", {(int64_t)t.P}, t.m2.get()}};
    write_atomic(dir + "/optimizer.safetensors", [&](const std::string &p) { write_safetensors(p, moments); });
    std::ostringstream s;
    s << "{\n  \"steps\": " << t.steps << ",\n  \"micro_steps\": " << t.micro_steps << ",\n  \"flat_size\": " << t.P
      << ",\n  \"aliases\": {";
    bool first = true;
    for (auto &[a, target] : aliases_of(t.table)) {
        s << (first ? "" : ", ") << json::quote(a) << ": " << json::quote(target);
        first = false;
    }
    s << "},\n  \"options\": " << options_json(t.opt) << ",\n  \"user\": " << user_json << "\n}\n";
    write_atomic(dir + "/trainer.json", [&](const std::string &p) { write_text(p, s.str()); });
}

std::string Trainer::checkpoint_user_json(const std::string &dir) {
    const std::string path = dir + "/trainer.json";
    json::Value st = json::parse(read_text(path), path);
    const json::Value *u = st.find("user");
    if (!u || !u->is_object()) return "{}";
    std::ostringstream s;
    s.precision(17);
    s << "{";
    bool first = true;
    for (auto &[k, v] : u->object) {
        s << (first ? "" : ", ") << json::quote(k) << ": ";
        if (v.is_number()) {
            s << v.number;
        } else if (v.is_string()) {
            s << json::quote(v.string);
        } else if (v.is_bool()) {
            s << (v.boolean ? "true" : "false");
        } else {
            s << "null";
        }
        first = false;
    }
    s << "}";
    return s.str();
}

void average_checkpoints(const std::vector<std::string> &dirs, const std::string &out, bool half) {
    if (dirs.empty()) throw Error("average: no checkpoints given");
    TrainOptions opt;
    Trainer acc = Trainer::from_model(dirs[0], opt);
    Trainer::Impl &a = *acc.impl_;
    Session &k = a.mi();
    DeviceScope scope(k.dev.get());
    const float inv = 1.0f / (float)dirs.size();
    View pa(a.params.get(), {{(int)a.P, 1}});
    k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(pa.get(), pa.get(), inv, 0.0f, pa.get()); });
    for (size_t i = 1; i < dirs.size(); i++) {
        Trainer other = Trainer::from_model(dirs[i], opt);
        Trainer::Impl &o = *other.impl_;
        if (o.cfg.to_json() != a.cfg.to_json()) throw Error(dirs[i] + ": config differs from " + dirs[0]);
        if (o.P != a.P || o.table.size() != a.table.size()) throw Error(dirs[i] + ": tensors differ from " + dirs[0]);
        for (size_t j = 0; j < a.table.size(); j++) {
            if (o.table[j].name != a.table[j].name || o.table[j].shape != a.table[j].shape) {
                throw Error(dirs[i] + ": tensor '" + o.table[j].name + "' differs from " + dirs[0]);
            }
        }
        View po(o.params.get(), {{(int)o.P, 1}});
        k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(pa.get(), po.get(), 1.0f, inv, pa.get()); });
    }
    acc.save(out, /*weights_only=*/true, half);
}

}  // namespace halformer

// The Trainer's parameters: the flat parameter, gradient and moment
// buffers laid out from the parameter table (a new model, a model
// directory, or a checkpoint), the Model over them, the gradient views, and
// reading single tensors back.
#include "trainer_impl.h"

#include "../model/params.h"
#include "halformer/files.h"
#include "halformer/json.h"
#include "halformer/safetensors.h"

#include <cstring>

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

}  // namespace

// ---------------------------------------------------------------- building

void Trainer::Impl::prepare(const Config &c, Device device) {
    if (!c.family.empty()) {
        throw Error("training a Hugging Face checkpoint (model_type \"" + c.family +
                    "\") is not supported: Halformer trains its own configs");
    }
    if (c.rms_norm || c.gated_ffn || c.positional_encoding == Positional::Relative || c.d_kv != 0 || !c.biases ||
        !c.qkv_bias || !c.out_bias || !c.ffn_bias || c.attention_scale != 0) {
        throw Error("training: RMSNorm, the gated feed-forward, relative positions, d_kv, bias-free layers and "
                    "attention_scale (T5's features) have no backward kernels: inference only");
    }
    if (c.positional_encoding == Positional::Rotary || c.kv_heads() != c.num_heads || c.sliding_window != 0) {
        throw Error("training: rotary positions, grouped-query attention (num_kv_heads) and sliding windows "
                    "(Llama's and Mistral's features) have no backward kernels: inference only");
    }
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
    pending->w->desc = describe(c);
    pending->w->fp32_pack = Fp32Packing::None;  // the optimizer updates the weights in place
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

// Tied tensors of a table: a name → the first name at its offset.
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
    if (!files::exists(state_path)) {
        throw Error(dir + ": not a training checkpoint (no trainer.json; a model directory is fine-tuned with --init)");
    }
    json::Value st = json::parse(files::read_text(state_path), state_path);
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


const Config &Trainer::config() const { return impl_->cfg; }
const TrainOptions &Trainer::options() const { return impl_->opt; }
int64_t Trainer::parameter_count() const { return impl_->model->parameter_count(); }
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


}  // namespace halformer

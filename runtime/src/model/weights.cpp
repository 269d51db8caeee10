// Model files and weights: config.json + model.safetensors (PyTorch
// state_dict names), or deterministic random weights; every tensor of the
// parameter table (params.h) is resolved to a kernel-ready float32 pointer
// and its shape checked.
#include "session.h"
#include "params.h"
#include "hf/hf.h"

#include "halformer/files.h"
#include "halformer/gguf.h"
#include "halformer/json.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <cstring>
#include <set>
#include <sys/stat.h>

namespace halformer {
namespace {

class FileSource : public TensorSource {
public:
    explicit FileSource(const std::string &path) : file_(path) {}
    bool has(const std::string &name) const override { return file_.find(name) != nullptr; }
    std::vector<int64_t> shape(const std::string &name) const override {
        return file_.find(name)->shape;
    }
    const float *data(const std::string &name) override { return file_.f32(*file_.find(name)); }
    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (auto &t : file_.tensors()) out.push_back(t.name);
        return out;
    }
    std::string where() const override { return file_.path(); }

private:
    SafeTensors file_;
};

// A new model's weights (the parameter table's fresh tensors, seeded):
// the same values Trainer::create starts from.
class FreshSource : public TensorSource {
public:
    FreshSource(const Config &cfg, uint64_t seed) {
        for (const ParamSpec &spec : param_specs(cfg)) {
            if (!spec.fresh) continue;
            specs_[spec.name] = spec;
            names_.push_back(spec.name);
            if (!spec.tied_to.empty()) continue;
            auto &v = store_[spec.name];
            v.resize((size_t)numel(spec.shape));
            init_param(spec, cfg, seed, v.data());
        }
    }
    bool has(const std::string &name) const override { return specs_.count(name) != 0; }
    std::vector<int64_t> shape(const std::string &name) const override { return specs_.at(name).shape; }
    const float *data(const std::string &name) override {
        const ParamSpec &s = specs_.at(name);
        return store_.at(s.tied_to.empty() ? name : s.tied_to).data();
    }
    std::vector<std::string> names() const override { return names_; }
    std::string where() const override { return "random weights"; }

private:
    std::map<std::string, ParamSpec> specs_;
    std::vector<std::string> names_;
    std::map<std::string, std::vector<float>> store_;
};

}  // namespace

namespace {

// Whether a file must hold an optional tensor: its pair is there (a final
// norm's gain and bias come together).
bool pair_present(const std::vector<ParamSpec> &specs, const ParamSpec &spec, const TensorSource &src,
                  const std::map<std::string, const float *> &bound) {
    if (!spec.needs.empty() && bound.count(spec.needs)) return true;
    for (const ParamSpec &o : specs) {
        if (o.needs == spec.name && src.has(o.name)) return true;
    }
    return false;
}

// An encoder's head: any rows of d_model.
std::vector<int64_t> head_shape(const TensorSource &src, const std::string &name, int64_t D) {
    auto shape = src.shape(name);
    if (shape.size() != 2 || shape[1] != D || shape[0] < 1) {
        throw Error(src.where() + ": tensor '" + name + "' has shape " + shape_string(shape) + ", expected [rows, " +
                    std::to_string(D) + "]");
    }
    return shape;
}

// One zero vector, as long as the longest bias a family's files lack (T5).
void fill_zeros(Scratch &zeros, const std::vector<ParamSpec> &specs) {
    int64_t n = 0;
    for (const ParamSpec &spec : specs) {
        if (spec.zero_if_absent) n = std::max(n, numel(spec.shape));
        // A mixture of experts' projections have no biases: zeros as long
        // as their outputs (layers/moe.cpp).
        if (spec.slot.layer >= 0 && spec.shape.size() == 2 &&
            (spec.slot.key == "router.weight" || spec.slot.key.rfind("experts.", 0) == 0)) {
            n = std::max(n, spec.shape[0]);
        }
    }
    if (n == 0) return;
    float *z = zeros.need((size_t)n);
    std::fill(z, z + n, 0.0f);
}

// The head's bias (zeros when the file has none) and its decoding copy with
// the banned ids at -1e30.
void head_biases(ModelWeights &w) {
    if (w.gen_w && !w.gen_b) {
        float *z = w.zero_bias.need((size_t)w.gen_rows);
        std::fill(z, z + w.gen_rows, 0.0f);
        w.gen_b = z;
    }
    if (!w.gen_w || w.cfg.banned_ids.empty()) return;
    float *b = w.decode_bias.need((size_t)w.gen_rows);
    std::copy(w.gen_b, w.gen_b + w.gen_rows, b);
    for (int id : w.cfg.banned_ids) {
        if (id < 0 || id >= w.gen_rows) {
            throw Error("config: banned token id " + std::to_string(id) + " is outside the head's " +
                        std::to_string(w.gen_rows) + " rows");
        }
        b[id] = -1e30f;
    }
    w.gen_b_decode = b;
}

// Every tensor of the file is one the model reads (else an Error naming them).
void require_all_read(const TensorSource &source, const std::map<std::string, const float *> &bound,
                      const Config &cfg) {
    std::vector<std::string> extra;
    for (auto &n : source.names()) {
        if (!bound.count(n)) extra.push_back(n);
    }
    if (extra.empty()) return;
    std::string list;
    for (size_t k = 0; k < extra.size() && k < 5; k++) list += (k ? ", '" : "'") + extra[k] + "'";
    if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size()) + " in all)";
    throw Error(source.where() + ": tensors the " + architecture_name(cfg.architecture) + " config does not use: " +
                list + " (do num_encoder_layers / num_decoder_layers / architecture match the file?)");
}

}  // namespace

void ModelWeights::bind() {
    desc = describe(cfg);
    const int64_t D = cfg.d_model;
    enc = StackW{};
    dec = StackW{};
    if (cfg.has_encoder()) enc.layers.resize((size_t)cfg.num_encoder_layers);
    if (cfg.has_decoder()) dec.layers.resize((size_t)cfg.num_decoder_layers);
    enc.vocab = cfg.src_vocab_size;
    dec.vocab = cfg.tgt_vocab_size;
    gen_rows = cfg.has_decoder() ? cfg.tgt_vocab_size : 0;
    std::map<std::string, const float *> bound;
    std::set<const float *> counted;
    const std::vector<ParamSpec> specs = param_specs(cfg);
    fill_zeros(zeros, specs);
    for (const ParamSpec &spec : specs) {
        const float *&slot = slot_of(enc, dec, gen_w, gen_b, spec.slot);
        const bool head_w = spec.name == "generator.weight", head_b = spec.name == "generator.bias";
        std::vector<int64_t> shape = spec.shape;
        if (head_b) shape = {gen_rows};
        if (head_b && !gen_w) continue;  // no head: a bias alone is extra
        if (!source->has(spec.name)) {
            if (spec.slot.part == Slot::Head && !spec.tied_to.empty()) {
                slot = bound.at(spec.tied_to);  // the output projection tied to the embedding
                tied = true;
                if (head_w) gen_rows = (int)spec.shape[0];
                continue;
            }
            if (spec.zero_if_absent) {
                slot = zeros.get();
                continue;
            }
            if (!spec.required && !pair_present(specs, spec, *source, bound)) continue;
            throw Error(source->where() + ": missing tensor " + source->origin(spec.name) + " (expected shape " +
                        shape_string(shape) + ")");
        }
        if (head_w && shape[0] == 0) {
            shape = head_shape(*source, spec.name, D);
            gen_rows = (int)shape[0];
        }
        const auto actual = source->shape(spec.name);
        if (actual != shape) {
            throw Error(source->where() + ": tensor " + source->origin(spec.name) + " has shape " +
                        shape_string(actual) + ", expected " + shape_string(shape));
        }
        if (head_w) gen_rows = (int)shape[0];
        // A layer's 2-D tensors and the untied head are projections; so is
        // the decoder's token table when deferred (int8 reads it from the
        // file's blocks: Session::embed_rows).
        const bool projection =
            shape.size() == 2 && (head_w || spec.slot.layer >= 0 || spec.name == "tgt_embed.weight");
        slot = bound[spec.name] = projection ? source->projection(spec.name) : source->data(spec.name);
        if (counted.insert(slot).second) params += numel(shape);  // shared storage counts once
    }
    head_biases(*this);
    require_all_read(*source, bound, cfg);
}

namespace {

// The Model over bound weights, its first session on `d`.
Model make_model(std::shared_ptr<ModelWeights> w, Device d) {
#ifndef HALFORMER_HAS_GPU
    if (d != Device::CPU) throw Error(device_problem(d));
#endif
    auto impl = std::make_unique<Model::Impl>();
    impl->first = std::make_unique<Session>(w, std::make_shared<MemoryBudget>());
    impl->first->set_device(d);
    impl->w = std::move(w);
    return Model(std::move(impl));
}

}  // namespace

namespace {

// A checkpoint's chat template: chat_template.jinja, or tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template}: "default"), with
// the special tokens' spellings it reads (bos_token, eos_token, unk_token,
// pad_token: strings or {"content": ...}). A template that does not parse
// leaves the model loadable; chat then says why.
void read_chat_template(const std::string &dir, ModelWeights &w) {
    auto read_text = [](const std::string &path) {
        std::ifstream in(path, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    const std::string cfg_path = dir + "/tokenizer_config.json", jinja = dir + "/chat_template.jinja";
    std::string source, from;
    if (files::exists(cfg_path)) {
        const json::Value root = json::parse(read_text(cfg_path), cfg_path);
        if (root.is_object()) {
            for (const char *key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
                const json::Value *v = root.find(key);
                if (v && v->is_object()) v = v->find("content");
                if (v && v->is_string()) w.chat_vars[key] = v->string;
            }
            if (const json::Value *t = root.find("chat_template")) {
                if (t->is_string()) {
                    source = t->string;
                } else if (t->is_array()) {
                    for (const json::Value &e : t->array) {
                        const json::Value *name = e.is_object() ? e.find("name") : nullptr;
                        const json::Value *tpl = e.is_object() ? e.find("template") : nullptr;
                        if (name && name->is_string() && name->string == "default" && tpl && tpl->is_string()) {
                            source = tpl->string;
                        }
                    }
                }
                from = cfg_path + ": chat_template";
            }
        }
    }
    if (files::exists(jinja)) {
        source = read_text(jinja);
        from = jinja;
    }
    if (source.empty()) {
        w.chat_missing = dir + " has no chat template (tokenizer_config.json's chat_template, chat_template.jinja)";
        return;
    }
    try {
        w.chat = std::make_shared<ChatTemplate>(ChatTemplate::parse(source));
    } catch (const Error &e) {
        w.chat_missing = from + ": " + e.what();
    }
}

}  // namespace

namespace {

// A GGUF file, read as the Hugging Face checkpoint it was converted from
// (hf/gguf_files.cpp): its config.json made from the metadata, its tensors
// under transformers' names, its tokenizer (tokenizer.ggml.*) and chat
// template (tokenizer.chat_template).
Model load_gguf(const std::string &path, Device device) {
    auto g = std::make_shared<Gguf>(path);
    const std::string what = path + " (as config.json)";
    const std::string text = hf::gguf_config_json(*g);
    auto w = std::make_shared<ModelWeights>();
    w->cfg = Config::from_json(text, what);
    w->source = hf::open_weights(hf::gguf_files(g), w->cfg, json::parse(text, what), what);
    if (auto tok = Tokenizer::load_gguf(path, w->cfg)) {
        w->tok = std::make_shared<Tokenizer>(std::move(*tok));
        w->tok->check_matches(w->cfg);
    }
    // The special tokens' spellings a chat template reads.
    const std::vector<std::string> tokens = g->strings("tokenizer.ggml.tokens", {});
    for (auto [var, id] : {std::pair<const char *, int>{"bos_token", w->cfg.bos_id}, {"eos_token", w->cfg.eos_id}}) {
        if (id >= 0 && (size_t)id < tokens.size()) w->chat_vars[var] = tokens[(size_t)id];
    }
    const std::string tpl = g->string("tokenizer.chat_template", "");
    if (tpl.empty()) {
        w->chat_missing = path + " has no chat template (tokenizer.chat_template)";
    } else {
        try {
            w->chat = std::make_shared<ChatTemplate>(ChatTemplate::parse(tpl));
        } catch (const Error &e) {
            w->chat_missing = path + ": tokenizer.chat_template: " + e.what();
        }
    }
    // A file of quantized weights runs as int8: projections packed from the
    // file's Q8_0 codes and block steps, or from another block type's
    // (Q4_0, Q4_K, ...) transcoded to Q8_0 blocks one tensor at a time
    // (requantize_row_q8_0: Q4_0 and Q5_0 exactly), their float32 values
    // never made (on a CPU; set_precision to another makes them).
    uint64_t q8 = 0, all = 0;
    for (const GgufTensor &t : g->tensors()) {
        if (t.ne.size() != 2) continue;
        all += t.bytes;
        const bool plain = t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16;
        if (!plain && ggml_can_dequantize(t.type)) q8 += t.bytes;
    }
    const bool int8 = device == Device::CPU && all > 0 && q8 * 2 > all && lowp_kernels();
    if (int8) w->source->defer_quantized();
    w->bind();
    Model m = make_model(std::move(w), device);
    if (int8) {
        m.set_precision(Precision::INT8);
        g->evict();  // (the packed copies hold the codes now)
    }
    return m;
}

}  // namespace

Model Model::load(const std::string &dir, Device device) {
    struct stat st;
    if (stat(dir.c_str(), &st) == 0 && S_ISREG(st.st_mode) && is_gguf_file(dir)) return load_gguf(dir, device);
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw Error(dir + ": not a model directory (expected config.json and model.safetensors) nor a GGUF file");
    }
    auto w = std::make_shared<ModelWeights>();
    w->cfg = Config::from_file(dir + "/config.json");
    if (!w->cfg.tokenizer.empty()) {
        const std::string path = dir + "/" + w->cfg.tokenizer;
        w->tok = std::make_unique<Tokenizer>(Tokenizer::load(path));
        try {
            w->tok->check_matches(w->cfg);
        } catch (const Error &e) {
            throw Error(dir + "/config.json: " + e.what());
        }
    }
    if (!w->cfg.family.empty()) {
        w->source = hf::open_weights(dir, w->cfg);
        hf::read_generation_config(dir, w->cfg);
        read_chat_template(dir, *w);
        if (auto tok = Tokenizer::load_hf(dir, w->cfg)) {
            w->tok = std::make_shared<Tokenizer>(std::move(*tok));
            w->tok->check_matches(w->cfg);
        }
    } else {
        w->source = std::make_unique<FileSource>(dir + "/model.safetensors");
    }
    w->bind();
    return make_model(std::move(w), device);
}

Model Model::random(const Config &config, uint64_t seed, Device device) {
    config.validate();
    auto w = std::make_shared<ModelWeights>();
    w->cfg = config;
    w->source = std::make_unique<FreshSource>(config, seed);
    w->bind();
    return make_model(std::move(w), device);
}

const Config &Model::config() const { return impl_->w->cfg; }
Device Model::device() const { return impl_->first->device(); }
DeviceMemory Model::device_memory() const {
    return {impl_->first->dev->weight_bytes(), impl_->first->dev->activation_bytes()};
}
int64_t Model::parameter_count() const { return impl_->w->params; }
int64_t Model::packed_weight_bytes() const {
    PackCache &c = *impl_->w->packs;
    std::lock_guard<std::mutex> lock(c.mu);
    int64_t bytes = 0;
    for (const auto &[key, p] : c.map) bytes += (int64_t)(p.data.bytes() + p.scale.bytes() + p.colsum.bytes() + p.mins.bytes());
    for (const auto &[key, e] : c.embeds) bytes += e ? (int64_t)e->bytes.size() : 0;
    return bytes;
}
bool Model::has_head() const { return impl_->w->gen_w != nullptr; }
bool Model::tied_head() const { return impl_->w->tied; }
int Model::output_rows() const { return impl_->w->gen_w ? impl_->w->gen_rows : impl_->w->cfg.d_model; }

}  // namespace halformer

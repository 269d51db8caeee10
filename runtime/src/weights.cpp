// Model files and weights: config.json + model.safetensors (PyTorch
// state_dict names), or deterministic random weights; every tensor the config
// implies is resolved to a kernel-ready float32 pointer and its shape checked.
#include "model_impl.h"
#include "splitmix.h"

#include <cmath>
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

// Deterministic random weights for a config: Xavier-uniform matrices, unit
// LayerNorm gains, zero biases, embeddings of scale d_model^-1/2; the output
// projection is tied and no final norms are present (the paper's model).
class RandomSource : public TensorSource {
public:
    RandomSource(const Config &cfg, uint64_t seed) : cfg_(cfg), seed_(seed) {}
    bool has(const std::string &name) const override {
        return name.rfind("generator.", 0) != 0 && name.find(".norm.") == std::string::npos &&
               name.rfind("encoder.norm", 0) != 0 && name.rfind("decoder.norm", 0) != 0;
    }
    std::vector<int64_t> shape(const std::string &) const override { return {}; }
    void expect(const std::string &name, const std::vector<int64_t> &shape) { shapes_[name] = shape; }
    const float *data(const std::string &name) override {
        // One shared embedding matrix when the vocabularies match (section 3.4).
        if (name == "src_embed.weight" && cfg_.src_vocab_size == cfg_.tgt_vocab_size &&
            cfg_.architecture == Architecture::EncoderDecoder) {
            shapes_["tgt_embed.weight"] = shapes_.at(name);
            return data("tgt_embed.weight");
        }
        const std::vector<int64_t> &shape = shapes_.at(name);
        if (store_.count(name)) return store_[name].data();
        size_t n = 1;
        for (auto d : shape) n *= (size_t)d;
        auto &v = store_[name];
        v.resize(n);
        auto ends = [&](const char *s) {
            size_t l = std::strlen(s);
            return name.size() >= l && name.compare(name.size() - l, l, s) == 0;
        };
        float fill = 0, range = 0;
        if (name.find("norm") != std::string::npos && ends(".weight")) {
            fill = 1;
        } else if (ends("bias")) {
            fill = 0;
        } else if (name.find("embed") != std::string::npos || name.find("_pos.") != std::string::npos) {
            range = std::sqrt(3.0f / (float)cfg_.d_model);
        } else {
            range = std::sqrt(6.0f / float(shape[0] + shape[1]));
        }
        SplitMix rng{seed_ ^ std::hash<std::string>{}(name)};
        for (size_t k = 0; k < n; k++) {
            v[k] = range == 0 ? fill : range * (float(rng.next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
        }
        return v.data();
    }
    std::vector<std::string> names() const override { return {}; }
    std::string where() const override { return "random weights"; }

private:
    Config cfg_;
    uint64_t seed_;
    std::map<std::string, std::vector<int64_t>> shapes_;
    std::map<std::string, std::vector<float>> store_;
};

}  // namespace

void Model::Impl::bind() {
    const int64_t D = cfg.d_model, F = cfg.d_ff;
    std::set<std::string> used;
    std::set<const float *> counted;
    auto *random = dynamic_cast<RandomSource *>(source.get());
    auto get = [&](const std::string &name, std::vector<int64_t> shape, bool required) -> const float * {
        if (!source->has(name)) {
            if (!required) return nullptr;
            throw Error(source->where() + ": missing tensor '" + name + "' (expected shape " +
                        shape_string(shape) + ")");
        }
        if (random) {
            random->expect(name, shape);
        } else {
            auto actual = source->shape(name);
            if (shape.empty()) shape = actual;  // free shape (an encoder head's rows)
            if (actual != shape) {
                throw Error(source->where() + ": tensor '" + name + "' has shape " +
                            shape_string(actual) + ", expected " + shape_string(shape));
            }
        }
        used.insert(name);
        const float *data = source->data(name);
        int64_t n = 1;
        for (auto d : shape) n *= d;
        if (counted.insert(data).second) params += n;  // shared storage counts once
        return data;
    };
    auto attn = [&](const std::string &p) {
        AttnW a;
        a.in_w = get(p + "in_proj_weight", {3 * D, D}, true);
        a.in_b = get(p + "in_proj_bias", {3 * D}, true);
        a.out_w = get(p + "out_proj.weight", {D, D}, true);
        a.out_b = get(p + "out_proj.bias", {D}, true);
        return a;
    };
    auto norm = [&](const std::string &p, bool required) {
        NormW n;
        n.g = get(p + "weight", {D}, required || source->has(p + "bias"));
        if (n.g) n.b = get(p + "bias", {D}, true);
        return n;
    };
    auto stack = [&](const std::string &side, int layers, bool cross, const std::string &embed,
                     const std::string &pos, int vocab) {
        StackW s;
        s.vocab = vocab;
        for (int i = 0; i < layers; i++) {
            std::string p = side + ".layers." + std::to_string(i) + ".";
            LayerW L;
            L.self = attn(p + "self_attn.");
            L.self_norm = norm(p + "norm1.", true);
            if (cross) {
                L.cross = attn(p + "multihead_attn.");
                L.cross_norm = norm(p + "norm2.", true);
            }
            L.w1 = get(p + "linear1.weight", {F, D}, true);
            L.b1 = get(p + "linear1.bias", {F}, true);
            L.w2 = get(p + "linear2.weight", {D, F}, true);
            L.b2 = get(p + "linear2.bias", {D}, true);
            L.ffn_norm = norm(p + (cross ? "norm3." : "norm2."), true);
            s.layers.push_back(L);
        }
        s.final_norm = norm(side + ".norm.", false);
        s.embed = get(embed + ".weight", {vocab, D}, true);
        if (cfg.positional_encoding == Positional::Learned) {
            s.pos = get(pos + ".weight", {cfg.max_positions, D}, true);
        }
        return s;
    };
    if (cfg.has_encoder()) {
        enc = stack("encoder", cfg.num_encoder_layers, false, "src_embed", "src_pos", cfg.src_vocab_size);
    }
    if (cfg.has_decoder()) {
        dec = stack("decoder", cfg.num_decoder_layers, cfg.architecture == Architecture::EncoderDecoder,
                    "tgt_embed", "tgt_pos", cfg.tgt_vocab_size);
        gen_rows = cfg.tgt_vocab_size;
        gen_w = get("generator.weight", {gen_rows, D}, false);
        if (!gen_w) {
            gen_w = dec.embed;
            tied = true;
        }
    } else if (source->has("generator.weight")) {
        auto shape = source->shape("generator.weight");
        if (shape.size() != 2 || shape[1] != D || shape[0] < 1) {
            throw Error(source->where() + ": tensor 'generator.weight' has shape " + shape_string(shape) +
                        ", expected [rows, " + std::to_string(D) + "]");
        }
        gen_rows = (int)shape[0];
        gen_w = get("generator.weight", shape, true);
    }
    if (gen_w) gen_b = get("generator.bias", {gen_rows}, false);
    if (!gen_b && gen_rows > 0) {
        float *z = zero_bias.need((size_t)gen_rows);
        std::fill(z, z + gen_rows, 0.0f);
        gen_b = z;
    }
    std::vector<std::string> extra;
    for (auto &n : source->names()) {
        if (!used.count(n)) extra.push_back(n);
    }
    if (!extra.empty()) {
        std::string list;
        for (size_t k = 0; k < extra.size() && k < 5; k++) list += (k ? ", '" : "'") + extra[k] + "'";
        if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size()) + " in all)";
        throw Error(source->where() + ": tensors the " + architecture_name(cfg.architecture) +
                    " config does not use: " + list +
                    " (do num_encoder_layers / num_decoder_layers / architecture match the file?)");
    }
}

namespace {

void set_model_device(Model::Impl &m, Device d) {
#ifndef HALFORMER_HAS_GPU
    if (d != Device::CPU) throw Error(device_problem(d));
#endif
    m.set_device(d);
}

}  // namespace

Model Model::load(const std::string &dir, Device device) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw Error(dir + ": not a model directory (expected config.json and model.safetensors)");
    }
    auto impl = std::make_unique<Impl>();
    impl->cfg = Config::from_file(dir + "/config.json");
    if (!impl->cfg.tokenizer.empty()) {
        const std::string path = dir + "/" + impl->cfg.tokenizer;
        impl->tok = std::make_unique<Tokenizer>(Tokenizer::load(path));
        try {
            impl->tok->check_matches(impl->cfg);
        } catch (const Error &e) {
            throw Error(dir + "/config.json: " + e.what());
        }
    }
    impl->source = std::make_unique<FileSource>(dir + "/model.safetensors");
    impl->bind();
    set_model_device(*impl, device);
    return Model(std::move(impl));
}

Model Model::random(const Config &config, uint64_t seed, Device device) {
    config.validate();
    auto impl = std::make_unique<Impl>();
    impl->cfg = config;
    impl->source = std::make_unique<RandomSource>(config, seed);
    impl->bind();
    set_model_device(*impl, device);
    return Model(std::move(impl));
}

const Config &Model::config() const { return impl_->cfg; }
Device Model::device() const { return impl_->device(); }
DeviceMemory Model::device_memory() const {
    return {impl_->dev->weight_bytes(), impl_->dev->activation_bytes()};
}
int64_t Model::parameter_count() const { return impl_->params; }
bool Model::has_head() const { return impl_->gen_w != nullptr; }
bool Model::tied_head() const { return impl_->tied; }
int Model::output_rows() const { return impl_->gen_w ? impl_->gen_rows : impl_->cfg.d_model; }

}  // namespace halformer

// A GGUF file (llama.cpp's format, halformer/gguf.h) read as the Hugging
// Face checkpoint it was converted from: config.json as transformers writes
// it for the family, made from the file's metadata, and the tensors under
// transformers' names, so that the family's config reader, weight rules and
// builder (families/<name>.cpp) serve a GGUF file exactly as they serve a
// directory.
//
// What llama.cpp's converter (convert_hf_to_gguf.py) changed, undone here:
// the names (blk.{i}.attn_q.weight for model.layers.{i}.self_attn.q_proj.
// weight, ...); the shapes (GGUF lists dimensions innermost first: ne =
// [in, out] for PyTorch's [out, in]); and, for the `llama` architecture,
// the rows of each query and key head, which the converter interleaves
// (rotating adjacent pairs, llama.cpp's "normal" rope) where transformers
// rotates the head's two halves: row 2j + t of a head is transformers' row
// t·head_dim/2 + j. Qwen2's and Qwen3's files keep transformers' order
// (llama.cpp rotates them by halves, "neox").
//
// Defaults llama.cpp assumes rather than stores come from the family's own
// config reader (transformers' defaults); a key the file has overrides
// them. Quantized tensors are dequantized to float32 once, when first read
// as float32, or given as Q8_0 rows to int8's packing (q8_0_row: Q8_0 in
// place, the other block types transcoded); float32 ones are read in place,
// in the file's mapping, whose pages leave resident memory once packed.
#include "hf.h"

#include "halformer/error.h"
#include "halformer/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

namespace halformer {
namespace hf {
namespace {

// One GGUF architecture: the transformers model_type and class it was
// converted from, and whether its Q and K rows were interleaved.
struct Arch {
    const char *model_type, *architecture;
    bool permuted_qk;
};
const std::map<std::string, Arch> &architectures() {
    static const std::map<std::string, Arch> a = {
        {"llama", {"llama", "LlamaForCausalLM", true}},
        {"qwen2", {"qwen2", "Qwen2ForCausalLM", false}},
        {"qwen3", {"qwen3", "Qwen3ForCausalLM", false}},
    };
    return a;
}

const Arch &arch_of(const Gguf &g) {
    const std::string name = g.string("general.architecture");
    auto it = architectures().find(name);
    if (it == architectures().end()) {
        std::string known;
        for (auto &[k, v] : architectures()) known += (known.empty() ? "" : ", ") + k;
        throw Error(g.name() + ": general.architecture \"" + name + "\" is not supported by Halformer (" + known +
                    ")");
    }
    return it->second;
}

// GGUF's per-layer names → transformers' (the {i} is the layer).
const std::vector<std::pair<std::string, std::string>> &layer_names() {
    static const std::vector<std::pair<std::string, std::string>> n = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_v.bias", "self_attn.v_proj.bias"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_output.bias", "self_attn.o_proj.bias"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_gate.bias", "mlp.gate_proj.bias"},
        {"ffn_up.bias", "mlp.up_proj.bias"},
        {"ffn_down.bias", "mlp.down_proj.bias"},
    };
    return n;
}
const std::map<std::string, std::string> &model_names() {
    static const std::map<std::string, std::string> n = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    return n;
}

// GGUF's name of a transformers tensor ("" when it has none).
std::string gguf_name(const std::string &hf) {
    for (auto &[theirs, ours] : model_names())
        if (ours == hf) return theirs;
    static const std::regex layer(R"(^model\.layers\.(\d+)\.(.+)$)");
    std::smatch m;
    if (!std::regex_match(hf, m, layer)) return "";
    for (auto &[theirs, ours] : layer_names()) {
        if (m[2].str() == ours) return "blk." + m[1].str() + "." + theirs;
    }
    return "";
}

// transformers' name of a GGUF tensor ("" when it has none).
std::string transformers_name(const std::string &gguf) {
    if (auto it = model_names().find(gguf); it != model_names().end()) return it->second;
    static const std::regex layer(R"(^blk\.(\d+)\.(.+)$)");
    std::smatch m;
    if (!std::regex_match(gguf, m, layer)) return "";
    for (auto &[theirs, ours] : layer_names()) {
        if (m[2].str() == theirs) return "model.layers." + m[1].str() + "." + ours;
    }
    return "";
}

std::string json_number(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// The metadata as config.json's fields: what the file has, in
// transformers' names.
class ConfigWriter {
public:
    explicit ConfigWriter(const Gguf &g) : g_(g), arch_(g.string("general.architecture")) {}
    void raw(const std::string &key, const std::string &json) {
        out_ << (first_ ? "" : ",\n") << "  " << json::quote(key) << ": " << json;
        first_ = false;
    }
    // An integer of the architecture's (prefix.suffix) where the file has
    // it (`required`: an Error naming it where it does not).
    void integer(const std::string &key, const std::string &suffix, bool required = false) {
        const std::string k = arch_ + "." + suffix;
        if (required && !g_.has(k)) throw Error(g_.name() + ": no " + k + " (" + key + ")");
        if (const GgufValue *v = g_.find(k)) {
            if (v->type == GgufType::ARRAY) {
                throw Error(g_.name() + ": " + k + " differs between layers: not supported by Halformer");
            }
            raw(key, std::to_string(g_.integer(k)));
        }
    }
    void real(const std::string &key, const std::string &suffix) {
        const std::string k = arch_ + "." + suffix;
        if (g_.has(k)) raw(key, json_number(g_.number(k)));
    }
    std::string text() const { return "{\n" + out_.str() + "\n}\n"; }

private:
    const Gguf &g_;
    std::string arch_;
    std::ostringstream out_;
    bool first_ = true;
};

// The Q|K rows of a head back in transformers' order (see the top).
void unpermute(const float *src, float *dst, int64_t rows, int64_t cols, int64_t heads, const std::string &what) {
    if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0) {
        throw Error(what + ": " + std::to_string(rows) + " rows are not " + std::to_string(heads) +
                    " heads of an even size");
    }
    const int64_t hd = rows / heads, half = hd / 2;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t j = 0; j < half; j++)
            for (int64_t t = 0; t < 2; t++) {
                const float *from = src + (h * hd + 2 * j + t) * cols;
                std::copy(from, from + cols, dst + (h * hd + t * half + j) * cols);
            }
}

class GgufFiles : public TensorFiles {
public:
    explicit GgufFiles(std::shared_ptr<Gguf> g) : g_(std::move(g)), arch_(arch_of(*g_)) {
        const std::string a = g_->string("general.architecture");
        heads_ = g_->integer(a + ".attention.head_count");
        kv_heads_ = g_->integer(a + ".attention.head_count_kv", heads_);
        for (const GgufTensor &t : g_->tensors()) {
            const std::string name = transformers_name(t.name);
            if (t.name == "rope_freqs.weight") continue;  // (read into the config: llama3_scaling)
            // A tensor with no transformers name keeps its own: the model's
            // loader names it as one it does not read.
            const std::string key = name.empty() ? t.name : name;
            std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
            entries_[key] = {&t, shape};
        }
    }
    const std::vector<int64_t> *shape(const std::string &name) const override {
        auto it = entries_.find(name);
        return it == entries_.end() ? nullptr : &it->second.shape;
    }
    const float *f32(const std::string &name) override {
        auto it = entries_.find(name);
        if (it == entries_.end()) throw Error("internal: no tensor '" + name + "' in " + where());
        Entry &e = it->second;
        if (!e.values.empty()) return e.values.data();
        const GgufTensor &t = *e.tensor;
        if (!ggml_can_dequantize(t.type)) {
            throw Error(where() + ": tensor '" + t.name + "' is " + ggml_type_name(t.type) +
                        ", which Halformer does not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, "
                        "Q6_K)");
        }
        const int permuted = permuted_heads(name);
        // A float32 tensor in its place is read where it lies, in the
        // file's mapping (GGUF aligns tensors to 32 bytes or more).
        if (t.type == GgmlType::F32 && !permuted && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
            return reinterpret_cast<const float *>(t.data);
        }
        std::vector<float> v((size_t)t.numel());
        dequantize(t, v.data());
        if (permuted) {
            e.values.resize(v.size());
            unpermute(v.data(), e.values.data(), e.shape[0], e.shape.size() == 2 ? e.shape[1] : 1, permuted,
                      where() + ": tensor '" + t.name + "'");
        } else {
            e.values = std::move(v);
        }
        return e.values.data();
    }
    // Q8_0 rows are the file's own; a tensor of another block type (Q4_0,
    // Q4_K, ...) is transcoded to Q8_0 whole on first use
    // (requantize_row_q8_0), kept until evict().
    bool holds_q8_0(const std::string &name) const override {
        auto it = entries_.find(name);
        if (it == entries_.end() || it->second.shape.size() != 2 || it->second.shape[1] % 32 != 0) return false;
        const GgmlType t = it->second.tensor->type;
        return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16 && ggml_can_dequantize(t) &&
               it->second.shape[1] % ggml_block_size(t) == 0;
    }
    const uint8_t *q4_0_row(const std::string &name, int64_t row) const override {
        auto it = entries_.find(name);
        if (it == entries_.end()) return nullptr;
        const Entry &e = it->second;
        const GgufTensor &t = *e.tensor;
        if (t.type != GgmlType::Q4_0 || e.shape.size() != 2 || e.shape[1] % 32 != 0 || row < 0 || row >= e.shape[0]) {
            return nullptr;
        }
        const int64_t from = file_row(name, e, row);
        if (from < 0) return nullptr;
        return t.data + (size_t)from * (size_t)(e.shape[1] / 32) * 18;
    }
    const uint8_t *q8_0_row(const std::string &name, int64_t row) const override {
        auto it = entries_.find(name);
        if (it == entries_.end() || !holds_q8_0(name)) return nullptr;
        return transcoded_row(name, it->second, row, GgmlType::Q8_0, 34, requantize_row_q8_0);
    }
    // Q4_1 rows are the file's own; Q4_K is transcoded to Q4_1 whole on first
    // use (transcode_row_q4_1), kept until evict().
    const uint8_t *q4_1_row(const std::string &name, int64_t row) const override {
        auto it = entries_.find(name);
        if (it == entries_.end()) return nullptr;
        const GgmlType t = it->second.tensor->type;
        if ((t != GgmlType::Q4_1 && t != GgmlType::Q4_K) || it->second.shape.size() != 2 ||
            it->second.shape[1] % ggml_block_size(t) != 0) {
            return nullptr;
        }
        return transcoded_row(name, it->second, row, GgmlType::Q4_1, 20, transcode_row_q4_1);
    }
    void evict(const std::string &name) const override {
        auto it = entries_.find(name);
        if (it == entries_.end()) return;
        g_->evict(*it->second.tensor);
        std::lock_guard<std::mutex> lock(q8_mu_);
        std::vector<uint8_t>().swap(it->second.transcoded);
    }
    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (auto &[name, e] : entries_) out.push_back(name);
        return out;
    }
    std::string where() const override { return g_->name(); }
    std::string spelled(const std::string &name) const override {
        const std::string g = gguf_name(name);
        return g.empty() ? name : g;
    }

private:
    // The heads whose Q or K rows (and biases) llama.cpp's converter
    // interleaved in this tensor (see the top); 0 where it did not.
    int permuted_heads(const std::string &name) const {
        if (!arch_.permuted_qk) return 0;
        if (name.find(".self_attn.q_proj.") != std::string::npos) return (int)heads_;
        if (name.find(".self_attn.k_proj.") != std::string::npos) return (int)kv_heads_;
        return 0;
    }
    struct Entry {
        const GgufTensor *tensor = nullptr;
        std::vector<int64_t> shape;  // PyTorch's order
        std::vector<float> values;   // once read
        // Another block type as the kernels' (Q8_0 or Q4_1) rows, while packing.
        mutable std::vector<uint8_t> transcoded;
        mutable GgmlType transcoded_as = GgmlType::F32;
    };
    mutable std::mutex q8_mu_;
    // Row `row` of e in block type `as` (row_bytes a row): the file's own
    // bytes where it holds that type, else the whole tensor transcoded once
    // by `convert` (a row at a time) and kept; null where it cannot be.
    template <typename Convert>
    const uint8_t *transcoded_row(const std::string &name, const Entry &e, int64_t row, GgmlType as, size_t per_block,
                                  Convert convert) const {
        const GgufTensor &t = *e.tensor;
        if (e.shape.size() != 2 || e.shape[1] % 32 != 0 || row < 0 || row >= e.shape[0]) return nullptr;
        const int64_t from = file_row(name, e, row);
        if (from < 0) return nullptr;
        const size_t row_bytes = (size_t)(e.shape[1] / 32) * per_block;
        if (t.type == as) return t.data + (size_t)from * row_bytes;
        std::lock_guard<std::mutex> lock(q8_mu_);
        if (e.transcoded.empty() || e.transcoded_as != as) {
            const int64_t K = e.shape[1];
            const size_t in_row = (size_t)(K / ggml_block_size(t.type)) * ggml_type_size(t.type);
            if ((uint64_t)e.shape[0] * in_row != t.bytes) return nullptr;
            e.transcoded.assign((size_t)e.shape[0] * row_bytes, 0);
            e.transcoded_as = as;
            for (int64_t r = 0; r < e.shape[0]; r++) {
                if (!convert(t.type, t.data + (size_t)r * in_row, e.transcoded.data() + (size_t)r * row_bytes, K)) {
                    std::vector<uint8_t>().swap(e.transcoded);
                    return nullptr;
                }
            }
            g_->evict(t);  // (read once: the copy holds it now)
        }
        return e.transcoded.data() + (size_t)from * row_bytes;
    }
    // Row `row` of transformers' order is the file's row where llama.cpp's
    // converter put it (unpermute, above, reversed); -1 where the heads do
    // not divide the rows.
    int64_t file_row(const std::string &name, const Entry &e, int64_t row) const {
        const int heads = permuted_heads(name);
        if (!heads) return row;
        const int64_t hd = e.shape[0] / heads, half = hd / 2, h = row / hd, i = row % hd;
        if (e.shape[0] % heads != 0 || hd % 2 != 0) return -1;
        return h * hd + 2 * (i % half) + i / half;
    }
    std::shared_ptr<Gguf> g_;
    Arch arch_;
    int64_t heads_ = 0, kv_heads_ = 0;
    std::map<std::string, Entry> entries_;
};

// Llama 3's rope scaling as llama.cpp's converter stores it: no keys, a
// tensor rope_freqs.weight of the factor dividing each of the head's
// frequencies. The parameters transformers reads (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings) are found as the
// ones that give that table (the factor is its largest entry; the others
// from the values every released Llama 3.x uses and their neighbours); a
// table no such parameters give is an Error.
std::string llama3_scaling(const Gguf &g, const GgufTensor &t, double base, int64_t dim) {
    const std::string what = g.name() + ": tensor 'rope_freqs.weight'";
    if (t.ne.size() != 1 || t.ne[0] * 2 != dim) {
        throw Error(what + " has " + std::to_string(t.numel()) + " values; the heads' " + std::to_string(dim) +
                    " dimensions need " + std::to_string(dim / 2));
    }
    std::vector<float> r((size_t)t.numel());
    dequantize(t, r.data());
    const double factor = *std::max_element(r.begin(), r.end());
    if (factor == 1.0) return "";
    auto table = [&](double low, double high, double old) {
        std::vector<double> out;
        for (int64_t i = 0; i < dim / 2; i++) {
            const double freq = 1.0 / std::pow(base, (double)(2 * i) / (double)dim);
            const double wavelen = 2 * M_PI / freq;
            if (wavelen < old / high) {
                out.push_back(1.0);
            } else if (wavelen > old / low) {
                out.push_back(factor);
            } else {
                const double smooth = (old / wavelen - low) / (high - low);
                out.push_back(1.0 / ((1 - smooth) / factor + smooth));
            }
        }
        return out;
    };
    for (double low : {1.0, 2.0, 0.5})
        for (double high : {4.0, 8.0, 2.0, 16.0})
            for (int64_t old = 32; old <= (1 << 20); old *= 2) {
                const std::vector<double> want = table(low, high, (double)old);
                bool same = true;
                for (size_t i = 0; i < r.size() && same; i++) same = std::fabs(want[i] - r[i]) <= 1e-5 * want[i];
                if (!same) continue;
                return "{\"rope_type\": \"llama3\", \"factor\": " + json_number(factor) + ", \"low_freq_factor\": " +
                       json_number(low) + ", \"high_freq_factor\": " + json_number(high) +
                       ", \"original_max_position_embeddings\": " + std::to_string(old) + "}";
            }
    throw Error(what + ": its factors match no Llama 3 rope scaling (factor " + json_number(factor) +
                "; low and high frequency factors 0.5 to 16, original context 32 to 2^20)");
}

}  // namespace

std::string gguf_config_json(const Gguf &g) {
    const Arch &a = arch_of(g);
    const std::string arch = g.string("general.architecture");
    ConfigWriter w(g);
    w.raw("model_type", json::quote(a.model_type));
    w.raw("architectures", "[" + json::quote(a.architecture) + "]");
    w.integer("hidden_size", "embedding_length", true);
    w.integer("intermediate_size", "feed_forward_length", true);
    w.integer("num_hidden_layers", "block_count", true);
    w.integer("num_attention_heads", "attention.head_count", true);
    w.integer("num_key_value_heads", "attention.head_count_kv");
    w.integer("max_position_embeddings", "context_length");
    w.real("rms_norm_eps", "attention.layer_norm_rms_epsilon");
    w.real("rope_theta", "rope.freq_base");
    // head_dim where the file gives one unlike hidden / heads (Qwen3's).
    if (g.has(arch + ".attention.key_length")) {
        const int64_t k = g.integer(arch + ".attention.key_length");
        const int64_t v = g.integer(arch + ".attention.value_length", k);
        if (v != k) {
            throw Error(g.name() + ": " + arch + ".attention.key_length " + std::to_string(k) + " and value_length " +
                        std::to_string(v) + " differ: not supported by Halformer");
        }
        w.raw("head_dim", std::to_string(k));
    }
    // The rotary dimensions: all of each head's (a partial rotary is
    // another family's).
    if (g.has(arch + ".rope.dimension_count") && g.has(arch + ".attention.key_length") &&
        g.integer(arch + ".rope.dimension_count") != g.integer(arch + ".attention.key_length")) {
        throw Error(g.name() + ": " + arch + ".rope.dimension_count is not the head size: a partial rotary is not "
                                             "supported for this architecture");
    }
    const std::string scaling = g.string(arch + ".rope.scaling.type", "none");
    if (const GgufTensor *freqs = g.find_tensor("rope_freqs.weight")) {
        if (scaling != "none") {
            throw Error(g.name() + ": both " + arch + ".rope.scaling.type and a rope_freqs.weight tensor");
        }
        const int64_t heads = g.integer(arch + ".attention.head_count");
        const int64_t dim = g.integer(arch + ".attention.key_length",
                                      heads > 0 ? g.integer(arch + ".embedding_length") / heads : 0);
        const std::string s = llama3_scaling(g, *freqs, g.number(arch + ".rope.freq_base", 10000.0), dim);
        if (!s.empty()) w.raw("rope_scaling", s);
    } else if (scaling == "linear") {
        w.raw("rope_scaling", "{\"rope_type\": \"linear\", \"factor\": " +
                                  json_number(g.number(arch + ".rope.scaling.factor")) + "}");
    } else if (scaling != "none") {
        throw Error(g.name() + ": " + arch + ".rope.scaling.type \"" + scaling +
                    "\" is not supported by Halformer (none, linear)");
    }
    // The vocabulary: the tokenizer's tokens, else the embedding's rows.
    if (g.has(arch + ".vocab_size")) {
        w.integer("vocab_size", "vocab_size");
    } else if (g.has("tokenizer.ggml.tokens")) {
        w.raw("vocab_size", std::to_string(g.find("tokenizer.ggml.tokens")->array.size()));
    } else if (const GgufTensor *e = g.find_tensor("token_embd.weight"); e && e->ne.size() == 2) {
        w.raw("vocab_size", std::to_string(e->ne[1]));
    }
    // No output.weight: the head is the embedding (tie_word_embeddings).
    w.raw("tie_word_embeddings", g.find_tensor("output.weight") ? "false" : "true");
    if (a.model_type == std::string("llama")) {
        w.raw("attention_bias", g.find_tensor("blk.0.attn_q.bias") ? "true" : "false");
        w.raw("mlp_bias", g.find_tensor("blk.0.ffn_up.bias") ? "true" : "false");
    }
    for (const char *id : {"bos", "eos", "padding"}) {
        const std::string key = std::string("tokenizer.ggml.") + id + "_token_id";
        const std::string field = std::string(id == std::string("padding") ? "pad" : id) + "_token_id";
        if (g.has(key)) w.raw(field, std::to_string(g.integer(key)));
    }
    w.raw("torch_dtype", "\"float32\"");
    return w.text();
}

std::unique_ptr<TensorFiles> gguf_files(std::shared_ptr<Gguf> g) { return std::make_unique<GgufFiles>(std::move(g)); }

}  // namespace hf
}  // namespace halformer

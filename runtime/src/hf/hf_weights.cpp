// A Hugging Face directory's weights under the parameter table's names
// (params.h: PyTorch nn.Transformer's). Each family is a table of rules, one
// per tensor of ours: which of the file's tensors it comes from and how —
// as it is, transposed (GPT-2's Conv1D keeps [in, out]), or several stacked
// (separate Q, K and V projections → one [3D, D] in_proj). The transposes
// and stacks are made once, at load; the calls read them as any weight.
// The file's tensors that no rule reads are an Error naming them, unless
// transformers keeps them beside the weights (buffers, unused heads).
#include "hf.h"

#include "../model_weights.h"
#include "../params.h"
#include "halformer/error.h"
#include "halformer/files.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace halformer {
namespace hf {
namespace {

enum class How { Same, Transposed, Stacked, Flat, Scaled };
struct Rule {
    How how;
    std::vector<std::string> theirs;  // "{i}": the layer
    float factor = 1;                 // Scaled: times this, once at load
};
using Rules = std::map<std::string, Rule>;  // ours ("{i}": the layer) → theirs

// GPT2LMHeadModel (or GPT2Model: names without "transformer.").
Rules gpt2_rules(const std::string &p) {
    const std::string h = p + "h.{i}.";
    return {
        {"tgt_embed.weight", {How::Same, {p + "wte.weight"}}},
        {"tgt_pos.weight", {How::Same, {p + "wpe.weight"}}},
        {"decoder.layers.{i}.self_attn.in_proj_weight", {How::Transposed, {h + "attn.c_attn.weight"}}},
        {"decoder.layers.{i}.self_attn.in_proj_bias", {How::Same, {h + "attn.c_attn.bias"}}},
        {"decoder.layers.{i}.self_attn.out_proj.weight", {How::Transposed, {h + "attn.c_proj.weight"}}},
        {"decoder.layers.{i}.self_attn.out_proj.bias", {How::Same, {h + "attn.c_proj.bias"}}},
        {"decoder.layers.{i}.linear1.weight", {How::Transposed, {h + "mlp.c_fc.weight"}}},
        {"decoder.layers.{i}.linear1.bias", {How::Same, {h + "mlp.c_fc.bias"}}},
        {"decoder.layers.{i}.linear2.weight", {How::Transposed, {h + "mlp.c_proj.weight"}}},
        {"decoder.layers.{i}.linear2.bias", {How::Same, {h + "mlp.c_proj.bias"}}},
        {"decoder.layers.{i}.norm1.weight", {How::Same, {h + "ln_1.weight"}}},
        {"decoder.layers.{i}.norm1.bias", {How::Same, {h + "ln_1.bias"}}},
        {"decoder.layers.{i}.norm2.weight", {How::Same, {h + "ln_2.weight"}}},
        {"decoder.layers.{i}.norm2.bias", {How::Same, {h + "ln_2.bias"}}},
        {"decoder.norm.weight", {How::Same, {p + "ln_f.weight"}}},
        {"decoder.norm.bias", {How::Same, {p + "ln_f.bias"}}},
        {"generator.weight", {How::Same, {"lm_head.weight"}}},
    };
}

// Marian's separate q, k, v projections → one in_proj.
void marian_attention(Rules &r, const std::string &ours, const std::string &theirs) {
    for (const char *kind : {"weight", "bias"}) {
        const std::string k = kind;
        r[ours + (k == "weight" ? "in_proj_weight" : "in_proj_bias")] = {
            How::Stacked, {theirs + "q_proj." + k, theirs + "k_proj." + k, theirs + "v_proj." + k}};
        r[ours + "out_proj." + k] = {How::Same, {theirs + "out_proj." + k}};
    }
}
void norm(Rules &r, const std::string &ours, const std::string &theirs) {
    r[ours + "weight"] = {How::Same, {theirs + "weight"}};
    r[ours + "bias"] = {How::Same, {theirs + "bias"}};
}

// MarianMTModel: the shared embedding (or each stack's own), post-LN layers,
// the head tied to the target embedding plus final_logits_bias [1, V].
Rules marian_rules(bool shared) {
    Rules r;
    r["src_embed.weight"] = {How::Same, {shared ? "model.shared.weight" : "model.encoder.embed_tokens.weight"}};
    r["tgt_embed.weight"] = {How::Same, {shared ? "model.shared.weight" : "model.decoder.embed_tokens.weight"}};
    r["src_pos.weight"] = {How::Same, {"model.encoder.embed_positions.weight"}};
    r["tgt_pos.weight"] = {How::Same, {"model.decoder.embed_positions.weight"}};
    for (const char *side : {"encoder", "decoder"}) {
        const std::string s = side, ours = s + ".layers.{i}.", theirs = "model." + s + ".layers.{i}.";
        marian_attention(r, ours + "self_attn.", theirs + "self_attn.");
        norm(r, ours + "norm1.", theirs + "self_attn_layer_norm.");
        if (s == "decoder") {
            marian_attention(r, ours + "multihead_attn.", theirs + "encoder_attn.");
            norm(r, ours + "norm2.", theirs + "encoder_attn_layer_norm.");
        }
        norm(r, ours + (s == "decoder" ? "norm3." : "norm2."), theirs + "final_layer_norm.");
        r[ours + "linear1.weight"] = {How::Same, {theirs + "fc1.weight"}};
        r[ours + "linear1.bias"] = {How::Same, {theirs + "fc1.bias"}};
        r[ours + "linear2.weight"] = {How::Same, {theirs + "fc2.weight"}};
        r[ours + "linear2.bias"] = {How::Same, {theirs + "fc2.bias"}};
    }
    r["generator.weight"] = {How::Same, {"lm_head.weight"}};
    r["generator.bias"] = {How::Flat, {"final_logits_bias"}};
    return r;
}

// BertModel ("embeddings...") or a model with a head ("bert.embeddings...").
Rules bert_rules(const std::string &p) {
    Rules r;
    const std::string e = p + "embeddings.";
    r["src_embed.weight"] = {How::Same, {e + "word_embeddings.weight"}};
    r["src_pos.weight"] = {How::Same, {e + "position_embeddings.weight"}};
    r["src_types.weight"] = {How::Same, {e + "token_type_embeddings.weight"}};
    norm(r, "src_embed_norm.", e + "LayerNorm.");
    const std::string ours = "encoder.layers.{i}.", l = p + "encoder.layer.{i}.";
    for (const char *kind : {"weight", "bias"}) {
        const std::string k = kind;
        r[ours + "self_attn.in_proj_" + k] = {
            How::Stacked,
            {l + "attention.self.query." + k, l + "attention.self.key." + k, l + "attention.self.value." + k}};
        r[ours + "self_attn.out_proj." + k] = {How::Same, {l + "attention.output.dense." + k}};
        r[ours + "linear1." + k] = {How::Same, {l + "intermediate.dense." + k}};
        r[ours + "linear2." + k] = {How::Same, {l + "output.dense." + k}};
    }
    norm(r, ours + "norm1.", l + "attention.output.LayerNorm.");
    norm(r, ours + "norm2.", l + "output.LayerNorm.");
    // The masked-LM head (its projection tied to word_embeddings unless the
    // file has its own) ...
    r["generator.weight"] = {How::Same, {"cls.predictions.decoder.weight"}};
    r["head_transform.weight"] = {How::Same, {"cls.predictions.transform.dense.weight"}};
    r["head_transform.bias"] = {How::Same, {"cls.predictions.transform.dense.bias"}};
    norm(r, "head_norm.", "cls.predictions.transform.LayerNorm.");
    r["generator.bias"] = {How::Same, {"cls.predictions.bias"}};
    // ... or the classifier's pooler and projection.
    r["pooler.weight"] = {How::Same, {p + "pooler.dense.weight"}};
    r["pooler.bias"] = {How::Same, {p + "pooler.dense.bias"}};
    return r;
}

// T5ForConditionalGeneration: separate q, k, v, o without biases; RMSNorm
// gains only; the relative-position tables of each stack's block 0; the
// feed-forward's wi (or wi_0 gated by wi_1) and wo. With the head tied to
// the shared embedding (v1.0) the decoder's output is scaled by
// d_model^-0.5 before it: folded into the final norm's gain here.
Rules t5_rules(const Config &c, bool tied) {
    Rules r;
    r["src_embed.weight"] = {How::Same, {"shared.weight"}};
    r["tgt_embed.weight"] = {How::Same, {"shared.weight"}};
    auto attention = [&](const std::string &ours, const std::string &theirs) {
        r[ours + "in_proj_weight"] = {How::Stacked, {theirs + "q.weight", theirs + "k.weight", theirs + "v.weight"}};
        r[ours + "out_proj.weight"] = {How::Same, {theirs + "o.weight"}};
    };
    for (const char *side : {"encoder", "decoder"}) {
        const std::string s = side, ours = s + ".layers.{i}.", theirs = s + ".block.{i}.layer.";
        const bool dec = s == "decoder";
        attention(ours + "self_attn.", theirs + "0.SelfAttention.");
        r[ours + "norm1.weight"] = {How::Same, {theirs + "0.layer_norm.weight"}};
        if (dec) {
            attention(ours + "multihead_attn.", theirs + "1.EncDecAttention.");
            r[ours + "norm2.weight"] = {How::Same, {theirs + "1.layer_norm.weight"}};
        }
        const std::string ff = theirs + (dec ? "2." : "1.");
        if (c.gated_ffn) {
            r[ours + "linear1.weight"] = {How::Same, {ff + "DenseReluDense.wi_0.weight"}};
            r[ours + "linear_gate.weight"] = {How::Same, {ff + "DenseReluDense.wi_1.weight"}};
        } else {
            r[ours + "linear1.weight"] = {How::Same, {ff + "DenseReluDense.wi.weight"}};
        }
        r[ours + "linear2.weight"] = {How::Same, {ff + "DenseReluDense.wo.weight"}};
        r[ours + (dec ? "norm3.weight" : "norm2.weight")] = {How::Same, {ff + "layer_norm.weight"}};
        r[s + ".rel_bias.weight"] = {How::Same, {s + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight"}};
        r[s + ".norm.weight"] = {How::Same, {s + ".final_layer_norm.weight"}};
    }
    if (tied) {
        r["decoder.norm.weight"] = {How::Scaled, {"decoder.final_layer_norm.weight"},
                                    1.0f / std::sqrt((float)c.d_model)};
    } else {
        r["generator.weight"] = {How::Same, {"lm_head.weight"}};
    }
    return r;
}

// Tensors transformers keeps beside the weights that no forward reads.
bool ignored(const std::string &family, const std::string &name) {
    static const std::regex gpt2(R"(^(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)$)");
    // (Marian: the stacks' copies of the shared embedding, which
    // transformers ties to model.shared on load.)
    static const std::regex marian(R"(^model\.(encoder|decoder)\.(embed_positions\._float_tensor|embed_tokens\.weight)$)");
    // (BERT: position ids; the pooler of a model whose head does not read
    // it; BertForPreTraining's next-sentence head; the MLM projection's copy
    // of its bias.)
    static const std::regex bert(
        R"(^(bert\.)?embeddings\.position_ids$|^(bert\.)?pooler\.dense\.(weight|bias)$|^cls\.seq_relationship\.(weight|bias)$|^cls\.predictions\.decoder\.bias$)");
    if (family == "gpt2") return std::regex_match(name, gpt2);
    if (family == "bert") return std::regex_match(name, bert);
    if (family == "marian") return std::regex_match(name, marian);
    // (T5: the stacks' copies of the shared embedding; the cross-attention
    // table old checkpoints hold in decoder block 0, which T5 never reads.)
    static const std::regex t5(
        R"(^(encoder|decoder)\.embed_tokens\.weight$|^decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight$)");
    if (family == "t5") return std::regex_match(name, t5);
    return false;
}

// The file's tensors, in one or several shards.
class Files {
public:
    explicit Files(const std::string &dir) {
        const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
        if (files::exists(single)) {
            open(single);
        } else if (files::exists(index)) {
            for (const std::string &shard : shards(index)) open(dir + "/" + shard);
        } else if (files::exists(dir + "/pytorch_model.bin") || files::exists(dir + "/pytorch_model.bin.index.json")) {
            throw Error(dir + ": holds pytorch_model.bin but no model.safetensors: Halformer reads safetensors only. "
                              "Save the model with transformers' model.save_pretrained(dir, safe_serialization=True) "
                              "(the default since transformers 4.35)");
        } else {
            throw Error(dir + ": no model.safetensors (nor model.safetensors.index.json with its shards)");
        }
    }
    const TensorInfo *find(const std::string &name, SafeTensors **file) const {
        auto it = where_.find(name);
        if (it == where_.end()) return nullptr;
        if (file) *file = files_[it->second].get();
        return files_[it->second]->find(name);
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (auto &f : files_)
            for (auto &t : f->tensors()) out.push_back(t.name);
        return out;
    }
    std::string where() const { return files_.size() == 1 ? files_[0]->path() : dir_of_shards_; }

private:
    std::vector<std::string> shards(const std::string &index) {
        dir_of_shards_ = index;
        std::ifstream in(index, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        json::Value root = json::parse(ss.str(), index);
        const json::Value *map = root.is_object() ? root.find("weight_map") : nullptr;
        if (!map || !map->is_object()) throw Error(index + ": no \"weight_map\" object");
        std::vector<std::string> out;
        for (auto &[name, file] : map->object) {
            if (!file.is_string() || file.string.find('/') != std::string::npos || file.string.empty() ||
                file.string[0] == '.') {
                throw Error(index + ": tensor '" + name + "' maps to no shard file name in this directory");
            }
            if (std::find(out.begin(), out.end(), file.string) == out.end()) out.push_back(file.string);
            expected_[name] = file.string;
        }
        if (out.empty()) throw Error(index + ": \"weight_map\" is empty");
        return out;
    }
    void open(const std::string &path) {
        files_.push_back(std::make_unique<SafeTensors>(path, true));
        const std::string base = path.substr(path.rfind('/') + 1);
        for (auto &t : files_.back()->tensors()) {
            if (where_.count(t.name)) throw Error(path + ": tensor '" + t.name + "' is in another shard too");
            auto e = expected_.find(t.name);
            if (!expected_.empty() && (e == expected_.end() || e->second != base)) {
                throw Error(path + ": tensor '" + t.name + "' is not where " + dir_of_shards_ + " puts it");
            }
            where_[t.name] = files_.size() - 1;
        }
        if (!expected_.empty() && files_.size() == count_shards()) {
            for (auto &[name, file] : expected_) {
                if (!where_.count(name)) throw Error(dir_of_shards_ + ": tensor '" + name + "' is missing from " + file);
            }
        }
    }
    size_t count_shards() const {
        std::set<std::string> s;
        for (auto &kv : expected_) s.insert(kv.second);
        return s.size();
    }

    std::vector<std::unique_ptr<SafeTensors>> files_;
    std::map<std::string, size_t> where_;
    std::map<std::string, std::string> expected_;
    std::string dir_of_shards_;
};

std::string replace_all(std::string s, const std::string &from, const std::string &to) {
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
    return s;
}

class HfSource : public TensorSource {
public:
    HfSource(std::unique_ptr<Files> files, const std::string &family, Rules rules)
        : files_(std::move(files)), family_(family), rules_(std::move(rules)) {}

    bool has(const std::string &name) const override {
        const Rule *r = rule(name);
        if (!r) return false;
        for (auto &t : r->theirs)
            if (!files_->find(subst(name, t), nullptr)) return false;
        return true;
    }
    std::vector<int64_t> shape(const std::string &name) const override {
        const Rule &r = *rule(name);
        std::vector<int64_t> s = files_->find(subst(name, r.theirs[0]), nullptr)->shape;
        switch (r.how) {
        case How::Same: break;
        case How::Transposed:
            if (s.size() != 2) bad_shape(subst(name, r.theirs[0]), s, "2 dimensions (Conv1D [in, out])");
            std::swap(s[0], s[1]);
            break;
        case How::Stacked:
            for (size_t k = 1; k < r.theirs.size(); k++) {
                auto sk = files_->find(subst(name, r.theirs[k]), nullptr)->shape;
                if (sk.empty() || sk.size() != s.size() || !std::equal(sk.begin() + 1, sk.end(), s.begin() + 1)) {
                    bad_shape(subst(name, r.theirs[k]), sk, "the shape of '" + subst(name, r.theirs[0]) + "' " + shape_string(s));
                }
                s[0] += sk[0];
            }
            break;
        case How::Flat: s = {numel(s)}; break;
        case How::Scaled: break;
        }
        return s;
    }
    const float *data(const std::string &name) override {
        const Rule &r = *rule(name);
        const std::string key = subst(name, r.theirs[0]);
        if (r.how == How::Same || r.how == How::Flat) return read(key);
        auto &made = made_[name];
        if (!made.empty()) return made.data();
        const std::vector<int64_t> s = shape(name);
        made.resize((size_t)numel(s));
        if (r.how == How::Scaled) {
            const float *src = read(key);
            for (size_t k = 0; k < made.size(); k++) made[k] = src[k] * r.factor;
        } else if (r.how == How::Transposed) {  // [in, out] → [out, in], once
            const float *src = read(key);
            const int64_t out = s[0], in = s[1];
            for (int64_t i = 0; i < in; i++)
                for (int64_t o = 0; o < out; o++) made[(size_t)(o * in + i)] = src[i * out + o];
        } else {  // Stacked: the parts' rows one after another
            size_t at = 0;
            for (auto &t : r.theirs) {
                const std::string part = subst(name, t);
                const size_t n = (size_t)files_->find(part, nullptr)->numel();
                std::copy(read(part), read(part) + n, made.begin() + (ptrdiff_t)at);
                at += n;
            }
        }
        return made.data();
    }
    // Ours for each rule whose tensors the file holds, and the file's own
    // name for every tensor that no rule reads and transformers would not
    // keep: bind() names those as unused.
    std::vector<std::string> names() const override {
        std::set<std::string> used;
        std::vector<std::string> out;
        for (auto &[name, ours] : used_by_) {
            used.insert(name);
            if (has(ours) && std::find(out.begin(), out.end(), ours) == out.end()) out.push_back(ours);
        }
        for (auto &n : files_->names()) {
            if (!used.count(n) && !ignored(family_, n) && !ignore_.count(n)) out.push_back(n);
        }
        return out;
    }
    std::string where() const override { return files_->where(); }
    std::string origin(const std::string &name) const override {
        const Rule *r = rule(name);
        if (!r) return "'" + name + "'";
        std::string out;
        for (auto &t : r->theirs) out += (out.empty() ? "'" : " + '") + subst(name, t) + "'";
        if (r->how == How::Transposed) out += " (transposed)";
        if (r->how == How::Scaled) out += " (scaled)";
        return out;
    }

    // A tensor of the file that this model does not read.
    void ignore(const std::string &theirs) { ignore_.insert(theirs); }
    // Every tensor of ours a model of these layers may read: maps each of
    // the file's names it would use to ours (for names()).
    void expect(const std::vector<std::string> &ours) {
        for (auto &n : ours) {
            const Rule *r = rule(n);
            if (!r) continue;
            for (auto &t : r->theirs) used_by_[subst(n, t)] = n;
        }
    }

private:
    // "decoder.layers.3.linear1.weight" → its rule and the layer "3".
    const Rule *rule(const std::string &name) const {
        auto it = rules_.find(generic(name));
        return it == rules_.end() ? nullptr : &it->second;
    }
    static std::string generic(const std::string &name) {
        static const std::regex layer(R"(\.layers\.(\d+)\.)");
        return std::regex_replace(name, layer, ".layers.{i}.");
    }
    static std::string layer_of(const std::string &name) {
        static const std::regex layer(R"(\.layers\.(\d+)\.)");
        std::smatch m;
        return std::regex_search(name, m, layer) ? m[1].str() : "";
    }
    static std::string subst(const std::string &ours, const std::string &theirs) {
        return replace_all(theirs, "{i}", layer_of(ours));
    }
    const float *read(const std::string &theirs) {
        SafeTensors *f = nullptr;
        const TensorInfo *t = files_->find(theirs, &f);
        return f->f32(*t);
    }
    [[noreturn]] void bad_shape(const std::string &t, const std::vector<int64_t> &s, const std::string &want) const {
        throw Error(where() + ": tensor '" + t + "' has shape " + shape_string(s) + ", expected " + want);
    }

    std::unique_ptr<Files> files_;
    std::string family_;
    Rules rules_;
    std::map<std::string, std::string> used_by_;
    std::set<std::string> ignore_;
    std::map<std::string, std::vector<float>> made_;
};

}  // namespace

std::unique_ptr<TensorSource> open_weights(const std::string &dir, Config &cfg) {
    auto files = std::make_unique<Files>(dir);
    std::unique_ptr<HfSource> src;
    if (cfg.family == "gpt2") {
        // Saved from GPT2LMHeadModel ("transformer.h.0...") or GPT2Model ("h.0...").
        const bool prefixed = files->find("transformer.wte.weight", nullptr) != nullptr;
        src = std::make_unique<HfSource>(std::move(files), cfg.family, gpt2_rules(prefixed ? "transformer." : ""));
    } else if (cfg.family == "marian") {
        const bool shared = files->find("model.shared.weight", nullptr) != nullptr;
        src = std::make_unique<HfSource>(std::move(files), cfg.family, marian_rules(shared));
        // Files converted before transformers stopped saving them hold the
        // position tables: the same values, used as they are.
        if (src->has("src_pos.weight") && src->has("tgt_pos.weight")) cfg.positional_encoding = Positional::Learned;
    } else if (cfg.family == "bert") {
        const bool prefixed = files->find("bert.embeddings.word_embeddings.weight", nullptr) != nullptr;
        Rules rules = bert_rules(prefixed ? "bert." : "");
        if (cfg.encoder_head == EncoderHead::Classifier) {
            rules["generator.weight"] = {How::Same, {"classifier.weight"}};
            rules["generator.bias"] = {How::Same, {"classifier.bias"}};
        }
        src = std::make_unique<HfSource>(std::move(files), cfg.family, rules);
    } else if (cfg.family == "t5") {
        // tie_word_embeddings (default true): no lm_head.weight is read (a
        // file may still hold a copy of shared.weight under that name).
        const bool tied = cfg.tied_head;
        src = std::make_unique<HfSource>(std::move(files), cfg.family, t5_rules(cfg, tied));
        if (tied) src->ignore("lm_head.weight");
    } else {
        throw Error(dir + ": internal: no weight names for model_type \"" + cfg.family + "\"");
    }
    std::vector<std::string> ours;
    for (const ParamSpec &s : param_specs(cfg)) ours.push_back(s.name);
    src->expect(ours);
    return src;
}

}  // namespace hf
}  // namespace halformer

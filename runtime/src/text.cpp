// Model's text entry points (model.h): tokenize, batch by length, run
// generate() / encode(), detokenize. No arithmetic: the kernels do it.
#include "session.h"

#include <algorithm>
#include <numeric>

namespace halformer {

namespace {

struct Prepared {
    std::vector<Sequence> ids;       // per input (empty on error)
    std::vector<TextResult> result;  // error set for the lines that failed
    std::vector<size_t> order;       // valid lines, shortest first (stable)
};

// Encodes every text; a line that cannot run gets its error, the rest are
// ordered by length so that a batch pads little.
Prepared prepare(const Tokenizer &tok, const std::vector<std::string> &texts, int max_tokens) {
    Prepared p;
    p.ids.resize(texts.size());
    p.result.resize(texts.size());
    for (size_t i = 0; i < texts.size(); i++) {
        TextResult &r = p.result[i];
        if (texts[i].find_first_not_of(" \t\r\n") == std::string::npos) {
            r.error = "empty text";
            continue;
        }
        try {
            p.ids[i] = tok.encode_input(texts[i]);
        } catch (const Error &e) {
            r.error = e.what();
            continue;
        }
        r.input_tokens = (int)p.ids[i].size();
        if (p.ids[i].empty()) {
            r.error = "the text has no tokens";
        } else if ((int)p.ids[i].size() > max_tokens) {
            r.error = "the text is " + std::to_string(p.ids[i].size()) + " tokens long; the model takes at most " +
                      std::to_string(max_tokens);
        } else {
            p.order.push_back(i);
        }
    }
    std::stable_sort(p.order.begin(), p.order.end(),
                     [&](size_t a, size_t b) { return p.ids[a].size() < p.ids[b].size(); });
    return p;
}

// A hypothesis' text: the ids up to eos (generate() stops there unless told
// not to), decoded. With `prompt` (decoder-only), the prompt and the new ids
// are decoded together and the prompt's own text is cut off, so the
// continuation keeps the space SentencePiece would drop at its start.
std::string hypothesis_text(const Tokenizer &tok, int eos, const Sequence &ids, const Sequence *prompt) {
    Sequence keep;
    for (int32_t id : ids) {
        if (id == eos) break;
        keep.push_back(id);
    }
    if (!prompt) return tok.decode(keep);
    Sequence all = *prompt;
    all.insert(all.end(), keep.begin(), keep.end());
    std::string whole = tok.decode(all), head = tok.decode(*prompt);
    return whole.compare(0, head.size(), head) == 0 ? whole.substr(head.size()) : tok.decode(keep);
}

// Runs the prepared lines through generate(), batch_size at a time in length
// order, and fills their results. new_tokens(o, longest) sets a batch's limit.
// A hypothesis the tokenizer cannot decode (an id past its pieces, from a
// model whose vocabulary is larger) is that line's error, not the call's.
template <typename Limit>
void generate_batches(Model &m, const Tokenizer &tok, Prepared &p, const GenerateOptions &options, int batch_size,
                      bool continuation, Limit new_tokens) {
    const int eos = m.config().eos_id;
    for (size_t at = 0; at < p.order.size(); at += (size_t)batch_size) {
        const size_t n = std::min(p.order.size() - at, (size_t)batch_size);
        std::vector<Sequence> src;
        for (size_t k = 0; k < n; k++) src.push_back(p.ids[p.order[at + k]]);
        GenerateOptions o = options;
        // Each batch its own random streams (sampling).
        o.seed = options.seed + 0x9E3779B97F4A7C15ull * (uint64_t)(at / (size_t)batch_size);
        // Per-line options follow their lines into the batch's order.
        auto per_line = [&](const auto &all, auto &mine, const char *what) {
            if (all.empty()) return;
            if (all.size() != p.ids.size()) {
                throw Error(std::string("generate: ") + std::to_string(all.size()) + " " + what + " for " +
                            std::to_string(p.ids.size()) + " lines (give one per line, or none)");
            }
            mine.clear();
            for (size_t k = 0; k < n; k++) mine.push_back(all[p.order[at + k]]);
        };
        per_line(options.target_prefix, o.target_prefix, "target prefixes");
        per_line(options.seeds, o.seeds, "seeds");
        per_line(options.max_new_tokens_each, o.max_new_tokens_each, "max_new_tokens_each");
        new_tokens(o, src);
        auto hyps = m.generate(src, o);
        for (size_t k = 0; k < n; k++) {
            TextResult &r = p.result[p.order[at + k]];
            const auto &h = hyps[k];
            if (h.empty()) {
                r.error = "no hypothesis";
                continue;
            }
            const Sequence *prompt = continuation ? &src[k] : nullptr;
            try {
                r.text = hypothesis_text(tok, eos, h[0].tokens, prompt);
                for (size_t j = 1; j < h.size(); j++) r.alternatives.push_back(hypothesis_text(tok, eos, h[j].tokens, prompt));
            } catch (const Error &e) {
                r.text.clear();
                r.alternatives.clear();
                r.error = std::string("the output cannot be decoded: ") + e.what();
                continue;
            }
            r.score = h[0].score;
            r.output_tokens = (int)h[0].tokens.size();
        }
    }
}

}  // namespace

bool Model::has_tokenizer() const { return impl_->w->tok != nullptr; }

bool Model::has_chat_template() const { return impl_->w->chat != nullptr; }

std::string Model::chat_prompt(const std::vector<ChatMessage> &messages, bool add_generation_prompt) const {
    const ModelWeights &w = *impl_->w;
    if (!w.chat) throw Error("chat: " + (w.chat_missing.empty() ? std::string("this model has no chat template") : w.chat_missing));
    return w.chat->render(messages, add_generation_prompt, w.chat_vars);
}

std::string Model::text_of(const Sequence &tokens, const Sequence *prompt) const {
    return hypothesis_text(tokenizer(), config().eos_id, tokens, prompt);
}

const Tokenizer &Model::tokenizer() const {
    if (!impl_->w->tok) {
        throw Error("this model has no tokenizer (config.json names none): it works with token ids only");
    }
    return *impl_->w->tok;
}

std::vector<TextResult> Model::translate(const std::vector<std::string> &texts, const GenerateOptions &options,
                                         int batch_size) {
    const Config &c = config();
    if (c.architecture != Architecture::EncoderDecoder) {
        throw Error("translate: needs an encoder-decoder model (this one is " +
                    std::string(architecture_name(c.architecture)) + ")");
    }
    if (batch_size < 1) throw Error("translate: batch size must be >= 1");
    const Tokenizer &tok = tokenizer();
    Prepared p = prepare(tok, texts, c.max_positions);
    if (options.max_new_tokens > c.max_positions) {
        throw Error("translate: max_new_tokens " + std::to_string(options.max_new_tokens) +
                    " is more than the model's max_positions " + std::to_string(c.max_positions));
    }
    // Without max_new_tokens each sentence gets default_new_tokens
    // (halformer/options.h: 2 × its own source + 10), from generate().
    generate_batches(*this, tok, p, options, batch_size, false, [](GenerateOptions &, const std::vector<Sequence> &) {});
    return p.result;
}

std::vector<TextResult> Model::continue_text(const std::vector<std::string> &prompts, const GenerateOptions &options,
                                             int batch_size) {
    const Config &c = config();
    if (c.architecture != Architecture::Decoder) {
        throw Error("continue_text: needs a decoder-only model (this one is " +
                    std::string(architecture_name(c.architecture)) + ")");
    }
    if (batch_size < 1) throw Error("continue_text: batch size must be >= 1");
    const Tokenizer &tok = tokenizer();
    // A prompt must leave room for at least one new token.
    Prepared p = prepare(tok, prompts, c.max_positions - 1);
    // A limit past what a prompt's positions allow is cut to them, prompt
    // by prompt (a prompt's answer does not depend on its batch).
    generate_batches(*this, tok, p, options, batch_size, true, [&](GenerateOptions &o, const std::vector<Sequence> &src) {
        if (o.max_new_tokens == -1) return;
        if (o.max_new_tokens_each.empty()) o.max_new_tokens_each.assign(src.size(), o.max_new_tokens);
        for (size_t b = 0; b < src.size(); b++) {
            int &n = o.max_new_tokens_each[b];
            n = std::min({n, o.max_new_tokens, c.max_positions - (int)src[b].size()});
        }
    });
    return p.result;
}

std::vector<Tensor> Model::sentence_embeddings(const std::vector<std::string> &texts, const PoolOptions &options) {
    const Config &c = config();
    if (!c.has_encoder()) throw Error("sentence_embeddings: a decoder-only model has no encoder");
    Prepared p = prepare(tokenizer(), texts, c.max_positions);
    for (size_t i = 0; i < texts.size(); i++) {
        if (!p.result[i].error.empty()) {
            throw Error("sentence_embeddings: text " + std::to_string(i) + ": " + p.result[i].error);
        }
    }
    return pool(p.ids, options);
}

std::vector<Classification> Model::classify(const std::vector<std::string> &texts, int batch_size) {
    const Config &c = config();
    if (batch_size < 1) throw Error("classify: batch size must be >= 1");
    if (c.encoder_head != EncoderHead::Classifier) {
        throw Error("classify: needs a sequence classifier (config.json's architectures: "
                    "BertForSequenceClassification)");
    }
    Prepared p = prepare(tokenizer(), texts, c.max_positions);
    std::vector<Classification> out(texts.size());
    for (size_t i = 0; i < texts.size(); i++) out[i].error = p.result[i].error;
    // batch_size texts a pass, in length order.
    std::vector<Tensor> logits, probs;
    for (size_t at = 0; at < p.order.size(); at += (size_t)batch_size) {
        std::vector<Sequence> ids;
        for (size_t k = at; k < std::min(p.order.size(), at + (size_t)batch_size); k++) ids.push_back(p.ids[p.order[k]]);
        std::vector<Tensor> l;
        for (auto &t : class_probabilities(ids, &l)) probs.push_back(std::move(t));
        for (auto &t : l) logits.push_back(std::move(t));
    }
    for (size_t k = 0; k < p.order.size(); k++) {
        Classification &r = out[p.order[k]];
        r.logits = logits[k].data;
        // The first largest logit, as torch.argmax.
        r.label = (int)(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin());
        r.name = r.label < (int)c.labels.size() ? c.labels[(size_t)r.label] : "LABEL_" + std::to_string(r.label);
        r.probability = probs[k].data[(size_t)r.label];
    }
    return out;
}

std::vector<FillMask> Model::fill_mask(const std::vector<std::string> &texts, int top_k) {
    const Config &c = config();
    if (c.encoder_head != EncoderHead::MaskedLM) {
        throw Error("fill_mask: needs a masked-LM head (config.json's architectures: BertForMaskedLM)");
    }
    if (top_k < 1 || top_k > 8) throw Error("fill_mask: top_k must be in [1, 8], not " + std::to_string(top_k));
    const Tokenizer &tok = tokenizer();
    if (tok.mask_id() < 0) throw Error("fill_mask: the tokenizer has no mask token");
    Prepared p = prepare(tok, texts, c.max_positions);
    std::vector<FillMask> out(texts.size());
    std::vector<Sequence> ids;
    std::vector<size_t> which;
    for (size_t i : p.order) {
        if (std::find(p.ids[i].begin(), p.ids[i].end(), tok.mask_id()) == p.ids[i].end()) {
            p.result[i].error = "the text has no mask token";
            continue;
        }
        ids.push_back(p.ids[i]);
        which.push_back(i);
    }
    for (size_t i = 0; i < texts.size(); i++) out[i].error = p.result[i].error;
    if (ids.empty()) return out;
    std::vector<Tensor> top_ids, probs;
    top_tokens(ids, top_k, top_ids, probs);
    for (size_t k = 0; k < ids.size(); k++) {
        FillMask &f = out[which[k]];
        for (size_t t = 0; t < ids[k].size(); t++) {
            if (ids[k][t] != tok.mask_id()) continue;
            MaskGuesses g;
            g.position = (int)t;
            for (int j = 0; j < top_k; j++) {
                const int id = (int)top_ids[k].data[t * top_k + (size_t)j];
                g.ids.push_back(id);
                g.probabilities.push_back(probs[k].data[t * top_k + (size_t)j]);
                g.tokens.push_back(tok.decode({id}));
            }
            f.masks.push_back(std::move(g));
        }
    }
    return out;
}

std::vector<Tensor> Model::embed(const std::vector<std::string> &texts) {
    const Config &c = config();
    if (!c.has_encoder()) throw Error("embed: a decoder-only model has no encoder");
    const Tokenizer &tok = tokenizer();
    Prepared p = prepare(tok, texts, c.max_positions);
    for (size_t i = 0; i < texts.size(); i++) {
        if (!p.result[i].error.empty()) throw Error("embed: text " + std::to_string(i) + ": " + p.result[i].error);
    }
    return encode(p.ids);
}

}  // namespace halformer

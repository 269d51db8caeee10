// Model's text entry points (model.h): tokenize, order by length, run
// generate() (lines joining one batch) / encode(), detokenize. No arithmetic: the kernels do it.
#include "model/session.h"
#include "decoding/generate.h"
#include "decoding/kv_blocks.h"

#include "halformer/options.h"

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

// A line's text results from its hypotheses (n_best of them). A
// hypothesis the tokenizer cannot decode (an id past its pieces, from a
// model whose vocabulary is larger) is that line's error, not the call's.
void fill_result(const Tokenizer &tok, int eos, const std::vector<Hypothesis> &h, const Sequence *prompt,
                 TextResult &r) {
    if (h.empty()) {
        r.error = "no hypothesis";
        return;
    }
    try {
        r.text = hypothesis_text(tok, eos, h[0].tokens, prompt);
        for (size_t j = 1; j < h.size(); j++) r.alternatives.push_back(hypothesis_text(tok, eos, h[j].tokens, prompt));
    } catch (const Error &e) {
        r.text.clear();
        r.alternatives.clear();
        r.error = std::string("the output cannot be decoded: ") + e.what();
        return;
    }
    r.score = h[0].score;
    r.output_tokens = (int)h[0].tokens.size();
}

// The per-line lists of `options` (one entry per line, or none).
void check_per_line(const GenerateOptions &options, size_t lines) {
    for (auto [n, what] : {std::pair<size_t, const char *>{options.target_prefix.size(), "target prefixes"},
                           {options.seeds.size(), "seeds"},
                           {options.max_new_tokens_each.size(), "max_new_tokens_each"}}) {
        if (n != 0 && n != lines) {
            throw Error(std::string("generate: ") + std::to_string(n) + " " + what + " for " +
                        std::to_string(lines) + " lines (give one per line, or none)");
        }
    }
    if (!options.sampling_each.empty()) throw Error("generate: sampling_each is for generate(), not text lines");
}

// The cache blocks for the batch_size longest lines at once (every other
// batch_size lines hold no more): each source, and per beam its prefix and
// new tokens (limit(line)).
template <typename Limit>
int64_t lines_cache_blocks(const Prepared &p, const GenerateOptions &options, int batch_size, bool continuation,
                           Limit limit) {
    const int K = std::max(options.beam, 1);
    int longest_prefix = 1;
    if (!options.target_prefix.empty()) {
        for (size_t i : p.order) longest_prefix = std::max(longest_prefix, 1 + (int)options.target_prefix[i].size());
    }
    int64_t blocks = 0;
    for (size_t k = p.order.size(); k-- > 0 && k + (size_t)batch_size >= p.order.size();) {
        const size_t i = p.order[k];
        const int S = continuation ? 0 : (int)p.ids[i].size();
        const int P = continuation ? (int)p.ids[i].size() : longest_prefix;
        blocks += decoding::blocks_for(S) + (int64_t)K * decoding::blocks_for(P + limit(i));
    }
    return blocks;
}

// Runs the prepared lines through generate() in length order, batch_size
// of them decoding at once: one call whose batch the next line joins as
// soon as a quarter of the batch is free (GenerateOptions::join, the
// decoder's continuous batching: a long line no longer holds a batch of
// short ones back). Each
// line answers what it would alone: its own limit (limit(line)), seed
// (options.seeds[line], else options.seed's stream for the line's index)
// and target prefix; the callbacks see line indices. Models whose
// attention takes one position a step for the whole batch (T5's relative
// positions) take no joins: fixed batches of batch_size lines there.
template <typename Limit>
void generate_lines(Model &m, const Tokenizer &tok, Prepared &p, const GenerateOptions &options, int batch_size,
                    bool continuation, Limit limit) {
    const Config &c = m.config();
    check_per_line(options, p.ids.size());
    auto seed = [&](size_t i) {
        return options.seeds.empty() ? options.seed + 0x9E3779B97F4A7C15ull * (uint64_t)i : options.seeds[i];
    };
    auto prefix = [&](size_t i) { return options.target_prefix.empty() ? Sequence{} : options.target_prefix[i]; };
    const bool joins = c.positional_encoding != Positional::Relative;
    const int64_t blocks = lines_cache_blocks(p, options, batch_size, continuation, limit);
    for (size_t at = 0; at < p.order.size();) {
        const size_t n = std::min(p.order.size() - at, (size_t)batch_size);
        std::vector<size_t> line;  // per input of the call: its line
        std::vector<Sequence> src;
        GenerateOptions o = options;
        o.seeds.clear();
        o.max_new_tokens_each.clear();
        o.target_prefix.clear();
        for (; line.size() < n; at++) {
            const size_t i = p.order[at];
            line.push_back(i);
            src.push_back(p.ids[i]);
            o.seeds.push_back(seed(i));
            o.max_new_tokens_each.push_back(limit(i));
            if (!options.target_prefix.empty()) o.target_prefix.push_back(prefix(i));
        }
        if (joins) {
            o.max_batch = batch_size;
            // Lines join once a quarter of the batch is free (or all that
            // are left fit): groups of one line each cost a run of the
            // encoder and a prefill for one row at nearly every step, more
            // than the shorter tail saves (translating 320 to 1,280 lines
            // joining one by one took 1.1-1.2x as long).
            const int least = std::max(1, batch_size / 4);
            o.kv_blocks = (int)std::min<int64_t>(blocks, INT32_MAX);
            o.join = [&, least](int room) {  // (least: this block's, gone before the calls)
                std::vector<JoinInput> in;
                if (room < std::min<int>(least, (int)(p.order.size() - at))) return in;
                for (; at < p.order.size() && (int)in.size() < room; at++) {
                    const size_t i = p.order[at];
                    line.push_back(i);
                    JoinInput j;
                    j.input = p.ids[i];
                    j.seed = seed(i);
                    j.max_new_tokens = limit(i);
                    j.target_prefix = prefix(i);
                    in.push_back(std::move(j));
                }
                return in;
            };
        }
        if (options.on_token) o.on_token = [&](int b, int32_t id) { options.on_token((int)line[(size_t)b], id); };
        if (options.on_finished) {
            o.on_finished = [&](int b, const std::vector<Hypothesis> &h) { options.on_finished((int)line[(size_t)b], h); };
        }
        if (options.cancelled) o.cancelled = [&](int b) { return options.cancelled((int)line[(size_t)b]); };
        const auto hyps = m.generate(src, o);
        for (size_t b = 0; b < line.size(); b++) {
            const size_t i = line[b];
            fill_result(tok, c.eos_id, hyps[b], continuation ? &p.ids[i] : nullptr, p.result[i]);
        }
    }
}

}  // namespace

bool Model::has_tokenizer() const { return impl_->w->tok != nullptr; }

bool Model::has_chat_template() const { return impl_->w->chat != nullptr; }

namespace {

// The checkpoint's chat template, or an Error naming why it has none.
const ChatTemplate &chat_template_of(const ModelWeights &w) {
    if (!w.chat) throw Error("chat: " + (w.chat_missing.empty() ? std::string("this model has no chat template") : w.chat_missing));
    return *w.chat;
}

}  // namespace

std::string Model::chat_prompt(const std::vector<ChatMessage> &messages, bool add_generation_prompt) const {
    return chat_template_of(*impl_->w).render(messages, add_generation_prompt, impl_->w->chat_vars);
}

std::string Model::chat_prompt_json(const std::string &conversation, bool add_generation_prompt) const {
    return chat_template_of(*impl_->w).render_json(conversation, add_generation_prompt, impl_->w->chat_vars);
}

const std::string &Model::chat_template_source() const {
    static const std::string none;
    return impl_->w->chat ? impl_->w->chat->source() : none;
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
    // (halformer/options.h: 2 × its own source + 10).
    generate_lines(*this, tok, p, options, batch_size, false, [&](size_t i) {
        int n = decoding::new_token_limit(c, options, (int)p.ids[i].size(),
                                          1 + (int)(options.target_prefix.empty() ? 0 : options.target_prefix[i].size()));
        if (!options.max_new_tokens_each.empty()) n = std::min(n, options.max_new_tokens_each[i]);
        return n;
    });
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
    generate_lines(*this, tok, p, options, batch_size, true, [&](size_t i) {
        const int P = (int)p.ids[i].size();
        int n = options.max_new_tokens == -1 ? default_new_tokens(c, 0, P)
                                             : std::min(options.max_new_tokens, c.max_positions - P);
        if (!options.max_new_tokens_each.empty()) n = std::min(n, options.max_new_tokens_each[i]);
        return n;
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

// The Transformer runtime: a model loaded from a directory holding
// config.json and model.safetensors (PyTorch state_dict names), run by the
// generated kernels.
//
//   auto model = halformer::Model::load("my-model");
//   auto logits = model.logits({{5, 6, 7}}, {{1, 9, 4}});     // teacher-forced
//   auto hyps = model.generate({{5, 6, 7}}, {.beam = 4});      // beam search
//
// The runtime validates inputs, allocates its buffers once per shape (they are
// reused while shapes do not grow), and calls one kernel per step; all
// arithmetic happens in the kernels. Errors throw halformer::Error (bad model,
// bad input) or halformer::KernelError (a kernel's nonzero return).
//
// Threads: logits(), generate(), encode() and the text calls may be made
// from any number of threads on one Model. The weights (converted, and
// packed by set_precision) are shared, read-only; each call runs in a
// session of its own (activations, KV caches, step times), taken from a
// pool the Model keeps and given back when the call returns. At most
// max_sessions() calls run at once (CPU: the machine's hardware threads, at
// least 2; a GPU model runs one call at a time); later callers wait. A
// kernel error reaches the thread whose call failed. set_precision,
// set_max_sessions, reset_profile, release_memory and moving or destroying
// the Model must not overlap calls. Process-wide Halide settings (the
// kernels' thread pool size, halide_set_num_threads, and the error and
// variant hooks installed by the runtime) are shared by every Model: set the
// pool size once, before the first call.
#pragma once

#include "halformer/chat.h"
#include "halformer/config.h"
#include "halformer/device.h"
#include "halformer/error.h"
#include "halformer/kernel_error.h"
#include "halformer/tokenizer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

using Sequence = std::vector<int32_t>;

// The arithmetic of the projections (attention, feed-forward, output head):
//   FP32  float32 weights and products (the reference);
//   BF16  weights stored in bfloat16, activations rounded to bfloat16 where
//         they enter a product, sums in float32 (AVX512-BF16 vdpbf16ps);
//   INT8  weights int8 with one scale per output column, activations
//         quantized per row on the fly, exact int32 sums (AVX512-VNNI
//         vpdpbusd), as CTranslate2's int8.
// Embeddings, attention, LayerNorm and softmax stay float32. CPU only.
enum class Precision { FP32, BF16, INT8 };
Precision parse_precision(const std::string &name);  // fp32|bf16|int8; Error otherwise
const char *precision_name(Precision p);

// A row-major float32 array.
struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> data;
};

// Sentence embeddings from an encoder (Model::pool): the output at each
// sequence's first position ([CLS] for BERT) or the mean over its
// positions, optionally scaled to unit L2 norm.
enum class Pooling { First, Mean };
struct PoolOptions {
    Pooling pooling = Pooling::Mean;
    bool normalize = false;
};

// A classifier's answer for one text (Model::classify): the label of the
// largest logit, its softmax probability, and every label's logit.
struct Classification {
    int label = -1;
    std::string name;  // config.json's id2label
    float probability = 0;
    std::vector<float> logits;
    std::string error;  // set when the text could not be classified
    bool ok() const { return error.empty(); }
};

// A masked-LM's guesses at one [MASK] of a text (Model::fill_mask): the
// most probable tokens, best first, with their softmax probabilities.
struct MaskGuesses {
    int position = 0;  // among the text's tokens ([CLS] is 0)
    std::vector<int> ids;
    std::vector<float> probabilities;
    std::vector<std::string> tokens;  // each id decoded alone
};
struct FillMask {
    std::vector<MaskGuesses> masks;  // one per [MASK], in order
    std::string error;               // set when the text could not run
    bool ok() const { return error.empty(); }
};

struct Hypothesis {
    std::vector<int32_t> tokens;  // generated ids (eos or a stop id included when produced)
    // beam: total log-probability / ((5 + len) / 6)^α; greedy and sampling:
    // the total log-probability with return_logprobs, else 0 (not computed).
    double score = 0;
    // With return_logprobs: log p(tokens[i] | what precedes it) under the
    // model (temperature 1, before any top-k or top-p filter; after the
    // repetition penalty, n-gram and minimum-length bans), one per token.
    std::vector<float> log_probs;
};

// How one input chooses its tokens without beams (GenerateOptions::
// sampling_each): greedy (the argmax), or drawn after a temperature, top-k
// and top-p, as GenerateOptions' fields of the same names say.
struct Sampling {
    bool sample = false;
    float temperature = 1.0f;
    int top_k = 0;
    float top_p = 1.0f;
};

// An input that joins a running generate() (GenerateOptions::join): a
// source (encoder-decoder) or a prompt (decoder-only), with what it would
// be given alone.
struct JoinInput {
    Sequence input;
    uint64_t seed = 0;         // sampling: its seed (as GenerateOptions::seeds)
    int max_new_tokens = -1;   // its limit (-1: as max_new_tokens would give it)
    Sequence target_prefix;    // encoder-decoder: its target prefix
    // Beam 1: greedy or its sampling settings (as sampling_each); none: the
    // batch's options' (sample, temperature, top_k, top_p).
    std::optional<Sampling> sampling;
};

struct GenerateOptions {
    // Tokens to generate at most (eos included); -1: default_new_tokens
    // (halformer/options.h), per input: an encoder-decoder's 2 × its source
    // + 10, a decoder's as many as its positions allow, at most 256. More
    // than the positions allow is an Error.
    int max_new_tokens = -1;
    int beam = 1;                // beam size; 1 = greedy (or sampling)
    float length_penalty = 0.6f; // α in ((5 + len) / 6)^α
    int n_best = 1;              // hypotheses returned per input (≤ beam)
    bool sample = false;
    float temperature = 1.0f;
    int top_k = 0;      // 0: no top-k filter
    float top_p = 1.0f; // 1: no nucleus filter
    uint64_t seed = 0;
    // Sampling: one seed per input; input b then draws exactly what it would
    // alone with seed = seeds[b] (a server batching requests keeps each
    // request's answer). Empty: every input draws from `seed`, each its own stream.
    std::vector<uint64_t> seeds;
    // One limit per input (each at most what max_new_tokens allows): input b
    // stops after max_new_tokens_each[b] tokens and gets what it would get
    // alone with that max_new_tokens. Empty: max_new_tokens for all.
    std::vector<int> max_new_tokens_each;
    // Beam 1: one Sampling per input: input b is greedy or draws with its
    // own temperature, top-k and top-p, and gets what it would alone with
    // them (a server batches greedy and sampled requests together). Empty:
    // sample, temperature, top_k and top_p for all.
    std::vector<Sampling> sampling_each;
    bool stop_at_eos = true;  // false: always generate max_new_tokens (benchmarks)
    // Ids that end a hypothesis as eos does (kept as its last token), each
    // in [0, vocabulary); they end it whatever stop_at_eos says.
    std::vector<int32_t> stop_ids;
    // Each hypothesis' per-token log-probabilities (Hypothesis::log_probs),
    // and for greedy and sampling its score: their sum. Greedy then takes
    // the argmax of the log-probabilities (the same token but for exact
    // ties of the last bits) and sampling draws from them.
    bool return_logprobs = false;
    // CTRL's repetition penalty θ (> 0; 1: off): the logit of a token
    // already in the output or its prefix (the prompt, or the target prefix)
    // is divided by θ where positive and multiplied by θ where negative.
    float repetition_penalty = 1.0f;
    // n > 0: a token that would make an n-gram the output (with its prefix)
    // already holds is never chosen (1: no token repeats at all).
    int no_repeat_ngram_size = 0;
    // eos and the stop ids are never chosen before this many new tokens.
    int min_length = 0;
    // The id every hypothesis ends with when it reaches its limit
    // (transformers' forced_eos_token_id: the step that takes the last
    // token allowed chooses this one, with its own log-probability): -2:
    // the checkpoint's (Config::forced_eos_id), -1: none.
    int forced_eos_id = -2;
    // Encoder-decoder: tokens every output of input b continues from, after
    // bos (CTranslate2's target_prefix: a translation that must begin so).
    // One list per input (an empty list: none), or none at all. The
    // hypotheses hold the tokens after the prefix; max_new_tokens counts
    // those.
    std::vector<Sequence> target_prefix;
    // Called (on the calling thread, during generate) as soon as input b is
    // done, with the hypotheses generate() will return for it: a server can
    // answer a short request while the long ones of its batch go on.
    std::function<void(int b, const std::vector<Hypothesis> &)> on_finished;
    // Asked (on the calling thread) before each step for every input still
    // decoding: true makes input b leave the batch now, with what it has
    // (a server's client went away). Null: never.
    std::function<bool(int b)> cancelled;
    // Called (on the calling thread) each time input b's hypothesis grows
    // by one token, as soon as the step chose it (greedy and sampling; eos
    // included). Beam search never calls it: a beam's tokens are final only
    // when the input is done (on_finished). TextStream turns the tokens
    // into text pieces.
    std::function<void(int b, int32_t token)> on_token;
    // Continuous batching (a server's worker): asked (on the calling
    // thread) before each decoder step with the number of inputs the
    // running batch has room for; the inputs it returns join the batch:
    // they are prefilled (encoded, their prefixes run in chunks of
    // prefill_chunk positions beside the rows already decoding, which go on
    // a step at a time) and then decode with the others, one kernel call per
    // step for all. They are numbered after the inputs given and those that
    // joined before (the callbacks above see them so); each answers what it
    // would alone. Every joined input shares these options but for its
    // seed, limit, target prefix and, without beams, its Sampling. Models
    // with relative positions (T5) take one position per step for the
    // whole batch: nothing joins them.
    // A call takes 4096 inputs at most in all: past them join is no more
    // asked (its bookkeeping would grow without end), and the call ends when
    // they are done. Null: the batch is what generate() was given.
    std::function<std::vector<JoinInput>(int room)> join;
    // Called on the calling thread at the start of each turn of the decoding
    // loop (before join is asked; a turn runs one step of the rows decoding
    // and one prefill chunk of those joining). For tracing, and for tests
    // that hold a running batch at a known step instead of racing it.
    std::function<void()> on_step;
    int max_batch = 16;      // with join: inputs prefilling or decoding at once
    int prefill_chunk = 64;  // positions of a joining prefix per step while others decode
    // With join: the paged KV cache's blocks (16 positions of one row each,
    // or 16 positions of a source's encoder K|V); 0: room for max_batch
    // inputs of 128 tokens and 256 new ones, or what the memory budget
    // allows. An input joins only when its blocks (its longest case) are
    // free.
    int kv_blocks = 0;
};

// The Sampling that sample, temperature, top_k and top_p give.
inline Sampling sampling_of(const GenerateOptions &o) { return {o.sample, o.temperature, o.top_k, o.top_p}; }


// One line of text through translate() / continue_text(): the output, or
// the reason this line got none (the other lines still do).
struct TextResult {
    std::string text;                       // best hypothesis, detokenized ("" on error)
    std::string error;                      // "" when the line was translated
    std::vector<std::string> alternatives;  // hypotheses 2..n_best (beam with n_best > 1)
    double score = 0;                       // the best hypothesis' score (beam), else 0
    int input_tokens = 0, output_tokens = 0;  // output_tokens counts eos when produced
    bool ok() const { return error.empty(); }
};

// Time and calls per kernel (for `halformer demo` and `bench`).
struct KernelTime {
    double seconds = 0;
    int64_t calls = 0;
};
using Profile = std::map<std::string, KernelTime>;

// Device memory a Model holds on its GPU (zero on the CPU).
struct DeviceMemory {
    size_t weights = 0;      // uploaded once, on first use
    size_t activations = 0;  // activations and KV caches (grow-only)
};

class Generation;

class Model {
public:
    // Loads DIR/config.json and DIR/model.safetensors; throws Error. With a
    // GPU device the kernels run there: weights are uploaded once (on first
    // use), activations and the KV cache stay on the device, and only logits,
    // top-k candidates or requested hidden states come back. A device whose
    // driver or hardware is missing is an Error naming what is missing.
    static Model load(const std::string &dir, Device device = Device::CPU);
    // The same model with deterministic random weights (no files).
    static Model random(const Config &config, uint64_t seed, Device device = Device::CPU);
    Model(Model &&) noexcept;
    Model &operator=(Model &&) noexcept;
    ~Model();

    const Config &config() const;
    Device device() const;
    // Packs the projections' weights for `p` (once: copies of the weights as
    // they are now; FP32 drops the copies). Error on a GPU device for BF16
    // and INT8.
    void set_precision(Precision p);
    Precision precision() const;
    DeviceMemory device_memory() const;
    // Calls that may run at once (>= 1; a GPU model keeps 1). Error on a
    // GPU device for n > 1.
    void set_max_sessions(int n);
    int max_sessions() const;
    // Bytes the activations and KV caches of this model's calls may hold
    // together (default: three quarters of the machine's memory). A call
    // that would need more fails with an Error naming the sizes, before it
    // allocates what does not fit; the model stays usable.
    void set_memory_budget(int64_t bytes);
    int64_t memory_budget() const;
    int64_t memory_used() const;  // held now, by all sessions
    // Frees the buffers idle sessions grew (a large request's activations
    // and caches); the next call allocates what it needs again. Returns the
    // bytes freed.
    size_t release_memory();
    int64_t parameter_count() const;
    // Bytes the projections' packed copies hold now (the precision's panels:
    // bf16, int8, a GGUF file's Q4_0, Q4_1 and Q4_K 4-bit, float32 where it
    // packs; made at set_precision, or for float32 on first use), and a
    // token table kept as the file's blocks (int8 precision).
    int64_t packed_weight_bytes() const;
    bool has_head() const;       // encoder-only: a generator.* projection
    bool tied_head() const;      // output projection is tgt_embed.weight
    int output_rows() const;     // logits width (vocabulary, or d_model)

    // Teacher-forced logits, one Tensor [len, width] per sequence:
    //   encoder-decoder: src and tgt (the decoder input, fed as given);
    //   decoder-only: src is the token sequence (tgt must be empty);
    //   encoder-only: src; logits of the head, or hidden states without one.
    // Sequences may differ in length: the batch is padded and masked.
    std::vector<Tensor> logits(const std::vector<Sequence> &src,
                               const std::vector<Sequence> &tgt = {});

    // Generation with a paged KV cache. Encoder-decoder: each src is
    // translated, starting from bos; decoder-only: each src is a prompt
    // continued. Returns n_best hypotheses per input, best first (with
    // GenerateOptions::join: the inputs given, then those that joined).
    std::vector<std::vector<Hypothesis>> generate(const std::vector<Sequence> &src,
                                                  const GenerateOptions &options = {});
    // The same call run a turn at a time by the caller (Generation): the
    // checks and the cache's allocation happen here; each Generation::step()
    // then runs one turn. A decoder-only model's prompts run as one batch
    // (generate() may split them to fit the memory budget; here they must
    // fit at once, or join).
    Generation start(const std::vector<Sequence> &src, const GenerateOptions &options = {});

    // Encoder output only (encoder-decoder and encoder models): [len, d_model].
    std::vector<Tensor> encode(const std::vector<Sequence> &src);

    // Text, for a model directory whose config.json names a tokenizer.
    bool has_tokenizer() const;
    const Tokenizer &tokenizer() const;  // Error when the model has none
    // Chat (a checkpoint's chat_template, halformer/chat.h): the prompt
    // text of a conversation, ending with the assistant's header when
    // add_generation_prompt (tokenize it with tokenizer().encode: the
    // template writes the special tokens itself). Error, naming why, when
    // the checkpoint has no template or one that did not parse.
    bool has_chat_template() const;
    std::string chat_prompt(const std::vector<ChatMessage> &messages, bool add_generation_prompt = true) const;
    // The same for a conversation as JSON text (ChatTemplate::render_json:
    // messages with tool calls and tool results, or an object with
    // "messages", "tools", "enable_thinking", ... for the template).
    std::string chat_prompt_json(const std::string &conversation, bool add_generation_prompt = true) const;
    // The chat template's source ("" without one): which tool-call and
    // thinking formats the model was trained on.
    const std::string &chat_template_source() const;
    // The text of generated ids (a Hypothesis' tokens): up to eos, decoded.
    // With prompt (decoder-only): the continuation of that prompt.
    std::string text_of(const Sequence &tokens, const Sequence *prompt = nullptr) const;
    // Encoder-decoder: translates each text. Lines are sorted by length and
    // decoded batch_size at a time in one generate() call, the next lines
    // joining its batch as a quarter of it frees (GenerateOptions::join; T5:
    // fixed batches); results come back in input order, each what the line
    // gives alone: options.seeds, target_prefix and max_new_tokens_each are
    // per line, a line without a seed draws from options.seed's stream for
    // its index, and the callbacks see line indices. A line
    // that is empty, not UTF-8 or longer than max_positions tokens gets
    // TextResult::error naming the problem, and the others are translated.
    // With max_new_tokens = -1 each line may generate 2·(its source) + 10
    // tokens (default_new_tokens: within max_positions, at most 256).
    std::vector<TextResult> translate(const std::vector<std::string> &texts, const GenerateOptions &options = {},
                                      int batch_size = 32);
    // Decoder-only: continues each prompt; TextResult::text is the continuation.
    std::vector<TextResult> continue_text(const std::vector<std::string> &prompts,
                                          const GenerateOptions &options = {}, int batch_size = 32);
    // Encoder-only and encoder-decoder: the encoder's output for each text,
    // [tokens, d_model], with what the tokenizer adds to an input
    // (Tokenizer::encode_input: BERT's [CLS] … [SEP], Marian's eos).
    // Errors as translate() throws.
    std::vector<Tensor> embed(const std::vector<std::string> &texts);

    // Encoder models: one [1, d_model] Tensor per sequence, pooled from the
    // encoder's output (the last stack's, before any head).
    std::vector<Tensor> pool(const std::vector<Sequence> &src, const PoolOptions &options = {});
    // ... of texts (with the tokenizer's special tokens: BERT's [CLS] … [SEP]).
    std::vector<Tensor> sentence_embeddings(const std::vector<std::string> &texts, const PoolOptions &options = {});
    // A sequence classifier (BERT's BertForSequenceClassification): each
    // text's label. A text that cannot run gets Classification::error.
    std::vector<Classification> classify(const std::vector<std::string> &texts, int batch_size = 32);
    // A sequence classifier's probabilities: the softmax of logits(src),
    // one [1, labels] Tensor per sequence; with `logits`, logits(src) too,
    // from the same pass.
    std::vector<Tensor> class_probabilities(const std::vector<Sequence> &src, std::vector<Tensor> *logits = nullptr);

    // A masked-LM (BertForMaskedLM): at every position of each sequence its
    // `top` (1..8) most probable tokens, [len, top] ids (as floats, exact)
    // and probabilities — the softmax and the selection in kernels.
    void top_tokens(const std::vector<Sequence> &src, int top, std::vector<Tensor> &ids,
                    std::vector<Tensor> &probabilities);
    // ... of texts: the guesses at each [MASK] (transformers' fill-mask
    // pipeline, top_k ≤ 8). A text without [MASK], or that cannot run,
    // gets FillMask::error.
    std::vector<FillMask> fill_mask(const std::vector<std::string> &texts, int top_k = 5);

    // Per-kernel times summed over the calls that have returned (all threads).
    Profile &profile();
    void reset_profile();
    // Wall time of each decoder step of the last generate() call to return
    // (any thread): entry 0 is
    // the prefix pass, then one entry per incremental step (all rows at once).
    const std::vector<double> &step_seconds() const;
    // Rows of the batch at each of those steps (inputs × beams still
    // decoding: an input leaves the batch once it is done).
    const std::vector<int> &step_rows() const;

    // The runtime's own: a Model over weights and a first session it has
    // made (Model::load, Model::random, the Trainer).
    struct Impl;
    struct Pool;
    explicit Model(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl_;  // the weights (shared by the sessions) and the first session
    std::unique_ptr<Pool> pool_;  // sessions, and the results calls leave behind
};

// A generate() call the caller runs a turn at a time (Model::start; vLLM's
// engine step, CTranslate2's token iterator): each step() asks
// GenerateOptions::join for inputs, runs a prefill chunk of those joining
// and one decoding step of the rows decoding, with every callback of
// generate() (on_token, on_finished, cancelled, on_step) on the calling
// thread; it returns false once every input is done, and results() gives
// what generate() would have returned. It holds one of the model's
// sessions (Model::max_sessions) until it is destroyed: a call that needs
// a session while Generations hold them all waits for one (on the thread
// that holds them, or in their callbacks: for ever). The Model must
// outlive it. Use it from one thread at a time. A step that throws leaves
// the generation unusable (step() and results() throw again).
class Generation {
public:
    Generation(Generation &&) noexcept;
    Generation &operator=(Generation &&) noexcept;
    ~Generation();

    bool step();
    bool done() const;
    // Error before done().
    std::vector<std::vector<Hypothesis>> results();

    struct Impl;
    explicit Generation(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl_;
};

// Generated tokens to text as they come (streaming): push() each new token
// and get the text it completes. A piece is never a split UTF-8 character:
// text whose end may still change (an incomplete character, a trailing
// U+FFFD or whitespace the next token may decode differently) is held back
// until a later token or finish(). The pieces of push() and finish(), in
// order, are exactly model.text_of(tokens, prompt).
//
// With stop strings the text ends just before the first of them to appear:
// stopped() turns true (the caller stops generating), and text that might
// still become a stop string is held back too, so no piece ever holds a
// part of one.
class TextStream {
public:
    // prompt (decoder-only): the continuation of that prompt, as text_of.
    explicit TextStream(const Model &model, const Sequence *prompt = nullptr,
                        std::vector<std::string> stop = {});
    std::string push(int32_t token);
    // The rest of the text, once no token will follow.
    std::string finish();
    bool stopped() const { return stopped_; }
    const Sequence &tokens() const { return tokens_; }
    const std::string &text() const { return sent_; }  // the pieces so far

private:
    std::string advance(const std::string &text, size_t end);
    const Model &model_;
    const Sequence *prompt_;
    std::vector<std::string> stop_;
    Sequence tokens_;
    std::string sent_;
    bool stopped_ = false;
};

}  // namespace halformer

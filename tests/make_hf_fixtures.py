#!/usr/bin/python3
"""Golden fixtures for loading Hugging Face model directories (issue 25), made with Debian's python3-torch.

There is no `transformers` package here. The reference modules below are our own, written from transformers'
published modeling code (modeling_gpt2.py, modeling_bert.py, modeling_t5.py, modeling_marian.py and their
configuration_*.py), and every file is laid out as `save_pretrained` lays it out. Each fixture is a directory
tests/fixtures/hf/<name>/ holding:

  config.json            transformers' field names, `json.dumps(indent=2, sort_keys=True)` like to_json_string
  model.safetensors      or, for gpt2_noprefix_f16_sharded, model-00001-of-00002.safetensors,
                         model-00002-of-00002.safetensors and model.safetensors.index.json
                         ({"metadata": {"total_size": <bytes of tensor data>}, "weight_map": {name: file}},
                         indent 2, sorted keys, as save_pretrained writes it)
  generation_config.json the generation ids (fixtures written by a post-4.26 transformers only)
  tokenizer files        small vocabularies of exactly the model's vocab_size (see below)
  golden.json            the reference outputs (schema below)

safetensors files are written as the safetensors library writes them: 8-byte little-endian header length, a
compact JSON header beginning with "__metadata__": {"format": "pt"}, then one entry per tensor
{"dtype", "shape", "data_offsets"} in data order (tensors sorted by dtype, widest first, then by name), the
header padded with spaces to a multiple of 8, then the tensor data. Tied tensors are absent, as
save_pretrained drops them; unused tensors and buffers are present where that class/version saves them.

The fixtures (d_model 32-48, 2 layers unless said, vocabularies not multiples of 8, non-zero biases, FFN inputs
scaled to |x| ~ 2-5 where gelu_new and erf gelu differ):

  gpt2_lm         GPT2LMHeadModel, F32, names `transformer.*`, n_embd 40, n_head 4, n_inner null (-> 4*n_embd
                  = 160), n_positions 32, vocab 61, activation_function "gelu_new". Saved like transformers
                  4.30 (before buffers became non-persistent): holds the buffers `transformer.h.N.attn.bias`
                  (BOOL [1,1,32,32], lower-triangular causal mask) and `transformer.h.N.attn.masked_bias`
                  (F32, shape [], -1e4), both unused. lm_head.weight tied to transformer.wte.weight: absent.
                  Tokenizer: vocab.json + merges.txt (byte-level BPE, <|endoftext|> = 60 = bos = eos).
  gpt2_noprefix_f16_sharded
                  GPT2LMHeadModel (config says so) with names without the `transformer.` prefix, as the hub's
                  own "gpt2" checkpoint is stored; F16; sharded into 2 files + index; n_embd 48, n_head 6,
                  n_inner 72, n_positions 32, vocab 75, activation_function "gelu" (erf, not gelu_new: the
                  loader must read the field). Holds `h.N.attn.bias` as an F16 [1,1,32,32] lower-triangular
                  table of ones (the hub gpt2 file has this float buffer; no masked_bias) - a ".bias" that is
                  NOT a bias vector. Tokenizer: tokenizer.json only (BPE model with vocab and merges inside).
  bert_mlm        config architectures ["BertForMaskedLM"], but the tensors are those BertForPreTraining saves,
                  as in the hub's bert-base-uncased: `bert.*` including the unused `bert.pooler.*` and
                  `cls.seq_relationship.*` (NSP head), and the buffer `bert.embeddings.position_ids` (I64 [1,P],
                  0..P-1, saved before transformers 4.31). MLM decoder weight tied to
                  bert.embeddings.word_embeddings.weight: `cls.predictions.decoder.weight` absent;
                  `cls.predictions.bias` is the decoder bias. F32, hidden 40, heads 4, intermediate 72, vocab
                  67, max_position_embeddings 24, type_vocab_size 2, hidden_act "gelu" (erf), eps 1e-12.
                  Tokenizer: vocab.txt + tokenizer_config.json (do_lower_case true).
  bert_cls        BertForSequenceClassification, 3 labels (id2label 0 negative, 1 neutral, 2 positive),
                  problem_type single_label_classification; `bert.*` with pooler, `classifier.*`; no
                  position_ids (a post-4.31 save). F32, hidden 48, heads 6, intermediate 80, vocab 67, P 24,
                  hidden_act "gelu_new". Tokenizer: vocab.txt + tokenizer_config.json (do_lower_case false).
  bert_base       BertModel (names without prefix: `embeddings.*`, `encoder.*`, `pooler.*`), with
                  `embeddings.position_ids`; BF16; hidden 32, heads 4, intermediate 56, vocab 67, P 24,
                  layer_norm_eps 1e-12, hidden_act "gelu". Tokenizer as bert_mlm.
  t5_v1_0         T5ForConditionalGeneration, original T5: relu FFN (`DenseReluDense.wi`/`wo`), lm_head tied
                  to `shared.weight` (absent) and the decoder output scaled by d_model**-0.5 before it; BF16.
                  Its config is minimal, like the hub's t5-small: no feed_forward_proj (default "relu"), no
                  relative_attention_max_distance (default 128), no num_decoder_layers (default num_layers),
                  no tie_word_embeddings (default true). d_model 40, d_kv 12, num_heads 4 (4*12 = 48 != 40),
                  d_ff 56, num_layers 2, relative_attention_num_buckets 16, vocab 69 (64 spiece pieces + 5
                  extra ids). Holds the unused `decoder.block.0.layer.1.EncDecAttention.relative_attention_bias
                  .weight` that old T5 checkpoints (hub t5-small) hold. Tokenizer: spiece.model +
                  tokenizer_config.json (extra_ids 5). pad 0 = decoder start, eos 1, unk 2.
  t5_v1_1         T5 v1.1 / flan: feed_forward_proj "gated-gelu" (dense_act_fn "gelu_new", is_gated_act true;
                  `DenseReluDense.wi_0` gated by gelu_new, times `wi_1`, then `wo`), tie_word_embeddings false
                  (separate `lm_head.weight`, no d_model**-0.5 scale), F32, full config. d_model 32, d_kv 12,
                  num_heads 3 (36 != 32), d_ff 40, num_layers 2, num_decoder_layers 3,
                  relative_attention_num_buckets 32, relative_attention_max_distance 24, eps 1e-6, vocab 75.
  marian          MarianMTModel as saved by current transformers: no `model.*.embed_positions.weight`
                  (sinusoidal tables, computed at load; save_pretrained drops them via _keys_to_ignore_on_save),
                  `model.shared.weight` (encoder/decoder embed_tokens and lm_head tied to it: absent),
                  `final_logits_bias` [1,V] non-zero. activation "swish", scale_embedding true, d_model 40,
                  encoder 2 layers x 4 heads, ffn 56; decoder 2 layers x 5 heads (head dim 8 vs 10), ffn 72;
                  max_position_embeddings 32; F32. eos 0, unk 1, pad = decoder_start = V-1 (as opus-mt).
                  Tokenizer: source.spm, target.spm, vocab.json (shared), tokenizer_config.json.
  marian_positions
                  MarianMTModel as old opus-mt checkpoints hold it (saved by transformers < 3.4, converted to
                  safetensors): the same layout plus `model.encoder.embed_positions.weight` and
                  `model.decoder.embed_positions.weight` [32, d_model] F32 sinusoid tables (exactly what
                  transformers computes, so using them or computing them gives the same result), and an
                  old-style config with static_position_embeddings/normalize_before/normalize_embedding/
                  add_bias_logits/add_final_layer_norm. activation "gelu", scale_embedding false, d_model 32,
                  4 heads, ffn 48 (enc and dec), F32.

The 2026 decoders (fixtures_2026(); one reference, dec_forward, written from modeling_qwen3.py, modeling_gemma3.py,
modeling_olmo2.py, modeling_gemma2.py, modeling_phi3.py, modeling_mixtral.py, modeling_qwen3_moe.py, masking_utils.py
and modeling_rope_utils.py). Every sliding window is transformers' masking_utils rule: a query at position q sees
the keys kv with q - sliding_window < kv <= q, i.e. sliding_window keys counting itself. No tokenizer files.

  qwen3           Qwen3ForCausalLM (config as transformers 4.51 writes it), F32, hidden 32, 4 query heads over 2
                  kv heads, head_dim 16 (!= 32 / 4; scale head_dim**-0.5), intermediate 64, 2 layers, no
                  biases, `self_attn.q_norm.weight` / `k_norm.weight` [16]: RMSNorm (eps rms_norm_eps, weight w)
                  of each head of q and k before rotary; rope_theta 1e6; tied head (no lm_head.weight); vocab
                  301, bos 298, eos 300.
  gemma3_text     Gemma3ForCausalLM, model_type gemma3_text, config as transformers 4.50 writes it (no
                  tie_word_embeddings: true by default; no layer_types), F32, hidden 32, heads 4 over 2,
                  head_dim 16, intermediate 48, 4 layers, vocab 211, pad 0 eos 1 bos 2. Every RMSNorm computes
                  x * rsqrt(mean(x^2) + eps) * (1 + w) (weights stored as w, here uniform in +-0.5); embeddings
                  times hidden_size**0.5 as a float32 scalar cast to the weights' dtype; input_layernorm ->
                  attention -> post_attention_layernorm -> residual add, pre_feedforward_layernorm -> MLP
                  (down(gelu_pytorch_tanh(gate) * up)) -> post_feedforward_layernorm -> residual add; q_norm /
                  k_norm per head (1 + w) before rotary; scores scaled by query_pre_attn_scalar**-0.5 (24, not
                  head_dim 16); no soft-caps. Layer i slides iff (i + 1) % sliding_window_pattern != 0
                  (transformers 4.50: is_sliding = bool((layer_idx + 1) % sliding_window_pattern); pattern 3:
                  layers 0, 1, 3 slide, layer 2 is global); sliding_window 5. Sliding layers: rope base
                  rope_local_base_freq 1e4, default rope; global layers: rope_theta 1e6 with rope_scaling
                  {"rope_type": "linear", "factor": 2} (inv_freq / 2), on the global layers only.
  gemma3_text_v5  The same family as transformers 5 writes it: BF16, hidden 48 (sqrt(48) = 6.9282 is 6.9375 in
                  bfloat16: the embedding scale used), heads 4 over 1, head_dim 16, intermediate 64, 4 layers,
                  query_pre_attn_scalar 32, sliding_window 6, "layer_types" [sliding, full, full, sliding] (what
                  the layers are; no pattern gives this list), "rope_parameters" {"full_attention": {"rope_type":
                  "linear", "factor": 4, "rope_theta": 1e6}, "sliding_attention": {"rope_type": "default",
                  "rope_theta": 1e4}}, "dtype" for torch_dtype, use_bidirectional_attention false; vocab 199.
  olmo2           Olmo2ForCausalLM (transformers 4.47 config; no bos_token_id), F32, hidden 32, heads 4 over 2
                  (head_dim 8), intermediate 64, 2 layers, untied lm_head, vocab 263, eos 262, pad 261. No
                  pre-norms: x = x + post_attention_layernorm(attn(x)); x = x + post_feedforward_layernorm(mlp(x));
                  `self_attn.q_norm.weight` [32] / `k_norm.weight` [16] are RMSNorms over the WHOLE projected
                  width (all heads together, heads * head_dim), applied before the split into heads and rotary;
                  plain w (not 1 + w); rope_theta 5e5.
  gemma2          Gemma2ForCausalLM (transformers 4.42 config: hidden_act and hidden_activation both, no
                  tie_word_embeddings), F32, hidden 32, heads 4 over 2, head_dim 16, intermediate 48, 4 layers,
                  vocab 211, pad 0 eos 1 bos 2; like gemma3_text without q/k norms and with one rope base
                  (rope_theta 1e4). Layers 0 and 2 slide (window 5), 1 and 3 are global: is_sliding = not
                  bool(layer_idx % 2) (transformers 5: layer_types from (i + 1) % 2). Attention soft-cap
                  attn_logit_softcapping 2.0: scores = tanh(scores * scale / cap) * cap, before the mask; final
                  logits tanh(logits / 5.0) * 5.0 (final_logit_softcapping). "softcap_check" in golden.json.
  phi3            Phi3ForCausalLM (transformers 4.49 config), F32, hidden 48, heads 4 over 2 (head_dim 12),
                  intermediate 64, 2 layers, untied, vocab 203, bos 1, eos = pad 202. `self_attn.qkv_proj.weight`
                  [(4 + 2 * 2) * 12, 48]: rows q (heads * head_dim), then k, then v; `mlp.gate_up_proj.weight`
                  [128, 48]: rows 0-63 gate, 64-127 up (down(silu(gate) * up)). partial_rotary_factor 0.5: the
                  first 6 of each head's 12 dims rotate (rotate_half within those 6), the other 6 pass. rope
                  "longrope" (rope_scaling "type"), rope_theta 1e4, short_factor [1, 1.5, 2.5], long_factor
                  [1, 4, 12], original_max_position_embeddings 32 (top-level field), max_position_embeddings
                  128: inv_freq = 1 / (ext * theta ** (2j / 6)) with ext = short_factor while the sequence
                  (max position id + 1) is <= original_max_position_embeddings and long_factor beyond it
                  (longrope_frequency_update, recomputed per forward); cos and sin multiplied by the attention
                  factor sqrt(1 + ln(128 / 32) / ln(32)) = 1.18322 (rope_scaling's attention_factor when given),
                  in both regimes. Per position: position p long when p + 1 > 32 (what cached generation gives
                  each new token; transformers' one whole forward of a longer sequence turns every position by
                  the long factors: detail "long_whole_forward"). One logits batch holds 44 tokens, past 32.
                  sliding_window 7 on every layer.
  mixtral         MixtralForCausalLM (transformers 4.46 config), F32, hidden 32, heads 4 over 2, 2 layers, 8
                  experts (num_local_experts), top 2, intermediate 24, untied, vocab 157, bos 1 eos 2, no
                  window. `block_sparse_moe.gate.weight` [8, 32]; `block_sparse_moe.experts.E.w1` (gate), `w3`
                  (up) [24, 32], `w2` (down) [32, 24]. Router: softmax over all 8 logits, top 2, the two
                  probabilities divided by their sum (always), output = sum of weight * w2(silu(w1 x) * w3 x).
  qwen3_moe       Qwen3MoeForCausalLM (transformers 4.51 config), F32, hidden 32, heads 4 over 2, head_dim 16,
                  q/k norms as qwen3, 3 layers, 4 experts top 2, moe_intermediate_size 24, norm_topk_prob false
                  (the top-2 softmax probabilities used as they are), mlp_only_layers [1], decoder_sparse_step 1:
                  layer i is sparse iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0 (so
                  layers 0 and 2; layer 1 a dense `mlp.gate_proj/up_proj/down_proj` of intermediate_size 48).
                  `mlp.gate.weight` [4, 32], `mlp.experts.E.gate_proj/up_proj` [24, 32], `down_proj` [32, 24];
                  untied, vocab 163, bos 160, eos 162.
  qwen3_moe_v5    Qwen3-MoE as transformers 5 saves it: experts fused, `mlp.experts.gate_up_proj` [4, 48, 32]
                  (per expert rows 0-23 gate_proj, 24-47 up_proj) and `mlp.experts.down_proj` [4, 32, 24] (no
                  ".weight"), router `mlp.gate.weight`; rope_parameters {"rope_type": "default", "rope_theta":
                  1e6}, "dtype"; 4 layers, decoder_sparse_step 2, mlp_only_layers []: layers 1 and 3 sparse, 0
                  and 2 dense; norm_topk_prob true (top-2 renormalized); vocab 131, bos 128, eos 130.
                  The MoE fixtures' tokens belong to clusters the routers favour (cluster_routing), so that no
                  top-k choice is a near tie.

golden.json (floats are float64 references rounded to 8 significant digits; ids are ints):
  "info": {"fixture", "family" ("gpt2"|"bert"|"t5"|"marian"), "architecture" (the config's), "dtype" (stored
           weights "F32"|"F16"|"BF16"), "vocab_size", "act_input_max_abs" (largest |x| fed to an activation
           over all golden computations)}
  "special_ids": the ids the decoders use: gpt2 {"bos","eos"}; bert {"pad","unk","cls","sep","mask"};
           t5 {"pad","eos","unk","decoder_start"}; marian {"pad","eos","unk","decoder_start"}.
  "logits": [ {"src": [[ids]...], "tgt": [[ids]...] or [], "width": V, "logits": [[flat row-major floats of
           [len, V]] per sequence]} ]. Each entry is one batch, padded by the reader as the family pads
           (bert: pad id + attention mask; t5/marian: source padded with pad id + encoder attention mask,
           targets right-padded; gpt2 right-padded, the causal mask keeps valid rows exact). Only the valid
           rows are given. Entries with one sequence are exactly `halformer logits DIR --src .. [--tgt ..]`:
           gpt2 `[len(src), V]`; bert its MLM head `[len(src), V]` (token types 0; bert_mlm only, the other
           bert fixtures have no MLM head and no "logits"); t5/marian `[len(tgt), V]` with the decoder fed tgt
           exactly (tgt starts with the decoder start id).
  "hidden" (bert): [ {"src": [[ids]...] (one padded batch), "last_hidden_state": [[flat [len, hidden]] per
           sequence, valid rows], "cls": [[hidden] per seq] (row 0), "mean": [[hidden] per seq] (mean over the
           valid tokens), "mean_l2": the mean vectors L2-normalised, "pooler": [[hidden] per seq]
           (tanh(pooler.dense(row 0)); only when the file has a pooler)} ]
  "class_logits" (bert_cls): [ {"src": [[ids]...], "logits": [[3 floats] per seq], "labels": [id2label of
           argmax per seq]} ]
  "greedy" (gpt2, t5, marian): [ {"src", "max_new_tokens", "tokens": the generated ids (eos included when
           produced, prompt/decoder start excluded), "min_margin": smallest top1-top2 logit gap on the way} ]
           argmax with ties to the lowest id, the whole prefix recomputed each step; gpt2 continues src; t5
           and marian start from decoder_start (t5: pad 0; marian: pad = decoder_start_token_id); stop at eos.
  "beam" (gpt2, t5, marian): [ {"src", "max_new_tokens", "beam", "length_penalty", "n_best", "hyps": [[ids]],
           "scores": [floats], "min_gap"} ] with exactly the beam rule of tests/make_fixtures.py (copied
           below), same starts and eos as greedy. The first greedy/beam source is one whose greedy output
           reaches eos after >= 3 steps (found by exchanging the ids of eos and a token the model emits in
           every vocabulary-indexed tensor, under which the model is equivariant; for gpt2 that source may hold
           the eos/bos id, like a prompt that starts with <|endoftext|>). min_margin >= 2e-3 and
           min_gap >= 1e-4 are asserted, so float32 rounding cannot flip a decision.
           Random token ids avoid the special ids (gpt2: eos; bert: 0-5; t5: 0-2 and the extra ids; marian:
           eos, unk, pad), except where placed on purpose ([CLS] ... [MASK] ... [SEP]; sources ending in eos).
  "gelu_check" (gpt2, bert): {"other": the gelu variant NOT in the config, "max_abs_diff", "rel_l2_diff"}:
           how far the checked outputs (gpt2 logits; bert_mlm MLM logits; other bert the hidden states) move
           if the other gelu is used; both asserted > 1e-3 (the runtime tests compare at 1e-4 relative L2).
  "t5_buckets" (t5): [ {"bidirectional", "num_buckets", "max_distance", "relative_position": [memory -
           query positions], "bucket": [ids]} ] for (32, 128) and the fixture's own (num_buckets,
           max_distance), bidirectional (encoder) and causal (decoder). The buckets are transformers' formula
           computed as transformers computes it (int64, the log in float32); "float64_differs" lists the
           relative positions where evaluating the same formula in float64 gives another bucket.
  "marian_positions" (marian): [ {"d_model", "entries": [[row, column, value]...]} ] for the fixture's
           d_model and for 512: transformers' MarianSinusoidalPositionalEmbedding table (first half sin, second
           half cos: column j < d/2 is sin(pos / 10000**(2j/d)), column d/2 + j is cos(pos / 10000**(2j/d)); numpy
           float64 rounded to float32). Position p of a sequence uses row p (no offset).

  2026 decoders: "special_ids" {"bos", "eos"} (+ "pad" where the config has one; bos null for olmo2), "logits",
           "greedy", "beam" as gpt2 (right-padded batches with pad id 0, the causal mask keeps valid rows exact;
           one batch holds a sequence longer than any sliding window), and
  "rope_inv_freq": the global (full-attention) layers' inverse frequencies as transformers computes them in
           float32 (phi3: the short factors over the 6 rotary dims; "rope_long_inv_freq" the long ones,
           "rope_attention_factor", "rope_rotary_dims"); gemma3_text also "rope_local_inv_freq" (sliding layers).
  "detail_checks": {detail: max |logits - logits with that detail done wrong| / max |logits|} over the logits
           batches, each asserted > 1e-3: norm_w_not_1_plus (w instead of 1 + w), no_embed_scale,
           embed_scale_unrounded (sqrt(hidden) not rounded to bfloat16), scale_head_dim (head_dim**-0.5 for
           query_pre_attn_scalar**-0.5), scale_hidden_over_heads ((hidden / heads)**-0.5 for head_dim**-0.5),
           window_plus_1 / window_minus_1, no_window, local_rope_global_base (sliding layers with rope_theta),
           rope_scaling_all_layers (the global layers' scaling on sliding layers too), no_rope_scaling,
           pattern_i_mod (global iff i % pattern == 0), sliding_odd_layers, qk_norm_whole_width (per-head norm
           done over all heads), qk_norm_per_head (olmo2's whole-width norm done per head), qk_norm_after_rope,
           no_qk_norm, pre_norm (olmo2's norms used as pre-norms), no_attn_softcap, no_final_softcap,
           softcap_after_mask, full_rotary (phi3 rotating all 12 dims, default rope), no_attention_factor,
           long_factor, no_short_factor (default rope on the 6 dims), long_whole_forward, gate_up_swapped, no_renorm (mixtral),
           flip_norm_topk_prob (qwen3_moe).
  "softcap_check" (gemma2): {"attn_logit_softcapping_rel_diff", "final_logit_softcapping_rel_diff"}: the same
           measure without each cap; both asserted > 1e-2.
  "router_min_margin" (mixtral, qwen3_moe*): the smallest gap between the k-th and (k+1)-th router probability
           over the valid rows of all golden computations (logits batches, greedy and beam), asserted >= 1e-3;
           "router_seed_attempts": which draw of the weights gave it.

Run:  /usr/bin/python3 tests/make_hf_fixtures.py   (deterministic: same bytes every run; needs Debian's
      python3-torch and python3-sentencepiece; `--only NAME...` rebuilds just those fixtures)
"""
import collections
import io
import json
import math
import os
import re
import shutil
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "hf")

F64 = torch.float64
ACT_MAX = [0.0]
# FFN scaling: first-layer inputs spread over about -5..+2, mostly where gelu_new and erf gelu differ the most
# relative to their value (x ~ -2.7: |gelu_new - gelu| = 4.7e-4 on a value of -0.009), and a second layer
# large enough that this shows in the outputs.
FF1_GAIN, FF1_BIAS, FF2_GAIN = 1.5, -2.0, 4.0  # largest |x| fed to an activation (per fixture; reset in build())
ROUTER_GAIN = 0.3
CLUSTER_EMB, CLUSTER_ROUTER = 2.0, 1.0  # (see cluster_routing)
GEMMA2_CAPS = (2.0, 5.0)  # attn_logit_softcapping, final_logit_softcapping of the gemma2 fixture

# ----------------------------------------------------------------------------------------------------------
# Reference math, float64


def act_fn(name):
    def record(x):
        ACT_MAX[0] = max(ACT_MAX[0], float(x.abs().max()))

    def gelu(x):
        record(x)
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def gelu_new(x):  # transformers' NewGELUActivation / gelu_pytorch_tanh
        record(x)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    def relu(x):
        record(x)
        return torch.clamp(x, min=0.0)

    def silu(x):
        record(x)
        return x * torch.sigmoid(x)

    return {"gelu": gelu, "gelu_new": gelu_new, "relu": relu, "swish": silu, "silu": silu}[name]


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):  # T5LayerNorm: no mean, no bias
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def linear(x, w, b=None):  # nn.Linear: weight [out, in]
    y = x @ w.t()
    return y + b if b is not None else y


def attend(q, k, v, heads, scale, bias):
    """q [B,Tq,H*dh], k/v [B,Tk,H*dh]; bias broadcastable to [B,H,Tq,Tk] (additive, -inf masks)."""
    B, Tq, _ = q.shape
    Tk = k.shape[1]
    dh = q.shape[-1] // heads
    q = q.view(B, Tq, heads, dh).transpose(1, 2)
    k = k.view(B, Tk, heads, dh).transpose(1, 2)
    v = v.view(B, Tk, heads, dh).transpose(1, 2)
    s = (q @ k.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(1, 2).reshape(B, Tq, heads * dh)


def key_mask(lens, T):
    """Additive [B,1,1,T] mask: -inf on padded keys."""
    m = torch.zeros(len(lens), 1, 1, T, dtype=F64)
    for b, n in enumerate(lens):
        m[b, :, :, n:] = -math.inf
    return m


def causal_mask(T):
    return torch.triu(torch.full((T, T), -math.inf, dtype=F64), diagonal=1)[None, None]


def pad_batch(seqs, pad_id):
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, [len(s) for s in seqs]


# ----------------------------------------------------------------------------------------------------------
# Families: parameter lists (state_dict order, shapes) and forwards, written from transformers' modeling code


def gpt2_names(c, prefix):
    D, F, P, V = c["n_embd"], c["n_inner"] or 4 * c["n_embd"], c["n_positions"], c["vocab_size"]
    p = prefix
    out = [(p + "wte.weight", [V, D], "emb"), (p + "wpe.weight", [P, D], "emb")]
    for i in range(c["n_layer"]):
        h = f"{p}h.{i}."
        out += [(h + "ln_1.weight", [D], "ln_w"), (h + "ln_1.bias", [D], "bias"),
                (h + "attn.bias", [1, 1, P, P], "buffer"), (h + "attn.masked_bias", [], "buffer"),
                (h + "attn.c_attn.weight", [D, 3 * D], "conv"), (h + "attn.c_attn.bias", [3 * D], "bias"),
                (h + "attn.c_proj.weight", [D, D], "conv"), (h + "attn.c_proj.bias", [D], "bias"),
                (h + "ln_2.weight", [D], "ln_w"), (h + "ln_2.bias", [D], "bias"),
                (h + "mlp.c_fc.weight", [D, F], "conv_ff1"), (h + "mlp.c_fc.bias", [F], "bias_ff1"),
                (h + "mlp.c_proj.weight", [F, D], "conv_ff2"), (h + "mlp.c_proj.bias", [D], "bias")]
    out += [(p + "ln_f.weight", [D], "ln_w"), (p + "ln_f.bias", [D], "bias"), ("lm_head.weight", [V, D], "tied")]
    return out


def gpt2_forward(W, c, prefix, seqs, act_name=None):
    """GPT2LMHeadModel: logits [T, V] per sequence (right-padded batch; causal, so valid rows are exact)."""
    act = act_fn(act_name or c["activation_function"])
    p, H, eps = prefix, c["n_head"], c["layer_norm_epsilon"]
    ids, lens = pad_batch(seqs, 0)
    T = ids.shape[1]
    x = W[p + "wte.weight"][ids] + W[p + "wpe.weight"][torch.arange(T)][None]
    D = x.shape[-1]
    mask = causal_mask(T)
    for i in range(c["n_layer"]):
        h = f"{p}h.{i}."
        a = layer_norm(x, W[h + "ln_1.weight"], W[h + "ln_1.bias"], eps)
        qkv = a @ W[h + "attn.c_attn.weight"] + W[h + "attn.c_attn.bias"]  # Conv1D: x @ W[in, out] + b
        q, k, v = qkv.split(D, dim=-1)
        o = attend(q, k, v, H, (D // H) ** -0.5, mask)
        x = x + (o @ W[h + "attn.c_proj.weight"] + W[h + "attn.c_proj.bias"])
        m = layer_norm(x, W[h + "ln_2.weight"], W[h + "ln_2.bias"], eps)
        f = act(m @ W[h + "mlp.c_fc.weight"] + W[h + "mlp.c_fc.bias"])
        x = x + (f @ W[h + "mlp.c_proj.weight"] + W[h + "mlp.c_proj.bias"])
    x = layer_norm(x, W[p + "ln_f.weight"], W[p + "ln_f.bias"], eps)
    logits = x @ W[p + "wte.weight"].t()
    return [logits[b, :n] for b, n in enumerate(lens)]


def bert_names(c, kind):
    D, F, P, V = c["hidden_size"], c["intermediate_size"], c["max_position_embeddings"], c["vocab_size"]
    p = "" if kind == "base" else "bert."
    out = [(p + "embeddings.position_ids", [1, P], "buffer"),
           (p + "embeddings.word_embeddings.weight", [V, D], "emb"),
           (p + "embeddings.position_embeddings.weight", [P, D], "emb"),
           (p + "embeddings.token_type_embeddings.weight", [c["type_vocab_size"], D], "emb"),
           (p + "embeddings.LayerNorm.weight", [D], "ln_w"), (p + "embeddings.LayerNorm.bias", [D], "bias")]
    for i in range(c["num_hidden_layers"]):
        l = f"{p}encoder.layer.{i}."
        for n in ("query", "key", "value"):
            out += [(l + f"attention.self.{n}.weight", [D, D], "lin"), (l + f"attention.self.{n}.bias", [D], "bias")]
        out += [(l + "attention.output.dense.weight", [D, D], "lin"), (l + "attention.output.dense.bias", [D], "bias"),
                (l + "attention.output.LayerNorm.weight", [D], "ln_w"),
                (l + "attention.output.LayerNorm.bias", [D], "bias"),
                (l + "intermediate.dense.weight", [F, D], "lin_ff1"), (l + "intermediate.dense.bias", [F], "bias_ff1"),
                (l + "output.dense.weight", [D, F], "lin_ff2"), (l + "output.dense.bias", [D], "bias"),
                (l + "output.LayerNorm.weight", [D], "ln_w"), (l + "output.LayerNorm.bias", [D], "bias")]
    if kind in ("pretraining", "cls", "base"):
        out += [(p + "pooler.dense.weight", [D, D], "lin"), (p + "pooler.dense.bias", [D], "bias")]
    if kind == "pretraining":  # BertPreTrainingHeads: predictions (MLM) + seq_relationship (NSP)
        out += [("cls.predictions.bias", [V], "bias"),
                ("cls.predictions.transform.dense.weight", [D, D], "lin_ff1"),
                ("cls.predictions.transform.dense.bias", [D], "bias"),
                ("cls.predictions.transform.LayerNorm.weight", [D], "ln_w"),
                ("cls.predictions.transform.LayerNorm.bias", [D], "bias"),
                ("cls.predictions.decoder.weight", [V, D], "tied"),
                ("cls.seq_relationship.weight", [2, D], "lin"), ("cls.seq_relationship.bias", [2], "bias")]
    if kind == "cls":
        out += [("classifier.weight", [c["num_labels"], D], "lin"), ("classifier.bias", [c["num_labels"]], "bias")]
    return out


def bert_forward(W, c, p, seqs, act_name=None):
    """BertModel (+ heads): dict of per-sequence hidden [T,D], pooled [D] (if pooler), mlm [T,V], cls [C]."""
    act = act_fn(act_name or c["hidden_act"])
    H, eps = c["num_attention_heads"], c["layer_norm_eps"]
    ids, lens = pad_batch(seqs, c["pad_token_id"])
    T = ids.shape[1]
    e = p + "embeddings."
    x = (W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][torch.arange(T)][None]
         + W[e + "token_type_embeddings.weight"][0])
    x = layer_norm(x, W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"], eps)
    mask = key_mask(lens, T)
    D = x.shape[-1]
    for i in range(c["num_hidden_layers"]):
        l = f"{p}encoder.layer.{i}."
        s = l + "attention.self."
        ctx = attend(linear(x, W[s + "query.weight"], W[s + "query.bias"]),
                     linear(x, W[s + "key.weight"], W[s + "key.bias"]),
                     linear(x, W[s + "value.weight"], W[s + "value.bias"]), H, (D // H) ** -0.5, mask)
        a = linear(ctx, W[l + "attention.output.dense.weight"], W[l + "attention.output.dense.bias"])
        x = layer_norm(a + x, W[l + "attention.output.LayerNorm.weight"], W[l + "attention.output.LayerNorm.bias"], eps)
        f = act(linear(x, W[l + "intermediate.dense.weight"], W[l + "intermediate.dense.bias"]))
        o = linear(f, W[l + "output.dense.weight"], W[l + "output.dense.bias"])
        x = layer_norm(o + x, W[l + "output.LayerNorm.weight"], W[l + "output.LayerNorm.bias"], eps)
    out = {"hidden": [x[b, :n] for b, n in enumerate(lens)]}
    if p + "pooler.dense.weight" in W:
        pooled = torch.tanh(linear(x[:, 0], W[p + "pooler.dense.weight"], W[p + "pooler.dense.bias"]))
        out["pooled"] = [pooled[b] for b in range(len(lens))]
        if "classifier.weight" in W:
            cl = linear(pooled, W["classifier.weight"], W["classifier.bias"])
            out["cls"] = [cl[b] for b in range(len(lens))]
    if "cls.predictions.bias" in W:
        t = act(linear(x, W["cls.predictions.transform.dense.weight"], W["cls.predictions.transform.dense.bias"]))
        t = layer_norm(t, W["cls.predictions.transform.LayerNorm.weight"],
                       W["cls.predictions.transform.LayerNorm.bias"], eps)
        mlm = t @ W[e + "word_embeddings.weight"].t() + W["cls.predictions.bias"]
        out["mlm"] = [mlm[b, :n] for b, n in enumerate(lens)]
    return out


def t5_names(c, old_unused):
    D, F, V = c["d_model"], c["d_ff"], c["vocab_size"]
    I, H = c["num_heads"] * c["d_kv"], c["num_heads"]
    gated = c["feed_forward_proj"].startswith("gated")
    out = [("shared.weight", [V, D], "emb")]

    def attn(pre, rel):
        r = [(pre + "q.weight", [I, D], "t5_q"), (pre + "k.weight", [I, D], "t5_kv"),
             (pre + "v.weight", [I, D], "t5_kv"), (pre + "o.weight", [D, I], "t5_o")]
        if rel:
            r.append((pre + "relative_attention_bias.weight", [c["relative_attention_num_buckets"], H], "relbias"))
        return r

    def ff(pre):
        if gated:
            return [(pre + "DenseReluDense.wi_0.weight", [F, D], "t5_wi"),
                    (pre + "DenseReluDense.wi_1.weight", [F, D], "t5_wi1"),
                    (pre + "DenseReluDense.wo.weight", [D, F], "t5_wo")]
        return [(pre + "DenseReluDense.wi.weight", [F, D], "t5_wi"),
                (pre + "DenseReluDense.wo.weight", [D, F], "t5_wo")]

    for stack, n in (("encoder", c["num_layers"]), ("decoder", c["num_decoder_layers"])):
        out.append((stack + ".embed_tokens.weight", [V, D], "tied"))
        for i in range(n):
            b = f"{stack}.block.{i}.layer."
            out += attn(b + "0.SelfAttention.", i == 0) + [(b + "0.layer_norm.weight", [D], "rms_w")]
            if stack == "decoder":
                out += attn(b + "1.EncDecAttention.", i == 0 and old_unused)
                out += [(b + "1.layer_norm.weight", [D], "rms_w")]
            f = "2." if stack == "decoder" else "1."
            out += ff(b + f) + [(b + f + "layer_norm.weight", [D], "rms_w")]
        out.append((stack + ".final_layer_norm.weight", [D], "rms_w"))
    out.append(("lm_head.weight", [V, D], "tied" if c["tie_word_embeddings"] else "emb_head"))
    return out


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5Attention._relative_position_bucket, computed as transformers computes it (int64; log in float32)."""
    rel = torch.as_tensor(rel, dtype=torch.long)
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (rel > 0).to(torch.long) * num_buckets
        n = torch.abs(rel)
    else:
        n = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, n, large)


def t5_bucket_f64(rel, bidirectional, num_buckets, max_distance):
    """The same formula, plainly in Python float64 (to show where float precision matters)."""
    b = 0
    if bidirectional:
        num_buckets //= 2
        b += num_buckets if rel > 0 else 0
        n = abs(rel)
    else:
        n = -min(rel, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return b + n
    v = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return b + min(v, num_buckets - 1)


def t5_position_bias(W, c, table, Tq, Tk, bidirectional):
    ctx = torch.arange(Tq)[:, None]
    mem = torch.arange(Tk)[None, :]
    bucket = t5_bucket(mem - ctx, bidirectional, c["relative_attention_num_buckets"],
                       c["relative_attention_max_distance"])
    return W[table][bucket].permute(2, 0, 1)[None]  # [1, H, Tq, Tk]


def t5_forward(W, c, srcs, tgts):
    """T5ForConditionalGeneration: logits [len(tgt), V] per pair; decoder fed tgt as given."""
    eps, H = c["layer_norm_epsilon"], c["num_heads"]
    act = act_fn(c["dense_act_fn"])
    gated = c["is_gated_act"]
    src, slen = pad_batch(srcs, c["pad_token_id"])
    tgt, tlen = pad_batch(tgts, c["pad_token_id"])
    Ts, Tt = src.shape[1], tgt.shape[1]
    smask = key_mask(slen, Ts)

    def attn(pre, x, kv, bias):
        return linear(attend(linear(x, W[pre + "q.weight"]), linear(kv, W[pre + "k.weight"]),
                             linear(kv, W[pre + "v.weight"]), H, 1.0, bias), W[pre + "o.weight"])

    def ff(pre, x):
        if gated:
            h = act(linear(x, W[pre + "DenseReluDense.wi_0.weight"])) * linear(x, W[pre + "DenseReluDense.wi_1.weight"])
        else:
            h = act(linear(x, W[pre + "DenseReluDense.wi.weight"]))
        return linear(h, W[pre + "DenseReluDense.wo.weight"])

    # Encoder: one bidirectional position bias (block 0's table) + the padding mask, shared by every block.
    x = W["shared.weight"][src]
    bias = t5_position_bias(W, c, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                            Ts, Ts, True) + smask
    for i in range(c["num_layers"]):
        b = f"encoder.block.{i}.layer."
        x = x + attn(b + "0.SelfAttention.", rms_norm(x, W[b + "0.layer_norm.weight"], eps),
                     rms_norm(x, W[b + "0.layer_norm.weight"], eps), bias)
        x = x + ff(b + "1.", rms_norm(x, W[b + "1.layer_norm.weight"], eps))
    mem = rms_norm(x, W["encoder.final_layer_norm.weight"], eps)
    # Decoder: causal position bias from decoder block 0's table; cross-attention has no position bias.
    y = W["shared.weight"][tgt]
    sbias = t5_position_bias(W, c, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                             Tt, Tt, False) + causal_mask(Tt)
    for i in range(c["num_decoder_layers"]):
        b = f"decoder.block.{i}.layer."
        n = rms_norm(y, W[b + "0.layer_norm.weight"], eps)
        y = y + attn(b + "0.SelfAttention.", n, n, sbias)
        y = y + attn(b + "1.EncDecAttention.", rms_norm(y, W[b + "1.layer_norm.weight"], eps), mem, smask)
        y = y + ff(b + "2.", rms_norm(y, W[b + "2.layer_norm.weight"], eps))
    y = rms_norm(y, W["decoder.final_layer_norm.weight"], eps)
    if c["tie_word_embeddings"]:
        # transformers 5 says whether to scale (scale_decoder_outputs: true for v1.0, false for the gated
        # ones); before it, a tied head always scaled.
        if c.get("scale_decoder_outputs", True):
            y = y * c["d_model"] ** -0.5
        logits = y @ W["shared.weight"].t()
    else:
        logits = y @ W["lm_head.weight"].t()
    return [logits[b, :n] for b, n in enumerate(tlen)]


def marian_names(c, with_positions):
    D, V, P = c["d_model"], c["vocab_size"], c["max_position_embeddings"]
    out = [("final_logits_bias", [1, V], "flb"), ("model.shared.weight", [V, D], "emb")]

    def attn(pre, heads):
        r = []
        for n in ("k_proj", "v_proj", "q_proj", "out_proj"):
            r += [(pre + n + ".weight", [D, D], "lin"), (pre + n + ".bias", [D], "bias")]
        return r

    for stack in ("encoder", "decoder"):
        Fd = c[stack + "_ffn_dim"]
        out += [(f"model.{stack}.embed_tokens.weight", [V, D], "tied"),
                (f"model.{stack}.embed_positions.weight", [P, D], "positions" if with_positions else "dropped")]
        for i in range(c[stack + "_layers"]):
            l = f"model.{stack}.layers.{i}."
            out += attn(l + "self_attn.", None)
            out += [(l + "self_attn_layer_norm.weight", [D], "ln_w"), (l + "self_attn_layer_norm.bias", [D], "bias")]
            if stack == "decoder":
                out += attn(l + "encoder_attn.", None)
                out += [(l + "encoder_attn_layer_norm.weight", [D], "ln_w"),
                        (l + "encoder_attn_layer_norm.bias", [D], "bias")]
            out += [(l + "fc1.weight", [Fd, D], "lin_ff1"), (l + "fc1.bias", [Fd], "bias_ff1"),
                    (l + "fc2.weight", [D, Fd], "lin_ff2"), (l + "fc2.bias", [D], "bias"),
                    (l + "final_layer_norm.weight", [D], "ln_w"), (l + "final_layer_norm.bias", [D], "bias")]
    out.append(("lm_head.weight", [V, D], "tied"))
    return out


def marian_table(n_pos, dim):
    """MarianSinusoidalPositionalEmbedding._init_weight: numpy float64, then float32; sin | cos halves."""
    import numpy as np
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = torch.empty(n_pos, dim, dtype=torch.float32)
    sentinel = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, :sentinel] = torch.FloatTensor(np.sin(enc[:, 0::2]))
    out[:, sentinel:] = torch.FloatTensor(np.cos(enc[:, 1::2]))
    return out


def marian_forward(W, c, srcs, tgts):
    """MarianMTModel: logits [len(tgt), V] per pair (post-norm layers, final_logits_bias)."""
    act = act_fn(c["activation_function"])
    D = c["d_model"]
    scale = math.sqrt(D) if c["scale_embedding"] else 1.0
    pos = marian_table(c["max_position_embeddings"], D).to(F64)
    src, slen = pad_batch(srcs, c["pad_token_id"])
    tgt, tlen = pad_batch(tgts, c["pad_token_id"])
    Ts, Tt = src.shape[1], tgt.shape[1]
    smask = key_mask(slen, Ts)

    def attn(pre, x, kv, heads, bias):
        dh = D // heads
        return linear(attend(linear(x, W[pre + "q_proj.weight"], W[pre + "q_proj.bias"]),
                             linear(kv, W[pre + "k_proj.weight"], W[pre + "k_proj.bias"]),
                             linear(kv, W[pre + "v_proj.weight"], W[pre + "v_proj.bias"]), heads, dh ** -0.5, bias),
                      W[pre + "out_proj.weight"], W[pre + "out_proj.bias"])

    def ln(pre, x):
        return layer_norm(x, W[pre + ".weight"], W[pre + ".bias"], 1e-5)

    def ffn(l, x):
        return linear(act(linear(x, W[l + "fc1.weight"], W[l + "fc1.bias"])), W[l + "fc2.weight"], W[l + "fc2.bias"])

    x = W["model.shared.weight"][src] * scale + pos[:Ts][None]
    He, Hd = c["encoder_attention_heads"], c["decoder_attention_heads"]
    for i in range(c["encoder_layers"]):
        l = f"model.encoder.layers.{i}."
        x = ln(l + "self_attn_layer_norm", x + attn(l + "self_attn.", x, x, He, smask))
        x = ln(l + "final_layer_norm", x + ffn(l, x))
    y = W["model.shared.weight"][tgt] * scale + pos[:Tt][None]
    cm = causal_mask(Tt)
    for i in range(c["decoder_layers"]):
        l = f"model.decoder.layers.{i}."
        y = ln(l + "self_attn_layer_norm", y + attn(l + "self_attn.", y, y, Hd, cm))
        y = ln(l + "encoder_attn_layer_norm", y + attn(l + "encoder_attn.", y, x, Hd, smask))
        y = ln(l + "final_layer_norm", y + ffn(l, y))
    logits = y @ W["model.shared.weight"].t() + W["final_logits_bias"][0]
    return [logits[b, :n] for b, n in enumerate(tlen)]


def llama_names(c):
    """LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM state_dict (the same names)."""
    D, F, V, H = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_attention_heads"]
    Hkv = c.get("num_key_value_heads") or H
    dh = c.get("head_dim") or D // H
    qkv_b = c.get("attention_bias", False) or c["model_type"] == "qwen2"
    o_b = c.get("attention_bias", False)
    mlp_b = c.get("mlp_bias", False)
    out = [("model.embed_tokens.weight", [V, D], "emb")]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for n, rows in (("q_proj", H * dh), ("k_proj", Hkv * dh), ("v_proj", Hkv * dh)):
            out.append((p + f"self_attn.{n}.weight", [rows, D], "lin"))
            if qkv_b:
                out.append((p + f"self_attn.{n}.bias", [rows], "bias"))
        out.append((p + "self_attn.o_proj.weight", [D, H * dh], "lin"))
        if o_b:
            out.append((p + "self_attn.o_proj.bias", [D], "bias"))
        out.append((p + "mlp.gate_proj.weight", [F, D], "lin_ff1"))
        if mlp_b:
            out.append((p + "mlp.gate_proj.bias", [F], "bias_ff1"))
        out.append((p + "mlp.up_proj.weight", [F, D], "lin"))
        if mlp_b:
            out.append((p + "mlp.up_proj.bias", [F], "bias"))
        out.append((p + "mlp.down_proj.weight", [D, F], "lin_ff2"))
        if mlp_b:
            out.append((p + "mlp.down_proj.bias", [D], "bias"))
        out += [(p + "input_layernorm.weight", [D], "rms_w"), (p + "post_attention_layernorm.weight", [D], "rms_w")]
    out.append(("model.norm.weight", [D], "rms_w"))
    out.append(("lm_head.weight", [V, D], "tied" if c.get("tie_word_embeddings", False) else "emb_head"))
    return out


def rope_parameters(c):
    """(theta, scaling dict or None) from either config form: transformers 4 (rope_theta, rope_scaling) or 5
    (rope_parameters)."""
    if "rope_parameters" in c:
        r = dict(c["rope_parameters"])
        return r.pop("rope_theta"), (r if r.get("rope_type", "default") != "default" else None)
    return c.get("rope_theta", 10000.0), c.get("rope_scaling")


def rope_inv_freq(c):
    """transformers' modeling_rope_utils: _compute_default_rope_parameters, then linear or llama3 (float32)."""
    D, H = c["hidden_size"], c["num_attention_heads"]
    dim = c.get("head_dim") or D // H
    base, sc = rope_parameters(c)
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if sc is None:
        return inv
    kind = sc.get("rope_type", sc.get("type"))
    if kind == "linear":
        return inv / sc["factor"]
    assert kind == "llama3", kind
    factor, low, high, old = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"], sc[
        "original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, inv_l)


def rope_cos_sin(c, T):
    """cos, sin [T, dim] (float64 of the float32 angle, as transformers: position * inv_freq in float32)."""
    inv = rope_inv_freq(c)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1).to(F64)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def llama_forward(W, c, seqs):
    """LlamaForCausalLM (MistralForCausalLM, Qwen2ForCausalLM alike): logits [T, V] per sequence, right-padded
    batch (causal: the valid rows are exact). A sliding window masks keys more than window - 1 behind."""
    D, H = c["hidden_size"], c["num_attention_heads"]
    Hkv = c.get("num_key_value_heads") or H
    dh = c.get("head_dim") or D // H
    eps = c["rms_norm_eps"]
    act = act_fn(c.get("hidden_act", "silu"))
    ids, lens = pad_batch(seqs, 0)
    B, T = ids.shape
    x = W["model.embed_tokens.weight"][ids]
    cos, sin = rope_cos_sin(c, T)
    mask = causal_mask(T)
    window = c.get("sliding_window") if c["model_type"] == "mistral" else None
    if window:
        mask = mask + torch.tril(torch.full((T, T), -math.inf, dtype=F64), diagonal=-window)[None, None]
    g = lambda n: W.get(n)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = linear(h, W[p + "self_attn.q_proj.weight"], g(p + "self_attn.q_proj.bias")).view(B, T, H, dh)
        k = linear(h, W[p + "self_attn.k_proj.weight"], g(p + "self_attn.k_proj.bias")).view(B, T, Hkv, dh)
        v = linear(h, W[p + "self_attn.v_proj.weight"], g(p + "self_attn.v_proj.bias")).view(B, T, Hkv, dh)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // Hkv, dim=1)  # repeat_kv: query head h reads kv head h // (H / Hkv)
        v = v.repeat_interleave(H // Hkv, dim=1)
        s = (q @ k.transpose(-1, -2)) * dh ** -0.5 + mask
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * dh)
        x = x + linear(o, W[p + "self_attn.o_proj.weight"], g(p + "self_attn.o_proj.bias"))
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        f = act(linear(h, W[p + "mlp.gate_proj.weight"], g(p + "mlp.gate_proj.bias"))) * \
            linear(h, W[p + "mlp.up_proj.weight"], g(p + "mlp.up_proj.bias"))
        x = x + linear(f, W[p + "mlp.down_proj.weight"], g(p + "mlp.down_proj.bias"))
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if c.get("tie_word_embeddings", False) else W["lm_head.weight"]
    logits = x @ head.t()
    return [logits[b, :n] for b, n in enumerate(lens)]


# ----------------------------------------------------------------------------------------------------------
# Weights


def init_weights(names, c, dtype, seed, family):
    """Deterministic random weights, rounded to the stored dtype, as float64 (the references use these)."""
    g = torch.Generator().manual_seed(seed)
    U = lambda shape, lo, hi: lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float32)
    N = lambda shape, std: torch.randn(shape, generator=g, dtype=torch.float32) * std

    def xavier(shape, gain):  # shape as stored; fan = sum of the two dims
        bound = gain * math.sqrt(6.0 / (shape[0] + shape[-1]))
        return U(shape, -bound, bound)

    # T5 with a tied head: a random model tends to repeat one token (the input embedding sits in the output);
    # small embeddings, sharp attention, strong position biases and a larger decoder norm avoid most of it.
    t5_tied = family == "t5" and c["tie_word_embeddings"]
    W = {}
    for name, shape, kind in names:
        if kind in ("tied", "buffer", "dropped", "positions"):
            continue
        if kind == "emb":
            t = N(shape, (0.3 if t5_tied else 1.0) if family == "t5" else
                  (c.get("d_model", 40) ** -0.5 if family == "marian" else 0.3))
        elif kind == "emb_head":
            t = N(shape, 0.2)
        elif kind in ("ln_w", "rms_w"):
            t = U(shape, 0.8, 1.2) * (3.0 if t5_tied and name == "decoder.final_layer_norm.weight" else 1.0)
        elif kind == "bias":
            t = U(shape, -0.2, 0.2)
        elif kind == "flb":
            t = U(shape, -0.5, 0.5)
        elif kind in ("lin", "conv"):
            t = xavier(shape, 1.0)
        elif kind in ("lin_ff1", "conv_ff1"):
            t = xavier(shape, FF1_GAIN)
        elif kind == "bias_ff1":
            t = U(shape, FF1_BIAS - 0.6, FF1_BIAS + 0.6)
        elif kind in ("lin_ff2", "conv_ff2"):
            t = xavier(shape, FF2_GAIN)
        elif kind == "t5_q":  # T5 does not scale q.k by d_kv**-0.5; transformers' init puts it into q
            t = N(shape, (3.0 if t5_tied else 1.0) * (shape[1] * c["d_kv"]) ** -0.5)
        elif kind == "t5_kv":
            t = N(shape, shape[1] ** -0.5)
        elif kind in ("t5_o", "t5_wo"):
            t = N(shape, (3.0 if t5_tied else 1.0) * shape[1] ** -0.5)
        elif kind == "t5_wi":
            t = N(shape, 2.0 * shape[1] ** -0.5)
        elif kind == "t5_wi1":
            t = N(shape, shape[1] ** -0.5)
        elif kind == "relbias":
            t = N(shape, 3.0 if t5_tied else 1.5)  # large, so a wrong bucket shows
        elif kind == "gemma_w":  # Gemma's RMSNorm weights are offsets from 1 (it computes x * (1 + w))
            t = U(shape, -0.5, 0.5)
        elif kind == "router":  # MoE router: sharp enough that the top-k choice is clear
            t = xavier(shape, ROUTER_GAIN)
        elif kind == "lin_gate_up":  # Phi-3's fused [gate; up]
            half = [shape[0] // 2, shape[1]]
            t = torch.cat([xavier(half, FF1_GAIN), xavier(half, 1.0)], 0)
        else:
            raise ValueError(kind)
        W[name] = round_to(t, dtype)
    return W


def round_to(t32, dtype):
    if dtype == "F16":
        return t32.half().to(F64)
    if dtype == "BF16":
        return t32.bfloat16().to(F64)
    return t32.to(F64)


def swap_vocab(W, a, b):
    """Exchange token ids a and b in every vocabulary-indexed tensor (the model is equivariant under it)."""
    for name, t in W.items():
        if name in ("transformer.wte.weight", "wte.weight", "shared.weight", "lm_head.weight", "model.shared.weight",
                    "model.embed_tokens.weight"):
            t[[a, b]] = t[[b, a]]
        elif name == "final_logits_bias":
            t[:, [a, b]] = t[:, [b, a]]


# ----------------------------------------------------------------------------------------------------------
# safetensors, as the safetensors library writes it

DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
               "I64", "U64"]


def tensor_bytes(dtype, t):
    t = t.contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    if dtype == "I64":
        return t.to(torch.int64).numpy().astype("<i8").tobytes()
    if dtype == "BOOL":
        return t.to(torch.bool).numpy().tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, tensor)}. Data sorted by dtype (widest first) then name, like safetensors."""
    items = sorted(tensors.items(), key=lambda kv: (-DTYPE_ORDER.index(kv[1][0]), kv[0]))
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, t) in items:
        b = tensor_bytes(dtype, t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return off


def save_weights(d, ordered, shards=1):
    """ordered: [(name, dtype, tensor)] in state_dict order. Writes model.safetensors or N shards + index."""
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), {n: (dt, t) for n, dt, t in ordered})
        return
    sizes = [len(tensor_bytes(dt, t)) for _, dt, t in ordered]
    total = sum(sizes)
    limit = int(total * 0.6)  # max_shard_size; shard_checkpoint starts a new shard when the next tensor would pass it
    blocks, cur, cur_size = [], [], 0
    for item, size in zip(ordered, sizes):
        if cur and cur_size + size > limit:
            blocks.append(cur)
            cur, cur_size = [], 0
        cur.append(item)
        cur_size += size
    blocks.append(cur)
    assert len(blocks) == shards, len(blocks)
    weight_map = {}
    for k, block in enumerate(blocks):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(d, fname), {n: (dt, t) for n, dt, t in block})
        for n, _, _ in block:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


def write_json(path, obj, **kw):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, **kw) + "\n")


# ----------------------------------------------------------------------------------------------------------
# Tokenizers (small vocabularies; tested elsewhere, here only consistent with the models)

ENGLISH = [
    "the quick brown fox jumps over the lazy dog.",
    "a small model reads the text and writes the answer.",
    "translate english to german: the house is wonderful.",
    "she sells sea shells by the sea shore.",
    "the weather is nice today, and the sun is shining.",
    "we load the weights from the file and run the kernels.",
    "how many tokens does the tokenizer make of this line?",
    "open the window, please; it is warm in here.",
    "good morning! the train leaves at seven.",
    "the cat sat on the mat and looked at the dog.",
    "summarize: the meeting was long but useful.",
    "every model has a config, a vocabulary and weights.",
]
GERMAN = [
    "der schnelle braune fuchs springt ueber den faulen hund.",
    "ein kleines modell liest den text und schreibt die antwort.",
    "das haus ist wunderbar.",
    "sie verkauft muscheln am meer.",
    "das wetter ist heute schoen, und die sonne scheint.",
    "wir laden die gewichte aus der datei.",
    "wie viele woerter hat diese zeile?",
    "oeffne bitte das fenster; es ist warm hier.",
    "guten morgen! der zug faehrt um sieben.",
    "die katze sass auf der matte und sah den hund an.",
]


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, dict(zip(bs, map(chr, cs)))


GPT2_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def train_bpe(lines, size):
    """Byte-level BPE with `size` entries (base bytes seen in the text + merges), deterministic ties."""
    order, b2u = bytes_to_unicode()
    words = collections.Counter()
    for line in lines:
        for w in GPT2_SPLIT.findall(line):
            words[tuple(b2u[b] for b in w.encode("utf-8"))] += 1
    seen = {ch for w in words for ch in w}
    vocab = [b2u[b] for b in order if b2u[b] in seen]
    merges = []
    words = dict(words)
    while len(vocab) < size:
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab.append(best[0] + best[1])
        new = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + n
        words = new
    assert len(vocab) == size, (len(vocab), size)
    return vocab, merges


def write_gpt2_tokenizer(d, V, as_tokenizer_json):
    vocab, merges = train_bpe(ENGLISH, V - 1)
    ids = {tok: i for i, tok in enumerate(vocab)}
    ids["<|endoftext|>"] = V - 1
    if as_tokenizer_json:
        tj = {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": V - 1, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                      "vocab": ids, "merges": [a + " " + b for a, b in merges]},
        }
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(tj, indent=2, ensure_ascii=False) + "\n")
    else:
        with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(ids, ensure_ascii=False) + "\n")
        with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"add_prefix_space": False, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>", "model_max_length": 32, "tokenizer_class": "GPT2Tokenizer"})


BERT_SPECIAL = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_bert_tokenizer(d, V, lower):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    words = ["the", "##s", "and", "model", "text"]
    toks = BERT_SPECIAL + [".", ",", "!", "?"] + letters + ["##" + l for l in letters] + words
    assert len(toks) == V, len(toks)
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in toks))
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"cls_token": "[CLS]", "do_basic_tokenize": True, "do_lower_case": lower, "mask_token": "[MASK]",
                "model_max_length": 24, "never_split": None, "pad_token": "[PAD]", "sep_token": "[SEP]",
                "strip_accents": None, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer",
                "unk_token": "[UNK]"})
    return {t: i for i, t in enumerate(toks)}


def train_spm(lines, vocab_size, **kw):
    import sentencepiece as spm
    model = io.BytesIO()
    fd = os.dup(2)  # the trainer logs to stderr
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            kw.setdefault("model_type", "unigram")
            spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                           character_coverage=1.0, num_threads=1,
                                           normalization_rule_name="identity", **kw)
        finally:
            os.dup2(fd, 2)
            os.close(fd)
    data = model.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=data)
    return data, [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def write_t5_tokenizer(d, V, extra):
    data, pieces = train_spm(ENGLISH, V - extra, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    assert pieces[:3] == ["<pad>", "</s>", "<unk>"], pieces[:3]
    with open(os.path.join(d, "spiece.model"), "wb") as f:
        f.write(data)
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"additional_special_tokens": [f"<extra_id_{i}>" for i in range(extra)], "eos_token": "</s>",
                "extra_ids": extra, "model_max_length": 512, "pad_token": "<pad>", "tokenizer_class": "T5Tokenizer",
                "unk_token": "<unk>"})


def marian_vocab(src_size, tgt_size):
    src_data, src_pieces = train_spm(ENGLISH, src_size)
    tgt_data, tgt_pieces = train_spm(GERMAN, tgt_size)
    vocab = ["</s>", "<unk>"]
    for p in src_pieces + tgt_pieces:
        if p not in ("<unk>", "<s>", "</s>") and p not in vocab:
            vocab.append(p)
    vocab.append("<pad>")
    return src_data, tgt_data, vocab


def write_marian_tokenizer(d, files):
    src_data, tgt_data, vocab = files
    with open(os.path.join(d, "source.spm"), "wb") as f:
        f.write(src_data)
    with open(os.path.join(d, "target.spm"), "wb") as f:
        f.write(tgt_data)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:  # in id order, as MarianTokenizer saves it
        f.write(json.dumps({p: i for i, p in enumerate(vocab)}, indent=2, ensure_ascii=False) + "\n")
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"eos_token": "</s>", "model_max_length": 512, "pad_token": "<pad>", "separate_vocabs": False,
                "source_lang": "en", "target_lang": "de", "tokenizer_class": "MarianTokenizer", "unk_token": "<unk>"})


# ----------------------------------------------------------------------------------------------------------
# Decoding (the whole prefix recomputed every step)


def argmax_lowest(v):
    mx = v.max()
    return int(torch.nonzero(v == mx)[0, 0])


def margin(v):
    top = torch.topk(v, 2).values
    return float(top[0] - top[1])


def force(v, forced):
    """transformers' ForcedEOSTokenLogitsProcessor at the last step: every id but `forced` at -inf."""
    f = torch.full_like(v, -math.inf)
    f[forced] = v[forced]
    return f


def greedy(next_logits, max_new, eos, forced=None):
    out, m = [], math.inf
    for step in range(max_new):
        v = next_logits(out)
        if forced is not None and step == max_new - 1:
            v = force(v, forced)
        m = min(m, margin(v))
        tok = argmax_lowest(v)
        out.append(tok)
        if tok == eos:
            break
    return out, m


def beam_search(next_logits, K, alpha, n_best, max_new, eos, forced=None):
    """tests/make_fixtures.py's beam_search, rule for rule; next_logits(hist) = logits after start + hist.
    forced: at the last step every id but this one at -inf, after the log-softmax (transformers' order).

    Also returns the smallest score gap among the candidates each step consumed (+1), a robustness measure."""
    lp = lambda n: ((5.0 + n) / 6.0) ** alpha
    beams = [([], 0.0)]  # (generated tokens, score), in beam-slot order
    finished = []
    min_gap = math.inf
    for step in range(max_new):
        cands = []
        for k, (hist, score) in enumerate(beams):
            logp = torch.log_softmax(next_logits(hist), dim=-1)
            if forced is not None and step == max_new - 1:
                logp = force(logp, forced)
            order = sorted(range(logp.shape[0]), key=lambda v: (-float(logp[v]), v))[: K + 1]
            for j, v in enumerate(order):
                cands.append((score + float(logp[v]), k, j, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        chosen = []
        used = 0
        for score, k, j, v in cands:
            if len(chosen) == K:
                break
            used += 1
            if v == eos:
                toks = beams[k][0] + [v]
                finished.append((toks, score / lp(len(toks))))
            else:
                chosen.append((beams[k][0] + [v], score))
        look = cands[: used + 1]
        for a, b in zip(look, look[1:]):
            min_gap = min(min_gap, a[0] - b[0])
        beams = chosen
        if len(finished) >= K or not beams:
            break
        if step == max_new - 1:
            finished += [(h, s / lp(len(h))) for h, s in beams]
    finished.sort(key=lambda f: -f[1])  # stable: ties keep their order
    fs = [s for _, s in finished[: n_best + 1]]
    for a, b in zip(fs, fs[1:]):
        min_gap = min(min_gap, a - b)
    return finished[:n_best], min_gap


# ----------------------------------------------------------------------------------------------------------
# Fixtures


def rounded(t):
    return [float("%.8g" % x) for x in t.flatten().tolist()]


class Rand:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def seq(self, n, lo, hi):
        """n ids in [lo, hi)."""
        return [int(x) for x in torch.randint(lo, hi, (n,), generator=self.g)]


def gelu_check(c_act, run):
    other = "gelu" if c_act == "gelu_new" else "gelu_new"
    a, b = run(None), run(other)
    a, b = torch.cat([x.flatten() for x in a]), torch.cat([x.flatten() for x in b])
    return {"other": other, "max_abs_diff": float("%.6g" % float((a - b).abs().max())),
            "rel_l2_diff": float("%.6g" % float((a - b).norm() / a.norm()))}


def decode_goldens(golden, step_logits, eos, make_src, probe, forced=None):
    """Greedy and beam for `probe` (reaches eos) and two more sources with good margins; `forced`: the
    checkpoint's forced_eos_token_id (ends every hypothesis at the length limit)."""
    srcs = [probe]
    tries = 0
    while len(srcs) < 3:
        tries += 1
        assert tries < 200
        src = make_src([1, 1, 9][len(srcs)])
        srcs.append(src)
        toks, m = greedy(lambda h: step_logits(src, h), 10, eos, forced)
        _, gap = beam_search(lambda h: step_logits(src, h), 3, 0.6, 2, 10, eos, forced)
        if m < 2e-3 or gap < 1e-4:
            srcs.pop()
    for src in srcs:
        toks, m = greedy(lambda h: step_logits(src, h), 10, eos, forced)
        assert m >= 2e-3, m
        golden["greedy"].append({"src": src, "max_new_tokens": 10, "tokens": toks, "min_margin": float("%.6g" % m)})
        hyps, gap = beam_search(lambda h: step_logits(src, h), 3, 0.6, 2, 10, eos, forced)
        assert gap >= 1e-4, gap
        golden["beam"].append({"src": src, "max_new_tokens": 10, "beam": 3, "length_penalty": 0.6, "n_best": 2,
                               "hyps": [h for h, _ in hyps], "scores": [s for _, s in hyps],
                               "min_gap": float("%.6g" % gap)})
    assert any(t[-1] == eos for t in (g["tokens"] for g in golden["greedy"])), "no greedy decode reaches eos"


def pick_eos(W, step_logits, eos, specials, make_src, swap, relabel):
    """Relabel a token the model emits as eos, so that decodes end at eos after a few steps.

    The model is equivariant under exchanging two token ids in every vocabulary-indexed tensor: greedy from a
    probe source emits e at step 3 (or 2, 4, 5); e and eos exchange ids. The relabelled probe then reaches eos
    at that step (gpt2 always; t5/marian whose sources end with eos only when a source is found that still
    does). Returns a source whose greedy decode reaches eos after >= 3 steps with clear margins."""
    def good(src):
        toks, m = greedy(lambda h: step_logits(src, h), 10, eos)
        if toks[-1] != eos or len(toks) < 3 or m < 2e-3:
            return False
        _, gap = beam_search(lambda h: step_logits(src, h), 3, 0.6, 2, 10, eos)
        return gap >= 1e-4

    for attempt in range(20):
        probe = make_src()
        toks, _ = greedy(lambda h: step_logits(probe, h), 8, -1)
        for s in (3, 2, 4, 5):
            e = toks[s]
            if e in specials or e in toks[:s]:
                continue
            swap(W, e, eos)
            cands = [relabel(probe, e, eos)] if relabel else []
            cands += [make_src() for _ in range(40)]
            for src in cands:
                if good(src):
                    return src
            swap(W, e, eos)  # undo
    raise AssertionError("no source reaches eos")


def build_gpt2(name, c, dtype, prefix, old_buffers, shards, tokenizer_json, seed):
    V, P = c["vocab_size"], c["n_positions"]
    names = gpt2_names(c, prefix)
    W = init_weights(names, c, dtype, seed, "gpt2")
    eos = c["eos_token_id"]
    step = lambda src, hist: gpt2_forward(W, c, prefix, [src + hist])[0][-1]
    R = Rand(seed + 1)
    relabel = lambda src, a, b: [b if x == a else a if x == b else x for x in src]
    probe = pick_eos(W, step, eos, {eos}, lambda: R.seq(6, 0, V - 1), swap_vocab, relabel)
    golden = {"special_ids": {"bos": c["bos_token_id"], "eos": eos}, "logits": [], "greedy": [], "beam": []}
    batches = [[R.seq(7, 0, V - 1)], [R.seq(1, 0, V - 1)], [R.seq(12, 0, V - 1)],
               [R.seq(n, 0, V - 1) for n in (7, 3, 1)], [R.seq(n, 0, V - 1) for n in (P, 2)]]
    for srcs in batches:
        out = gpt2_forward(W, c, prefix, srcs)
        golden["logits"].append({"src": srcs, "tgt": [], "width": V, "logits": [rounded(o) for o in out]})
    decode_goldens(golden, step, eos, lambda n: R.seq(n, 0, V - 1), probe)
    gc = gelu_check(c["activation_function"],
                    lambda a: [o for srcs in batches for o in gpt2_forward(W, c, prefix, srcs, a)])
    assert gc["max_abs_diff"] > 1e-3 and gc["rel_l2_diff"] > 1e-3, gc
    golden["gelu_check"] = gc
    # Files
    files = []
    for n, shape, kind in names:
        if kind == "tied":
            continue
        if kind == "buffer":
            if n.endswith("attn.bias"):
                if old_buffers == "bool":
                    files.append((n, "BOOL", torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P)))
                elif old_buffers == "float":
                    files.append((n, dtype, torch.tril(torch.ones(P, P)).view(1, 1, P, P)))
            elif n.endswith("masked_bias") and old_buffers == "bool":
                files.append((n, "F32", torch.tensor(-1e4)))
            continue
        files.append((n, dtype, W[n]))
    return golden, files, lambda d: write_gpt2_tokenizer(d, V, tokenizer_json), shards


LLAMA_TOKENIZER_TEXTS = [
    "the quick brown fox jumps over the lazy dog.", "", " ", "  two  spaces", "Hello\nworld\n\n", "tabs\tand\ttabs",
    "café naïve résumé", "漢字とかな", "emoji 🙂 and 🚀!", "numbers 1234567 and 3.14159", "MiXeD CaSe", "ünïcödé",
    "a</s>b", "<s>start", "x<unk>y", "\u00a0non-breaking", "don't won't I'm",
]


def chat_template(name):
    """The real chat_template string of that family's instruct checkpoints (tests/fixtures/chat/)."""
    with open(os.path.join(HERE, "fixtures", "chat", name + ".jinja"), encoding="utf-8") as f:
        return f.read()


def write_llama_tokenizer(d, V):
    """Llama 2's / Mistral's tokenizer.model: SentencePiece BPE with byte_fallback (unk 0, bos 1, eos 2), and the
    ids LlamaTokenizer gives (bos + SentencePiece's own encoding, the special tokens' spellings matched whole
    first, each stretch between them encoded on its own: legacy=True)."""
    import sentencepiece as spm
    data, pieces = train_spm(ENGLISH, V, model_type="bpe", byte_fallback=True, unk_id=0, bos_id=1, eos_id=2,
                             pad_id=-1)
    assert pieces[:3] == ["<unk>", "<s>", "</s>"], pieces[:3]
    with open(os.path.join(d, "tokenizer.model"), "wb") as f:
        f.write(data)
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                "chat_template": chat_template("mistral"), "legacy": True, "model_max_length": 1000000000000000019884624838656, "pad_token": None,
                "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>"})
    sp = spm.SentencePieceProcessor(model_proto=data)
    cases = []
    for text in LLAMA_TOKENIZER_TEXTS:
        ids = [1]
        for part in re.split(r"(<s>|</s>|<unk>)", text):
            if part in ("<s>", "</s>", "<unk>"):
                ids.append({"<s>": 1, "</s>": 2, "<unk>": 0}[part])
            elif part:
                ids += sp.encode(part)
        back = sp.decode([i for i in ids if i not in (1, 2)])
        cases.append({"text": text, "ids": ids, "decoded": back})
    return cases


def build_llama(name, c, dtype, long_len, seed, tokenizer=False, tokenizer_json=None):
    """Llama, Mistral and Qwen2 decoders: logits (one batch with a sequence of long_len positions), greedy and
    beam goldens like GPT-2's, and the rotary frequencies transformers computes. tokenizer: write Llama 2's
    kind of tokenizer.model; tokenizer_json: copy tests/fixtures/tokenizers/gpt2/tokenizer_<this>.json (Llama 3's
    or Qwen2's form: byte-level tokens, then 3 special ones with the last ids; Qwen2's first, <|endoftext|>, is
    the vocabulary's own) as tokenizer.json."""
    V = c["vocab_size"]
    hi = V - 3 if tokenizer_json else V  # (random inputs avoid the special tokens)
    names = llama_names(c)
    W = init_weights(names, c, dtype, seed, "llama")
    eos = c["eos_token_id"][0] if isinstance(c["eos_token_id"], list) else c["eos_token_id"]
    bos = c.get("bos_token_id")
    step = lambda src, hist: llama_forward(W, c, [src + hist])[0][-1]
    R = Rand(seed + 1)
    lo = 3  # ids 0-2 (Llama's unk, bos, eos) stay out of random inputs
    relabel = lambda src, a, b: [b if x == a else a if x == b else x for x in src]
    probe = pick_eos(W, step, eos, {eos, bos}, lambda: R.seq(6, lo, hi), swap_vocab, relabel)
    golden = {"special_ids": {"bos": bos, "eos": eos}, "logits": [], "greedy": [], "beam": [],
              "rope_inv_freq": [float(x) for x in rope_inv_freq(c).tolist()]}
    batches = [[R.seq(7, lo, hi)], [R.seq(1, lo, hi)], [R.seq(12, lo, hi)],
               [R.seq(n, lo, hi) for n in (7, 3, 1)], [R.seq(n, lo, hi) for n in (long_len, 2)]]
    for srcs in batches:
        out = llama_forward(W, c, srcs)
        golden["logits"].append({"src": srcs, "tgt": [], "width": V, "logits": [rounded(o) for o in out]})
    decode_goldens(golden, step, eos, lambda n: R.seq(n, lo, hi), probe)
    files = [(n, dtype, W[n]) for n, shape, kind in names if kind != "tied"]

    def write_tokenizer(d):
        if tokenizer_json:
            shutil.copy(os.path.join(HERE, "fixtures", "tokenizers", "gpt2", "tokenizer_%s.json" % tokenizer_json),
                        os.path.join(d, "tokenizer.json"))
            specials = ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"} if tokenizer_json == "llama3"
                        else {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
            write_json(os.path.join(d, "tokenizer_config.json"),
                       dict(specials, chat_template=chat_template(tokenizer_json), model_max_length=131072,
                            tokenizer_class="PreTrainedTokenizerFast"))
        return {"tokenizer": write_llama_tokenizer(d, V)} if tokenizer else None

    return golden, files, write_tokenizer, 1


def bert_inputs(R, V, tok, lens, with_mask):
    lo = len(BERT_SPECIAL)
    seqs = []
    for i, n in enumerate(lens):
        if n == 1:
            seqs.append([tok["[CLS]"]])
            continue
        mid = R.seq(n - 2, lo, V)
        if with_mask and n > 3:
            mid[len(mid) // 2] = tok["[MASK]"]
        seqs.append([tok["[CLS]"]] + mid + [tok["[SEP]"]])
    return seqs


def build_bert(name, c, dtype, kind, position_ids, lower, seed):
    V, P = c["vocab_size"], c["max_position_embeddings"]
    names = bert_names(c, kind)
    W = init_weights(names, c, dtype, seed, "bert")
    p = "" if kind == "base" else "bert."
    R = Rand(seed + 1)
    tok = {t: i for i, t in enumerate(BERT_SPECIAL)}
    golden = {"special_ids": {"pad": tok["[PAD]"], "unk": tok["[UNK]"], "cls": tok["[CLS]"], "sep": tok["[SEP]"],
                              "mask": tok["[MASK]"]}}
    batches = [bert_inputs(R, V, tok, [9], True), bert_inputs(R, V, tok, [1], True),
               bert_inputs(R, V, tok, [9, 4, 12], True), bert_inputs(R, V, tok, [P, 3], True)]
    if kind == "cls":
        # Centre the classifier on these inputs, so that the predicted labels differ between sequences.
        pooled = torch.stack([x for srcs in batches for x in bert_forward(W, c, p, srcs)["pooled"]])
        centre = -(pooled @ W["classifier.weight"].t()).mean(0)
        W["classifier.bias"] = round_to((centre + 0.1 * W["classifier.bias"]).float(), dtype)
    golden["hidden"] = []
    if kind == "pretraining":
        golden["logits"] = []
    if kind == "cls":
        golden["class_logits"] = []
    for srcs in batches:
        out = bert_forward(W, c, p, srcs)
        mean = [h.mean(0) for h in out["hidden"]]
        e = {"src": srcs, "last_hidden_state": [rounded(h) for h in out["hidden"]],
             "cls": [rounded(h[0]) for h in out["hidden"]], "mean": [rounded(m) for m in mean],
             "mean_l2": [rounded(m / m.norm()) for m in mean]}
        if "pooled" in out:
            e["pooler"] = [rounded(x) for x in out["pooled"]]
        golden["hidden"].append(e)
        if "mlm" in out:
            golden["logits"].append({"src": srcs, "tgt": [], "width": V, "logits": [rounded(o) for o in out["mlm"]]})
        if "cls" in out:
            golden["class_logits"].append({"src": srcs, "logits": [rounded(x) for x in out["cls"]],
                                           "labels": [c["id2label"][str(argmax_lowest(x))] for x in out["cls"]]})
    if kind == "cls":
        labels = {l for e in golden["class_logits"] for l in e["labels"]}
        assert len(labels) >= 2, labels
    key = "mlm" if kind == "pretraining" else "hidden"
    gc = gelu_check(c["hidden_act"], lambda a: [o for srcs in batches for o in bert_forward(W, c, p, srcs, a)[key]])
    assert gc["max_abs_diff"] > 1e-3 and gc["rel_l2_diff"] > 1e-3, gc
    golden["gelu_check"] = gc
    files = []
    for n, shape, k in names:
        if k == "tied":
            continue
        if k == "buffer":
            if position_ids:
                files.append((n, "I64", torch.arange(P).view(1, P)))
            continue
        files.append((n, dtype, W[n]))
    return golden, files, lambda d: write_bert_tokenizer(d, V, lower), 1


def enc_dec_goldens(golden, fwd, c, R, V, src_range, start, eos, specials, W, swap, banned=()):
    """Logits for padded batches (sources end with eos, targets start with the decoder start), greedy, beam.
    `banned`: ids generation never picks (Marian's pad: transformers sets their logits to -inf while
    generating); the logits themselves are unchanged."""
    def step(src, hist):
        out = fwd([src], [[start] + hist])[0][-1].clone()
        for b in banned:
            out[b] = -float("inf")
        return out
    lo, hi = src_range
    tgt = lambda n: [start] + R.seq(n - 1, lo, hi)
    src = lambda n: R.seq(n - 1, lo, hi) + [eos] if n > 1 else [eos]
    probe = pick_eos(W, step, eos, specials, lambda: src(7), swap, None)
    batches = [([src(7)], [tgt(5)]), ([src(1)], [tgt(1)]), ([src(13)], [tgt(12)]),
               ([src(n) for n in (7, 3, 1)], [tgt(n) for n in (4, 6, 2)]),
               ([src(n) for n in (c.get("max_position_embeddings", 24), 2)], [tgt(n) for n in (3, 10)])]
    for srcs, tgts in batches:
        out = fwd(srcs, tgts)
        golden["logits"].append({"src": srcs, "tgt": tgts, "width": V, "logits": [rounded(o) for o in out]})
    decode_goldens(golden, step, eos, src, probe, c.get("forced_eos_token_id"))


def build_t5(name, c, dtype, old_unused, seed):
    V = c["vocab_size"]
    names = t5_names(c, old_unused)
    W = init_weights(names, c, dtype, seed, "t5")
    extra = 5
    pad, eos, unk = 0, 1, 2
    R = Rand(seed + 1)
    golden = {"special_ids": {"pad": pad, "eos": eos, "unk": unk, "decoder_start": c["decoder_start_token_id"]},
              "logits": [], "greedy": [], "beam": []}
    fwd = lambda s, t: t5_forward(W, c, s, t)
    enc_dec_goldens(golden, fwd, c, R, V, (3, V - extra), c["decoder_start_token_id"], eos,
                    set(range(3)) | set(range(V - extra, V)), W, swap_vocab)
    rels = list(range(-40, 41)) + [s * d for d in (48, 63, 64, 65, 100, 127, 128, 129, 200, 1000) for s in (-1, 1)]
    rels = sorted(set(rels))
    golden["t5_buckets"] = []
    for nb, md in sorted({(32, 128), (c["relative_attention_num_buckets"], c["relative_attention_max_distance"])}):
        for bidir in (True, False):
            b = t5_bucket(rels, bidir, nb, md).tolist()
            differs = [r for r, x in zip(rels, b) if t5_bucket_f64(r, bidir, nb, md) != x]
            golden["t5_buckets"].append({"bidirectional": bidir, "num_buckets": nb, "max_distance": md,
                                         "relative_position": rels, "bucket": b, "float64_differs": differs})
    files = [(n, dtype, W[n]) for n, shape, k in names if k != "tied"]
    return golden, files, lambda d: write_t5_tokenizer(d, V, extra), 1


def build_marian(name, c, dtype, with_positions, tok_files, seed):
    V, P, D = c["vocab_size"], c["max_position_embeddings"], c["d_model"]
    names = marian_names(c, with_positions)
    W = init_weights(names, c, dtype, seed, "marian")
    pad, eos, unk = c["pad_token_id"], c["eos_token_id"], 1
    R = Rand(seed + 1)
    golden = {"special_ids": {"pad": pad, "eos": eos, "unk": unk, "decoder_start": c["decoder_start_token_id"]},
              "logits": [], "greedy": [], "beam": []}
    fwd = lambda s, t: marian_forward(W, c, s, t)
    enc_dec_goldens(golden, fwd, c, R, V, (2, V - 1), c["decoder_start_token_id"], eos, {0, 1, V - 1}, W,
                    swap_vocab, banned=(pad,))
    golden["marian_positions"] = []
    for dim in sorted({D, 512}):
        t = marian_table(max(P, 512), dim)
        rows = [0, 1, 2, 7, P - 1, 511]
        cols = sorted({0, 1, 2, dim // 2 - 1, dim // 2, dim // 2 + 1, dim - 1})
        golden["marian_positions"].append({"d_model": dim,
                                           "entries": [[r, k, float(t[r, k])] for r in rows for k in cols]})
    table = marian_table(P, D)
    files = []
    for n, shape, k in names:
        if k in ("tied", "dropped"):
            continue
        files.append((n, dtype, table if k == "positions" else W[n]))
    return golden, files, lambda d: write_marian_tokenizer(d, tok_files), 1


# ----------------------------------------------------------------------------------------------------------
# 2026 decoders (qwen3, gemma3_text, olmo2, gemma2, phi3, mixtral, qwen3_moe): one parameter list and one
# forward for all of them, written from each family's modeling_*.py. `wrong` names one detail done wrong on
# purpose (the "detail_checks" of golden.json: how far the logits move if an implementation gets it wrong).

SLIDING, FULL = "sliding_attention", "full_attention"
ROUTER_MARGIN = [math.inf]  # smallest gap between the k-th and (k+1)-th router probability (valid rows only)
ROUTER_RECORD = [False]


def is_gemma(c):
    return c["model_type"] in ("gemma2", "gemma3_text")


def is_moe_layer(c, i):
    """Mixtral: every layer. Qwen3-MoE (Qwen2MoeDecoderLayer's rule): sparse iff i not in mlp_only_layers and
    num_experts > 0 and (i + 1) % decoder_sparse_step == 0; otherwise a dense MLP of intermediate_size."""
    mt = c["model_type"]
    if mt == "mixtral":
        return True
    if mt == "qwen3_moe":
        return (i not in c.get("mlp_only_layers", [])) and c["num_experts"] > 0 and \
            (i + 1) % c.get("decoder_sparse_step", 1) == 0
    return False


def dec_head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def dec_names(c):
    """State-dict names (the per-expert names transformers 4 saves; qwen3_moe_v5 fuses them in dec_files)."""
    mt = c["model_type"]
    D, V, H, L = c["hidden_size"], c["vocab_size"], c["num_attention_heads"], c["num_hidden_layers"]
    Hkv = c.get("num_key_value_heads") or H
    dh = dec_head_dim(c)
    F = c["intermediate_size"]
    nk = "gemma_w" if is_gemma(c) else "rms_w"
    bias = c.get("attention_bias", False)
    out = [("model.embed_tokens.weight", [V, D], "emb")]
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        if mt == "phi3":
            out += [(a + "o_proj.weight", [D, H * dh], "lin"), (a + "qkv_proj.weight", [(H + 2 * Hkv) * dh, D], "lin")]
        else:
            for n, rows in (("q_proj", H * dh), ("k_proj", Hkv * dh), ("v_proj", Hkv * dh)):
                out.append((a + n + ".weight", [rows, D], "lin"))
                if bias:
                    out.append((a + n + ".bias", [rows], "bias"))
            out.append((a + "o_proj.weight", [D, H * dh], "lin"))
            if bias:
                out.append((a + "o_proj.bias", [D], "bias"))
            if mt in ("qwen3", "qwen3_moe", "gemma3_text"):  # per head: [head_dim]
                out += [(a + "q_norm.weight", [dh], nk), (a + "k_norm.weight", [dh], nk)]
            elif mt == "olmo2":  # over the whole projected width
                out += [(a + "q_norm.weight", [H * dh], nk), (a + "k_norm.weight", [Hkv * dh], nk)]
        if mt == "mixtral":
            E = c["num_local_experts"]
            m = p + "block_sparse_moe."
            out.append((m + "gate.weight", [E, D], "router"))
            for e in range(E):
                out += [(m + f"experts.{e}.w1.weight", [F, D], "lin_ff1"), (m + f"experts.{e}.w2.weight", [D, F], "lin_ff2"),
                        (m + f"experts.{e}.w3.weight", [F, D], "lin")]
        elif is_moe_layer(c, i):
            E, Fm = c["num_experts"], c["moe_intermediate_size"]
            out.append((p + "mlp.gate.weight", [E, D], "router"))
            for e in range(E):
                x = p + f"mlp.experts.{e}."
                out += [(x + "gate_proj.weight", [Fm, D], "lin_ff1"), (x + "up_proj.weight", [Fm, D], "lin"),
                        (x + "down_proj.weight", [D, Fm], "lin_ff2")]
        elif mt == "phi3":
            out += [(p + "mlp.gate_up_proj.weight", [2 * F, D], "lin_gate_up"), (p + "mlp.down_proj.weight", [D, F], "lin_ff2")]
        else:
            out += [(p + "mlp.gate_proj.weight", [F, D], "lin_ff1"), (p + "mlp.up_proj.weight", [F, D], "lin"),
                    (p + "mlp.down_proj.weight", [D, F], "lin_ff2")]
        if is_gemma(c):
            norms = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm")
        elif mt == "olmo2":
            norms = ("post_attention_layernorm", "post_feedforward_layernorm")
        else:
            norms = ("input_layernorm", "post_attention_layernorm")
        out += [(p + n + ".weight", [D], nk) for n in norms]
    out.append(("model.norm.weight", [D], nk))
    out.append(("lm_head.weight", [V, D], "tied" if c.get("tie_word_embeddings", is_gemma(c)) else "emb_head"))
    return out


def dec_files(names, W, dtype, fused_experts):
    """[(name, dtype, tensor)] as save_pretrained writes them. fused_experts (transformers 5's MoE layout):
    mlp.experts.gate_up_proj [E, 2*F, D] (rows 0..F-1 gate_proj, F..2F-1 up_proj, as the forward's chunk(2))
    and mlp.experts.down_proj [E, D, F] in place of the per-expert Linear weights."""
    files = [(n, dtype, W[n]) for n, shape, kind in names if kind != "tied"]
    if not fused_experts:
        return files
    out, done = [], set()
    for n, dt, t in files:
        m = re.match(r"(model\.layers\.\d+\.mlp\.experts\.)(\d+)\.", n)
        if not m:
            out.append((n, dt, t))
            continue
        pre = m.group(1)
        if pre in done:
            continue
        done.add(pre)
        E = 1 + max(int(re.match(re.escape(pre) + r"(\d+)\.", k).group(1)) for k in W if k.startswith(pre))
        gu = torch.stack([torch.cat([W[f"{pre}{e}.gate_proj.weight"], W[f"{pre}{e}.up_proj.weight"]], 0)
                          for e in range(E)])
        dn = torch.stack([W[f"{pre}{e}.down_proj.weight"] for e in range(E)])
        out += [(pre + "gate_up_proj", dt, gu), (pre + "down_proj", dt, dn)]
    return out


def dec_layer_type(c, i, wrong):
    mt = c["model_type"]
    if c.get("layer_types") is not None:
        return c["layer_types"][i]
    if mt == "gemma3_text":  # transformers 4.50: is_sliding = bool((layer_idx + 1) % sliding_window_pattern)
        pat = c["sliding_window_pattern"]
        if "pattern_i_mod" in wrong:
            return SLIDING if i % pat else FULL
        return SLIDING if (i + 1) % pat else FULL
    if mt == "gemma2":  # is_sliding = not bool(layer_idx % 2): layers 0, 2, 4, ... slide
        if "sliding_odd_layers" in wrong:
            return SLIDING if i % 2 else FULL
        return SLIDING if i % 2 == 0 else FULL
    if mt in ("phi3", "mixtral"):  # one sliding_window for every layer (null: none)
        return SLIDING if c.get("sliding_window") is not None else FULL
    if mt in ("qwen3", "qwen3_moe"):
        return SLIDING if c.get("use_sliding_window") and i >= c.get("max_window_layers", 0) else FULL
    return FULL


def dec_rope_params(c, lt, wrong):
    """(theta, scaling dict or None, rotary dims) for one layer type."""
    dh = dec_head_dim(c)
    mt = c["model_type"]
    if mt == "gemma3_text":
        if "rope_parameters" in c:  # transformers 5: one entry per layer type
            r = dict(c["rope_parameters"][lt])
            other = dict(c["rope_parameters"][FULL if lt == SLIDING else SLIDING])
        else:  # transformers 4: local layers rope_local_base_freq (default rope); global rope_theta + rope_scaling
            r = ({"rope_type": "default", "rope_theta": c["rope_local_base_freq"]} if lt == SLIDING else
                 dict(c.get("rope_scaling") or {"rope_type": "default"}, rope_theta=c["rope_theta"]))
            other = ({"rope_type": "default", "rope_theta": c["rope_local_base_freq"]} if lt == FULL else
                     dict(c.get("rope_scaling") or {"rope_type": "default"}, rope_theta=c["rope_theta"]))
        if lt == SLIDING and "local_rope_global_base" in wrong:
            r["rope_theta"] = other["rope_theta"]
        if lt == SLIDING and "rope_scaling_all_layers" in wrong:
            r = dict(other, rope_theta=r["rope_theta"])
        if lt == FULL and "no_rope_scaling" in wrong:
            r = {"rope_type": "default", "rope_theta": r["rope_theta"]}
        theta = r.pop("rope_theta")
        return theta, (r if r.get("rope_type", r.get("type")) != "default" else None), dh
    theta, sc = rope_parameters(c)
    rot = dh
    if mt == "phi3":
        rot = int(dh * c.get("partial_rotary_factor", 1.0))
        if "full_rotary" in wrong:
            rot, sc = dh, None
    return theta, sc, rot


def longrope_inv_freq(c, theta, sc, rot, seq_len):
    """_compute_longrope_parameters: ext = long_factor if seq_len > original_max_position_embeddings else
    short_factor; inv = 1 / (ext * theta ** (arange(0, rot, 2) / rot)) (float32). attention_factor: the config's,
    else sqrt(1 + ln(f) / ln(original)) with f = max_position_embeddings / original_max_position_embeddings
    (1.0 when f <= 1). transformers 4 reads original_max_position_embeddings from the config's top level."""
    orig = c.get("original_max_position_embeddings") or sc.get("original_max_position_embeddings")
    factor = c["max_position_embeddings"] / orig
    att = sc.get("attention_factor")
    if att is None:
        att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = torch.tensor(sc["long_factor"] if seq_len > orig else sc["short_factor"], dtype=torch.float32)
    shape = torch.arange(0, rot, 2, dtype=torch.int64).float() / rot
    return 1.0 / (ext * theta ** shape), att


def dec_inv_freq(c, lt, seq_len, wrong=()):
    """(inv_freq float32 [rot/2], attention factor, rot) as the family's rotary embedding computes them."""
    theta, sc, rot = dec_rope_params(c, lt, wrong)
    kind = (sc or {}).get("rope_type", (sc or {}).get("type", "default"))
    if kind == "longrope":
        if "no_attention_factor" in wrong or "long_factor" in wrong or "no_short_factor" in wrong:
            inv, att = longrope_inv_freq(c, theta, sc, rot, 10 ** 9 if "long_factor" in wrong else seq_len)
            if "no_attention_factor" in wrong:
                att = 1.0
            if "no_short_factor" in wrong:
                inv = rope_inv_freq({"hidden_size": 1, "num_attention_heads": 1, "head_dim": rot, "rope_theta": theta})
            return inv, att, rot
        inv, att = longrope_inv_freq(c, theta, sc, rot, seq_len)
        return inv, att, rot
    fake = {"hidden_size": 1, "num_attention_heads": 1, "head_dim": rot, "rope_theta": theta, "rope_scaling": sc}
    return rope_inv_freq(fake), 1.0, rot


def dec_cos_sin(c, lt, T, wrong):
    inv, att, rot = dec_inv_freq(c, lt, T, wrong)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    theta, sc, _ = dec_rope_params(c, lt, wrong)
    kind = (sc or {}).get("rope_type", (sc or {}).get("type", "default"))
    if kind == "longrope" and not (set(wrong) & {"long_factor", "no_short_factor", "long_whole_forward"}):
        # Per position: position p turns by the short factors while p + 1 <= original_max_position_embeddings,
        # by the long ones from there on (what transformers' cached generation gives each new token:
        # _longrope_frequency_update sees seq_len = p + 1; Halformer decides per row, so that a row's values do
        # not depend on the rest of its call). "long_whole_forward": transformers' rule for one whole forward
        # (every position long once the sequence passes the original length).
        orig = c.get("original_max_position_embeddings") or sc.get("original_max_position_embeddings")
        inv_short, _ = longrope_inv_freq(c, theta, sc, rot, 1)
        inv_long, _ = longrope_inv_freq(c, theta, sc, rot, 10 ** 9)
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        long_row = (torch.arange(T) + 1 > orig)[:, None]
        ang = torch.where(long_row, pos * inv_long[None, :], pos * inv_short[None, :])
    emb = torch.cat([ang, ang], dim=-1).to(F64)
    return emb.cos() * att, emb.sin() * att, rot


def apply_rope(x, cos, sin, rot):
    """Rotate the first rot dims of each head (rotate_half within them), pass the rest (Phi-3's partial rotary)."""
    r, rest = x[..., :rot], x[..., rot:]
    return torch.cat([r * cos + rotate_half(r) * sin, rest], dim=-1)


def gelu_tanh(x):
    return act_fn("gelu_new")(x)


def dec_forward(W, c, seqs, wrong=()):
    """Logits [T, V] per sequence (right-padded batch; causal, so valid rows are exact)."""
    mt = c["model_type"]
    gemma = is_gemma(c)
    D, H, L, V = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"], c["vocab_size"]
    Hkv = c.get("num_key_value_heads") or H
    dh = dec_head_dim(c)
    eps = c["rms_norm_eps"]
    aname = c.get("hidden_activation") or c.get("hidden_act", "silu") if gemma else c.get("hidden_act", "silu")
    if aname == "gelu_pytorch_tanh":
        aname = "gelu" if "gelu_erf" in wrong else "gelu_new"
    act = act_fn(aname)
    ids, lens = pad_batch(seqs, 0)
    B, T = ids.shape
    valid = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lens):
        valid[b, :n] = True

    def norm(h, w):
        if gemma:  # Gemma RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), in float32
            return rms_norm(h, w if "norm_w_not_1_plus" in wrong else 1.0 + w, eps)
        return rms_norm(h, w, eps)

    x = W["model.embed_tokens.weight"][ids]
    if gemma and "no_embed_scale" not in wrong:
        # Gemma*ScaledWordEmbedding / Gemma2Model: x * hidden_size**0.5, the factor a float32 scalar cast to the
        # weights' dtype (sqrt(48) = 6.9282 is 6.9375 in bfloat16)
        s = torch.tensor(D ** 0.5, dtype=torch.float32)
        x = x * (float(s) if "embed_scale_unrounded" in wrong else float(round_to(s, c["_dtype"])))
    masks, ropes = {}, {}
    for lt in (SLIDING, FULL):
        m = causal_mask(T)
        if lt == SLIDING and c.get("sliding_window") is not None:
            Wn = c["sliding_window"] + (1 if "window_plus_1" in wrong else -1 if "window_minus_1" in wrong else 0)
            if "no_window" not in wrong:  # masking_utils.sliding_window_overlay: kv_idx > q_idx - sliding_window
                m = m + torch.tril(torch.full((T, T), -math.inf, dtype=F64), diagonal=-Wn)[None, None]
        masks[lt] = m
        ropes[lt] = dec_cos_sin(c, lt, T, wrong)
    if gemma:
        scale = (dh if "scale_head_dim" in wrong else c["query_pre_attn_scalar"]) ** -0.5
    else:
        scale = ((D // H) if "scale_hidden_over_heads" in wrong else dh) ** -0.5
    cap = c.get("attn_logit_softcapping") if "no_attn_softcap" not in wrong else None
    g = lambda n: W.get(n)

    def head_norm(t, w):  # t [B, heads, T, dh]
        if "qk_norm_whole_width" in wrong:
            Bh, nh, Th, d = t.shape
            flat = t.transpose(1, 2).reshape(Bh, Th, nh * d)
            flat = norm(flat, w.repeat(nh))
            return flat.view(Bh, Th, nh, d).transpose(1, 2)
        return norm(t, w)

    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        lt = dec_layer_type(c, i, wrong)
        cos, sin, rot = ropes[lt]

        def attention(h):
            if mt == "phi3":
                qkv = linear(h, W[a + "qkv_proj.weight"])
                q, k, v = qkv.split([H * dh, Hkv * dh, Hkv * dh], dim=-1)
            else:
                q = linear(h, W[a + "q_proj.weight"], g(a + "q_proj.bias"))
                k = linear(h, W[a + "k_proj.weight"], g(a + "k_proj.bias"))
                v = linear(h, W[a + "v_proj.weight"], g(a + "v_proj.bias"))
            if mt == "olmo2" and "no_qk_norm" not in wrong:
                if "qk_norm_per_head" in wrong:
                    q = norm(q.view(B, T, H, dh), W[a + "q_norm.weight"].view(H, dh)).reshape(B, T, H * dh)
                    k = norm(k.view(B, T, Hkv, dh), W[a + "k_norm.weight"].view(Hkv, dh)).reshape(B, T, Hkv * dh)
                else:  # Olmo2Attention: q_norm(q_proj(x)) over all heads * head_dim, then split into heads
                    q = norm(q, W[a + "q_norm.weight"])
                    k = norm(k, W[a + "k_norm.weight"])
            q = q.view(B, T, H, dh).transpose(1, 2)
            k = k.view(B, T, Hkv, dh).transpose(1, 2)
            v = v.view(B, T, Hkv, dh).transpose(1, 2)
            per_head = mt in ("qwen3", "qwen3_moe", "gemma3_text") and "no_qk_norm" not in wrong
            if per_head and "qk_norm_after_rope" not in wrong:  # before rotary, on each head's head_dim
                q, k = head_norm(q, W[a + "q_norm.weight"]), head_norm(k, W[a + "k_norm.weight"])
            q, k = apply_rope(q, cos, sin, rot), apply_rope(k, cos, sin, rot)
            if per_head and "qk_norm_after_rope" in wrong:
                q, k = head_norm(q, W[a + "q_norm.weight"]), head_norm(k, W[a + "k_norm.weight"])
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
            s = (q @ k.transpose(-1, -2)) * scale
            if cap is not None and "softcap_after_mask" in wrong:
                s = torch.tanh((s + masks[lt]) / cap) * cap
            else:
                if cap is not None:  # Gemma2: tanh(scores / cap) * cap, before the mask
                    s = torch.tanh(s / cap) * cap
                s = s + masks[lt]
            o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * dh)
            return linear(o, W[a + "o_proj.weight"], g(a + "o_proj.bias"))

        def mlp(h):
            if mt == "phi3":
                gate, up = linear(h, W[p + "mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
                if "gate_up_swapped" in wrong:
                    gate, up = up, gate
                return linear(act(gate) * up, W[p + "mlp.down_proj.weight"])
            if not is_moe_layer(c, i):
                return linear(act(linear(h, W[p + "mlp.gate_proj.weight"])) * linear(h, W[p + "mlp.up_proj.weight"]),
                              W[p + "mlp.down_proj.weight"])
            if mt == "mixtral":
                m, E, k_top = p + "block_sparse_moe.", c["num_local_experts"], c["num_experts_per_tok"]
                renorm = "no_renorm" not in wrong  # MixtralSparseMoeBlock: always renormalizes the top-k
                ex = lambda e, t: linear(act(linear(t, W[f"{m}experts.{e}.w1.weight"])) *
                                         linear(t, W[f"{m}experts.{e}.w3.weight"]), W[f"{m}experts.{e}.w2.weight"])
            else:
                m, E, k_top = p + "mlp.", c["num_experts"], c["num_experts_per_tok"]
                renorm = c["norm_topk_prob"] != ("flip_norm_topk_prob" in wrong)
                ex = lambda e, t: linear(act(linear(t, W[f"{m}experts.{e}.gate_proj.weight"])) *
                                         linear(t, W[f"{m}experts.{e}.up_proj.weight"]),
                                         W[f"{m}experts.{e}.down_proj.weight"])
            flat = h.reshape(B * T, D)
            probs = torch.softmax(linear(flat, W[m + "gate.weight"]), dim=-1)  # softmax over all experts first
            top, sel = torch.topk(probs, k_top, dim=-1)
            if ROUTER_RECORD[0] and not wrong:
                srt = torch.sort(probs, dim=-1, descending=True).values
                gap = (srt[:, k_top - 1] - srt[:, k_top])[valid.reshape(-1)]
                if gap.numel():
                    ROUTER_MARGIN[0] = min(ROUTER_MARGIN[0], float(gap.min()))
            if renorm:
                top = top / top.sum(dim=-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e in range(E):
                wgt = (top * (sel == e)).sum(dim=-1)
                if bool((wgt != 0).any()):
                    out = out + wgt[:, None] * ex(e, flat)
            return out.view(B, T, D)

        if gemma:
            x = x + norm(attention(norm(x, W[p + "input_layernorm.weight"])), W[p + "post_attention_layernorm.weight"])
            x = x + norm(mlp(norm(x, W[p + "pre_feedforward_layernorm.weight"])), W[p + "post_feedforward_layernorm.weight"])
        elif mt == "olmo2":
            if "pre_norm" in wrong:
                x = x + attention(norm(x, W[p + "post_attention_layernorm.weight"]))
                x = x + mlp(norm(x, W[p + "post_feedforward_layernorm.weight"]))
            else:  # Olmo2DecoderLayer: the norms on the sub-layer outputs, before the residual add
                x = x + norm(attention(x), W[p + "post_attention_layernorm.weight"])
                x = x + norm(mlp(x), W[p + "post_feedforward_layernorm.weight"])
        else:
            x = x + attention(norm(x, W[p + "input_layernorm.weight"]))
            x = x + mlp(norm(x, W[p + "post_attention_layernorm.weight"]))
    x = norm(x, W["model.norm.weight"])
    tied = c.get("tie_word_embeddings", gemma)
    logits = x @ (W["model.embed_tokens.weight"] if tied else W["lm_head.weight"]).t()
    fcap = c.get("final_logit_softcapping")
    if fcap is not None and "no_final_softcap" not in wrong:
        logits = torch.tanh(logits / fcap) * fcap
    return [logits[b, :n] for b, n in enumerate(lens)]


def rel_max_diff(a, b):
    a, b = torch.cat([t.flatten() for t in a]), torch.cat([t.flatten() for t in b])
    return float((a - b).abs().max() / a.abs().max())


def cluster_routing(W, c, dtype, seed):
    """Give the tokens clusters the routers see, so that most top-k choices are clear: with a random router
    alone, 1% of the decisions have the k-th and (k+1)-th probabilities within 1e-3 of each other, and a
    float32 implementation could choose other experts than the float64 reference. Token v belongs to cluster
    v % n (n = experts / top_k); its embedding gets CLUSTER_EMB * u_cluster (u orthonormal), and each MoE
    router's rows of the k experts assigned to a cluster (a random assignment per layer) get CLUSTER_ROUTER *
    u_cluster. The context (the rest of the hidden state) still moves the choice now and then."""
    g = torch.Generator().manual_seed(seed + 2)
    D, V = c["hidden_size"], c["vocab_size"]
    E = c.get("num_local_experts") or c["num_experts"]
    k = c["num_experts_per_tok"]
    n = E // k
    u, _ = torch.linalg.qr(torch.randn(D, n, generator=g, dtype=F64))
    u = u.t()  # [n, D], orthonormal rows
    emb = W["model.embed_tokens.weight"]
    W["model.embed_tokens.weight"] = round_to((emb + CLUSTER_EMB * u[torch.arange(V) % n]).float(), dtype)
    for name in [x for x in W if x.endswith("gate.weight") and ("block_sparse_moe" in x or ".mlp.gate." in x)]:
        perm = torch.randperm(E, generator=g)
        r = W[name].clone()
        for j in range(n):
            r[perm[j * k:(j + 1) * k]] += CLUSTER_ROUTER * u[j]
        W[name] = round_to(r.float(), dtype)


def build_decoder(name, c, dtype, long_len, seed, details, fused_experts=False, first_attempt=0):
    """qwen3 / gemma3_text / olmo2 / gemma2 / phi3 / mixtral / qwen3_moe: goldens like build_llama's, plus
    "detail_checks" (each asserted > 1e-3) and, for MoE, "router_min_margin" (asserted >= 1e-3; otherwise the
    weights are drawn again from the next seed; first_attempt: where that search starts, the attempt it found
    when the fixture was made, so that a run need not repeat the search)."""
    V = c["vocab_size"]
    c = dict(c, _dtype=dtype)
    names = dec_names(c)
    moe = c["model_type"] in ("mixtral", "qwen3_moe")
    for attempt in range(first_attempt, first_attempt + 400):
        s = seed + 7919 * attempt
        ROUTER_MARGIN[0] = math.inf
        ROUTER_RECORD[0] = False
        W = init_weights(names, c, dtype, s, "decoder")
        if moe:
            cluster_routing(W, c, dtype, s)
        eos = c["eos_token_id"][0] if isinstance(c["eos_token_id"], list) else c["eos_token_id"]
        bos = c.get("bos_token_id")
        step = lambda src, hist: dec_forward(W, c, [src + hist])[0][-1]
        R = Rand(s + 1)
        lo, hi = 3, V - 3  # (the special ids sit at 0-2 or at the top)
        relabel = lambda src, a, b: [b if x == a else a if x == b else x for x in src]
        probe = pick_eos(W, step, eos, {eos, bos, c.get("pad_token_id")}, lambda: R.seq(6, lo, hi), swap_vocab,
                         relabel)
        ROUTER_RECORD[0] = True
        golden = {"special_ids": {"bos": bos, "eos": eos}, "logits": [], "greedy": [], "beam": []}
        if c.get("pad_token_id") is not None:
            golden["special_ids"]["pad"] = c["pad_token_id"]
        batches = [[R.seq(7, lo, hi)], [R.seq(1, lo, hi)], [R.seq(12, lo, hi)],
                   [R.seq(n, lo, hi) for n in (7, 3, 1)], [R.seq(n, lo, hi) for n in (long_len, 2)]]
        outs = []
        for srcs in batches:
            out = dec_forward(W, c, srcs)
            outs += out
            golden["logits"].append({"src": srcs, "tgt": [], "width": V, "logits": [rounded(o) for o in out]})
        decode_goldens(golden, step, eos, lambda n: R.seq(n, lo, hi), probe)
        ROUTER_RECORD[0] = False
        if moe and ROUTER_MARGIN[0] < 1e-3:
            print(f"  {name}: router margin {ROUTER_MARGIN[0]:.3g} < 1e-3 with seed {s}; drawing again")
            continue
        break
    else:
        raise AssertionError("no seed gives router margins >= 1e-3")
    act_saved = ACT_MAX[0]
    checks = {}
    for d in details:
        wrong_out = [o for srcs in batches for o in dec_forward(W, c, srcs, wrong=(d,))]
        checks[d] = float("%.4g" % rel_max_diff(outs, wrong_out))
        assert checks[d] > 1e-3, (name, d, checks[d])
    golden["detail_checks"] = checks
    if c["model_type"] == "gemma2":
        sc = {}
        for d, key in (("no_attn_softcap", "attn_logit_softcapping_rel_diff"),
                       ("no_final_softcap", "final_logit_softcapping_rel_diff")):
            sc[key] = float("%.4g" % rel_max_diff(outs, [o for srcs in batches for o in dec_forward(W, c, srcs, (d,))]))
            assert sc[key] > 1e-2, (name, sc)
        golden["softcap_check"] = sc
    ACT_MAX[0] = act_saved
    if moe:
        golden["router_min_margin"] = float("%.6g" % ROUTER_MARGIN[0])
        golden["router_seed_attempts"] = attempt + 1
    if c["model_type"] == "gemma3_text":
        golden["rope_inv_freq"] = [float(x) for x in dec_inv_freq(c, FULL, 1)[0].tolist()]
        golden["rope_local_inv_freq"] = [float(x) for x in dec_inv_freq(c, SLIDING, 1)[0].tolist()]
    else:
        inv, att, rot = dec_inv_freq(c, FULL, 1)
        golden["rope_inv_freq"] = [float(x) for x in inv.tolist()]
        if c["model_type"] == "phi3":
            golden["rope_rotary_dims"] = rot
            golden["rope_attention_factor"] = att
            golden["rope_long_inv_freq"] = [float(x) for x in dec_inv_freq(c, FULL, 10 ** 9)[0].tolist()]
    return golden, dec_files(names, W, dtype, fused_experts), lambda d: None, 1


# ----------------------------------------------------------------------------------------------------------
# Configs (transformers' field names; what to_json_string writes for each class and version)


def gpt2_config(**kw):
    c = dict(activation_function="gelu_new", attn_pdrop=0.1, embd_pdrop=0.1, initializer_range=0.02,
             layer_norm_epsilon=1e-05, model_type="gpt2", n_inner=None, n_layer=2, reorder_and_upcast_attn=False,
             resid_pdrop=0.1, scale_attn_by_inverse_layer_idx=False, scale_attn_weights=True,
             summary_activation=None, summary_first_dropout=0.1, summary_proj_to_labels=True,
             summary_type="cls_index", summary_use_proj=True, use_cache=True, architectures=["GPT2LMHeadModel"])
    c.update(kw)
    c["bos_token_id"] = c["eos_token_id"] = c["vocab_size"] - 1
    return c


def llama_config(model_type, **kw):
    """config.json as LlamaConfig / MistralConfig / Qwen2Config.to_json_string writes it (their own fields)."""
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[model_type]
    c = dict(architectures=[arch], model_type=model_type, attention_dropout=0.0, hidden_act="silu",
             initializer_range=0.02, num_hidden_layers=2, rms_norm_eps=1e-06, use_cache=True, bos_token_id=0,
             eos_token_id=1, tie_word_embeddings=False)
    if model_type == "llama":
        c.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    if model_type == "qwen2":
        c.update(use_sliding_window=False, sliding_window=4096, max_window_layers=2)
    c.update(kw)
    return c


def bert_config(**kw):
    c = dict(attention_probs_dropout_prob=0.1, classifier_dropout=None, hidden_act="gelu", hidden_dropout_prob=0.1,
             initializer_range=0.02, layer_norm_eps=1e-12, max_position_embeddings=24, model_type="bert",
             num_hidden_layers=2, pad_token_id=0, position_embedding_type="absolute", type_vocab_size=2,
             use_cache=True, vocab_size=67)
    c.update(kw)
    return c


def t5_config(**kw):
    c = dict(architectures=["T5ForConditionalGeneration"], decoder_start_token_id=0, dropout_rate=0.1, eos_token_id=1,
             initializer_factor=1.0, is_encoder_decoder=True, layer_norm_epsilon=1e-06, model_type="t5",
             pad_token_id=0, use_cache=True, num_layers=2)
    c.update(kw)
    return c


def t5_effective(cfg):
    """T5Config's defaults for what a minimal config leaves out."""
    c = dict(cfg)
    c.setdefault("relative_attention_max_distance", 128)
    c.setdefault("num_decoder_layers", c["num_layers"])
    c.setdefault("tie_word_embeddings", True)
    c.setdefault("feed_forward_proj", "relu")
    act = c["feed_forward_proj"].split("-")
    c.setdefault("dense_act_fn", "gelu_new" if c["feed_forward_proj"] == "gated-gelu" else act[-1])
    c.setdefault("is_gated_act", act[0] == "gated")
    return c


def marian_config(**kw):
    c = dict(activation_dropout=0.0, architectures=["MarianMTModel"], attention_dropout=0.0, classifier_dropout=0.0,
             decoder_layerdrop=0.0, decoder_layers=2, dropout=0.1, encoder_layerdrop=0.0, encoder_layers=2,
             init_std=0.02, is_encoder_decoder=True, max_position_embeddings=32, model_type="marian",
             num_hidden_layers=2, use_cache=True, eos_token_id=0, forced_eos_token_id=0)
    c.update(kw)
    V = c["vocab_size"]
    c["pad_token_id"] = c["decoder_start_token_id"] = V - 1
    c.setdefault("decoder_vocab_size", V)
    return c


def fixtures_2026():
    """Qwen3, Gemma 3 (text), OLMo 2, Gemma 2, Phi-3, Mixtral and Qwen3-MoE (the module docstring describes them)."""
    out = []
    c = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", attention_bias=False, attention_dropout=0.0,
             bos_token_id=298, eos_token_id=300, head_dim=16, hidden_act="silu", hidden_size=32,
             initializer_range=0.02, intermediate_size=64, max_position_embeddings=128, max_window_layers=2,
             num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2, rms_norm_eps=1e-06,
             rope_scaling=None, rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=True,
             torch_dtype="float32", transformers_version="4.51.0", use_cache=True, use_sliding_window=False,
             vocab_size=301)
    out.append(("qwen3", "qwen3", c, c, "F32",
                lambda c, s: build_decoder("qwen3", c, "F32", 40, s, ["qk_norm_whole_width", "qk_norm_after_rope",
                                                                     "no_qk_norm", "scale_hidden_over_heads"]), True))

    # Gemma 3 text, as transformers 4.50 writes Gemma3TextConfig (no tie_word_embeddings: true by default)
    c = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", attention_bias=False,
             attention_dropout=0.0, attn_logit_softcapping=None, bos_token_id=2, cache_implementation="hybrid",
             eos_token_id=1, final_logit_softcapping=None, head_dim=16, hidden_activation="gelu_pytorch_tanh",
             hidden_size=32, initializer_range=0.02, intermediate_size=48, max_position_embeddings=128,
             num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=2, pad_token_id=0,
             query_pre_attn_scalar=24, rms_norm_eps=1e-06, rope_local_base_freq=10000.0,
             rope_scaling={"factor": 2.0, "rope_type": "linear"}, rope_theta=1000000.0, sliding_window=5,
             sliding_window_pattern=3, torch_dtype="float32", transformers_version="4.50.0", use_cache=True,
             vocab_size=211)
    g3 = ["norm_w_not_1_plus", "no_embed_scale", "scale_head_dim", "window_plus_1", "window_minus_1",
          "local_rope_global_base", "rope_scaling_all_layers", "no_rope_scaling", "qk_norm_after_rope"]
    out.append(("gemma3_text", "gemma3_text", c, c, "F32",
                lambda c, s: build_decoder("gemma3_text", c, "F32", 32, s, g3 + ["pattern_i_mod"]), True))
    # Gemma 3 text as transformers 5 writes it: layer_types (here a list no sliding_window_pattern gives) and
    # rope_parameters per layer type; "dtype" for torch_dtype; BF16 with sqrt(48) = 6.9282 -> 6.9375.
    c = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", attention_bias=False,
             attention_dropout=0.0, attn_logit_softcapping=None, bos_token_id=2, dtype="bfloat16", eos_token_id=1,
             final_logit_softcapping=None, head_dim=16, hidden_activation="gelu_pytorch_tanh", hidden_size=48,
             initializer_range=0.02, intermediate_size=64,
             layer_types=[SLIDING, FULL, FULL, SLIDING], max_position_embeddings=128,
             num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=1, pad_token_id=0,
             query_pre_attn_scalar=32, rms_norm_eps=1e-06,
             rope_parameters={FULL: {"factor": 4.0, "rope_theta": 1000000.0, "rope_type": "linear"},
                              SLIDING: {"rope_theta": 10000.0, "rope_type": "default"}},
             sliding_window=6, transformers_version="5.0.0", use_bidirectional_attention=False, use_cache=True,
             vocab_size=199)
    out.append(("gemma3_text_v5", "gemma3_text", c, c, "BF16",
                lambda c, s: build_decoder("gemma3_text_v5", c, "BF16", 32, s,
                                           g3 + ["embed_scale_unrounded"]), True))

    # OLMo 2 as transformers 4.47 writes Olmo2Config (no bos_token_id: null is the default)
    c = dict(architectures=["Olmo2ForCausalLM"], model_type="olmo2", attention_bias=False, attention_dropout=0.0,
             eos_token_id=262, hidden_act="silu", hidden_size=32, initializer_range=0.02, intermediate_size=64,
             max_position_embeddings=128, num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2,
             pad_token_id=261, rms_norm_eps=1e-06, rope_scaling=None, rope_theta=500000.0, tie_word_embeddings=False,
             torch_dtype="float32", transformers_version="4.47.0", use_cache=True, vocab_size=263)
    out.append(("olmo2", "olmo2", c, c, "F32",
                lambda c, s: build_decoder("olmo2", c, "F32", 32, s, ["qk_norm_per_head", "pre_norm", "no_qk_norm"]),
                True))

    # Gemma 2 as transformers 4.42 writes Gemma2Config (hidden_act and hidden_activation both; no
    # tie_word_embeddings)
    c = dict(architectures=["Gemma2ForCausalLM"], model_type="gemma2", attention_bias=False, attention_dropout=0.0,
             attn_logit_softcapping=GEMMA2_CAPS[0], bos_token_id=2, cache_implementation="hybrid", eos_token_id=1,
             final_logit_softcapping=GEMMA2_CAPS[1], head_dim=16, hidden_act="gelu_pytorch_tanh",
             hidden_activation="gelu_pytorch_tanh", hidden_size=32, initializer_range=0.02, intermediate_size=48,
             max_position_embeddings=128, num_attention_heads=4, num_hidden_layers=4, num_key_value_heads=2,
             pad_token_id=0, query_pre_attn_scalar=24, rms_norm_eps=1e-06, rope_theta=10000.0, sliding_window=5,
             torch_dtype="float32", transformers_version="4.42.4", use_cache=True, vocab_size=211)
    out.append(("gemma2", "gemma2", c, c, "F32",
                lambda c, s: build_decoder("gemma2", c, "F32", 32, s,
                                           ["no_attn_softcap", "no_final_softcap", "softcap_after_mask",
                                            "sliding_odd_layers", "window_plus_1", "window_minus_1",
                                            "norm_w_not_1_plus", "scale_head_dim", "no_embed_scale"]), True))

    # Phi-3 as transformers 4.49 writes Phi3Config: partial rotary 0.5 (6 of 12 dims), longrope (short factors
    # up to original_max_position_embeddings 32 positions, long ones past them, attention factor
    # sqrt(1 + ln(128/32) / ln(32))), a sliding window of 7. One logits batch holds 44 tokens: past 32.
    c = dict(architectures=["Phi3ForCausalLM"], model_type="phi3", attention_dropout=0.0, bos_token_id=1,
             embd_pdrop=0.0, eos_token_id=202, hidden_act="silu", hidden_size=48, initializer_range=0.02,
             intermediate_size=64, max_position_embeddings=128, num_attention_heads=4, num_hidden_layers=2,
             num_key_value_heads=2, original_max_position_embeddings=32, pad_token_id=202,
             partial_rotary_factor=0.5, resid_pdrop=0.0, rms_norm_eps=1e-05,
             rope_scaling={"long_factor": [1.0, 4.0, 12.0], "short_factor": [1.0, 1.5, 2.5], "type": "longrope"},
             rope_theta=10000.0, sliding_window=7, tie_word_embeddings=False, torch_dtype="float32",
             transformers_version="4.49.0", use_cache=True, vocab_size=203)
    out.append(("phi3", "phi3", c, c, "F32",
                lambda c, s: build_decoder("phi3", c, "F32", 44, s,
                                           ["full_rotary", "no_attention_factor", "long_factor", "no_short_factor",
                                            "long_whole_forward", "gate_up_swapped", "no_window",
                                            "window_plus_1"]), True))

    # Mixtral as transformers 4.46 writes MixtralConfig: 8 experts, top 2, per-expert w1/w2/w3
    c = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", attention_dropout=0.0, bos_token_id=1,
             eos_token_id=2, hidden_act="silu", hidden_size=32, initializer_range=0.02, intermediate_size=24,
             max_position_embeddings=128, num_attention_heads=4, num_experts_per_tok=2, num_hidden_layers=2,
             num_key_value_heads=2, num_local_experts=8, output_router_logits=False, rms_norm_eps=1e-05,
             rope_theta=1000000.0, router_aux_loss_coef=0.02, router_jitter_noise=0.0, sliding_window=None,
             tie_word_embeddings=False, torch_dtype="float32", transformers_version="4.46.0", use_cache=True,
             vocab_size=157)
    out.append(("mixtral", "mixtral", c, c, "F32",
                lambda c, s: build_decoder("mixtral", c, "F32", 32, s, ["no_renorm"], first_attempt=42),
                True))

    # Qwen3-MoE as transformers 4.51 writes Qwen3MoeConfig: 4 experts, top 2, norm_topk_prob false, layer 1
    # dense (mlp_only_layers) with intermediate_size 48, experts of moe_intermediate_size 24
    c = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", attention_bias=False,
             attention_dropout=0.0, bos_token_id=160, decoder_sparse_step=1, eos_token_id=162, head_dim=16,
             hidden_act="silu", hidden_size=32, initializer_range=0.02, intermediate_size=48,
             max_position_embeddings=128, max_window_layers=3, mlp_only_layers=[1], moe_intermediate_size=24,
             norm_topk_prob=False, num_attention_heads=4, num_experts=4, num_experts_per_tok=2, num_hidden_layers=3,
             num_key_value_heads=2, output_router_logits=False, rms_norm_eps=1e-06, rope_scaling=None,
             rope_theta=1000000.0, router_aux_loss_coef=0.001, sliding_window=None, tie_word_embeddings=False,
             torch_dtype="float32", transformers_version="4.51.0", use_cache=True, use_sliding_window=False,
             vocab_size=163)
    out.append(("qwen3_moe", "qwen3_moe", c, c, "F32",
                lambda c, s: build_decoder("qwen3_moe", c, "F32", 32, s, ["flip_norm_topk_prob", "qk_norm_whole_width"]),
                True))
    # Qwen3-MoE as transformers 5 saves it: experts fused (mlp.experts.gate_up_proj [E, 2F, D], down_proj
    # [E, D, F]), rope_parameters, dtype; decoder_sparse_step 2 (layers 1 and 3 sparse, 0 and 2 dense),
    # norm_topk_prob true
    c = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", attention_bias=False,
             attention_dropout=0.0, bos_token_id=128, decoder_sparse_step=2, dtype="float32", eos_token_id=130,
             head_dim=16, hidden_act="silu", hidden_size=32, initializer_range=0.02, intermediate_size=48,
             max_position_embeddings=128, mlp_only_layers=[], moe_intermediate_size=24, norm_topk_prob=True,
             num_attention_heads=4, num_experts=4, num_experts_per_tok=2, num_hidden_layers=4,
             num_key_value_heads=2, output_router_logits=False, rms_norm_eps=1e-06,
             rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, router_aux_loss_coef=0.001,
             sliding_window=None, tie_word_embeddings=False, transformers_version="5.0.0", use_cache=True,
             use_sliding_window=False, vocab_size=131)
    out.append(("qwen3_moe_v5", "qwen3_moe", c, c, "F32",
                lambda c, s: build_decoder("qwen3_moe_v5", c, "F32", 32, s, ["flip_norm_topk_prob",
                                                                            "qk_norm_whole_width"], True, first_attempt=3),
                True))
    return out


def main():
    """Writes every fixture (the output directory made anew). `--only NAME...` (for working on some): builds
    just those, each with the seed it has in the full run, and leaves the other directories as they are."""
    import sys
    only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv else None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if only is None:
        if os.path.isdir(OUT):
            shutil.rmtree(OUT)
        os.makedirs(OUT)
    new, old = "4.36.2", "4.30.2"
    marian_tok = marian_vocab(48, 46)
    marian_tok2 = marian_vocab(42, 40)
    Vm, Vm2 = len(marian_tok[2]), len(marian_tok2[2])
    assert Vm % 8 and Vm2 % 8, (Vm, Vm2)

    fixtures = []  # (name, family, config as written, config with defaults, dtype, builder, generation_config)

    c = gpt2_config(n_embd=40, n_head=4, n_positions=32, vocab_size=61, torch_dtype="float32", transformers_version=old)
    fixtures.append(("gpt2_lm", "gpt2", c, c, "F32",
                     lambda c, s: build_gpt2("gpt2_lm", c, "F32", "transformer.", "bool", 1, False, s), True))
    c = gpt2_config(n_embd=48, n_head=6, n_inner=72, n_positions=32, vocab_size=75, activation_function="gelu",
                    torch_dtype="float16", transformers_version=new)
    fixtures.append(("gpt2_noprefix_f16_sharded", "gpt2", c, c, "F16",
                     lambda c, s: build_gpt2("gpt2_noprefix_f16_sharded", c, "F16", "", "float", 2, True, s), False))

    c = bert_config(architectures=["BertForMaskedLM"], hidden_size=40, num_attention_heads=4, intermediate_size=72,
                    torch_dtype="float32", transformers_version=old)
    fixtures.append(("bert_mlm", "bert", c, c, "F32",
                     lambda c, s: build_bert("bert_mlm", c, "F32", "pretraining", True, True, s), False))
    labels = {"0": "negative", "1": "neutral", "2": "positive"}
    c = bert_config(architectures=["BertForSequenceClassification"], hidden_size=48, num_attention_heads=6,
                    intermediate_size=80, hidden_act="gelu_new", id2label=labels,
                    label2id={v: int(k) for k, v in labels.items()}, problem_type="single_label_classification",
                    torch_dtype="float32", transformers_version=new)
    fixtures.append(("bert_cls", "bert", c, dict(c, num_labels=3), "F32",
                     lambda c, s: build_bert("bert_cls", c, "F32", "cls", False, False, s), False))
    c = bert_config(architectures=["BertModel"], hidden_size=32, num_attention_heads=4, intermediate_size=56,
                    torch_dtype="bfloat16", transformers_version=old)
    fixtures.append(("bert_base", "bert", c, c, "BF16",
                     lambda c, s: build_bert("bert_base", c, "BF16", "base", True, True, s), False))

    c = t5_config(d_model=40, d_kv=12, num_heads=4, d_ff=56, relative_attention_num_buckets=16, vocab_size=69,
                  n_positions=512, output_past=True, transformers_version=old)
    fixtures.append(("t5_v1_0", "t5", c, t5_effective(c), "BF16",
                     lambda c, s: build_t5("t5_v1_0", c, "BF16", True, s), True))
    c = t5_config(d_model=32, d_kv=12, num_heads=3, d_ff=40, num_decoder_layers=3, relative_attention_num_buckets=32,
                  relative_attention_max_distance=24, feed_forward_proj="gated-gelu", dense_act_fn="gelu_new",
                  is_gated_act=True, tie_word_embeddings=False, classifier_dropout=0.0, vocab_size=75,
                  torch_dtype="float32", transformers_version=new)
    fixtures.append(("t5_v1_1", "t5", c, t5_effective(c), "F32",
                     lambda c, s: build_t5("t5_v1_1", c, "F32", False, s), True))

    # T5 as transformers 5 saves a gated model (flan-t5): tie_word_embeddings true (only shared.weight in the
    # file) and scale_decoder_outputs false: the tied head without the d_model**-0.5 scale.
    c = t5_config(d_model=32, d_kv=8, num_heads=4, d_ff=48, relative_attention_num_buckets=32,
                  relative_attention_max_distance=24, feed_forward_proj="gated-gelu", dense_act_fn="gelu_new",
                  is_gated_act=True, tie_word_embeddings=True, scale_decoder_outputs=False, classifier_dropout=0.0,
                  vocab_size=71, torch_dtype="float32", transformers_version="5.0.0")
    fixtures_late = [("t5_v5_gated_tied", "t5", c, t5_effective(c), "F32",
                      lambda c, s: build_t5("t5_v5_gated_tied", c, "F32", False, s), True)]
    # Marian whose decoder has widths of its own (legal in MarianConfig): encoder 4 heads of 10, ffn 56;
    # decoder 5 heads of 8, ffn 72.
    c = marian_config(d_model=40, encoder_attention_heads=4, decoder_attention_heads=5, encoder_ffn_dim=56,
                      decoder_ffn_dim=72, activation_function="swish", scale_embedding=True, vocab_size=Vm,
                      share_encoder_decoder_embeddings=True, torch_dtype="float32", transformers_version=new)
    fixtures_late.append(("marian_widths", "marian", c, c, "F32",
                          lambda c, s: build_marian("marian_widths", c, "F32", False, marian_tok, s + 2), True))

    # (One width for both stacks, as every opus-mt checkpoint has; marian_widths below has two.)
    c = marian_config(d_model=40, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=56,
                      decoder_ffn_dim=56, activation_function="swish", scale_embedding=True, vocab_size=Vm,
                      share_encoder_decoder_embeddings=True, torch_dtype="float32", transformers_version=new)
    fixtures.append(("marian", "marian", c, c, "F32",
                     lambda c, s: build_marian("marian", c, "F32", False, marian_tok, s), True))
    c = marian_config(d_model=32, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
                      decoder_ffn_dim=48, activation_function="gelu", scale_embedding=False, vocab_size=Vm2,
                      add_bias_logits=False, add_final_layer_norm=False, normalize_before=False,
                      normalize_embedding=False, static_position_embeddings=True, bos_token_id=0,
                      transformers_version="4.22.0.dev0")
    c.pop("decoder_vocab_size")
    c.pop("classifier_dropout")
    fixtures.append(("marian_positions", "marian", c, c, "F32",
                     lambda c, s: build_marian("marian_positions", c, "F32", True, marian_tok2, s), False))

    # Today's decoders (issue 41). llama_gqa: 6 query heads over 2 key/value heads, linear rope scaling in
    # transformers 4's form ("type"), untied head. llama3_mqa: one key/value head, head_dim 16 != 32 / 4,
    # rope_theta 500000 and llama3 scaling (original context 64: its three frequency bands all occur; a
    # sequence of 80 positions), transformers 5's rope_parameters, attention and MLP biases, tied head, BF16.
    # mistral_window: 4 over 2 heads, sliding_window 6 (shorter than most prompts: prefill and decoding both mask), F16,
    # Llama 2's kind of tokenizer.model (SentencePiece BPE, byte_fallback) with the ids LlamaTokenizer gives. qwen2: Q/K/V biases only,
    # rope_theta 1e6, tied head, the unused sliding_window fields.
    c = llama_config("llama", hidden_size=48, num_attention_heads=6, num_key_value_heads=2, intermediate_size=72,
                     vocab_size=67, max_position_embeddings=64, rope_theta=10000.0,
                     rope_scaling={"type": "linear", "factor": 2.0}, torch_dtype="float32",
                     transformers_version=new)
    fixtures.append(("llama_gqa", "llama", c, c, "F32", lambda c, s: build_llama("llama_gqa", c, "F32", 40, s), True))
    c = llama_config("llama", hidden_size=32, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                     intermediate_size=56, vocab_size=297, max_position_embeddings=128, bos_token_id=294,
                     eos_token_id=295,
                     rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64},
                     attention_bias=True, mlp_bias=True, tie_word_embeddings=True, torch_dtype="bfloat16",
                     transformers_version="5.0.0")
    fixtures.append(("llama3_mqa", "llama", c, c, "BF16",
                     lambda c, s: build_llama("llama3_mqa", c, "BF16", 80, s, tokenizer_json="llama3"), True))
    c = llama_config("mistral", hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                     vocab_size=300, max_position_embeddings=64, rope_theta=10000.0, sliding_window=6, bos_token_id=1,
                     eos_token_id=2, torch_dtype="float16", transformers_version=new)
    fixtures.append(("mistral_window", "mistral", c, c, "F16",
                     lambda c, s: build_llama("mistral_window", c, "F16", 40, s, tokenizer=True), True))
    c = llama_config("qwen2", hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
                     vocab_size=296, max_position_embeddings=64, rope_theta=1000000.0, tie_word_embeddings=True,
                     bos_token_id=293, eos_token_id=295,
                     torch_dtype="float32", transformers_version=new)
    fixtures.append(("qwen2", "qwen2", c, c, "F32",
                     lambda c, s: build_llama("qwen2", c, "F32", 40, s, tokenizer_json="qwen2"), True))

    fixtures += fixtures_late  # (after the others: their seeds stay as they were)
    fixtures += fixtures_2026()  # (after those again)
    total = 0
    names = [f[0] for f in fixtures]
    assert only is None or all(n in names for n in only), only
    for k, (name, family, cfg, eff, dtype, build, gen_cfg) in enumerate(fixtures):
        if only is not None and name not in only:
            continue
        ACT_MAX[0] = 0.0
        with torch.no_grad():
            golden, files, write_tok, shards = build(eff, 1000 + 17 * k)
        golden = dict({"info": {"fixture": name, "family": family, "architecture": cfg["architectures"][0],
                                "dtype": dtype, "vocab_size": cfg["vocab_size"],
                                "act_input_max_abs": float("%.4g" % ACT_MAX[0])}}, **golden)
        d = os.path.join(OUT, name)
        if only is not None and os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        write_json(os.path.join(d, "config.json"), cfg)
        if gen_cfg:
            g = {"_from_model_config": True, "transformers_version": cfg["transformers_version"]}
            for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id",
                        "forced_eos_token_id"):
                if key in cfg:
                    g[key] = cfg[key]
            write_json(os.path.join(d, "generation_config.json"), g)
        save_weights(d, files, shards)
        extra = write_tok(d)  # (a dict of tokenizer goldens, or None)
        if extra:
            golden.update(extra)
        with open(os.path.join(d, "golden.json"), "w") as f:
            f.write(json.dumps(golden, separators=(",", ":")) + "\n")
        size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
        total += size
        n_params = sum(t.numel() for _, _, t in files)
        print(f"{name}: {n_params} stored values, {size // 1024} KiB, act |x| max {ACT_MAX[0]:.2f}, "
              f"gelu check {golden.get('gelu_check', {}).get('max_abs_diff', '-')}")
    print(f"total {total // 1024} KiB")


if __name__ == "__main__":
    main()

"""The Python module against PyTorch's golden outputs, against itself by a
second path, and its kernels against float64 numpy references.

Environment:
  HALFORMER_SOURCE_DIR  the source tree (tests/fixtures, models/en-de);
                        default: two levels above this file
  PYTHONPATH            must reach the built package (e.g. the build's
                        python/ directory, or /tmp/pybuild standalone)
"""
import functools
import json
import os
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import halformer
from halformer import kernels

SOURCE = Path(os.environ.get("HALFORMER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
FIXTURES = SOURCE / "tests" / "fixtures"
EN_DE = SOURCE / "models" / "en-de"

# tests/fixtures/<name>: small models PyTorch made, with golden.json
# (tests/make_fixtures.py): batched logits, greedy and beam outputs.
MODELS = ["ed_post_relu", "ed_pre_gelu", "ed_learned_tanh", "enc_head", "enc_hidden", "dec_pre_gelu",
          "dec_post_relu"]
GENERATORS = [m for m in MODELS if not m.startswith("enc")]


@functools.lru_cache(maxsize=None)
def model(name):
    return halformer.Model.load(str(FIXTURES / name))


@functools.lru_cache(maxsize=None)
def golden(name):
    return json.loads((FIXTURES / name / "golden.json").read_text())


@functools.lru_cache(maxsize=None)
def translator():
    return halformer.Model.load(str(EN_DE))


def rel_error(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return np.sqrt(np.sum((out - ref) ** 2) / np.sum(ref ** 2))


# ---- models ----

@pytest.mark.parametrize("name", MODELS)
def test_logits_match_pytorch(name):
    cases = golden(name)["logits"]
    assert len(cases) == 3
    for case in cases:
        out = model(name).logits(case["src"], case["tgt"])
        assert len(out) == len(case["logits"])
        for b, (got, ref) in enumerate(zip(out, case["logits"])):
            assert got.dtype == np.float32 and got.ndim == 2
            assert got.shape[1] == case["width"]
            assert got.size == len(ref), f"sequence {b}"
            assert rel_error(got.ravel(), ref) <= 1e-4, f"{name} sequence {b}"


@pytest.mark.parametrize("name", GENERATORS)
def test_greedy_matches_pytorch(name):
    cases = golden(name)["greedy"]
    m = model(name)
    for case in cases:
        hyps = m.generate([case["src"]], max_new_tokens=case["max_new_tokens"])
        assert len(hyps) == 1 and len(hyps[0]) == 1
        assert hyps[0][0].tokens == case["tokens"]
    # The same inputs as one padded batch.
    together = m.generate([c["src"] for c in cases], max_new_tokens=cases[0]["max_new_tokens"])
    assert [h[0].tokens for h in together] == [c["tokens"] for c in cases]


def greedy_by_logits(m, src, max_new_tokens):
    """Greedy decoding the slow way: the full teacher-forced forward pass per
    step and numpy's argmax (ties to the lowest id, as the runtime's)."""
    c = m.config
    out = []
    for _ in range(max_new_tokens):
        if c.architecture == halformer.Architecture.EncoderDecoder:
            rows = m.logits([src], [[c.bos_id] + out])[0]
        else:
            rows = m.logits([src + out])[0]
        out.append(int(np.argmax(rows[-1])))
        if out[-1] == c.eos_id:
            break
    return out


@pytest.mark.parametrize("name", GENERATORS)
def test_greedy_is_argmax_of_logits(name):
    m = model(name)
    rng = np.random.default_rng(3)
    vocab = m.src_vocab_size if m.architecture == "encoder-decoder" else m.tgt_vocab_size
    for length in (1, 4, 9):
        src = [int(t) for t in rng.integers(3, vocab, length)]
        expected = greedy_by_logits(m, src, 8)
        assert m.generate([src], max_new_tokens=8, beam=1)[0][0].tokens == expected


@pytest.mark.parametrize("name", GENERATORS)
def test_logprobs_are_the_teacher_forced_log_softmax(name):
    m = model(name)
    c = m.config
    src = [5, 6, 7]
    h = m.generate([src], max_new_tokens=6, return_logprobs=True, stop_at_eos=False)[0][0]
    assert len(h.log_probs) == len(h.tokens)
    for i, tok in enumerate(h.tokens):
        if c.architecture == halformer.Architecture.EncoderDecoder:
            row = m.logits([src], [[c.bos_id] + h.tokens[:i]])[0][-1].astype(np.float64)
        else:
            row = m.logits([src + h.tokens[:i]])[0][-1].astype(np.float64)
        ref = row[tok] - row.max() - np.log(np.exp(row - row.max()).sum())
        assert abs(h.log_probs[i] - ref) < 2e-4, (i, h.log_probs[i], ref)
    assert abs(h.score - sum(h.log_probs)) < 1e-6
    cut = m.generate([src], max_new_tokens=6, stop_at_eos=False, stop_ids=[h.tokens[2]])[0][0]
    assert cut.tokens == h.tokens[: h.tokens.index(h.tokens[2]) + 1]
    once = m.generate([src], max_new_tokens=6, stop_at_eos=False, no_repeat_ngram_size=1)[0][0].tokens
    assert len(set(once)) == len(once)


@pytest.mark.parametrize("name", GENERATORS)
def test_beam_matches_pytorch(name):
    for case in golden(name)["beam"]:
        opts = halformer.GenerateOptions(max_new_tokens=case["max_new_tokens"], beam=case["beam"],
                                         n_best=case["n_best"], length_penalty=case["length_penalty"])
        hyps = model(name).generate([case["src"]], opts)[0]
        assert [h.tokens for h in hyps] == case["hyps"]
        assert [h.score for h in hyps] == pytest.approx(case["scores"], abs=1e-4)


def test_sampling_is_seeded():
    m = model("ed_post_relu")
    run = functools.partial(m.generate, [[4, 11, 38], [30]], sample=True, temperature=1.5, max_new_tokens=8)
    assert [h[0].tokens for h in run(seed=7)] == [h[0].tokens for h in run(seed=7)]


def test_greedy_and_sampled_inputs_share_a_batch():
    m = model("ed_post_relu")
    src = [[4, 11, 38], [30], [7, 7]]
    each = [halformer.Sampling(), halformer.Sampling(sample=True, temperature=1.5, top_k=20),
            halformer.Sampling(True, 0.8, 0, 0.9)]
    together = m.generate(src, sampling_each=each, seeds=[1, 2, 3], max_new_tokens=8, stop_at_eos=False)
    for b in range(3):
        alone = m.generate([src[b]], sample=each[b].sample, temperature=each[b].temperature, top_k=each[b].top_k,
                           top_p=each[b].top_p, seeds=[b + 1], max_new_tokens=8, stop_at_eos=False)
        assert together[b][0].tokens == alone[0][0].tokens
    with pytest.raises(halformer.Error, match="temperature of input 0"):
        m.generate([[5]], sampling_each=[halformer.Sampling(sample=True, temperature=0)])


def test_engine_answers_as_generate_alone():
    """Requests submitted to an Engine from Python threads: each answer (and
    each streamed token) equals generate() on that request alone."""
    m = model("ed_post_relu")
    cases = [([4, 11, 38], {}), ([30], dict(beam=3, n_best=2)),
             ([7, 7], dict(sample=True, temperature=1.5, top_k=20, seed=2)), ([5, 9, 12], dict(max_new_tokens=3)),
             ([12, 13, 14, 15], dict(sample=True, top_p=0.9, seed=11))]
    want = [m.generate([src], **kw)[0] for src, kw in cases]
    engine = halformer.Engine(m, workers=2, max_batch=3)
    streamed = [[] for _ in cases]
    reqs = [None] * len(cases)

    def submit(i):
        src, kw = cases[i]
        reqs[i] = engine.submit(src, on_token=streamed[i].append, **kw)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(reqs):
        got = r.result(timeout=60)
        assert got is not None and r.done()
        assert [h.tokens for h in got] == [h.tokens for h in want[i]], cases[i]
        if cases[i][1].get("beam", 1) == 1:
            assert streamed[i] == want[i][0].tokens
    engine.stop()
    stats = engine.stats()
    assert stats["batched"] + stats["joined"] == len(cases) and stats["waiting"] == 0
    with pytest.raises(halformer.EngineBusy, match="stopping"):
        engine.submit([4])
    with pytest.raises(ValueError, match="temperature"):
        halformer.Engine(m).submit([4], sample=True, temperature=-1)
    with pytest.raises(halformer.Error, match="workers"):
        halformer.Engine(m, workers=-1)
    # A request outlives the name of its engine: it keeps the engine alive.
    r = halformer.Engine(m).submit([4, 11], max_new_tokens=2)
    r.abort()
    assert r.result(timeout=60) is not None and r.done()


def test_encode_and_properties():
    m = model("ed_post_relu")
    assert (m.architecture, m.d_model, m.src_vocab_size, m.tgt_vocab_size) == ("encoder-decoder", 32, 43, 40)
    assert (m.num_encoder_layers, m.num_decoder_layers, m.device, m.output_rows) == (2, 2, "cpu", 40)
    assert not m.has_tokenizer
    out = m.encode([[5, 6, 7], [8]])
    assert [o.shape for o in out] == [(3, 32), (1, 32)]


def test_random_model_from_config():
    c = model("dec_pre_gelu").config
    c.num_decoder_layers = 1
    m = halformer.Model.random(c, seed=5)
    a, b = m.logits([[5, 6, 7]])[0], halformer.Model.random(c, seed=5).logits([[5, 6, 7]])[0]
    assert a.shape == (3, c.tgt_vocab_size)
    np.testing.assert_array_equal(a, b)


def test_calls_from_threads_agree():
    """Calls release the GIL and run at once on one Model."""
    m = model("ed_pre_gelu")
    case = golden("ed_pre_gelu")["logits"][0]
    expected = m.logits(case["src"], case["tgt"])
    results = [None] * 4

    def work(i):
        results[i] = m.logits(case["src"], case["tgt"])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        for got, ref in zip(r, expected):
            np.testing.assert_array_equal(got, ref)


# ---- today's checkpoints: Llama, Mistral, Qwen2 (tests/fixtures/hf) ----

HF_DECODERS = ["llama_gqa", "llama3_mqa", "mistral_window", "qwen2"]


@pytest.mark.parametrize("name", HF_DECODERS)
def test_hf_decoders_match_pytorch(name):
    """A transformers checkpoint through Python: its config.json read into
    Config's fields, logits and greedy tokens against PyTorch's."""
    m = halformer.Model.load(str(FIXTURES / "hf" / name))
    raw = json.loads((FIXTURES / "hf" / name / "config.json").read_text())
    g = json.loads((FIXTURES / "hf" / name / "golden.json").read_text())
    c = m.config
    assert c.family == raw["model_type"]
    assert c.positional_encoding == halformer.Positional.Rotary
    assert (c.num_heads, c.kv_heads) == (raw["num_attention_heads"],
                                         raw.get("num_key_value_heads", raw["num_attention_heads"]))
    assert c.kv_width == c.kv_heads * c.head_dim
    # rope_scaling (transformers 4) or rope_parameters (5, with the theta inside)
    scaling = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    assert c.rope_theta == pytest.approx(raw.get("rope_theta", scaling.get("rope_theta", 10000.0)))
    window = raw.get("sliding_window") if raw.get("use_sliding_window", True) else None
    assert c.sliding_window == (window or 0)
    # Qwen2: biases on Q, K, V only; Llama: attention_bias and mlp_bias; Mistral: none
    attention_bias, mlp_bias = raw.get("attention_bias", False), raw.get("mlp_bias", False)
    expected = (True, False, False) if name == "qwen2" else (attention_bias, attention_bias, mlp_bias)
    assert (c.qkv_bias, c.out_bias, c.ffn_bias) == expected
    kinds = {"linear": halformer.RopeScaling.Kind.Linear, "llama3": halformer.RopeScaling.Kind.Llama3}
    kind = scaling.get("rope_type", scaling.get("type"))
    assert c.rope_scaling.kind == kinds.get(kind, halformer.RopeScaling.Kind.Default)
    if kind in kinds:
        assert c.rope_scaling.factor == pytest.approx(scaling["factor"])
    for case in g["logits"]:
        out = m.logits(case["src"])
        for b, (got, ref) in enumerate(zip(out, case["logits"])):
            assert got.shape == (len(case["src"][b]), case["width"])
            assert rel_error(got.ravel(), ref) <= 1e-4, f"{name} sequence {b}"
    for case in g["greedy"]:
        hyps = m.generate([case["src"]], max_new_tokens=case["max_new_tokens"])
        assert hyps[0][0].tokens == case["tokens"]


def test_chat_prompt_from_the_checkpoints_template():
    m = halformer.Model.load(str(FIXTURES / "hf" / "qwen2"))
    assert m.has_chat_template
    prompt = m.chat_prompt([("system", "Be brief."), ("user", "Hi")])
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), prompt
    assert "<|im_start|>system\nBe brief.<|im_end|>" in prompt
    assert not m.chat_prompt([("user", "Hi")], add_generation_prompt=False).endswith("assistant\n")
    assert not model("dec_pre_gelu").has_chat_template
    with pytest.raises(halformer.Error):
        model("dec_pre_gelu").chat_prompt([("user", "Hi")])


def test_chat_prompt_with_tools_as_transformers_takes_them():
    m = halformer.Model.load(str(FIXTURES / "hf" / "qwen2_tools"))  # Qwen2.5's template
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "21 degrees"}]
    prompt = m.chat_prompt(messages, tools=tools)
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather.", ' in prompt, prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt, prompt
    assert "<tool_response>\n21 degrees\n</tool_response>" in prompt, prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "<tools>" not in m.chat_prompt(messages[:1])


def test_a_gguf_file_loads_as_its_checkpoint():
    g = halformer.Model.load(str(FIXTURES / "gguf" / "qwen2.f32.gguf"))
    d = halformer.Model.load(str(FIXTURES / "hf" / "qwen2"))
    ids = [[5, 17, 42, 9, 1]]
    np.testing.assert_allclose(g.logits(ids)[0], d.logits(ids)[0], rtol=1e-5, atol=1e-5)
    assert g.chat_prompt([("user", "Hi")]) == d.chat_prompt([("user", "Hi")])


# ---- text: the demo translator ----

def test_translate_to_german():
    [r] = translator().translate(["Open the file"])
    assert r.ok and r.error == ""
    assert "Datei" in r.text
    assert r.input_tokens > 0 and r.output_tokens > 0


def test_translate_is_generate_then_text_of():
    m = translator()
    text = "Show hidden files"
    ids = m.tokenizer.encode_input(text)
    hyp = m.generate([ids], max_new_tokens=2 * len(ids) + 10)[0][0]
    assert m.translate([text])[0].text == m.text_of(hyp.tokens)


def test_translate_beam_alternatives():
    [r] = translator().translate(["Save the document"], beam=4, n_best=3)
    assert r.text and len(r.alternatives) == 2 and r.score < 0


def test_translate_bad_line():
    m = translator()
    with pytest.raises(halformer.Error, match="line 1: empty text"):
        m.translate(["Open the file", ""])
    results = m.translate(["Open the file", ""], raise_errors=False)
    assert results[0].ok and results[0].text
    assert not results[1].ok and "empty" in results[1].error


def test_tokenizer_round_trip():
    tok = translator().tokenizer
    assert tok.vocab_size == 8000 and (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    for text in ["Open the file", "Größe der Datei ändern", "Error 404: file 'a.txt' not found"]:
        ids = tok.encode(text)
        assert ids and all(0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text
    standalone = halformer.Tokenizer.load(str(EN_DE / "tokenizer.model"))
    assert standalone.encode("Open the file") == tok.encode("Open the file")


def test_gguf_q4_0_runs_packed():
    m = halformer.Model.load(str(FIXTURES / "gguf" / "llama3_mqa.q4_0.gguf"))
    assert m.precision == "int8" and m.packed_weight_bytes > 0
    out = m.generate([[1, 2, 3]], max_new_tokens=3)
    assert len(out[0][0].tokens) >= 1


def test_tokenizer_decode_options():
    tok = translator().tokenizer
    ids = tok.encode("Open the file , please .")
    framed = [tok.bos_id] + ids + [tok.eos_id]
    assert not tok.clean_up_tokenization_spaces
    assert tok.decode(framed) == "Open the file , please ."
    assert tok.decode(framed, skip_special_tokens=False) == "<s>Open the file , please .</s>"
    assert tok.decode(framed, clean_up_tokenization_spaces=True) == "Open the file, please."
    assert tok.decode(ids, False, True) == "Open the file, please."
    bert = halformer.Tokenizer.load_for(str(FIXTURES / "tokenizers" / "bert"))
    assert bert.clean_up_tokenization_spaces
    assert bert.decode(bert.encode_input("hello , world !"), skip_special_tokens=False) == "[CLS] hello, world! [SEP]"


# ---- errors ----

def test_missing_model_dir_names_the_path():
    missing = str(FIXTURES / "no_such_model")
    with pytest.raises(halformer.Error, match="no_such_model") as e:
        halformer.Model.load(missing)
    assert isinstance(e.value, RuntimeError) and missing in str(e.value)


def test_out_of_range_token():
    m = model("ed_post_relu")
    with pytest.raises(halformer.Error, match=r"source token id 43 at position 1 of sequence 0 is out of range \[0, 43\)"):
        m.logits([[3, 43, 5]], [[1, 2]])
    with pytest.raises(halformer.Error, match="target token id -1"):
        m.logits([[3, 4]], [[1, -1]])
    assert m.logits([[3, 4]], [[1, 2]])[0].shape == (2, 40)  # still usable


def test_bad_options():
    m = model("ed_post_relu")
    with pytest.raises(TypeError, match="unexpected keyword argument 'beem'"):
        m.generate([[5]], beem=2)
    with pytest.raises(TypeError, match="beam='x'"):
        m.generate([[5]], beam="x")
    # Each option's range from the schema (halformer/options.h), refused as it is set.
    with pytest.raises(ValueError, match=r"beam must be in \[1, 7\]"):
        m.generate([[5]], beam=9)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        halformer.GenerateOptions(top_p=1.5)
    with pytest.raises(ValueError, match="temperature must be positive"):
        m.generate([[5]], sample=True, temperature=0)
    with pytest.raises(halformer.Error, match="n_best 3 must be in"):
        m.generate([[5]], beam=2, n_best=3)
    assert halformer.GenerateOptions(max_new_tokens=-1).max_new_tokens == -1
    with pytest.raises(halformer.Error, match="tpu"):
        halformer.Model.load(str(FIXTURES / "ed_post_relu"), device="tpu")


# ---- kernels against float64 references ----

def f32(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def ref_layer_norm(x, gamma, beta, eps, residual=None):
    h = x.astype(np.float64) + (0 if residual is None else residual)
    mean = h.mean(axis=-1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)
    return (h - mean) / np.sqrt(var + eps) * gamma + beta


def ref_rms_norm(x, gamma, eps, residual=None):
    h = x.astype(np.float64) + (0 if residual is None else residual)
    return h / np.sqrt((h ** 2).mean(axis=-1, keepdims=True) + eps) * gamma


def ref_gelu(z):
    from math import erf
    return z * 0.5 * (1 + np.vectorize(erf)(z / np.sqrt(2)))


REF_ACTIVATIONS = {
    None: lambda z: z,
    "relu": lambda z: np.maximum(z, 0),
    "gelu": ref_gelu,
    "gelu_tanh": lambda z: 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3))),
    "tanh": np.tanh,
}


def ref_softmax(x, mask=None, log=False):
    s = x.astype(np.float64) + (0 if mask is None else mask)
    live = np.isfinite(s)
    m = np.where(live, s, -np.inf).max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.where(live, np.exp(s - m), 0)
    total = e.sum(axis=-1, keepdims=True)
    if log:
        return np.where(live, s - m - np.log(np.where(total > 0, total, 1)), -np.inf)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0)


def ref_attention(q, k, v, kv_len, causal, q_offset, scale, window=0):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scores = np.einsum("bhid,bhjd->bhij", q, k) * scale
    i = np.arange(q.shape[2])[:, None]
    j = np.arange(k.shape[2])[None, :]
    lens = np.asarray(kv_len)[:, None, None]
    valid = j[None] < lens  # [B, 1, Tkv]
    if causal:
        valid = valid & (j <= i + q_offset)[None]
    if window > 0:  # the query's position: its own, or its row's last key
        p = np.minimum((i + q_offset)[None], lens - 1)
        valid = valid & (j[None] > p - window)
    mask = np.where(valid[:, None], 0.0, -np.inf)
    p = ref_softmax(scores + mask)
    return np.einsum("bhij,bhjd->bhid", p, v)


@pytest.mark.parametrize("rows, d", [(1, 1), (5, 37), (17, 100), (129, 512)])
def test_layer_norm(rows, d):
    rng = np.random.default_rng(rows * 1000 + d)
    x, r = f32(rng, rows, d, lo=-3, hi=3), f32(rng, rows, d)
    gamma, beta = f32(rng, d, lo=0.5, hi=1.5), f32(rng, d)
    assert rel_error(kernels.layer_norm(x, gamma, beta), ref_layer_norm(x, gamma, beta, 1e-5)) <= 1e-5
    got = kernels.layer_norm(x, gamma, beta, eps=1e-3, residual=r)
    assert got.shape == (rows, d) and got.dtype == np.float32
    assert rel_error(got, ref_layer_norm(x, gamma, beta, 1e-3, r)) <= 1e-5


def test_rms_norm():
    rng = np.random.default_rng(11)
    x, r, gamma = f32(rng, 9, 48), f32(rng, 9, 48), f32(rng, 48, lo=0.5, hi=1.5)
    assert rel_error(kernels.rms_norm(x, gamma), ref_rms_norm(x, gamma, 1e-6)) <= 1e-5
    assert rel_error(kernels.rms_norm(x, gamma, 1e-6, r), ref_rms_norm(x, gamma, 1e-6, r)) <= 1e-5


@pytest.mark.parametrize("activation", list(REF_ACTIVATIONS))
def test_linear(activation):
    rng = np.random.default_rng(21)
    for m, k, n in [(1, 1, 1), (7, 33, 19), (64, 128, 96)]:
        x, w, b = f32(rng, m, k), f32(rng, n, k, lo=-0.5, hi=0.5), f32(rng, n)
        ref = REF_ACTIVATIONS[activation](x.astype(np.float64) @ w.T + b)
        got = kernels.linear(x, w, b, activation=activation)
        assert got.shape == (m, n)
        assert rel_error(got, ref) <= 1e-5, (activation, m, k, n)


def test_linear_without_bias_and_with_residual():
    rng = np.random.default_rng(22)
    x, w, r = f32(rng, 6, 20), f32(rng, 10, 20), f32(rng, 6, 10)
    assert rel_error(kernels.linear(x, w), x.astype(np.float64) @ w.T) <= 1e-5
    assert rel_error(kernels.linear(x, w, residual=r), x.astype(np.float64) @ w.T + r) <= 1e-5
    with pytest.raises(ValueError, match="only with activation=None"):
        kernels.linear(x, w, activation="relu", residual=r)


def test_softmax_and_log_softmax():
    rng = np.random.default_rng(31)
    x = f32(rng, 6, 41, lo=-20, hi=20)
    mask = np.where(rng.random((6, 41)) < 0.3, -np.inf, 0).astype(np.float32)
    mask[2] = -np.inf  # a fully masked row: zeros (softmax), -inf (log_softmax), never NaN
    assert rel_error(kernels.softmax(x), ref_softmax(x)) <= 1e-5
    np.testing.assert_allclose(kernels.softmax(x, mask), ref_softmax(x, mask), atol=1e-6, rtol=1e-5)
    assert np.all(kernels.softmax(x, mask)[2] == 0)
    got = kernels.log_softmax(x, mask)
    ref = ref_softmax(x, mask, log=True)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    np.testing.assert_allclose(got[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal):
    rng = np.random.default_rng(41 + causal)
    B, H, Tq, Tkv, dk = 2, 3, 5, 70, 8  # Tkv over a 64-key block
    q, k, v = f32(rng, B, H, Tq, dk), f32(rng, B, H, Tkv, dk), f32(rng, B, H, Tkv, dk)
    kv_len, q_offset = [Tkv, 37], Tkv - Tq  # the last Tq queries of a cache
    got = kernels.attention(q, k, v, kv_len=kv_len, causal=causal, q_offset=q_offset)
    ref = ref_attention(q, k, v, kv_len, causal, q_offset, 1 / np.sqrt(dk))
    assert got.shape == (B, H, Tq, dk)
    assert rel_error(got, ref) <= 1e-5
    # Defaults: every key, 1/√dk, and an explicit scale.
    assert rel_error(kernels.attention(q, k, v), ref_attention(q, k, v, [Tkv] * B, False, 0, dk ** -0.5)) <= 1e-5
    assert rel_error(kernels.attention(q, k, v, scale=0.3), ref_attention(q, k, v, [Tkv] * B, False, 0, 0.3)) <= 1e-5


def test_attention_sliding_window():
    rng = np.random.default_rng(43)
    B, H, T, dk = 2, 2, 40, 16
    q, k, v = f32(rng, B, H, T, dk), f32(rng, B, H, T, dk), f32(rng, B, H, T, dk)
    for window in (1, 7, 64):
        got = kernels.attention(q, k, v, kv_len=[T, 23], causal=True, window=window)
        assert rel_error(got, ref_attention(q, k, v, [T, 23], True, 0, dk ** -0.5, window)) <= 1e-5, window
    # A window longer than the keys is the causal kernel's answer; a short one is not.
    whole = kernels.attention(q, k, v, causal=True)
    assert np.array_equal(kernels.attention(q, k, v, causal=True, window=T), whole)
    assert not np.allclose(kernels.attention(q, k, v, causal=True, window=3), whole)
    with pytest.raises(ValueError, match="needs causal=True"):
        kernels.attention(q, k, v, window=4)
    with pytest.raises(ValueError, match="window must be 0"):
        kernels.attention(q, k, v, causal=True, window=-1)


# ---- strided inputs: read in place, same answers ----

def test_strided_views_read_in_place():
    rng = np.random.default_rng(51)
    base = f32(rng, 40, 3 * 64)
    x = base[::2, 64:128]            # row stride 2·192 floats, an offset start
    flipped = base[::-1, :64]        # a negative row stride
    gamma, beta = f32(rng, 64), f32(rng, 64)
    for view in (x, flipped):
        assert not view.flags.c_contiguous and kernels.reads_in_place(view)
        np.testing.assert_array_equal(kernels.layer_norm(view, gamma, beta),
                                      kernels.layer_norm(np.ascontiguousarray(view), gamma, beta))
    # A row broadcast to every row (row stride 0) is read in place too.
    mask_row = np.where(rng.random(64) < 0.5, -np.inf, 0).astype(np.float32)
    mask = np.broadcast_to(mask_row, x.shape)
    assert kernels.reads_in_place(mask)
    np.testing.assert_array_equal(kernels.softmax(x, mask), kernels.softmax(x, np.tile(mask_row, (x.shape[0], 1))))


def test_strided_input_is_not_copied():
    """A 4 MB strided view: the call allocates the output and nothing the
    size of the input (numpy reports its buffers to tracemalloc)."""
    rng = np.random.default_rng(52)
    base = f32(rng, 1024, 2048)
    x = base[:, 512:1536]
    gamma, beta = np.ones(1024, np.float32), np.zeros(1024, np.float32)
    tracemalloc.start()
    try:
        y = kernels.layer_norm(x, gamma, beta)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert y.nbytes <= peak < y.nbytes + x.nbytes // 2


def test_fused_qkv_views():
    """q, k and v as strided views into one fused projection [B, T, 3, H, dk]
    (what the runtime's attention reads), not copied, same answer."""
    rng = np.random.default_rng(53)
    B, T, H, dk = 2, 9, 4, 16
    qkv = f32(rng, B, T, 3, H, dk)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # [B, H, T, dk]
    assert all(kernels.reads_in_place(a) and not a.flags.c_contiguous for a in (q, k, v))
    dense = [np.ascontiguousarray(a) for a in (q, k, v)]
    np.testing.assert_array_equal(kernels.attention(q, k, v, causal=True),
                                  kernels.attention(*dense, causal=True))


def test_unreadable_layouts_are_copied():
    rng = np.random.default_rng(54)
    base = f32(rng, 8, 64)
    gamma, beta = f32(rng, 32), f32(rng, 32)
    every_other = base[:, ::2]  # innermost stride 2: Halide wants 1
    assert not kernels.reads_in_place(every_other)
    assert not kernels.reads_in_place(np.broadcast_to(gamma[:1], (32,)))  # innermost stride 0
    raw = np.zeros(8 * 32 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(8, 32)  # misaligned
    raw[...] = base[:, :32]
    assert not kernels.reads_in_place(raw)
    for a in (every_other, raw):
        np.testing.assert_array_equal(kernels.layer_norm(a, gamma, beta),
                                      kernels.layer_norm(np.ascontiguousarray(a), gamma, beta))


# ---- bad kernel arguments ----

def test_wrong_dtype_is_a_type_error():
    x = np.zeros((3, 4))
    with pytest.raises(TypeError, match=r"x: expected a numpy float32 array of shape \[\?, \?\], got a float64 array "
                                        r"of shape \[3, 4\]"):
        kernels.layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="gamma: .* got a list"):
        kernels.layer_norm(x.astype(np.float32), [1.0] * 4, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="w: .*float32.*got a >f4 array"):
        kernels.linear(np.zeros((2, 4), np.float32), np.zeros((3, 4), ">f4"))


def test_wrong_shape_is_a_value_error():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"beta: expected a numpy float32 array of shape \[4\], got a float32 array "
                                         r"of shape \[5\]"):
        kernels.layer_norm(x, np.ones(4, np.float32), np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"w: .*shape \[\?, 4\], got .*shape \[4, 3\]"):
        kernels.linear(x, np.zeros((4, 3), np.float32))
    q = np.zeros((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match=r"v: .*shape \[1, 2, 5, 8\], got .*\[1, 2, 6, 8\]"):
        kernels.attention(q, np.zeros((1, 2, 5, 8), np.float32), np.zeros((1, 2, 6, 8), np.float32))
    with pytest.raises(ValueError, match="kv_len: expected 1 key lengths"):
        kernels.attention(q, q, q, kv_len=[3, 3])
    with pytest.raises(ValueError, match="activation: 'swish' is not one of"):
        kernels.linear(x, np.zeros((2, 4), np.float32), activation="swish")


def test_kernel_error_carries_halides_message():
    """A buffer past Halide's 2^31-element limit (a broadcast: no memory)
    reaches Python as halformer.KernelError, not an abort."""
    k = 1 << 16
    x = np.broadcast_to(np.ones(k, np.float32), ((1 << 15) + 1, k))
    with pytest.raises(halformer.KernelError, match="hf_linear.*Product of extents for buffer x") as e:
        kernels.linear(x, np.ones((1, k), np.float32))
    assert isinstance(e.value, halformer.Error) and isinstance(e.value, RuntimeError)


def test_engine_and_generation_step_on_this_thread():
    """workers=0: the caller runs the Engine with step(); Model.start() runs
    one generate() call a turn at a time. Both answer as generate() does."""
    m = model("ed_post_relu")
    srcs = [[4, 11, 38], [30], [7, 7, 9], [5, 9, 12, 13], [12, 13]]
    want = [m.generate([s], max_new_tokens=4)[0] for s in srcs]
    engine = halformer.Engine(m, workers=0, max_batch=2)
    reqs = [engine.submit(s, max_new_tokens=4) for s in srcs]
    assert engine.stats()["waiting"] == len(srcs)
    steps = 0
    while engine.step():
        steps += 1
    assert all(r.done() for r in reqs)
    assert [[h.tokens for h in r.result()] for r in reqs] == [[h.tokens for h in w] for w in want]
    assert engine.stats()["batches"] == 1 and engine.stats()["joined"] == 3 and steps > 4
    g = m.start(srcs, max_new_tokens=4)
    with pytest.raises(halformer.Error, match="before the last step"):
        g.results()
    turns = 1
    while g.step():
        turns += 1
    assert g.done and turns == 4  # a turn a token: the prefill chooses the first
    assert [[h.tokens for h in r] for r in g.results()] == [[h.tokens for h in w] for w in want]
    del g

#!/usr/bin/env bash
# The halformer command: each subcommand's output format and its errors.
set -euo pipefail
hf=$1 fx=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# npy_close A.npy B.npy TOL: both float32 .npy files of one shape, every value
# finite, and ‖A − B‖₂ ≤ TOL·‖B‖₂ (B not all zeros). Plain Python, no numpy.
npy_close() {
    "$py" - "$@" << 'PY'
import ast, math, struct, sys

def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not an .npy file")
    if data[6] == 1:
        (n,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (n,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start:start + n].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        sys.exit(f"{path}: not little-endian float32 in C order: {header}")
    count = math.prod(header["shape"])
    payload = data[start + n:]
    if len(payload) != 4 * count:
        sys.exit(f"{path}: {len(payload)} bytes of data for shape {header['shape']}")
    return header["shape"], struct.unpack(f"<{count}f", payload)

(sa, a), (sb, b) = load(sys.argv[1]), load(sys.argv[2])
tol = float(sys.argv[3])
if sa != sb:
    sys.exit(f"shapes differ: {sa} and {sb}")
if not all(math.isfinite(x) for x in a + b):
    sys.exit("a value is not finite")
num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
den = math.sqrt(sum(y * y for y in b))
if den == 0:
    sys.exit(f"{sys.argv[2]} is all zeros: nothing to compare")
worst = max(range(len(a)), key=lambda k: abs(a[k] - b[k]))
if num > tol * den:
    sys.exit(f"relative error {num / den:.3g} > {tol:g}; worst at {worst}: {a[worst]!r} vs {b[worst]!r}")
PY
}
py=/usr/bin/python3
[ -x "$py" ] || py=python3

"$hf" info "$fx/ed_post_relu" > "$tmp/info"
grep -q '"architecture": "encoder-decoder"' "$tmp/info" || fail "info: config"
grep -q "parameters: 41376" "$tmp/info" || fail "info: parameter count"
grep -q "tied to tgt_embed.weight" "$tmp/info" || fail "info: tied head"
grep -q "kernel variant this CPU runs: " "$tmp/info" || fail "info: variant"
# sse41: the one variant every x86-64 CPU the kernels support runs (avx2 is not
# on every host).
grep -q "runs: sse41" <<< "$(HALFORMER_ISA=sse41 "$hf" info "$fx/ed_post_relu")" || fail "info: HALFORMER_ISA"

# logits: .npy with the documented shape; never overwrites without --force.
"$hf" logits "$fx/ed_post_relu" --src 5,6,7 --tgt 1,9,4 --out "$tmp/a.npy"
head -c 128 "$tmp/a.npy" | grep -aq "'shape': (3, 40)" || fail "logits: encoder-decoder shape"
[ "$(stat -c %s "$tmp/a.npy")" = $((128 + 3 * 40 * 4)) ] || fail "logits: file size"
expect_error "exists; pass --force" "$hf" logits "$fx/ed_post_relu" --src 5,6,7 --tgt 1,9,4 --out "$tmp/a.npy"
"$hf" logits "$fx/ed_post_relu" --src 5,6 --tgt 1 --out "$tmp/a.npy" --force
head -c 128 "$tmp/a.npy" | grep -aq "'shape': (1, 40)" || fail "logits: --force"
"$hf" logits "$fx/dec_pre_gelu" --src 5,6,7,8 --out "$tmp/d.npy"
head -c 128 "$tmp/d.npy" | grep -aq "'shape': (4, 40)" || fail "logits: decoder-only shape"
"$hf" logits "$fx/enc_head" --src 5,6 --out "$tmp/e.npy"
# A Hugging Face directory as transformers saves it, by the same contract:
# GPT-2 [len(src), vocab]; Marian [len(tgt), vocab] with the decoder fed --tgt
# exactly as given. Against the golden logits of tests/make_hf_fixtures.py.
golden_npy() {  # golden_npy FIXTURE CASE OUT: that case's only sequence as .npy
  "$py" - "$@" << 'PY'
import json, struct, sys
g = json.load(open(sys.argv[1] + "/golden.json"))
c = g["logits"][int(sys.argv[2])]
vals, width = c["logits"][0], c["width"]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(vals) // width, width)
header += " " * (127 - 10 - len(header)) + "\n"
with open(sys.argv[3], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % len(vals), *vals))
PY
}
ids() { "$py" -c "import json,sys; c=json.load(open(sys.argv[1]+'/golden.json'))['logits'][int(sys.argv[2])]; print(','.join(map(str, c[sys.argv[3]][0])))" "$@"; }
for case in 0 2; do
  d="$fx/hf/gpt2_lm"
  "$hf" logits "$d" --src "$(ids "$d" $case src)" --out "$tmp/g$case.npy"
  golden_npy "$d" $case "$tmp/gg$case.npy"
  npy_close "$tmp/g$case.npy" "$tmp/gg$case.npy" 1e-4 || fail "logits: gpt2 case $case"
  d="$fx/hf/marian"
  "$hf" logits "$d" --src "$(ids "$d" $case src)" --tgt "$(ids "$d" $case tgt)" --out "$tmp/m$case.npy"
  golden_npy "$d" $case "$tmp/mg$case.npy"
  npy_close "$tmp/m$case.npy" "$tmp/mg$case.npy" 1e-4 || fail "logits: marian case $case"
  d="$fx/hf/t5_v1_1"
  "$hf" logits "$d" --src "$(ids "$d" $case src)" --tgt "$(ids "$d" $case tgt)" --out "$tmp/t$case.npy"
  golden_npy "$d" $case "$tmp/tg$case.npy"
  npy_close "$tmp/t$case.npy" "$tmp/tg$case.npy" 1e-4 || fail "logits: t5 case $case"
done
grep -q 'model_type "gpt2"' <<< "$("$hf" info "$fx/hf/gpt2_lm")" || fail "info: a Hugging Face directory"
"$hf" generate "$fx/hf/gpt2_lm" --text "the cat" --max-new-tokens 4 > "$tmp/gen" || fail "generate --text: gpt2"
"$hf" translate "$fx/hf/marian" "the red house" > "$tmp/tr" || fail "translate: marian"
"$hf" embed "$fx/hf/bert_base" "the red house" "a film" > "$tmp/emb" || fail "embed: bert"
[ "$(grep -c '"embedding": \[' "$tmp/emb")" = 2 ] || fail "embed: one JSON line a text"
"$hf" embed "$fx/hf/bert_base" --pooling cls --normalize --out "$tmp/emb.npy" "the red house" "a film"
head -c 128 "$tmp/emb.npy" | grep -aq "'shape': (2, 32)" || fail "embed: .npy [texts, d_model]"
expect_error "exists; pass --force" "$hf" embed "$fx/hf/bert_base" --out "$tmp/emb.npy" "x"
"$hf" classify "$fx/hf/bert_cls" "the film was good" > "$tmp/cls" || fail "classify: bert"
grep -Eq "^(negative|neutral|positive)	0\.[0-9]+	" "$tmp/cls" || fail "classify: label, probability, logits"
expect_error "classify needs a sequence classifier" "$hf" classify "$fx/hf/bert_base" "x"
"$hf" generate "$fx/hf/t5_v1_0" --text "translate: the red house" --max-new-tokens 6 > "$tmp/t5" || fail "generate --text: t5"
[ "$(wc -l < "$tmp/t5")" = 1 ] || fail "generate --text: t5 prints one line"
"$hf" fill-mask "$fx/hf/bert_mlm" --top-k 3 "the [MASK] sat" "no mask" > "$tmp/fm" && fail "fill-mask: a text without [MASK] sets the exit status"
grep -q '^{"masks": \[{"position": 2, "tokens": \["[^"]*", "[^"]*", "[^"]*"\], "ids": \[' "$tmp/fm" || fail "fill-mask: a JSON line with 3 guesses"
grep -q '^{"error": "the text has no mask token"}' "$tmp/fm" || fail "fill-mask: the error line"
expect_error "fill-mask needs a masked-LM head" "$hf" fill-mask "$fx/hf/bert_cls" "a [MASK]"
[ "$(wc -l < "$tmp/tr")" = 1 ] || fail "translate: marian prints one line"

head -c 128 "$tmp/e.npy" | grep -aq "'shape': (2, 5)" || fail "logits: encoder head shape"
"$hf" logits "$fx/enc_hidden" --src 5,6 --out "$tmp/h.npy"
head -c 128 "$tmp/h.npy" | grep -aq "'shape': (2, 32)" || fail "logits: encoder hidden shape"

# generate: greedy one line; beam n-best lines with a tab and score.
[ "$("$hf" generate "$fx/ed_post_relu" --src 5,6,7 --max-new-tokens 5 | wc -l)" = 1 ] || fail "generate: greedy"
out=$("$hf" generate "$fx/ed_post_relu" --src 5,6,7 --beam 3 --n-best 3 --max-new-tokens 6)
[ "$(grep -c $'\t' <<< "$out")" = 3 ] || fail "generate: beam n-best: $out"
a=$("$hf" generate "$fx/dec_pre_gelu" --src 5,6 --sample --top-k 5 --temperature 2 --seed 3)
b=$("$hf" generate "$fx/dec_pre_gelu" --src 5,6 --sample --top-k 5 --temperature 2 --seed 3)
[ "$a" = "$b" ] || fail "generate: seeded sampling repeats"
# --logprobs: ids, a tab and the score, a tab and one log-probability per id
# (the score their sum); --stop-ids ends the output at the id; a bad id is
# an error naming it.
out=$("$hf" generate "$fx/ed_post_relu" --src 5,6,7 --max-new-tokens 6 --logprobs)
/usr/bin/python3 - "$out" <<'PY' || fail "generate --logprobs: $out"
import sys
ids, score, lps = sys.argv[1].split("\t")
lps = [float(x) for x in lps.split(",")]
assert len(lps) == len(ids.split()), (ids, lps)
assert all(x <= 0 for x in lps) and abs(sum(lps) - float(score)) < 1e-4, (score, lps)
PY
first=$("$hf" generate "$fx/dec_pre_gelu" --src 5,6 --max-new-tokens 6 | cut -d' ' -f2)
[ "$("$hf" generate "$fx/dec_pre_gelu" --src 5,6 --max-new-tokens 6 --stop-ids "$first" | wc -w)" -le 2 ] ||
    fail "generate --stop-ids: the output goes on past $first"
"$hf" generate "$fx/ed_post_relu" --src 5,6,7 --target-prefix 4,5 --max-new-tokens 3 > /dev/null ||
    fail "generate --target-prefix"
err=$("$hf" generate "$fx/ed_post_relu" --src 5,6,7 --stop-ids 99999 2>&1) && fail "generate --stop-ids 99999 passed"
# --no-repeat-ngram-size 1: no id twice (the unconstrained output repeats).
out=$("$hf" generate "$fx/ed_post_relu" --src 5,6,7 --max-new-tokens 8 --no-repeat-ngram-size 1 --repetition-penalty 1.2)
[ "$(tr ' ' '\n' <<< "$out" | sort | uniq -d | wc -l)" = 0 ] || fail "generate --no-repeat-ngram-size 1 repeats: $out"
"$hf" generate "$fx/ed_post_relu" --src 5,6,7 --repetition-penalty 0 > /dev/null 2>&1 &&
    fail "generate --repetition-penalty 0 passed"
grep -q "stop id 99999 is out of range" <<< "$err" || fail "generate --stop-ids: $err"

# bench: one JSON object with the documented keys.
out=$("$hf" bench "$fx/ed_pre_gelu" --src-len 8 --new-tokens 4 --iters 1 --batch 2 --beam 2 --json)
for key in encoder_ms decoder_step_ms greedy_tokens_per_s beam_tokens_per_s peak_rss_mb; do
    grep -q "\"$key\": [0-9]" <<< "$out" || fail "bench --json: $key in $out"
done
bench_out=$("$hf" bench "$fx/dec_post_relu" --src-len 5 --new-tokens 3 --iters 1) || fail "bench: text"
grep -q "decoder_step_ms" <<< "$bench_out" || fail "bench: text"
expect_error "max_positions = 24" "$hf" bench "$fx/ed_pre_gelu" --src-len 30 --iters 1

# Errors name the problem; nothing crashes.
expect_error "not a model directory" "$hf" info "$tmp/missing"
# --device: an unknown name, and a GPU whose driver is missing, are errors
# that say so; OpenCL (PoCL in CI) gives the CPU's tokens and logits.
expect_error "unknown device 'tpu' (expected cpu, cuda or opencl)" "$hf" generate "$fx/ed_post_relu" --src 5 --device tpu
"$hf" info > "$tmp/info_dev"
grep -q "^device opencl: " "$tmp/info_dev" || fail "info: device lines"
if grep -q "^device cuda: CUDA: no NVIDIA driver" "$tmp/info_dev"; then
  expect_error "CUDA: no NVIDIA driver" "$hf" generate "$fx/ed_post_relu" --src 5 --device cuda
fi
if grep -q "^device opencl: OpenCL: " "$tmp/info_dev" && ! grep -q "^device opencl: OpenCL: no" "$tmp/info_dev"; then
  for m in ed_post_relu ed_pre_gelu dec_pre_gelu; do
    for opts in "--max-new-tokens 8" "--beam 3 --n-best 3 --max-new-tokens 8" "--sample --top-k 5 --seed 4"; do
      # Tokens must match; beam scores (6 decimals) may differ in the last digit.
      # shellcheck disable=SC2086
      a=$("$hf" generate "$fx/$m" --src 5,6,7,9 $opts | cut -f1)
      # shellcheck disable=SC2086
      b=$("$hf" generate "$fx/$m" --src 5,6,7,9 $opts --device opencl | cut -f1)
      [ "$a" = "$b" ] || fail "generate --device opencl ($m $opts): '$b', CPU gives '$a'"
    done
  done
  # logits: the same shape and values within fp32 rounding (‖g − c‖ ≤ 1e-5·‖c‖).
  "$hf" logits "$fx/ed_post_relu" --src 5,6,7 --tgt 1,9,4 --out "$tmp/c.npy"
  "$hf" logits "$fx/ed_post_relu" --src 5,6,7 --tgt 1,9,4 --out "$tmp/g.npy" --device opencl
  npy_close "$tmp/g.npy" "$tmp/c.npy" 1e-5 || fail "logits --device opencl (encoder-decoder): not the CPU's logits"
  "$hf" logits "$fx/dec_pre_gelu" --src 5,6,7,8 --out "$tmp/c.npy" --force
  "$hf" logits "$fx/dec_pre_gelu" --src 5,6,7,8 --out "$tmp/g.npy" --device opencl --force
  npy_close "$tmp/g.npy" "$tmp/c.npy" 1e-5 || fail "logits --device opencl (decoder-only): not the CPU's logits"
  echo "generate --device opencl: the CPU's tokens (greedy, beam, sampling); logits --device opencl: the CPU's values"
else
  echo "no OpenCL device here: --device opencl not compared"
fi

expect_error "token id 99 at position 1" "$hf" generate "$fx/ed_post_relu" --src 5,99
expect_error "max_positions = 24" "$hf" generate "$fx/ed_post_relu" --src 5 --max-new-tokens 40
expect_error "needs --tgt" "$hf" logits "$fx/ed_post_relu" --src 5 --out "$tmp/x.npy"
expect_error "unknown option --bogus" "$hf" generate "$fx/ed_post_relu" --src 5 --bogus 1
expect_error "'x' is not a token id" "$hf" generate "$fx/ed_post_relu" --src 5,x
expect_error "unknown command" "$hf" frobnicate

# chat: a turn a line through the checkpoint's template (Qwen2's), the reply
# streamed then a newline: the continuation generate gives the rendered prompt.
reply=$(printf 'Hello there\n' | "$hf" chat "$fx/hf/qwen2" --max-new-tokens 5)
rendered=$'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n'
same=$("$hf" generate "$fx/hf/qwen2" --text "$rendered" --max-new-tokens 5)
[ "$reply" = "$same" ] || fail "chat: the reply '$reply' is not generate's continuation of the rendered prompt '$same'"
expect_error "has no chat template" sh -c "echo hi | '$hf' chat '$fx/hf/gpt2_lm'"
expect_error "Conversation roles must alternate" sh -c "echo hi | '$hf' chat '$fx/hf/mistral_window' --system be-brief"
expect_error "max_positions = 64" sh -c "printf 'a\\nb\\nc\\n' | '$hf' chat '$fx/hf/qwen2' --max-new-tokens 5"
echo "chat: replies a line a turn; templates' refusals and the position limit are errors naming them"
# chat --print-prompt: the conversation's rendered prompt, nothing generated.
printed=$(printf '[{"role": "user", "content": "Hello there"}]' | "$hf" chat "$fx/hf/qwen2" --print-prompt)
[ "$printed" = "${rendered%$'\n'}" ] || fail "chat --print-prompt: '$printed' is not the rendered prompt"
expect_error "message 0 is not an object" sh -c "echo '[1]' | '$hf' chat '$fx/hf/qwen2' --print-prompt"
# An object: the messages and the template's other variables (Qwen2.5's template with tools).
printed=$(printf '%s' '{"messages": [{"role": "user", "content": "Weather?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]}' |
          "$hf" chat "$fx/hf/qwen2_tools" --print-prompt)
grep -qF '<tools>
{"type": "function", "function": {"name": "get_weather", "parameters": {}}}
</tools>' <<<"$printed" || fail "chat --print-prompt with tools: no <tools> block in '$printed'"
expect_error "neither a JSON list of messages nor an object" sh -c "echo '{\"tools\": []}' | '$hf' chat '$fx/hf/qwen2_tools' --print-prompt"
# A directory of tokenizer files alone (no config.json).
tokdir=$(mktemp -d)
cp "$fx/hf/qwen2/tokenizer.json" "$fx/hf/qwen2/tokenizer_config.json" "$tokdir/"
[ "$("$hf" tokenizer encode "$tokdir" "Hello there")" = "$("$hf" tokenizer encode "$fx/hf/qwen2" "Hello there")" ] ||
    fail "tokenizer encode on tokenizer files alone differs from the checkpoint's"
rm -rf "$tokdir"

# GGUF files: info, generate and the tokenizer as on a directory (docs/gguf.md).
# (Captured first: grep -q stops reading at the match, and info's next write
# would then fail with SIGPIPE under pipefail.)
info_out=$("$hf" info "$fx/gguf/qwen2.f32.gguf") || fail "info on a GGUF file"
grep -q 'format: GGUF' <<< "$info_out" || fail "info on a GGUF file: $info_out"
# A Q4_0 file runs 4-bit: info names it and the packed weights' bytes.
q4_info=$("$hf" info "$fx/gguf/llama3_mqa.q4_0.gguf") || fail "info on a Q4_0 GGUF file"
grep -q 'precision: int8' <<< "$q4_info" && grep -Eq 'packed weights: [0-9.]+ (kB|MB) resident' <<< "$q4_info" ||
    fail "info on a Q4_0 GGUF file: $q4_info"
g_ids=$("$hf" tokenizer encode "$fx/gguf/qwen2.f32.gguf" "Hello there, 123")
d_ids=$("$hf" tokenizer encode "$fx/hf/qwen2" "Hello there, 123")
[ -n "$g_ids" ] && [ "$g_ids" = "$d_ids" ] || fail "tokenizer encode: the GGUF file's '$g_ids', the directory's '$d_ids'"
g_out=$("$hf" generate "$fx/gguf/qwen2.f32.gguf" --text "Hello there" --max-new-tokens 6)
d_out=$("$hf" generate "$fx/hf/qwen2" --text "Hello there" --max-new-tokens 6)
[ "$g_out" = "$d_out" ] || fail "generate: the GGUF file's '$g_out', the directory's '$d_out'"
# A checkpoint's tokenizer without its weights.
mkdir -p "$tmp/tok_only" && cp "$fx/hf/qwen2/"{config.json,tokenizer.json,tokenizer_config.json} "$tmp/tok_only/"
[ "$("$hf" tokenizer encode "$tmp/tok_only" "Hello there, 123")" = "$d_ids" ] || fail "tokenizer encode without weights"
n_ids=$(wc -w <<< "$d_ids")
[ "$("$hf" tokenizer count "$fx/gguf/qwen2.f32.gguf" "Hello there, 123")" = "$n_ids" ] || fail "tokenizer count"
counts=$(printf 'a b\nHello there, 123\n' | "$hf" tokenizer count "$tmp/tok_only" 2> "$tmp/count.err" | tr '\n' ' ')
grep -q "total: .* tokens in 2 lines" "$tmp/count.err" || fail "tokenizer count: no total ($(cat "$tmp/count.err"))"
[ "${counts% }" = "$(wc -w <<< "$("$hf" tokenizer encode "$tmp/tok_only" "a b")") $n_ids" ] || fail "tokenizer count: $counts"
echo "gguf: info, tokenizer and generate equal the directory's; chat --print-prompt; a tokenizer without weights"
echo "cli: OK"

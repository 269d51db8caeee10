#!/usr/bin/env bash
# `halformer tune`: a short search writes a record, table and curve; it
# refuses to overwrite a record; it stops on SIGINT and resumes; bad options
# give errors that name them. And the build applies the checked-in records:
# `halformer info` lists each one with the kernels it tunes.
#   check_tune.sh HALFORMER SRC GENERATED search    the searches (timed: ctest runs them alone)
#   check_tune.sh HALFORMER SRC GENERATED records   the options and the checked-in records
set -euo pipefail
hf=$1 src=$2 generated=$3 part=${4:-all}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

if [ "$part" = search ] || [ "$part" = all ]; then

# A short run: the hand space of layer_norm and Adams2019 with retraining
# (after every 2 samples; --adams-rounds 1: one batch and its retraining
# whatever the budget, so that a slow or busy machine reaches it too).
"$hf" tune --ops layer_norm --budget 25s --adams-batch 2 --adams-rounds 1 --out "$tmp/rec" --work "$tmp/work" > "$tmp/out" 2> "$tmp/err" \
    || { cat "$tmp/err"; fail "tune run"; }
rec=$tmp/rec/record.json
for key in '"target": "' '"machine": ' '"date": ' '"command": "halformer tune --ops layer_norm' \
           '"op": "layer_norm"' '"class": "prefill"' '"kernels": {' '"schedules": {' '"hand_ms": ' '"paired_rounds": '; do
    grep -qF -- "$key" "$rec" || fail "record lacks $key"
done
grep -q '"adams2019_samples": [1-9]' "$rec" || fail "no Adams2019 samples"
grep -q '"retrains": [1-9]' "$rec" || fail "the cost model was never retrained"
ls "$tmp"/work/cost_model_1.weights > /dev/null || fail "no retrained weights"
grep -q '^| layer_norm | prefill | ' "$tmp/rec/report.md" || fail "report table"
grep -q '^| layer_norm | prefill | ' "$tmp/out" || fail "the table is not printed"
grep -q 'ETA' "$tmp/err" || fail "no progress line"
[ "$(wc -l < "$tmp/work/curve.csv")" -gt 3 ] || fail "no tuning curve"
grep -q '"ok":true' "$tmp/work/state.jsonl" || fail "no measured candidate in the state"
if grep -q '"ok":true,"error":"wrong' "$tmp/work/state.jsonl"; then fail "a wrong result was accepted"; fi

# An existing record is kept unless --force.
cp "$rec" "$tmp/before.json"
expect_error "pass --force" "$hf" tune --ops layer_norm --budget 5s --out "$tmp/rec" --work "$tmp/work"
cmp -s "$rec" "$tmp/before.json" || fail "the record was touched"

# Stop (SIGINT) and resume: the second run starts from the measured state.
set +e
timeout --preserve-status -s INT 8 "$hf" tune --ops attention/prefill --budget 60s --no-adams --out "$tmp/r2" --work "$tmp/w2" \
    > /dev/null 2> "$tmp/err2"
rc=$?
set -e
[ "$rc" = 130 ] || { cat "$tmp/err2"; fail "a stopped run should exit 130, got $rc"; }
grep -q "Rerun with --resume" "$tmp/err2" || fail "no resume hint"
[ ! -e "$tmp/r2/record.json" ] || fail "a stopped run wrote a record"
n1=$(wc -l < "$tmp/w2/state.jsonl")
[ "$n1" -ge 1 ] || fail "nothing measured before the stop"
"$hf" tune --ops attention/prefill --budget 12s --no-adams --resume --out "$tmp/r2" --work "$tmp/w2" \
    > /dev/null 2> "$tmp/err3" || { cat "$tmp/err3"; fail "resume"; }
grep -q "resuming: $n1 measurements" "$tmp/err3" || fail "resume did not load the state"
[ -e "$tmp/r2/record.json" ] || fail "resume wrote no record"

# The packed int8 kernels in this CPU's form of products: without VNNI the
# sign form, whose pipeline has no colsum input (the tuner once stopped
# there: "the pipeline has no input named colsum").
"$hf" tune --ops linear_int8/decode --budget 15s --no-adams --out "$tmp/r3" --work "$tmp/w3" \
    > /dev/null 2> "$tmp/err4" || { cat "$tmp/err4"; fail "tuning the int8 kernels"; }
grep -q '"op": "linear_int8"' "$tmp/r3/record.json" || fail "no int8 task in the record"

fi

if [ "$part" = records ] || [ "$part" = all ]; then
# Bad options.
expect_error "--budget wants a positive duration" "$hf" tune --budget 0
expect_error "no op 'nope'" "$hf" tune --ops nope
expect_error "not a build target" "$hf" tune --target bogus
expect_error "say which, cuda or opencl" "$hf" tune --target gpu
expect_error "unknown argument" "$hf" tune --frobnicate
expect_error "--adams-batch" "$hf" tune --adams-batch 0

# --try: one point, checked as a search checks a candidate. This attention
# point (300 keys: 19 blocks of 16) broke the causal chunks' bits until the
# combination over key blocks was summed in strict float.
"$hf" tune --ops attention/prefill --rows 300 --try query_tile=4,key_block=16 > "$tmp/try" 2>&1 \
    || { cat "$tmp/try"; fail "--try attention/prefill at 300 keys"; }
grep -q "checked against the reference and 3 bit-identities; small shapes pass" "$tmp/try" || fail "--try output"
expect_error "must name one task" "$hf" tune --try query_tile=4
expect_error "has no knob 'bogus'" "$hf" tune --ops attention/prefill --try bogus=1
expect_error "is not a whole number" "$hf" tune --ops attention/prefill --try query_tile=x
# A decoding step's one-row kernel keeps the prefill kernel's bits for its
# row (a request alone takes the one, in a batch the other).
"$hf" tune --ops linear_f32/decode --try task_blocks=0 > "$tmp/try2" 2>&1 \
    || { cat "$tmp/try2"; fail "--try linear_f32/decode"; }
grep -q "checked against the reference and 1 bit-identities; small shapes pass" "$tmp/try2" || fail "--try decode output"
# The packed block's width must divide the 48-wide panel (3 or 6 vectors on
# AVX-512 and AVX2, 12 on SSE4.1): 5 divides none of them.
expect_error "does not divide" "$hf" tune --ops linear_f32/prefill --rows 16 --try vectors_n=5

# The checked-in records are compiled in: info names each, with its kernels.
"$hf" info > "$tmp/info"
for r in "$src"/schedules/tuned/*/record.json; do
    [ -e "$r" ] || continue
    name=$(basename "$(dirname "$r")")
    t=$(grep -o '"target": "[a-z0-9_]*"' "$r" | head -1 | cut -d'"' -f4)
    grep -q "schedules, $t: tuned record schedules/tuned/$name/record.json" "$tmp/info" \
        || fail "info does not show the $name record"
    # every kernel the record tunes is in the generated table the generators read
    for k in $(sed -n '/"kernels": {/,/}$/p' "$r" | grep -o '"hf_[a-z0-9_]*"' | tr -d '"'); do
        grep -q "{\"$name\", \"$k\"," "$generated/halformer_tuned_records.inc" || fail "$k ($name) not in the build"
        grep -q "  $k " "$tmp/info" || fail "$k ($name) not listed by info"
    done
done
# ... and the generators apply them: under its kernel name each builds the
# loop nest of the record's values, not the hand schedule's.
"$hf" tune --check-records --work "$tmp/check" > "$tmp/check.out" || { cat "$tmp/check.out"; fail "--check-records"; }
fi
echo "tune ($part): all checks passed"

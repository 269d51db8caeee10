#!/usr/bin/env bash
# halformer train, from the command line.
#
#   check_train.sh HALFORMER copy   the copy task is learned (greedy decodes
#                                   of held-out sequences) by the average of
#                                   the last checkpoints, which `generate`
#                                   loads; ctest runs it once per x86
#                                   variant (HALFORMER_ISA; 77 where this CPU
#                                   cannot run it): the recipe must hold
#                                   whatever a variant's rounding
#   check_train.sh HALFORMER        a resumed run repeats an uninterrupted
#                                   one exactly, Ctrl-C saves a checkpoint,
#                                   nothing is replaced without --force,
#                                   token-id files of all three architectures
#                                   train and their errors name the line, 20
#                                   steps on OpenCL equal the CPU's, and 2 MPI
#                                   ranks give the same losses as one process
#                                   over the same shards
set -euo pipefail
hf=$1
mode=${2:-all}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
small=(--d-model 64 --d-ff 128 --threads 2)
# same_losses NAME LOG1 LOG2 STEPS TOL: the two runs' losses per step agree.
same_losses() {
    /usr/bin/python3 - "$@" << 'PY'
import json, sys
name, l1, l2, steps, tol = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
a = [json.loads(l)["loss"] for l in open(l1)]
b = [json.loads(l)["loss"] for l in open(l2)]
assert len(a) == len(b) == steps, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print("%s, %d steps: worst relative loss difference %.1e" % (name, steps, worst))
sys.exit(worst > tol)
PY
}

# 1. The copy task (vocabulary 11, length 10): >= 99% of 1000 held-out
#    sequences decoded exactly by the final model, the average of the last 3
#    of 16 checkpoints (steps 350, 375, 400: the paper averages the last
#    checkpoints of a converged run). The gradient's norm is clipped at 1:
#    without it a 400-step run at d_model 64 can spike once its loss has
#    converged, at a learning rate near the warm-up's peak, or not, by the
#    variant's rounding (docs/training.md, "A small model's recipe").
if [ "$mode" = copy ]; then
    variant=$("$hf" info 2>&1 | sed -n 's/^kernel variant this CPU runs: //p')
    if [ -n "${HALFORMER_ISA:-}" ] && [ "$variant" != "$HALFORMER_ISA" ]; then
        echo "this CPU cannot run the $HALFORMER_ISA variant (it runs $variant): skipped"
        exit 77
    fi
    "$hf" train "$tmp/copy" --task copy --steps 400 "${small[@]}" --clip 1 --save-every 25 --average 3 \
        > "$tmp/copy.out" 2>&1 || { cat "$tmp/copy.out"; fail "copy task run"; }
    acc=$(grep -o "copy task: [0-9.]*%" "$tmp/copy.out" | grep -o "[0-9.]*") || fail "no accuracy line: $(cat "$tmp/copy.out")"
    echo "copy task ($variant): $acc% exact"
    awk -v a="$acc" 'BEGIN { exit !(a >= 99.0) }' || { cat "$tmp/copy.out"; fail "copy task accuracy $acc% < 99%"; }
    grep -q "average of the last 3 checkpoints" "$tmp/copy.out" || fail "no averaging"
    [ "$(wc -l < "$tmp/copy/train.log")" = 400 ] || fail "train.log: one line a step"
    [ "$(ls "$tmp/copy/checkpoints" | wc -l)" -le 5 ] || fail "more checkpoints kept than --keep"
    for f in config.json model.safetensors; do [ -f "$tmp/copy/$f" ] || fail "missing $f"; done
    if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
        [ -s "$tmp/copy/training.png" ] || fail "no training.png"
    fi
    out=$("$hf" generate "$tmp/copy" --src 3,4,5,6,7,8,9,10,3,4 --max-new-tokens 11)
    [ "$out" = "3 4 5 6 7 8 9 10 3 4 2" ] || fail "generate on the trained model: $out"
    echo "train copy: all checks passed"
    exit 0
fi

# 2. Resume: 30 steps, then --resume to 60, equals 60 uninterrupted steps
#    (with dropout, so the masks must be re-created exactly too).
run=(--task reverse --dropout 0.1 "${small[@]}" --eval-examples 100)
"$hf" train "$tmp/full" "${run[@]}" --steps 60 > /dev/null 2>&1 || fail "uninterrupted run"
"$hf" train "$tmp/part" "${run[@]}" --steps 30 > /dev/null 2>&1 || fail "first half"
"$hf" train "$tmp/part" "${run[@]}" --steps 60 --resume > /dev/null 2>&1 || fail "resumed half"
diff <(grep -o '"loss": [0-9.e-]*' "$tmp/full/train.log") <(grep -o '"loss": [0-9.e-]*' "$tmp/part/train.log") \
    || fail "resumed losses differ from the uninterrupted run"

# 3. Nothing is replaced without --force.
expect_error "exists and is not empty" "$hf" train "$tmp/full" --task copy --steps 2 "${small[@]}"
[ -f "$tmp/full/checkpoints/step_00000060/trainer.json" ] || fail "a refused run touched the directory"

# 4. Ctrl-C: a checkpoint, exit code 130, and the hint to resume.
"$hf" train "$tmp/int" --task copy --steps 100000 "${small[@]}" > "$tmp/int.out" 2>&1 &
pid=$!
for _ in $(seq 100); do
    [ -s "$tmp/int/train.log" ] && break
    sleep 0.1
done
kill -INT $pid
rc=0
wait $pid || rc=$?
[ $rc = 130 ] || fail "SIGINT: exit code $rc, expected 130"
grep -q -- "--resume" "$tmp/int.out" || fail "SIGINT: no resume hint"
ls "$tmp/int/checkpoints"/step_*/trainer.json > /dev/null 2>&1 || fail "SIGINT: no checkpoint"

# 5. Token-id files: encoder-decoder (with validation), decoder-only,
#    encoder-only; a bad id names the file and line.
cfg() {  # cfg ARCH: a small config.json
    cat << JSON
{"architecture": "$1", "d_model": 32, "num_heads": 4, "d_ff": 64, "num_encoder_layers": 1,
 "num_decoder_layers": 1, "src_vocab_size": 20, "tgt_vocab_size": 20, "max_positions": 16,
 "positional_encoding": "learned", "norm_first": true, "activation": "gelu", "layer_norm_eps": 1e-5,
 "scale_embeddings": true, "pad_id": 0, "bos_id": 1, "eos_id": 2}
JSON
}
for a in encoder-decoder decoder encoder; do cfg $a > "$tmp/$a.json"; done
for i in $(seq 200); do
    x=$((3 + i % 17)) y=$((3 + (i * 7) % 17)) z=$((3 + (i * 3) % 17))
    printf '%d %d %d\t%d %d %d\n' $x $y $z $z $y $x >> "$tmp/ed.tsv"
    printf '%d %d %d %d\n' $x $y $z $x >> "$tmp/dec.txt"
    printf '%d %d %d\t%d %d %d\n' $x $y $z $((x % 3)) $((y % 3)) $((z % 3)) >> "$tmp/enc.tsv"
done
head -20 "$tmp/ed.tsv" > "$tmp/ed_valid.tsv"
"$hf" train "$tmp/f_ed" --config "$tmp/encoder-decoder.json" --train "$tmp/ed.tsv" --valid "$tmp/ed_valid.tsv" \
    --steps 6 --valid-every 3 --batch-tokens 200 --micro-tokens 64 --threads 2 > "$tmp/f_ed.out" 2>&1 \
    || { cat "$tmp/f_ed.out"; fail "encoder-decoder file training"; }
grep -q '"valid_ppl"' "$tmp/f_ed/train.log" || fail "no validation in the log"
"$hf" train "$tmp/f_dec" --config "$tmp/decoder.json" --train "$tmp/dec.txt" --steps 3 --threads 2 > /dev/null 2>&1 \
    || fail "decoder-only file training"
"$hf" train "$tmp/f_enc" --config "$tmp/encoder.json" --labels 3 --train "$tmp/enc.tsv" --steps 3 --threads 2 \
    > /dev/null 2>&1 || fail "encoder-only file training"
"$hf" logits "$tmp/f_enc" --src 5,6,7 --out "$tmp/enc.npy" > /dev/null
head -c 128 "$tmp/enc.npy" | grep -aq "'shape': (3, 3)" || fail "the encoder's head has 3 labels"
"$hf" train "$tmp/f_ft" --init "$tmp/f_ed" --train "$tmp/ed.tsv" --steps 2 --threads 2 > /dev/null 2>&1 \
    || fail "fine-tuning from a model directory"
printf '5 6\t7 8\n5 99\t7 8\n' > "$tmp/bad.tsv"
expect_error "bad.tsv:2" "$hf" train "$tmp/f_bad" --config "$tmp/encoder-decoder.json" --train "$tmp/bad.tsv" --steps 1
expect_error "nothing to train on" "$hf" train "$tmp/f_none" --config "$tmp/encoder-decoder.json" --steps 1
expect_error "needs a head" "$hf" train "$tmp/f_nohead" --config "$tmp/encoder.json" --train "$tmp/enc.tsv" --steps 1

# 6. The same training on OpenCL (PoCL in CI): the losses of 20 steps equal
#    the CPU's within 1e-4 relative.
if grep -q "^device opencl: OpenCL" <<< "$("$hf" info 2>&1)"; then
    gp=(--task copy --steps 20 --d-model 32 --d-ff 64 --dropout 0.1 --eval-examples 50)
    "$hf" train "$tmp/cpu20" "${gp[@]}" --threads 2 > /dev/null 2>&1 || fail "20 steps on the CPU"
    "$hf" train "$tmp/ocl20" "${gp[@]}" --device opencl > "$tmp/ocl.out" 2>&1 || { cat "$tmp/ocl.out"; fail "OpenCL training"; }
    same_losses "CPU vs OpenCL" "$tmp/cpu20/train.log" "$tmp/ocl20/train.log" 20 1e-4 \
        || fail "OpenCL losses differ from the CPU's"
else
    echo "no OpenCL device: the GPU training check is skipped"
fi

# 7. Data parallel: 2 MPI ranks × 1 thread, 100 steps, against one process
#    summing the same two shards in turn: the same losses (to 1e-5; they
#    are bit-identical when the build is the same).
if command -v mpirun > /dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    mp=(--task copy --steps 100 --d-model 32 --d-ff 64 --threads 1 --eval-examples 100)
    "$hf" train "$tmp/one" "${mp[@]}" --shards 2 > /dev/null 2>&1 || fail "1 process, 2 shards"
    mpirun -np 2 "$hf" train "$tmp/two" "${mp[@]}" > "$tmp/two.out" 2>&1 || { cat "$tmp/two.out"; fail "mpirun -np 2"; }
    grep -q "2 rank(s)" "$tmp/two.out" || fail "mpirun: not 2 ranks"
    same_losses "1 process vs 2 ranks" "$tmp/one/train.log" "$tmp/two/train.log" 100 1e-5 \
        || fail "2 ranks differ from 1 process"
else
    echo "mpirun not found (Debian openmpi-bin): data-parallel check skipped"
fi
echo "train: all checks passed"

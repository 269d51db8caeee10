#!/usr/bin/env bash
# Trains the demo translator (models/en-de) from scratch, the way the
# committed one was made; run it again after a stop or a lost machine and it
# resumes from the last checkpoint. Every step keeps what it made before.
#
#   ./scripts/train_translator.sh [WORK_DIR]        # default: ../halformer-en-de
#
# 1. the corpus: German gettext catalogs of the packages in
#    scripts/debian_po_packages.txt (apt-get download) and of this machine
# 2. a joint 8000-piece BPE tokenizer on both sides of the training split
# 3. token-id files (pairs with a side over 100 tokens left out)
# 4. halformer train: d_model 256, 4 heads, d_ff 1024, 3 + 3 layers, 128
#    positions; batches of ~6000 target tokens, warm-up 600, lr scale 0.5,
#    dropout 0.1, label smoothing 0.1; 4000 steps, a checkpoint every 100,
#    the final model the float16 average of the last 5
# Then copy WORK_DIR/en-de/{config.json,model.safetensors,tokenizer.model,
# train.log,training.png} to models/en-de and evaluate it (docs/text.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$root/../halformer-en-de}"
steps="${STEPS:-4000}"
mkdir -p "$work"
cd "$work"
B="$root/build/halformer"
[ -x "$B" ] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }

if [ ! -f corpus/stats.json ]; then  # written last: a complete corpus
  /usr/bin/python3 "$root/scripts/debian_po_corpus.py" build --out corpus --list "$root/scripts/debian_po_packages.txt" \
    --from-system --only-catalogs
fi
[ -f tok.model ] || "$B" tokenizer train tok.model --input corpus/train.en --input corpus/train.de \
  --vocab-size 8000 --type bpe
for s in train dev test; do
  [ -f $s.ids ] || "$B" tokenizer pairs tok.model --src corpus/$s.en --tgt corpus/$s.de --out $s.ids --max-len 100
done
cat > config.json <<'EOF'
{
  "architecture": "encoder-decoder",
  "d_model": 256, "num_heads": 4, "d_ff": 1024,
  "num_encoder_layers": 3, "num_decoder_layers": 3,
  "src_vocab_size": 8000, "tgt_vocab_size": 8000, "max_positions": 128,
  "positional_encoding": "sinusoidal", "norm_first": false, "activation": "relu",
  "scale_embeddings": true, "pad_id": 0, "bos_id": 1, "eos_id": 2
}
EOF
recipe=(--train train.ids --valid dev.ids --steps "$steps" --batch-tokens 6000 --micro-tokens 6000 --warmup 600
        --lr-scale 0.5 --dropout 0.1 --label-smoothing 0.1 --save-every 100 --keep 5 --average 5 --half
        --valid-every 200 --log-every 10)
if [ -n "$(ls en-de/checkpoints 2>/dev/null)" ]; then
  exec "$B" train en-de --resume "${recipe[@]}"
fi
# No checkpoint yet: start (again) from scratch; --force clears what an
# interrupted first start left (its log and tokenizer copy).
exec "$B" train en-de --config config.json --tokenizer tok.model --force "${recipe[@]}"

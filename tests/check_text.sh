#!/usr/bin/env bash
# Text end to end with the halformer command: a tokenizer trained on a
# generated English/German corpus, encode/decode round trips, `tokenizer
# pairs` (what it leaves out, and its errors), `train --tokenizer`, then
# `translate` (arguments and stdin, bad lines), `eval` and `generate --text`
# on the tiny trained model.
set -euo pipefail
hf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# A parallel corpus: the same random sentence in both word lists, word for word.
awk -v seed=5 -v en="$tmp/train.en" -v de="$tmp/train.de" 'BEGIN {
    n = split("open the file save changes document folder print settings network error window close delete " \
              "copy paste search user password update install system server message new old please wait now " \
              "cannot found was is not and or of in for with this your all files version size key page line", E)
    split("Öffne die Datei speichere Änderungen Dokument Ordner drucken Einstellungen Netzwerk Fehler Fenster " \
          "schließen löschen kopieren einfügen suchen Benutzer Passwort aktualisieren installieren System Server " \
          "Nachricht neue alte bitte warten jetzt kann gefunden wurde ist nicht und oder von in für mit diese " \
          "Ihre alle Dateien Version Größe Schlüssel Seite Zeile", D)
    split(". ! ? : ...", P, " ")
    srand(seed)
    for (i = 0; i < 300; i++) {
        k = 3 + int(rand() * 8); a = ""; b = ""
        for (j = 0; j < k; j++) {
            w = 1 + int(rand() * n)
            sep = (j == 0) ? "" : (rand() < 0.1 ? ", " : " ")
            if (rand() < 0.08) { num = int(rand() * 1000); a = a sep num; b = b sep num }
            else { a = a sep E[w]; b = b sep D[w] }
        }
        p = P[1 + int(rand() * 5)]
        print a p > en; print b p > de
    }
}'
[ "$(wc -l < "$tmp/train.en")" = 300 ] && [ "$(wc -l < "$tmp/train.de")" = 300 ] || fail "corpus generation"

# 1. tokenizer train: one joint model; never over an existing file.
out=$("$hf" tokenizer train "$tmp/tok.model" --input "$tmp/train.en" --input "$tmp/train.de" --vocab-size 400 \
      --threads 1 2> /dev/null) || fail "tokenizer train"
grep -q "400 pieces (pad 0, bos 1, eos 2, unk 3)" <<< "$out" || fail "tokenizer train: $out"
sum=$(md5sum < "$tmp/tok.model")
expect_error "exists" "$hf" tokenizer train "$tmp/tok.model" --input "$tmp/train.en" --vocab-size 400
[ "$(md5sum < "$tmp/tok.model")" = "$sum" ] || fail "tokenizer train replaced an existing model"
expect_error "missing.txt" "$hf" tokenizer train "$tmp/tok2.model" --input "$tmp/missing.txt" --vocab-size 400

# 2. encode → decode round trips (an argument; stdin line by line, an empty
#    line included; an unseen character by byte fallback).
text="Öffne die Datei, bitte: 42 neue Dateien!"
ids=$("$hf" tokenizer encode "$tmp/tok.model" "$text")
grep -Eq '^[0-9]+( [0-9]+)*$' <<< "$ids" || fail "tokenizer encode: $ids"
[ "$("$hf" tokenizer decode "$tmp/tok.model" "$ids")" = "$text" ] || fail "tokenizer decode of '$ids'"
printf 'open the file\n\nGrüße aus 日本\n' > "$tmp/lines.txt"
"$hf" tokenizer encode "$tmp/tok.model" < "$tmp/lines.txt" > "$tmp/lines.ids"
[ "$(wc -l < "$tmp/lines.ids")" = 3 ] || fail "tokenizer encode: one line of ids per line"
"$hf" tokenizer decode "$tmp/tok.model" < "$tmp/lines.ids" | cmp -s - "$tmp/lines.txt" \
    || fail "encode | decode does not give the lines back"
"$hf" tokenizer encode "$tmp/tok.model" "open the file" --pieces | grep -q "▁" || fail "tokenizer encode --pieces"
rc=0
printf 'open\nab\xffcd\nthe file\n' | "$hf" tokenizer encode "$tmp/tok.model" > "$tmp/bad.ids" 2> "$tmp/bad.err" || rc=$?
[ $rc = 1 ] || fail "tokenizer encode of a bad line: exit status $rc"
[ "$(wc -l < "$tmp/bad.ids")" = 3 ] && [ -z "$(sed -n 2p "$tmp/bad.ids")" ] || fail "tokenizer encode: bad line not kept in place"
grep -q "line 2: .*UTF-8 (byte 2)" "$tmp/bad.err" || fail "tokenizer encode: $(cat "$tmp/bad.err")"
expect_error "400" "$hf" tokenizer decode "$tmp/tok.model" "5 400"
# --keep-special writes bos and eos; --clean-up drops the space before
# punctuation; --clean-up with --no-clean-up is refused.
[ "$("$hf" tokenizer decode "$tmp/tok.model" "1 $ids 2" --keep-special)" = "<s>$text</s>" ] \
    || fail "tokenizer decode --keep-special"
spaced=$("$hf" tokenizer encode "$tmp/tok.model" "open the file , please !")
[ "$("$hf" tokenizer decode "$tmp/tok.model" "$spaced" --clean-up)" = "open the file, please!" ] \
    || fail "tokenizer decode --clean-up"
[ "$("$hf" tokenizer decode "$tmp/tok.model" "$spaced")" = "open the file , please !" ] \
    || fail "tokenizer decode cleaned up unasked"
expect_error "excludes" "$hf" tokenizer decode "$tmp/tok.model" "$spaced" --clean-up --no-clean-up

# 3. tokenizer pairs: the token-id file train reads; an over-long pair, a pair
#    with an empty side and one that is not UTF-8 are left out and counted.
cp "$tmp/train.en" "$tmp/p.en"
cp "$tmp/train.de" "$tmp/p.de"
long=$(printf 'open the file %.0s' $(seq 40))
printf '%s\n%s\n' "$long" "open the file" >> "$tmp/p.en"
printf '%s\n%s\n' "Öffne die Datei" "" >> "$tmp/p.de"
printf 'open \xff file\n' >> "$tmp/p.en"
printf 'Öffne Datei\n' >> "$tmp/p.de"
out=$("$hf" tokenizer pairs "$tmp/tok.model" --src "$tmp/p.en" --tgt "$tmp/p.de" --out "$tmp/ids.tsv" --max-len 60 2> "$tmp/pairs.err") \
    || fail "tokenizer pairs: $(cat "$tmp/pairs.err")"
grep -q "300 of 303 lines written" <<< "$out" || fail "tokenizer pairs: $out"
grep -q "left out: 1 longer than 60 tokens, 1 with an empty side, 1 not UTF-8" <<< "$out" || fail "tokenizer pairs: $out"
[ "$(wc -l < "$tmp/ids.tsv")" = 300 ] || fail "tokenizer pairs: $(wc -l < "$tmp/ids.tsv") lines written"
[ "$(grep -c $'\t' "$tmp/ids.tsv")" = 300 ] || fail "tokenizer pairs: every line has a source and a target"
awk -F'[ \t]' '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+$/ || $i + 0 >= 400) exit 1 }' "$tmp/ids.tsv" \
    || fail "tokenizer pairs: ids outside the vocabulary"
grep -q "line 303 left out: .*UTF-8" "$tmp/pairs.err" || fail "tokenizer pairs: the bad line is not named"
sum=$(md5sum < "$tmp/ids.tsv")
expect_error "exists" "$hf" tokenizer pairs "$tmp/tok.model" --src "$tmp/p.en" --tgt "$tmp/p.de" --out "$tmp/ids.tsv"
[ "$(md5sum < "$tmp/ids.tsv")" = "$sum" ] || fail "tokenizer pairs replaced --out without --force"
head -5 "$tmp/train.de" > "$tmp/short.de"
expect_error "differ in length" "$hf" tokenizer pairs "$tmp/tok.model" --src "$tmp/p.en" --tgt "$tmp/short.de" \
    --out "$tmp/ids.tsv" --force
[ "$(md5sum < "$tmp/ids.tsv")" = "$sum" ] || fail "a failed tokenizer pairs touched --out"
[ -z "$(find "$tmp" -maxdepth 1 -name '*.part')" ] || fail "tokenizer pairs left a .part file"
"$hf" tokenizer pairs "$tmp/tok.model" --src "$tmp/train.en" --out "$tmp/dec.ids" > /dev/null \
    || fail "tokenizer pairs without --tgt"
[ "$(wc -l < "$tmp/dec.ids")" = 300 ] && ! grep -q $'\t' "$tmp/dec.ids" || fail "tokenizer pairs without --tgt: one sequence a line"

# 4. train --tokenizer: the tokenizer travels with the model. (60 steps, a
#    second: enough for greedy decoding to say words rather than repeat bos.)
cat > "$tmp/config.json" << 'JSON'
{"architecture": "encoder-decoder", "d_model": 32, "num_heads": 4, "d_ff": 64, "num_encoder_layers": 1,
 "num_decoder_layers": 1, "src_vocab_size": 400, "tgt_vocab_size": 400, "max_positions": 64,
 "positional_encoding": "learned", "norm_first": true, "activation": "relu", "layer_norm_eps": 1e-5,
 "scale_embeddings": true, "pad_id": 0, "bos_id": 1, "eos_id": 2}
JSON
"$hf" train "$tmp/m" --config "$tmp/config.json" --tokenizer "$tmp/tok.model" --train "$tmp/ids.tsv" --steps 60 \
    --warmup 20 --dropout 0 --batch-tokens 400 --micro-tokens 400 --threads 2 > "$tmp/train.out" 2>&1 \
    || { cat "$tmp/train.out"; fail "train --tokenizer"; }
cmp -s "$tmp/m/tokenizer.model" "$tmp/tok.model" || fail "train: OUT/tokenizer.model is not the tokenizer"
grep -q '"tokenizer": "tokenizer.model"' "$tmp/m/config.json" || fail "train: config.json names no tokenizer"
sed 's/"src_vocab_size": 400, "tgt_vocab_size": 400/"src_vocab_size": 300, "tgt_vocab_size": 300/' "$tmp/config.json" \
    > "$tmp/small.json"
expect_error "300" "$hf" train "$tmp/m_small" --config "$tmp/small.json" --tokenizer "$tmp/tok.model" \
    --train "$tmp/ids.tsv" --steps 1

# 5. translate: arguments, then stdin with bad lines (same number of lines
#    out, exit status 1, the bad lines named).
"$hf" translate "$tmp/m" "Öffne die Datei" "open the file" --batch 1 > "$tmp/tr.out" 2> /dev/null || fail "translate"
[ "$(wc -l < "$tmp/tr.out")" = 2 ] || fail "translate: $(wc -l < "$tmp/tr.out") lines for 2 texts"
[ -n "$(tr -d '\n' < "$tmp/tr.out")" ] || fail "translate: nothing but empty lines"
rc=0
printf 'Öffne die Datei\n\nab\xffcd\nopen the file\n' | "$hf" translate "$tmp/m" --batch 1 > "$tmp/tr2.out" 2> "$tmp/tr2.err" || rc=$?
[ $rc = 1 ] || fail "translate with bad lines: exit status $rc"
[ "$(wc -l < "$tmp/tr2.out")" = 4 ] || fail "translate: $(wc -l < "$tmp/tr2.out") lines out for 4 in"
grep -q "line 2: empty" "$tmp/tr2.err" || fail "translate: line 2 not named: $(cat "$tmp/tr2.err")"
grep -q "line 3: .*UTF-8" "$tmp/tr2.err" || fail "translate: line 3 not named: $(cat "$tmp/tr2.err")"
! grep -q "line [14]:" "$tmp/tr2.err" || fail "translate: a good line reported: $(cat "$tmp/tr2.err")"
[ -z "$(sed -n 2p "$tmp/tr2.out")$(sed -n 3p "$tmp/tr2.out")" ] || fail "translate: text for a bad line"
[ "$(sed -n 1p "$tmp/tr2.out")" = "$(sed -n 1p "$tmp/tr.out")" ] \
    && [ "$(sed -n 4p "$tmp/tr2.out")" = "$(sed -n 2p "$tmp/tr.out")" ] || fail "translate: stdin and arguments differ"
mkdir "$tmp/notok"
cp "$tmp/m/model.safetensors" "$tmp/notok/"
grep -v '"tokenizer"' "$tmp/m/config.json" | sed -z 's/,\n}/\n}/' > "$tmp/notok/config.json"
# --precision: bf16 and int8 translate the same inputs to as many lines; an
# unknown precision is refused by name.
for p in bf16 int8; do
    "$hf" translate "$tmp/m" "Öffne die Datei" "open the file" --batch 1 --precision $p > "$tmp/tr_$p.out" 2> /dev/null \
        || fail "translate --precision $p"
    [ "$(wc -l < "$tmp/tr_$p.out")" = 2 ] || fail "translate --precision $p: $(wc -l < "$tmp/tr_$p.out") lines"
done
expect_error "fp8" "$hf" translate "$tmp/m" "open the file" --precision fp8
expect_error "fp8" "$hf" generate "$tmp/m" --text "open the file" --precision fp8
expect_error "tokenizer" "$hf" translate "$tmp/notok" "open the file"
cp -r "$tmp/m" "$tmp/m_missing"
rm "$tmp/m_missing/tokenizer.model"
expect_error "m_missing/tokenizer.model" "$hf" translate "$tmp/m_missing" "open the file"

# 6. eval: a model on a test set (JSON with bleu and chrf), and a hypothesis
#    file against itself (100).
head -20 "$tmp/train.en" > "$tmp/test.en"
head -20 "$tmp/train.de" > "$tmp/test.de"
out=$("$hf" eval "$tmp/m" --src "$tmp/test.en" --ref "$tmp/test.de" --out "$tmp/hyp.de" --json "$tmp/scores.json" 2>&1) \
    || fail "eval: $out"
grep -q "^BLEU = " <<< "$out" && grep -q "^chrF = " <<< "$out" || fail "eval: $out"
[ "$(wc -l < "$tmp/hyp.de")" = 20 ] || fail "eval --out: not 20 lines"
"$hf" translate "$tmp/m" --quiet < "$tmp/test.en" | cmp -s - "$tmp/hyp.de" || fail "eval --out differs from translate"
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert 0 <= j["bleu"] <= 100 and 0 < j["chrf"] <= 100 and j["sentences"] == 20 and j["failed"] == 0, j
' "$tmp/scores.json" || fail "eval --json: $(cat "$tmp/scores.json")"
expect_error "exists" "$hf" eval "$tmp/m" --src "$tmp/test.en" --ref "$tmp/test.de" --json "$tmp/scores.json"
out=$("$hf" eval --hyp "$tmp/test.de" --ref "$tmp/test.de")
grep -q "^BLEU = 100.00 " <<< "$out" && grep -q "^chrF = 100.00" <<< "$out" || fail "eval of the references: $out"
expect_error "lines" "$hf" eval --hyp "$tmp/short.de" --ref "$tmp/test.de"
expect_error "lines" "$hf" eval "$tmp/m" --src "$tmp/short.de" --ref "$tmp/test.de"

# 7. generate --text: one line (greedy).
out=$("$hf" generate "$tmp/m" --text "Öffne die Datei" --max-new-tokens 5 2> /dev/null) || fail "generate --text"
[ "$(wc -l <<< "$out")" = 1 ] || fail "generate --text: $out"
expect_error "empty" "$hf" generate "$tmp/m" --text ""
# 8. Fine-tuning keeps --init's tokenizer; --tokenizer is only for a new model.
"$hf" train "$tmp/ft" --init "$tmp/m" --train "$tmp/ids.tsv" --steps 2 --batch-tokens 400 --micro-tokens 400 \
    --threads 2 > /dev/null 2>&1 || fail "fine-tuning"
cmp -s "$tmp/m/tokenizer.model" "$tmp/ft/tokenizer.model" || fail "fine-tuning lost the tokenizer"
grep -q '"tokenizer": "tokenizer.model"' "$tmp/ft/config.json" || fail "fine-tuned config.json names no tokenizer"
[ "$("$hf" translate "$tmp/ft" "Open the file" --quiet | wc -l)" = 1 ] || fail "translate with the fine-tuned model"
expect_error "new model" "$hf" train "$tmp/ft2" --init "$tmp/m" --tokenizer "$tmp/tok.model" --train "$tmp/ids.tsv" --steps 1
echo "text: all checks passed"

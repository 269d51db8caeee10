// The reference side of tests/check_hub_tokenizers.sh: each model's own
// tokenizer.json run by @lenml/tokenizers (transformers.js's tokenizers) on
// the hard strings of strings.json; prints {name: {ids: [[...]], text: [...]}}
// as JSON (text: each encoding decoded, special tokens skipped, no clean-up;
// input: the ids with the special tokens added (add_special_tokens);
// special: those decoded with the special tokens kept, no clean-up; clean:
// the first ids decoded with tokenizer_config.json's
// clean_up_tokenization_spaces, false where it does not say, as transformers
// has it (transformers.js's own default is true)).
//   node hub_tokenizers.mjs STRINGS.json NAME...
import { readFileSync } from "node:fs";

const [stringsFile, ...names] = process.argv.slice(2);
const strings = JSON.parse(readFileSync(stringsFile, "utf8"));
const out = {};
for (const name of names) {
  const { fromPreTrained } = await import(`@lenml/tokenizer-${name}`);
  const tok = fromPreTrained();
  const ids = strings.map((s) => Array.from(tok.encode(s, { add_special_tokens: false })));
  const text = ids.map((x) => x.length ? tok.decode(x, { skip_special_tokens: true, clean_up_tokenization_spaces: false }) : "");
  const input = strings.map((s) => Array.from(tok.encode(s)));
  const special = input.map((x) => x.length ? tok.decode(x, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "");
  const cleanUp = tok.config.clean_up_tokenization_spaces ?? false;
  const clean = ids.map((x) => x.length ? tok.decode(x, { skip_special_tokens: true, clean_up_tokenization_spaces: cleanUp }) : "");
  out[name] = { ids, text, input, special, clean, cleanUp };
}
process.stdout.write(JSON.stringify(out));

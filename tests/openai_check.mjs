// What the OpenAI client tests (tests/openai_*client.mjs) share: check()
// prints one line a check and counts the failures; done() prints the
// summary and exits 0 only when every check passed.
let failures = 0;

export function check(ok, what, got) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok ? "" : ": " + JSON.stringify(got)}`);
  if (!ok) failures++;
}

export function done(name) {
  console.log(failures === 0 ? `[${name}] PASS` : `[${name}] ${failures} checks failed`);
  process.exit(failures === 0 ? 0 : 1);
}

// OpenAI's official Node client against `halformer serve` with API keys over
// HTTPS (tests/check_openai.sh secure: keys from --api-key-file and
// $HALFORMER_API_KEY, the fixture certificate, which node trusts through
// NODE_EXTRA_CA_CERTS): each right key answers, a wrong key or none is the
// client's AuthenticationError (401, code invalid_api_key), and plain http
// on the TLS port is a connection error. Exit 0 when every check passes.
import OpenAI from "openai";

import { check, done } from "./openai_check.mjs";

const [baseURL, modelName] = process.argv.slice(2);
const client = (apiKey, url = baseURL) => new OpenAI({ baseURL: url, apiKey, maxRetries: 0, timeout: 60000 });

for (const key of ["file-key-1", "file-key-2", "env-key"]) {
  const c = client(key);
  const models = await c.models.list();
  check(models.data.length === 1 && models.data[0].id === modelName, `key ${key}: models.list() over https`,
        models.data);
  const done = await c.completions.create({ model: modelName, prompt: "Open the file.", max_tokens: 20,
                                            temperature: 0 });
  check(done.choices[0].text === "Datei öffnen.", `key ${key}: completions.create()`, done.choices);
}

const stream = await client("env-key").completions.create({ model: modelName, prompt: "Open the file.",
                                                            max_tokens: 20, temperature: 0, stream: true });
let text = "";
for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
check(text === "Datei öffnen.", "a streamed completion over https", text);

for (const key of ["file-key-3", "file-key-", "FILE-KEY-1", "# the keys of this test"]) {
  try {
    await client(key).models.list();
    check(false, `key ${JSON.stringify(key)} refused`, "answered");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === "invalid_api_key",
          `key ${JSON.stringify(key)}: AuthenticationError 401 invalid_api_key`, [e.constructor.name, e.status, e.code]);
  }
}

try {
  await client("file-key-1", baseURL.replace("https://", "http://")).models.list();
  check(false, "plain http on the https port refused", "answered");
} catch (e) {
  check(e instanceof OpenAI.APIConnectionError, "plain http on the https port: APIConnectionError",
        [e.constructor.name, e.message]);
}

done("openai secure");

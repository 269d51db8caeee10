// OpenAI's official Node client against a running `halformer serve` of the
// translator (tests/check_openai.sh starts both): models, completions with
// and without streaming, n, a list of prompts, and errors as the client's
// own exception classes. Exit 0 when every check passes.
import OpenAI from "openai";

import { check, done } from "./openai_check.mjs";

const [baseURL, modelName] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === modelName, "models.list() names the model", models.data);
const one = await client.models.retrieve(modelName);
check(one.id === modelName && one.object === "model", "models.retrieve()", one);

const plain = await client.completions.create({ model: modelName, prompt: "Open the file.", max_tokens: 20, temperature: 0 });
check(plain.choices[0].text === "Datei öffnen.", "completions.create(): greedy text", plain.choices);
check(plain.choices[0].finish_reason === "stop", "finish_reason stop", plain.choices[0]);
check(plain.usage.completion_tokens > 0 && plain.usage.prompt_tokens > 0, "usage", plain.usage);

const prompts = ["Show hidden files", "Where is the nearest train station?"];
const many = await client.completions.create({ model: modelName, prompt: prompts, max_tokens: 40, temperature: 0 });
check(many.choices.length === 2 && many.choices.every((c, i) => c.index === i && c.text.length > 0),
      "a list of prompts: one choice each", many.choices);

const stream = await client.completions.create({ model: modelName, prompt: prompts, max_tokens: 40, temperature: 0,
                                                 stream: true, stream_options: { include_usage: true } });
const texts = ["", ""];
let chunks = 0, usage = null, reasons = 0;
for await (const chunk of stream) {
  chunks++;
  for (const c of chunk.choices) {
    texts[c.index] += c.text;
    if (c.finish_reason) reasons++;
  }
  if (chunk.usage) usage = chunk.usage;
}
check(texts[0] === many.choices[0].text && texts[1] === many.choices[1].text,
      `streaming: ${chunks} chunks add up to the same texts`, texts);
check(reasons === 2 && usage && usage.total_tokens === many.usage.total_tokens, "streaming: finish reasons and usage", usage);

const sampled = await client.completions.create({ model: modelName, prompt: "Open the file.", max_tokens: 20,
                                                  temperature: 0.8, n: 3, seed: 5 });
const again = await client.completions.create({ model: modelName, prompt: "Open the file.", max_tokens: 20,
                                                temperature: 0.8, n: 3, seed: 5 });
check(sampled.choices.length === 3 && JSON.stringify(sampled.choices) === JSON.stringify(again.choices),
      "n = 3 sampled with a seed: three choices, the same twice", sampled.choices);

const stopped = await client.completions.create({ model: modelName, prompt: "Open the file.", max_tokens: 20,
                                                  temperature: 0, stop: ["öffnen"] });
check(stopped.choices[0].text === "Datei " && stopped.choices[0].finish_reason === "stop", "stop strings",
      stopped.choices[0]);

try {
  await client.completions.create({ model: "no-such-model", prompt: "a" });
  check(false, "an unknown model is refused", "no error");
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.status === 404, "an unknown model: NotFoundError (404)", String(e));
}
try {
  await client.completions.create({ model: modelName, prompt: "a", temperature: 5 });
  check(false, "a bad argument is refused", "no error");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /temperature/.test(e.message), "a bad argument: BadRequestError naming it",
        String(e));
}
done("openai");

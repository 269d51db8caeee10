// OpenAI's official Node client's chat.completions against a running
// `halformer serve` of a decoder with a chat template (tests/check_openai.sh
// with "chat": the qwen2 fixture, its real Qwen2 template): the answer is
// the completion of the prompt the template renders (checked against
// /v1/completions given that text), streamed deltas add up to it, and bad
// conversations are the client's own exception classes.
import OpenAI from "openai";

import { check, done } from "./openai_check.mjs";

const [baseURL, modelName] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });

const messages = [{ role: "user", content: "Hello there" }];
const chat = await client.chat.completions.create({ model: modelName, messages, max_tokens: 5, temperature: 0 });
const c0 = chat.choices[0];
check(chat.object === "chat.completion" && c0.message.role === "assistant" && typeof c0.message.content === "string",
      "chat.completions.create(): an assistant message", chat);
check(c0.finish_reason === "length" || c0.finish_reason === "stop", "a finish reason", c0.finish_reason);
// Qwen2's template: a default system message, then the turn and the assistant's header.
const rendered = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n" +
                 "<|im_start|>assistant\n";
const plain = await client.completions.create({ model: modelName, prompt: rendered, max_tokens: 5, temperature: 0 });
check(plain.choices[0].text === c0.message.content, "the reply is the completion of the rendered template",
      [plain.choices[0].text, c0.message.content]);
check(chat.usage.prompt_tokens === plain.usage.prompt_tokens, "usage: the rendered prompt's tokens",
      [chat.usage, plain.usage]);

const stream = await client.chat.completions.create({ model: modelName, messages, max_tokens: 5, temperature: 0,
                                                      stream: true });
let text = "", role = null, chunks = 0, finish = null;
for await (const chunk of stream) {
  chunks++;
  const d = chunk.choices[0]?.delta ?? {};
  if (d.role) role = d.role;
  if (d.content) text += d.content;
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}
check(role === "assistant" && text === c0.message.content && finish !== null,
      "streamed deltas: the role, then pieces adding up to the answer", { role, text, finish, chunks });

const parts = await client.chat.completions.create({
  model: modelName, messages: [{ role: "user", content: [{ type: "text", text: "Hello " }, { type: "text", text: "there" }] }],
  max_tokens: 5, temperature: 0 });
check(parts.choices[0].message.content === c0.message.content, "content as text parts", parts.choices[0]);

for (const [bad, what, re] of [[[], "an empty conversation", /messages/],
                               [[{ content: "no role" }], "a message without a role", /role/],
                               [[{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }],
                                "an image part", /text parts/]]) {
  try {
    await client.chat.completions.create({ model: modelName, messages: bad, max_tokens: 5 });
    check(false, what + " is refused", "no error");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && re.test(e.message), what + ": BadRequestError naming it", String(e));
  }
}
done("openai chat");

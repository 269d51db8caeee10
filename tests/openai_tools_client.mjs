// OpenAI's official Node client: a tool call's round trip through
// `halformer serve` (tests/check_openai.sh tools) of tests/fixtures/hf/qwen2_tools,
// a Qwen2 model with Qwen2.5's chat template whose weights make it call
// get_weather when no call is in the conversation and answer once the call
// and its result are (tests/make_tool_model.py). Tools in, a tool call parsed
// out (whole and streamed), the call and a tool result back in, the final
// answer out; then requests the server refuses, as the client's exceptions.
import OpenAI from "openai";

import { check, done } from "./openai_check.mjs";

const [baseURL, modelName] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather now in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const ask = { role: "user", content: "What is the weather in Paris?" };

// 1. Tools in, a call out.
const first = await client.chat.completions.create({ model: modelName, messages: [ask], tools, temperature: 0,
                                                     max_tokens: 8 });
const c0 = first.choices[0];
check(c0.finish_reason === "tool_calls", "finish_reason tool_calls", c0);
check(c0.message.content === null, "no content beside the call", c0.message);
const call = c0.message.tool_calls?.[0];
check(c0.message.tool_calls?.length === 1 && call.type === "function" && call.function.name === "get_weather" &&
      typeof call.id === "string" && call.id.startsWith("call_"), "one get_weather call with an id", c0.message);
check(JSON.stringify(JSON.parse(call?.function?.arguments ?? "null")) === JSON.stringify({ city: "Paris" }),
      "its arguments: JSON text of {city: Paris}", call);

// The same streamed: the call in one delta, then the finish reason.
const stream = await client.chat.completions.create({ model: modelName, messages: [ask], tools, temperature: 0,
                                                      max_tokens: 8, stream: true });
let streamedCalls = [], finish = null, text = "";
for await (const chunk of stream) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.content) text += d.content;
  for (const tc of d.tool_calls ?? []) streamedCalls.push(tc);
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}
check(finish === "tool_calls" && text === "" && streamedCalls.length === 1 && streamedCalls[0].index === 0 &&
      streamedCalls[0].function.name === "get_weather" &&
      streamedCalls[0].function.arguments === call?.function?.arguments,
      "streamed: one tool_calls delta, finish_reason tool_calls", { finish, text, streamedCalls });

// 2. The call and its result back in, the final answer out.
const history = [ask, c0.message, { role: "tool", tool_call_id: call?.id, content: "21 degrees, clear" }];
const second = await client.chat.completions.create({ model: modelName, messages: history, tools, temperature: 0,
                                                      max_tokens: 8 });
const c1 = second.choices[0];
check(c1.finish_reason === "stop" && c1.message.content === "It is 21 degrees in Paris." &&
      c1.message.tool_calls === undefined, "the final answer after the tool result", c1);

// tool_choice "none": the tools are not offered, so no call is parsed (the
// model's text stays content).
const none = await client.chat.completions.create({ model: modelName, messages: [ask], tools, tool_choice: "none",
                                                    temperature: 0, max_tokens: 8 });
check(none.choices[0].finish_reason === "stop" && typeof none.choices[0].message.content === "string" &&
      none.choices[0].message.tool_calls === undefined, "tool_choice none: text, no call", none.choices[0]);

// Refused, each a BadRequestError naming the problem.
for (const [body, what, re] of [
  [{ messages: [ask], tools, tool_choice: "required" }, "tool_choice required", /tool_choice/],
  [{ messages: [ask], tools: [{ type: "retrieval" }] }, "a tool that is not a function", /function/],
  [{ messages: [ask], tools: [{ type: "function", function: {} }] }, "a function without a name", /name/],
  [{ messages: [ask, { role: "assistant", content: null, tool_calls: [{ id: "x", type: "function",
      function: { name: "get_weather", arguments: "{not json" } }] }] }, "arguments that are not JSON", /arguments/],
  [{ messages: [ask], chat_template_kwargs: { tools: [] } }, "chat_template_kwargs setting tools", /chat_template_kwargs/],
]) {
  try {
    await client.chat.completions.create({ model: modelName, max_tokens: 4, ...body });
    check(false, `refused: ${what}`, "answered");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && re.test(e.message), `refused: ${what}`, [e.constructor.name, e.message]);
  }
}

done("openai tools");

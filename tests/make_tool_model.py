#!/usr/bin/python3
# A Qwen2 checkpoint whose weights are set by hand so that its greedy reply
# is known: the tool-call round trip of tests/openai_tools_client.mjs
# (tests/fixtures/hf/qwen2_tools). Its tokenizer is the qwen2 fixture's plus
# two added tokens (not special):
#   CALL   '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
#   ANSWER 'It is 21 degrees in Paris.'
# and its chat template Qwen2.5-Instruct's (tests/fixtures/chat/qwen2_5.jinja).
# One layer: Q and K are zero, so attention averages the context; V and O
# carry "CALL is in the context" into one dimension of the residual. The
# output head then reads the current token and that flag:
#   no CALL in the context yet  -> CALL   (the model calls the tool)
#   CALL in the context         -> ANSWER (a tool result came back)
#   after CALL or ANSWER        -> <|im_end|> (eos)
# so a conversation gets the call first and, once the call and its result
# are in the history (the template writes the call back as the same text),
# the answer. The MLP is zero. numpy only:
#   /usr/bin/python3 tests/make_tool_model.py
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "fixtures", "hf", "qwen2")
OUT = os.path.join(HERE, "fixtures", "hf", "qwen2_tools")
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ANSWER = "It is 21 degrees in Paris."

H, HEADS, KV, HD, FFN = 32, 4, 2, 8, 48
D_FLAG, D_SOURCE, D_CONST, D_CALL, D_ANSWER = 16, 17, 18, 19, 20


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = json.load(open(os.path.join(SRC, "tokenizer.json"), encoding="utf-8"))
    base = 1 + max(t["id"] for t in tok["added_tokens"])
    call_id, answer_id = base, base + 1
    for i, text in ((call_id, CALL), (answer_id, ANSWER)):
        tok["added_tokens"].append({"id": i, "content": text, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": False})
    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    V = answer_id + 1
    eos = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|im_end|>")
    pad = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|endoftext|>")

    cfg = json.load(open(os.path.join(SRC, "config.json")))
    cfg.update({"num_hidden_layers": 1, "vocab_size": V, "max_position_embeddings": 4096,
                "tie_word_embeddings": False, "eos_token_id": eos, "bos_token_id": pad})
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": pad, "eos_token_id": eos}, f, indent=2)
        f.write("\n")
    tc = json.load(open(os.path.join(SRC, "tokenizer_config.json")))
    with open(os.path.join(HERE, "fixtures", "chat", "qwen2_5.jinja"), encoding="utf-8") as f:
        tc["chat_template"] = f.read()
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=2)
        f.write("\n")

    rng = np.random.default_rng(2024)
    emb = np.zeros((V, H), np.float32)
    emb[:, :16] = rng.normal(0, 0.3, (V, 16))
    emb[:, D_CONST] = 1.0
    emb[call_id, D_SOURCE] = 1.0
    emb[call_id, D_CALL] = 3.0
    emb[answer_id, D_ANSWER] = 3.0
    t = {"model.embed_tokens.weight": emb}
    p = "model.layers.0."
    t[p + "input_layernorm.weight"] = np.ones(H, np.float32)
    t[p + "post_attention_layernorm.weight"] = np.ones(H, np.float32)
    for n, rows in (("q_proj", HEADS * HD), ("k_proj", KV * HD), ("v_proj", KV * HD)):
        t[p + "self_attn." + n + ".weight"] = np.zeros((rows, H), np.float32)
        t[p + "self_attn." + n + ".bias"] = np.zeros(rows, np.float32)
    t[p + "self_attn.v_proj.weight"][0, D_SOURCE] = 1.0  # kv head 0, dim 0: "this position is CALL"
    o = np.zeros((H, HEADS * HD), np.float32)
    o[D_FLAG, 0] = 200.0  # head 0 (reads kv head 0): its average over the context
    t[p + "self_attn.o_proj.weight"] = o
    t[p + "mlp.gate_proj.weight"] = np.zeros((FFN, H), np.float32)
    t[p + "mlp.up_proj.weight"] = np.zeros((FFN, H), np.float32)
    t[p + "mlp.down_proj.weight"] = np.zeros((H, FFN), np.float32)
    t["model.norm.weight"] = np.ones(H, np.float32)
    head = np.zeros((V, H), np.float32)
    head[call_id, D_CONST] = 10.0
    head[answer_id, D_CONST] = 9.5
    head[answer_id, D_FLAG] = 50.0
    head[eos, D_CALL] = head[eos, D_ANSWER] = 100.0
    t["lm_head.weight"] = head
    write_safetensors(os.path.join(OUT, "model.safetensors"), t)
    print("wrote", OUT, "vocab", V, "call", call_id, "answer", answer_id, "eos", eos)


if __name__ == "__main__":
    main()

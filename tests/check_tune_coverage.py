#!/usr/bin/env python3
"""Every kernel the inference runtime calls is tuned by `halformer tune`.

The kernels called: the hf_* identifiers in the code of runtime/src/ and its
subdirectories (layers/, decoding/, ...; comments, strings and #include lines
left out; training, runtime/src/train/, is not searched by the tuner, nor
the layers' backward halves, which only training calls). The kernels covered: `halformer tune
--list-kernels`, every kernel of every task's group (tools/tune/tasks.h). A
kernel called and not covered would keep its hand schedule on every machine
however long one tunes; it fails this check unless EXCLUDED says why.

Usage: check_tune_coverage.py HALFORMER SOURCE_DIR
"""
import glob
import os
import re
import subprocess
import sys

# Called by the runtime, deliberately not tuned: kernel (or prefix*) → why.
EXCLUDED = {
    "hf_pack_*": "packs the weights once, at load (Model::set_precision)",
    "hf_topk8": "no tunable knob (generator topk)",
    "hf_rope": "an elementwise rotation of a step's Q|K rows (memory-bound, far below the projections; "
               "its one knob, gpu_threads, is the GPU's)",
    "hf_argmax": "no tunable knob (generator topk)",
    "hf_logits_adjust": "a copy of one step's logits and a few entries (the decoding controls), far below the head",
    "hf_gather_rows": "a copy: a prefill chunk's keys from the paged cache, the last positions of prompts of different lengths",
    "hf_scatter_rows": "a copy of a step's new K|V rows to their paged-cache rows, far below the projections",
    "hf_pool_*": "no tunable knob (generator pool: a few rows a call, far below a layer)",
    "hf_moe_route": "no tunable knob (generator moe_route: a row of router logits a task, the top-k of a few experts)",
    "hf_moe_combine": "no tunable knob (generator moe_combine: k expert rows joined a row, far below the experts' projections)",
    "hf_softcap": "an elementwise cap of one step's logits (memory-bound, far below the head's projection)",
    "hf_position_bias*": "no tunable knob (generator position_bias: one (2·max_distance + 1) × heads table per stack and call)",
    "hf_embedding_none_q*": "one row per token read from a GGUF file's blocks (generator embedding_blocks: memory-bound, "
                            "far below a layer; its knob is embedding's tokens_per_task)",
    "hf_linear_q4*": "not yet: int8's schedule and knobs (linear_packed), but the tuner makes float32 weights and packs "
                     "them (tools/tune/ops.h), and q4 / q4_1 pack only a GGUF file's Q4_0 / Q4_1 blocks (hf_pack_q4_0, "
                     "hf_pack_q4_1)",
}


def matches(name, pattern):
    return name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1]))


def excluded(name):
    for pattern, why in EXCLUDED.items():
        if matches(name, pattern):
            return why
    return None


# Comments and string/char literals (kept apart so that "//" inside a string
# is no comment), and preprocessor #include lines.
TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#[ \t]*include[^\n]*',
                    re.S | re.M)
KERNEL = re.compile(r"\bhf_[a-z0-9_]+\b")


def without_training(text):
    """text with the training-only lines blanked: #ifdef HALFORMER_HAS_TRAINING
    branches and the #else of #ifndef HALFORMER_HAS_TRAINING (the layers'
    backward halves and dropout)."""
    out, stack = [], []  # per open #if: [is a training conditional, current branch skipped]
    for line in text.split("\n"):
        d = line.strip()
        skipped = any(s for _, s in stack)
        if re.match(r"#\s*ifdef\s+HALFORMER_HAS_TRAINING\b", d):
            stack.append([True, True])
        elif re.match(r"#\s*ifndef\s+HALFORMER_HAS_TRAINING\b", d):
            stack.append([True, False])
        elif re.match(r"#\s*if", d):
            stack.append([False, False])
        elif re.match(r"#\s*else", d) and stack and stack[-1][0]:
            stack[-1][1] = not stack[-1][1]
        elif re.match(r"#\s*endif", d) and stack:
            stack.pop()
        out.append("" if skipped or any(s for _, s in stack) else line)
    return "\n".join(out)


def called_kernels(src):
    """kernel → first 'file:line' where the runtime's code names it."""
    found = {}
    files = sorted(p for p in glob.glob(os.path.join(src, "runtime", "src", "**", "*.cpp"), recursive=True)
                   if os.sep + "train" + os.sep not in p)
    if not files:
        sys.exit(f"FAIL: no runtime sources in {src}/runtime/src")
    for path in files:
        text = without_training(open(path, encoding="utf-8").read())
        # Blank the comments etc. keeping the newlines, so line numbers stay.
        code = TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        for m in KERNEL.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            found.setdefault(m.group(0), f"{os.path.relpath(path, src)}:{line}")
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    halformer, src = sys.argv[1], sys.argv[2]
    out = subprocess.run([halformer, "tune", "--list-kernels"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: {halformer} tune --list-kernels exited with {out.returncode}:\n{out.stderr}")
    covered = set(out.stdout.split())
    if not covered:
        sys.exit("FAIL: halformer tune --list-kernels listed no kernel")
    called = called_kernels(src)
    if not called:
        sys.exit("FAIL: found no hf_* kernel in runtime/src/*.cpp")

    uncovered, skipped = [], []
    for name in sorted(called):
        why = excluded(name)
        if why:
            skipped.append(f"  {name}: {why}")
        elif name not in covered:
            uncovered.append(name)
    print(f"{len(called)} kernels called by runtime/src/*.cpp, {len(covered)} covered by halformer tune's tasks")
    print(f"not tuned, by design ({len(skipped)}):")
    print("\n".join(skipped))
    for pattern in EXCLUDED:
        if not any(matches(n, pattern) for n in called):
            print(f"note: exclusion {pattern} matches no kernel the runtime calls (stale?)")
    if uncovered:
        for name in uncovered:
            print(f"FAIL: {name} (named at {called[name]}) is in no tuning task's group: "
                  "add it to a task in tools/tune/tasks.h, or to EXCLUDED here with the reason")
        return 1
    print("tune.coverage: every kernel the runtime calls is tuned")
    return 0


if __name__ == "__main__":
    sys.exit(main())

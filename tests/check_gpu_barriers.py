#!/usr/bin/python3
"""Every hand-scheduled kernel's GPU code must not put a barrier inside a
branch that only some threads take (a divergent barrier: wrong results on
PoCL, a hang or undefined behaviour on a GPU). Halide 14 can produce one when
a guarded thread split is hoisted over a stage's pure and update loops; the
OpenCL op tests catch it only at some shapes, so this reads the lowered
OpenCL C of each kernel (its `-e stmt`) instead.

  check_gpu_barriers.py GENERATOR_EXE KERNEL_LIST_INC OUT_DIR [TARGET]
"""
import re
import subprocess
import sys

gen, kernel_list, out = sys.argv[1:4]
target = sys.argv[4] if len(sys.argv) > 4 else "x86-64-linux-sse41-opencl-cl_doubles"
bad = []
kernels = re.findall(r'\{"([^"]+)", "([^"]+)", "([^"]*)"\}', open(kernel_list).read())
for name, generator, params in kernels:
    r = subprocess.run([gen, "-g", generator, "-f", name, "-o", out, "-e", "stmt", f"target={target}"] +
                       params.split(), capture_output=True, text=True)
    if r.returncode:
        print(f"{name}: the generator failed:\n{r.stderr[-2000:]}")
        sys.exit(1)
    # Inside a kernel, track what each open brace belongs to: a branch or
    # loop (if / else / for / while: only some threads, or some trips, may
    # reach it) or a plain scope (Halide opens one per allocation; every
    # thread passes through it). A barrier with any branch or loop open
    # around it is counted.
    in_kernel, count, stack, prev = False, 0, [], ""
    for line in open(f"{out}/{name}.stmt", errors="replace"):
        text = line.strip()
        if line.startswith("__kernel"):
            in_kernel, stack = True, []
        elif line.startswith("} // kernel"):
            in_kernel = False
        elif in_kernel:
            if "barrier(" in text and any(stack):
                count += 1
            if text.startswith("}"):
                if stack:
                    stack.pop()
                if text.startswith("} else"):
                    stack.append(True)
            elif text.endswith("{"):
                head = text[:-1].strip() or prev
                stack.append(bool(re.match(r"(if|else|for|while)\b", head)))
        if text:
            prev = text
    if count:
        bad.append(f"{name}: {count} barrier(s) inside a branch")
print(f"{len(kernels)} kernels' {target} code read")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("no divergent barriers")

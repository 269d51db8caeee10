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
    in_kernel, count = False, 0
    for line in open(f"{out}/{name}.stmt", errors="replace"):
        if line.startswith("__kernel"):
            in_kernel = True
        elif line.startswith("} // kernel"):
            in_kernel = False
        elif in_kernel and "barrier(" in line and len(line) - len(line.lstrip()) > 1:
            count += 1
    if count:
        bad.append(f"{name}: {count} barrier(s) inside a branch")
print(f"{len(kernels)} kernels' {target} code read")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("no divergent barriers")

#!/usr/bin/python3
"""Every hand-scheduled kernel's GPU code must not put a barrier inside a
branch or loop that only some threads take (a divergent barrier: wrong
results on PoCL, a hang or undefined behaviour on a GPU). Halide 14 can
produce one when a guarded thread split is hoisted over a stage's pure and
update loops; the OpenCL op tests catch it only at some shapes, so this reads
the lowered OpenCL C of each kernel (its `-e stmt`) instead.

A branch or loop is divergent when its condition or bounds depend on a
thread id, directly or through values computed from one (or when it sits in
a divergent one). Barriers in loops every thread of the block runs alike (a
loop over a block's rows, a serial combine of per-thread partials) are
legal and not counted. The analysis checks itself on hand-written kernels
first (a barrier under a thread-dependent branch must be found).

  check_gpu_barriers.py GENERATOR_EXE KERNEL_LIST_INC OUT_DIR [TARGET]
"""
import re
import subprocess
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
ASSIGN = re.compile(r"(?:[A-Za-z_][A-Za-z_0-9 ]*\s+)?(_[A-Za-z_0-9]+)\s*=\s*(.*);$")
LOOP_VAR = re.compile(r"for\s*\(\s*int\s+(_[A-Za-z_0-9]+)")


def divergent_barriers(lines):
    """The number of barriers inside divergent branches or loops of the
    __kernel functions in `lines` (OpenCL C as Halide writes it)."""
    in_kernel, count, stack, prev, tainted = False, 0, [], "", set()
    closed = False  # the divergence of the scope closed last (an `else` takes its branch's)

    def divergent(expr):
        return "get_local_id" in expr or any(t in tainted for t in IDENT.findall(expr))

    for line in lines:
        text = line.strip()
        if line.startswith("__kernel"):
            in_kernel, stack, tainted = True, [], set()
        elif line.startswith("} // kernel"):
            in_kernel = False
        elif in_kernel:
            if "barrier(" in text and any(stack):
                count += 1
            # A value computed from a thread id, or inside a divergent scope,
            # is per-thread.
            m = ASSIGN.match(text)
            if m and not text.startswith(("for", "if")) and (divergent(m.group(2)) or any(stack)):
                tainted.add(m.group(1))
            if text.startswith("}"):
                closed = stack.pop() if stack else False
                if text.startswith("} else"):
                    stack.append(closed or any(stack))  # the else of the branch just closed
            elif text.endswith("{"):
                head = text[:-1].strip() or prev
                kind = re.match(r"(if|else|for|while)\b", head)
                if not kind:
                    stack.append(False)  # a plain scope: every thread passes
                elif kind.group(1) == "else":
                    # Halide writes `} // if _c`, `else`, `{` on three lines:
                    # the else of the branch closed last.
                    stack.append(closed or any(stack))
                else:
                    d = divergent(head) or any(stack)
                    loop_var = LOOP_VAR.match(head)
                    if d and loop_var:
                        tainted.add(loop_var.group(1))
                    stack.append(d)
        if text:
            prev = text
    return count


SELF_TEST = [
    # (kernel, divergent barriers)
    ("""__kernel void k(const int _n) {
 int _t = get_local_id(0);
 bool _c = _t < 5;
 if (_c)
 {
  barrier(0);
 }
} // kernel
""", 1),
    ("""__kernel void k(const int _n) {
 int _t = get_local_id(0);
 for (int _i = 0; _i < 0 + _n; _i++)
 {
  barrier(0);
 }
 int _m = _t * 4;
 for (int _j = 0; _j < 0 + _m; _j++)
 {
  {
   barrier(0);
  }
 }
} // kernel
""", 1),
    ("""__kernel void k(const int _n) {
 int _t = get_local_id(0);
 if (_n > 2)
 {
  barrier(0);
 } else {
  barrier(0);
 }
 if (_t)
 {
  int _z = 1;
 } else {
  barrier(0);
 }
} // kernel
""", 1),
    # Halide's own layout of an else: three lines.
    ("""__kernel void k(const int _n) {
 int _t = get_local_id(0);
 bool _c = _t < 3;
 if (_c)
 {
  int _z = 1;
 } // if _c
 else
 {
  barrier(0);
 } // if _c else
 if (_n)
 {
  int _y = 2;
 } // if _n
 else
 {
  barrier(0);
 } // if _n else
} // kernel
""", 1),
]


def main():
    for i, (kernel, want) in enumerate(SELF_TEST):
        got = divergent_barriers(kernel.splitlines(keepends=True))
        if got != want:
            print(f"self-test {i}: {got} divergent barriers found, {want} expected")
            sys.exit(1)
    gen, kernel_list, out = sys.argv[1:4]
    target = sys.argv[4] if len(sys.argv) > 4 else "x86-64-linux-sse41-opencl-cl_doubles"
    bad = []
    kernels = re.findall(r'\{"([^"]+)", "([^"]+)", "([^"]*)", (?:true|false)\}', open(kernel_list).read())
    if not kernels:
        print(f"no kernels read from {kernel_list}: has its format changed?")
        sys.exit(1)
    for name, generator, params in kernels:
        r = subprocess.run([gen, "-g", generator, "-f", name, "-o", out, "-e", "stmt", f"target={target}"] +
                           params.split(), capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: the generator failed:\n{r.stderr[-2000:]}")
            sys.exit(1)
        count = divergent_barriers(open(f"{out}/{name}.stmt", errors="replace"))
        if count:
            bad.append(f"{name}: {count} barrier(s) inside a branch or loop only some threads take")
    print(f"{len(kernels)} kernels' {target} code read")
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("no divergent barriers")


if __name__ == "__main__":
    main()

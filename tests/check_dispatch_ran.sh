#!/usr/bin/env bash
# check_dispatch_ran.sh CHECK_DISPATCH MODE: which function of the probe
# kernel's wrapper actually ran. check_dispatch checks what the runtime
# answered the wrapper for each variant; here gdb stops at every variant's
# function of hf_layer_norm, and the one that runs must be the selected
# variant's (HALFORMER_ISA), with the record's marker on the record's CPU and
# none on any other. Skipped (77) where check_dispatch is; without gdb only
# check_dispatch's own checks are made.
set -uo pipefail
bin=$1 mode=$2
out=$("$bin" "$mode")
rc=$?
echo "$out"
[ $rc = 0 ] || exit $rc
command -v gdb > /dev/null || { echo "gdb not found (Debian gdb): which function ran is not checked"; exit 0; }
want=$(sed -n 's/^check_dispatch: the variant that must run: //p' <<< "$out")
isa=${want%%,*}
marker=${want##*marker }
ran=$(gdb -q -batch -ex 'set pagination off' -ex 'rbreak ^hf_layer_norm-x86' -ex run -ex 'bt 1' \
          --args "$bin" "$mode" 2>&1 | sed -n 's/^#0 .* in \(hf_layer_norm-x86[^ ]*\) ().*/\1/p' | head -1)
[ -n "$ran" ] || { echo "check_dispatch_ran: FAIL: gdb saw no variant of hf_layer_norm run"; exit 1; }
echo "ran: $ran"
f="-${ran#hf_layer_norm-}-"
has() { [[ "$f" == *"-$1-"* ]]; }
case "$isa" in
  sapphirerapids) has avx512_sapphirerapids ;;
  avx512) has avx512_skylake && ! has avx512_sapphirerapids ;;
  avx2) has avx2 && ! has avx512 ;;
  sse41) has sse41 && ! has avx ;;
  *) false ;;
esac || { echo "check_dispatch_ran: FAIL: the $isa variant must run"; exit 1; }
for m in arm_dot_prod arm_fp16 armv81a cl_doubles cl_half cl_atomics64; do
  if has $m && [ "$m" != "$marker" ]; then echo "check_dispatch_ran: FAIL: the variant of marker $m ran"; exit 1; fi
done
if [ "$marker" != none ] && ! has "$marker"; then
  echo "check_dispatch_ran: FAIL: the record's variant (marker $marker) did not run"; exit 1
fi
echo "check_dispatch_ran: $isa, marker $marker: the expected function ran"

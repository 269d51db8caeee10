#!/usr/bin/env bash
# expect_exit.sh CODE COMMAND...: passes when COMMAND exits with CODE (for a
# suite that must be skipped, 77, on the host it runs on).
want=$1
shift
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
  echo "expected exit code $want, got $got: $*" >&2
  exit 1
fi
echo "exit code $got, as expected"

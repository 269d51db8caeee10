# Shared by the check_*.sh scripts: sourced, not run.
fail() { echo "FAIL: $*"; exit 1; }
expect_error() {  # expect_error "message piece" command...: fails unless the command fails saying it
    local piece=$1; shift
    if out=$("$@" 2>&1); then fail "no error from: $*"; fi
    grep -qF -- "$piece" <<< "$out" || fail "expected '$piece' from: $* — got: $out"
}

# Shared helpers of the integration tests. Each test is `bash test_x.sh PATH/TO/elastrain`.
set -euo pipefail
BIN=${1:?usage: $0 PATH/TO/elastrain}
BIN=$(readlink -f "$BIN")
SRC=${ELASTRAIN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
WORK=$(mktemp -d /tmp/elastrain_it.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
PASSED=0
FAILED=0

pass() { echo "ok   - $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL - $*"; FAILED=$((FAILED + 1)); }

# expect_error NAME PATTERN -- ARGS...: the command must exit non-zero, print exactly one
# line on stderr, and that line must match PATTERN (grep -E).
expect_error() {
  local name=$1 pattern=$2
  shift 3
  local out rc=0
  out=$("$BIN" "$@" 2>&1 >/dev/null) || rc=$?
  local lines
  lines=$(printf '%s\n' "$out" | grep -c . || true)
  if [ "$rc" -eq 0 ]; then fail "$name: exit code 0, expected an error"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$name: expected one line on stderr, got $lines: $out"; return; fi
  if ! printf '%s\n' "$out" | grep -qE "$pattern"; then fail "$name: '$out' does not match /$pattern/"; return; fi
  pass "$name (exit $rc): $out"
}

# losses FILE: the "loss" values of metrics.jsonl, one per line, as written.
losses() { grep -o '"loss":[^,}]*' "$1" | cut -d: -f2; }
eval_losses() { grep -o '"eval_loss":[^,}]*' "$1" | cut -d: -f2; }

finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

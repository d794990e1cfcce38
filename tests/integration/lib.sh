# Shared helpers of the integration tests. Each test is `bash test_x.sh PATH/TO/elastrain`.
set -euo pipefail
BIN=${1:?usage: $0 PATH/TO/elastrain}
BIN=$(readlink -f "$BIN")
SRC=${ELASTRAIN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
WORK=$(mktemp -d /tmp/elastrain_it.XXXXXX)
# Background processes a test starts (heads, agents) are killed when it exits.
BG_PIDS=()
bg_track() { BG_PIDS+=("$1"); }
kill_tracked() {
  local p
  for p in "${BG_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
# KEEP_WORK=1 keeps the work directory for a look after a failure.
trap 'kill_tracked; [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT
cd "$WORK"
# A home of the test's own: the head's token (~/.elastrain/head_token) and anything else
# kept under $HOME stay inside $WORK and never touch the user's.
export HOME="$WORK/home"
mkdir -p "$HOME"
# Nor do the caller's credentials reach a test.
unset ELASTRAIN_TOKEN ELASTRAIN_CA_CERT ELASTRAIN_ETCD_CA ELASTRAIN_ETCD_CERT ELASTRAIN_ETCD_KEY \
  ELASTRAIN_ETCD_USER ELASTRAIN_ETCD_PASSWORD_FILE
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
  if ! grep -qE -e "$pattern" <<<"$out"; then fail "$name: '$out' does not match /$pattern/"; return; fi
  pass "$name (exit $rc): $out"
}

# poll_pause N: the pause after the Nth look at a condition that did not hold yet: 0.05 s
# for the first 10, then 0.25 s. A look starts processes (`elastrain status` and
# json_query: 40-90 ms of CPU each here), taken from the job being waited for: polled
# every 0.05 s for minutes, they held about half a core.
poll_pause() { if [ "$1" -lt 10 ]; then sleep 0.05; else sleep 0.25; fi; }

# wait_until SECONDS COMMAND...: runs COMMAND (poll_pause apart) until it succeeds (then
# true) or SECONDS pass (then false). Tests wait on a condition with a generous deadline,
# never a fixed sleep or a count of short polls: a loaded machine may be many times
# slower than an idle one, and the deadline only catches a hang.
wait_until() {
  local deadline=$((SECONDS + $1)) n=0
  shift
  until "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    poll_pause $((n++))
  done
}

# The head's public key (the head writes it beside its default --signing-key under the
# test's $HOME): agents verify what the head signed with it (--head-public-key, issue 33).
HEAD_PUB="$HOME/.elastrain/head_signing_key.pub"
# head_pub_ready: waits for the head (started first) to have written it.
head_pub_ready() { wait_until 60 test -s "$HEAD_PUB" || fail "no $HEAD_PUB: the head did not write its public key"; }

# losses FILE: the "loss" values of metrics.jsonl, one per line, as written.
losses() { grep -o '"loss":[^,}]*' "$1" | cut -d: -f2; }
eval_losses() { grep -o '"eval_loss":[^,}]*' "$1" | cut -d: -f2; }

finish() {
  # No test but the gray-failure ones slows a rank: a straggler_detected anywhere else is
  # a false alarm of the straggler rule (issue 32), whatever the test checked.
  if [ -z "${EXPECT_STRAGGLERS:-}" ]; then
    local f alarms=""
    while IFS= read -r f; do
      alarms+=$("$JQ" --jsonl "$f" event=straggler_detected rank 2>/dev/null | head -1 |
                sed "s|^|$f: straggler_detected rank |" || true)
    done < <(find "$WORK" -name events.jsonl 2>/dev/null)
    [ -z "$alarms" ] && pass "no straggler_detected in this test's runs" || fail "false straggler alarm: $alarms"
  fi
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

# compare_params REF OTHER: OTHER's parameters within 1e-5 of REF: the relative L2 norm
# of the difference and the largest absolute difference must both be <= 1e-5 (weights
# are O(0.02..1)). Not per element relative: a parameter whose true gradient is zero
# (gpt2's key bias: softmax ignores a per-query constant) moves by Adam-amplified
# rounding noise, so its value is noise in every run, not a meaningful reference.
compare_params() {
  [ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] || { echo "size differs"; return 1; }
  paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") | awk '
    { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; dd += d * d; nn += $1 * $1 }
    END { r = sqrt(dd / nn); printf "relative L2 diff %.3g, max abs diff %.3g over %d params\n", r, m, NR;
          exit !(r <= 1e-5 && m <= 1e-5) }'
}

# step_losses FILE: "step loss" per training line of metrics.jsonl (a resumed run appends).
step_losses() {
  awk 'match($0, /"loss":[^,}]*/) { l = substr($0, RSTART + 7, RLENGTH - 7);
       match($0, /"step":[0-9]+/); print substr($0, RSTART + 7, RLENGTH - 7), l }' "$1"
}

# compare_losses REF OTHER: every step logged in OTHER has the same step in REF with a
# loss within 1e-5 relative (steps are matched by number, so OTHER may be a resumed tail).
compare_losses() {
  awk 'NR == FNR { ref[$1] = $2; next }
       { if (!($1 in ref)) { missing++; next } d = ref[$1] - $2; if (d < 0) d = -d; r = d / (ref[$1] < 0 ? -ref[$1] : ref[$1]);
         if (r > m) m = r; n++ }
       END { printf "%d losses, max rel diff %.3g\n", n, m; exit !(n > 0 && !missing && m <= 1e-5) }' \
    <(step_losses "$1") <(step_losses "$2")
}

# --- elastic runs -----------------------------------------------------------------
TOOLS=$(dirname "$BIN")
JQ="$TOOLS/json_query"
# last_step RUN_DIR: the newest step in metrics.jsonl (0 before the first).
last_step() {
  local s
  s=$("$JQ" --jsonl "$1/metrics.jsonl" step 2>/dev/null | sort -n | tail -1)
  echo "${s:-0}"
}
# wait_step RUN_DIR N [SECONDS]: waits until step N is logged (needs log_period=1); false
# after SECONDS (default 120).
wait_step() {
  local deadline=$((SECONDS + ${3:-120})) n=0
  while [ "$(last_step "$1")" -lt "$2" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    poll_pause $((n++))
  done
}
# ev RUN_DIR EVENT FIELD [K=V ...]: FIELD of each EVENT in events.jsonl (whose fields K equal V).
ev() {
  local run=$1 event=$2 field=$3
  shift 3
  "$JQ" --jsonl "$run/events.jsonl" event="$event" "$@" "$field" 2>/dev/null || true
}
# wait_ev RUN_DIR EVENT [SECONDS] [K=V ...]: waits until EVENT appears.
wait_ev() {
  local run=$1 event=$2 deadline=$((SECONDS + ${3:-60})) n=0
  shift 3 || shift $#
  until [ -n "$(ev "$run" "$event" time "$@")" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    poll_pause $((n++))
  done
}
# rank_pid RUN_DIR RANK: the pid of a rank of the running generation (elastrain status).
rank_pid() { "$BIN" status --run-dir "$1" --json | "$JQ" "ranks.$2.pid"; }
now() { date +%s.%N; }
# compare_params_within REF OTHER TOL: like compare_params, with tolerance TOL.
compare_params_within() {
  [ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] || { echo "size differs"; return 1; }
  paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") | awk -v tol="$3" '
    { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; dd += d * d; nn += $1 * $1 }
    END { r = sqrt(dd / nn); printf "relative L2 diff %.3g, max abs diff %.3g over %d params\n", r, m, NR;
          exit !(r <= tol) }'
}
# A small text corpus that a run goes through several times (epochs).
make_corpus() { head -c "${2:-24000}" /usr/share/games/fortunes/computers > "$1"; }

# --- observability ------------------------------------------------------------------
# Files a test keeps for people to look at (screenshots, scraped metrics): build/test-artifacts.
ARTIFACTS="$TOOLS/test-artifacts"
mkdir -p "$ARTIFACTS"
# chrome ARGS...: headless Chromium (installed by scripts/install_deps.sh --test), with a
# profile of its own in $WORK, no sandbox (root), no GPU; its chatter goes to $WORK.
chrome() {
  local bin
  bin=$(command -v chromium-headless-shell || command -v chromium || true)
  [ -n "$bin" ] || { echo "no chromium-headless-shell or chromium (scripts/install_deps.sh --test)" >&2; return 1; }
  timeout 90 "$bin" --no-sandbox --disable-gpu --headless --user-data-dir="$WORK/chrome-profile" \
    --window-size=1300,1700 "$@" 2>>"$WORK/chrome.log"
}
# --- records ----------------------------------------------------------------------
# train_steps RUN: the step of each training line of RUN's metrics.jsonl, in file order.
train_steps() { step_losses "$1/metrics.jsonl" | awk '{ print $1 }'; }
# check_lines RUN STEPS WHAT: exactly one training line for each step 1..STEPS, nothing else.
check_lines() {
  local dups missing
  dups=$(train_steps "$1" | sort -n | uniq -d | tr '\n' ' ')
  missing=$(comm -23 <(seq 1 "$2" | sort) <(train_steps "$1" | sort -u) | sort -n | tr '\n' ' ')
  if [ -z "$dups" ] && [ -z "$missing" ] && [ "$(train_steps "$1" | wc -l)" -eq "$2" ]; then
    pass "$3: one metrics line for each of steps 1..$2"
  else
    fail "$3: steps logged twice: [${dups}], steps without a line: [${missing}]"
  fi
}
# check_no_redo_from_memory RUN: no generation that restored from memory redid a step
# (steps are redone only where no survivor held the state), from `elastrain report`.
check_no_redo_from_memory() {
  local run=$1 memory redoing="" bad="" i g n
  "$BIN" report "$run" --json --html "$WORK/report.html" >"$WORK/report.json"
  memory=" $(ev "$run" state_restored generation kind=memory | tr '\n' ' ')"
  for ((i = 0; ; i++)); do
    g=$("$JQ" generations.$i.generation <"$WORK/report.json") || break
    n=$("$JQ" generations.$i.redone_steps <"$WORK/report.json")
    [ "$n" -gt 0 ] || continue
    redoing+="$g($n) "
    [[ "$memory" == *" $g "* ]] && bad+="$g "
  done
  echo "  generations: $i, restored from memory: $(wc -w <<<"$memory"), redoing steps: ${redoing:-none}"
  [ -z "$bad" ] && pass "no step redone after a restore from memory ($("$JQ" redone_steps <"$WORK/report.json") in all)" ||
    fail "generations restored from memory that redid steps: $bad"
}

# Issue 34, "Done when" 3: the README's quick start, literally as written, top to bottom in
# one shell, in a fresh clone of this repository (build/ is the harness's build, so the
# `make` lines are the only ones not run: the test runs after `make`). Every command must
# succeed (set -e); then what they should have left is checked: each train wrote its own
# run directory, the elastic rehearsal was killed and stopped, the submitted job succeeded.
# HOME is the test's own (the head's token and keys), and every process the README starts
# in the background is killed on every exit path.
source "$(dirname "$0")/lib.sh"
git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 || { echo "skip: $SRC is not a git clone"; exit 77; }
command -v etcd >/dev/null || { fail "etcd is not installed (scripts/install_deps.sh)"; finish; exit 1; }
# The README's etcd and head take the fixed ports 2379, 2380 and 8265, which another
# test's `train` may hold: the quick start runs in a network namespace of its own (its
# own loopback) where this test may make one (root), so it runs beside other tests.
# Elsewhere it needs those ports free on this machine.
PRIVATE_NET=()
if unshare --net true 2>/dev/null; then
  PRIVATE_NET=(unshare --net sh -c 'ip link set lo up && exec "$@"' sh)
else
  for port in 2379 2380 8265; do
    if ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN; then echo "skip: port $port is taken (the README's etcd and head use it)"; exit 77; fi
  done
fi
clone="$WORK/clone"
git clone -q "$SRC" "$clone"
# The working tree's README (what a reader sees), in the clone the harness just built.
cp "$SRC/README.md" "$clone/README.md"
ln -s "$(cd "$(dirname "$BIN")" && pwd)" "$clone/build"
mkdir -p "$WORK/home"

# The shell blocks of the "Quick start" section, in order; `make` lines are the build.
script="$WORK/quickstart.sh"
{
  echo "PS4='+ \$(date +%T) '"  # each traced line with the time it began (root's bash ignores PS4 from the environment)
  echo "set -ex"
  awk '/^## Quick start/ { on = 1; next } on && /^## / { exit } on && /^```sh/ { code = 1; next }
       on && /^```/ { code = 0; next } code { print }' "$clone/README.md" | grep -v '^make\b'
} >"$script"
ncmd=$(grep -cv '^\s*\(#\|$\)' "$script")
[ "$ncmd" -ge 15 ] && pass "README quick start: $((ncmd - 2)) lines of shell to run" || fail "only $ncmd lines found in README's quick start"

# The shell runs in a session of its own (its id in $WORK/sid), so that everything it
# starts, in the background too, is killed with it: at the deadline, after it, and on
# every exit path of this test.
deadline=${QUICKSTART_TIMEOUT:-900}
( cd "$clone" && HOME="$WORK/home" "${PRIVATE_NET[@]}" setsid bash -c \
    'echo $$ >"$1"; bash "$2"; echo $? >"$3"' sh "$WORK/sid" "$script" "$WORK/rc" >"$WORK/quickstart.out" 2>&1 ) &
pid=$!
kill_session() {
  local sid
  sid=$(cat "$WORK/sid" 2>/dev/null) || return 0
  [ -n "$sid" ] && pkill -KILL -s "$sid" 2>/dev/null || true
}
trap 'kill_session; kill_tracked; [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT
t0=$SECONDS
while [ ! -s "$WORK/rc" ] && [ $((SECONDS - t0)) -lt "$deadline" ]; do sleep 1; done
rc=$(cat "$WORK/rc" 2>/dev/null || echo "timeout: still running after ${deadline} s")
kill_session
wait $pid 2>/dev/null || true
if [ "$rc" = 0 ]; then
  pass "every command succeeded, top to bottom"
else
  fail "the quick start stopped (exit $rc) at: $(grep -a '^+ ' "$WORK/quickstart.out" | tail -1)"
  echo "--- the last lines of its output:"; tail -25 "$WORK/quickstart.out"
  for log in head agent etcd; do
    [ -s "$clone/runs/$log.log" ] && { echo "--- runs/$log.log:"; tail -8 "$clone/runs/$log.log"; }
  done
fi
runs="$clone/runs"
n=$(ls -d "$runs"/run-* 2>/dev/null | wc -l)
[ "$n" -ge 5 ] && pass "$n trains, $n run directories (no run resumed another's)" || fail "$n default run directories: $(ls "$runs")"
grep -q '"event":"worker_failed"\|"event":"generation_failed"' "$runs/elastic/events.jsonl" 2>/dev/null \
  && pass "the elastic rehearsal lost rank 1 and went on" || fail "no failure in runs/elastic/events.jsonl"
grep -q "the job exited 4" "$WORK/quickstart.out" && pass "elastrain stop saved and stopped it (exit 4)" \
  || fail "the elastic job did not exit 4: $(grep -a 'exited' "$WORK/quickstart.out" | tail -2)"
grep -qi "SUCCEEDED" <(grep -a -A6 "elastrain submit" "$WORK/quickstart.out") \
  && pass "the submitted cluster job finished" || fail "submit: $(grep -a -A5 'elastrain submit' "$WORK/quickstart.out" | tail -4)"
finish

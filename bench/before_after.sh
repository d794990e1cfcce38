#!/usr/bin/env bash
# Recovery before and after a change, side by side in one run: bench/recovery.sh and
# bench/launch_recovery.sh with an old and a new elastrain binary, alternating round by
# round so a busy machine weighs on both alike. Both runs use this checkout's bench
# scripts (they read the events of older binaries too: `first_step_time` or the old
# `step_time`). The old binary needs its json_query beside it, as a build directory has.
#   usage: bench/before_after.sh OLD/elastrain NEW/elastrain [rounds]
#   TRIALS=1           trials per scenario of recovery.sh in each round
#   LAUNCH_WORKERS=2   launch_recovery.sh's WORKERS in each round (one run per mode)
# Prints each run's table under a header naming the binary and the round; timing never
# fails the script (exit 1 only when a bench broke).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OLD=$(readlink -f "${1:?usage: bench/before_after.sh OLD/elastrain NEW/elastrain [rounds]}")
NEW=$(readlink -f "${2:?usage: bench/before_after.sh OLD/elastrain NEW/elastrain [rounds]}")
ROUNDS=${3:-1}
for bin in "$OLD" "$NEW"; do
  [ -x "$bin" ] && [ -x "$(dirname "$bin")/json_query" ] ||
    { echo "before_after: $bin: expected an elastrain binary with json_query beside it" >&2; exit 1; }
done
broken=0
for r in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    echo "=== round $r, $side ($bin): bench/recovery.sh, ${TRIALS:-1} trial(s) per scenario"
    bash "$ROOT/bench/recovery.sh" "$bin" "${TRIALS:-1}" || broken=1
  done
  for side in before after; do
    bin=$OLD; [ $side = after ] && bin=$NEW
    # torchrun does not depend on elastrain's binary: measured once a round, as the yardstick.
    modes="cold warm"; [ $side = before ] && modes="torchrun cold warm"
    echo "=== round $r, $side ($bin): bench/launch_recovery.sh, WORKERS=${LAUNCH_WORKERS:-2}, modes $modes"
    RUNS=1 WORKERS=${LAUNCH_WORKERS:-2} MODES="$modes" bash "$ROOT/bench/launch_recovery.sh" "$bin" || broken=1
  done
done
exit $broken

#!/usr/bin/env bash
# Goodput through a failure history (issue 37): a real job replays a trace
# (`elastrain chaos replay`), and `elastrain cost simulate` predicts the same window from
# the same trace; both by category, side by side. `small`, embedded (one host), 4 workers
# of 1 thread each:
#   dp     data parallel, num_workers=2:4, through a trace of kills and preemptions with
#          notice (slots back after RETURN s); the prediction's costs are measured on the
#          same job *before* the window (a calibration kill and a calibration preemption:
#          their recovery spans; the checkpoint stalls' share of a clean stretch), so the
#          window itself is predicted, not fitted
#   fsdp   the same trace on FSDP 4, with the RAM tier off and at memory_snapshot_period=1
#   slow   a trace of slowdowns (and kills): straggler_policy=alert against exclude
#   usage: bench/goodput_trace.sh [build/elastrain]
#   MINUTES=10 RATE=150 (events per hour) RETURN=45 SEED=1 PARTS="dp fsdp slow"
# Figures are printed, never asserted; exit 1 only when a run broke.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/bench_lib.sh"  # wait_for
WAIT_FOR_POLL=1  # each look starts processes (elastrain report, status)
BIN=$(readlink -f "${1:-$ROOT/build/elastrain}")
JQ=$(dirname "$BIN")/json_query
MINUTES=${MINUTES:-10}
RATE=${RATE:-150}
RETURN=${RETURN:-45}
SEED=${SEED:-1}
PARTS=${PARTS:-dp fsdp slow}
[ -x "$BIN" ] && [ -x "$JQ" ] || { echo "goodput_trace: expected $BIN and $JQ (make build)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/elastrain_goodput.XXXXXX)
cleanup() {
  pkill -f "base_output_directory=$WORK" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
WINDOW=$((MINUTES * 60))
common=(model_name=small log_period=1 eval_interval=0 global_batch_size=8 per_device_batch_size=2
        max_target_length=128 checkpoint_period=50 threads_per_worker=1 dashboard_port=0 hardware_peak_tflops=1
        steps=100000000 max_failures=100000 host_failure_threshold=100000 preemption_notice_seconds=5
        worker_heartbeat_timeout=5 "base_output_directory=$WORK")
broken=0

# report_field RUN PATH: a value of `elastrain report --json` (a dotted path; 0 if none).
report_field() { "$BIN" report "$WORK/$1" --json 2>/dev/null | "$JQ" "$2" 2>/dev/null || echo 0; }
recoveries() { report_field "$1" recoveries | tr -d '[] ' | tr ',' '\n' | grep -c . || true; }
nth_recovery() { report_field "$1" "recoveries.$(($2 - 1))"; }  # nth_recovery RUN N (from 1)
training() { "$BIN" status --run-dir "$WORK/$1" --json 2>/dev/null | "$JQ" step 2>/dev/null | awk '{exit !($1 >= 5)}'; }
at_least_recoveries() { [ "$(recoveries "$1")" -ge "$2" ]; }

start_job() {  # start_job RUN key=value...
  local run=$1; shift
  "$BIN" train "${common[@]}" run_name="$run" "$@" >"$WORK/$run.out" 2>&1 &
  wait_for 300 training "$run" || { echo "$run: did not start training"; tail -5 "$WORK/$run.out"; broken=1; return 1; }
}

# replay RUN TRACE: the trace against the running job over WINDOW s, then stop it. Prints
# the replay's lines; leaves "$WORK/$RUN.replay".
replay() {
  "$BIN" chaos replay "$2" --seed "$SEED" --run-dir "$WORK/$1" --end-seconds "$WINDOW" --stop-at-end \
    >"$WORK/$1.replay" 2>&1 || { echo "$1: replay failed"; tail -5 "$WORK/$1.replay"; broken=1; }
  wait_for 120 sh -c "! pgrep -f 'run_name=$1 ' >/dev/null" || true
}
# measured RUN: "goodput productive redone recovery checkpoint waiting" (percent of the window).
measured() {
  awk '/^goodput over the replay:/ { sub("%", "", $5); g = $5 }
       /\(replay\)$/ { sub("%", "", $3); p[$1] = $3 }
       END { printf "%s %s %s %s %s %s", g, p["productive"], p["redone"], p["recovery"], p["checkpoint"], p["waiting"] }' \
    "$WORK/$1.replay"
}
# predicted ARGS...: the same six figures from `cost simulate` (one trial: the trace is the draw).
predicted() {
  "$BIN" cost simulate --trials 1 --horizon-seconds "$WINDOW" "$@" 2>&1 | awk -F'|' '/goodput [0-9.]+% \| productive/ {
      for (i = 1; i <= NF; ++i) { n = split($i, w, " "); v[i] = w[n]; sub("%", "", v[i]) }
      printf "%s %s %s %s %s %s", v[1], v[2], v[3], v[4], v[5], v[6] }'
}
side_by_side() {  # side_by_side LABEL "measured" "predicted"
  local m=($2) p=($3) names=(goodput productive redone recovery checkpoint waiting)
  printf "%s\n  %-12s %9s %9s %9s\n" "$1" "category" "measured" "predicted" "diff"
  for i in 0 1 2 3 4 5; do
    awk -v n="${names[$i]}" -v a="${m[$i]:-nan}" -v b="${p[$i]:-nan}" \
      'BEGIN { printf "  %-12s %8.1f%% %8.1f%% %+8.1f\n", n, a, b, a - b }'
  done
}

# --- dp -------------------------------------------------------------------------------
if [[ " $PARTS " == *" dp "* ]]; then
  trace=$WORK/dp.csv
  "$BIN" chaos trace --duration "$WINDOW" --rate "$RATE" --mix kill:3,preempt:2 --return-seconds "$RETURN" \
    --seed "$SEED" --output "$trace" >/dev/null
  events=$(grep -cE '^[0-9.]+,' "$trace")
  kills=$(grep -cE '^[0-9.]+,kill,' "$trace" || true)
  echo "dp: small, 4 data-parallel workers (num_workers=2:4), $events events in $WINDOW s ($kills kills," \
       "$((events - kills)) preemptions with notice, slots back after $RETURN s), seed $SEED"
  if start_job dp num_workers=2:4; then
    # Calibration, before the window: three kills, then a preemption whose slot returns.
    # A kill's cost is every recovery span it causes (a shrink, and a growth back if the
    # slot's new worker joins later), so the kills' spans are summed and divided by 3.
    for k in 1 2 3; do
      n=$(recoveries dp)
      "$BIN" chaos kill --rank 1 --run-dir "$WORK/dp" >/dev/null || true
      wait_for 120 at_least_recoveries dp $((n + 1)) || true
      sleep 8
    done
    n_kills=$(recoveries dp)
    r_kill=$(report_field dp recoveries | tr -d '[] ' | tr ',' '\n' | awk 'NF { s += $1 } END { printf "%.3f", s / 3 }')
    "$BIN" chaos preempt --rank 1 --seconds 15 --run-dir "$WORK/dp" >/dev/null || true
    wait_for 180 at_least_recoveries dp $((n_kills + 2)) || true
    sleep 30  # a clean stretch, for the checkpoint stalls' share
    r_shrink=$(nth_recovery dp $((n_kills + 1))); r_grow=$(nth_recovery dp $((n_kills + 2)))
    ckpt=$(report_field dp seconds.checkpoint); prod=$(report_field dp seconds.productive)
    share=$(awk -v c="$ckpt" -v p="$prod" 'BEGIN { printf "%.4f", (p > 0 ? c / p : 0) }')
    r_peer=$(awk -v a="$r_kill" -v b="$r_shrink" -v k="$kills" -v n="$events" \
      'BEGIN { printf "%.3f", (k * a + (n - k) * b) / n }')  # the trace's mix of kills and notices
    # A kill loses the step in flight (half a step on average): the "snapshot" of a
    # data-parallel job is its last completed step.
    step=$(grep -o '"step_time":[0-9.e+-]*' "$WORK/dp/metrics.jsonl" | cut -d: -f2 | sort -g \
      | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }')
    printf "  calibration (same job, before the window): a kill's recoveries %.2fs (of 3); notice -> %.2fs;" \
      "$r_kill" "$r_shrink"
    printf " slot back -> %.2fs; step %.3fs; checkpoint stalls %.2f%% of compute\n" "$r_grow" "$step" \
      "$(awk -v s="$share" 'BEGIN { print 100 * s }')"
    replay dp "$trace"
    grep -E '^chaos replay: [0-9]+ of' "$WORK/dp.replay" | sed 's/^/  /'
    m=$(measured dp)
    p=$(predicted --trace "$trace" --hosts 4 --min-hosts 2 --interval-seconds 60 \
        --checkpoint-seconds "$(awk -v s="$share" 'BEGIN { print 60 * s }')" --detection-seconds 0 \
        --restart-seconds "$r_peer" --ram-tier-coverage 1 --snapshot-period-seconds "$step" \
        --peer-restore-seconds "$r_peer" --resize-seconds "$r_grow")
    side_by_side "dp: the window of $WINDOW s, measured (chaos replay) against predicted (cost simulate)" "$m" "$p"
  fi
fi

# --- fsdp -----------------------------------------------------------------------------
if [[ " $PARTS " == *" fsdp "* ]]; then
  trace=$WORK/dp.csv
  [ -f "$trace" ] || "$BIN" chaos trace --duration "$WINDOW" --rate "$RATE" --mix kill:3,preempt:2 \
    --return-seconds "$RETURN" --seed "$SEED" --output "$trace" >/dev/null
  echo "fsdp: small, FSDP 4 (num_workers=2:4, ici_fsdp_parallelism=-1), the same trace"
  for period in 0 1; do
    run=fsdp_p$period
    if start_job $run num_workers=2:4 ici_fsdp_parallelism=-1 memory_snapshot_period=$period; then
      replay $run "$trace"
      m=($(measured $run))
      printf "  memory_snapshot_period=%s: goodput %s%% (productive %s, redone %s, recovery %s, checkpoint %s, waiting %s)\n" \
        "$period" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
    fi
  done
  echo "  memory_snapshot_period=auto: not built yet"
fi

# --- slow -----------------------------------------------------------------------------
if [[ " $PARTS " == *" slow "* ]]; then
  trace=$WORK/slow.csv
  "$BIN" chaos trace --duration "$WINDOW" --rate "$((RATE / 2))" --mix slow:3,kill:1 --slow-factor 4 \
    --slow-seconds 120 --seed "$SEED" --output "$trace" >/dev/null
  echo "slow: small, 4 data-parallel workers, $(grep -cE '^[0-9.]+,slow,' "$trace") slowdowns (4x, 120 s) and" \
       "$(grep -cE '^[0-9.]+,kill,' "$trace") kills in $WINDOW s"
  for policy in alert exclude; do
    run=slow_$policy
    if start_job $run num_workers=2:4 straggler_policy=$policy; then
      replay $run "$trace"
      m=($(measured $run))
      printf "  straggler_policy=%-8s goodput %s%% (productive %s, redone %s, recovery %s, checkpoint %s, waiting %s);" \
        "$policy" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
      printf " steps %s\n" "$(wc -l <"$WORK/$run/metrics.jsonl")"
    fi
  done
fi
exit $broken

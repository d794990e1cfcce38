#!/usr/bin/env bash
# Gray failures (issue 32) on this machine, `small` with 4 data-parallel workers of 1
# thread each (embedded: one host), side by side in one run:
#   clean 4 / clean 3     median step time of failure-free runs of 4 and of 3 workers
#   slowed FxF POLICY     rank 1 slowed F x (`elastrain chaos slow`) after step SLOW_AT:
#                         the step straggler_detected names it at (steps after the slow
#                         down), the rank and host it names, and the median step time
#                         after it (alert: the slow pace goes on; exclude: the generation
#                         re-planned without it) -> throughput against clean 3 / clean 4
#   hang                  rank 1 SIGSTOPped mid-run (worker_heartbeat_timeout=5): seconds
#                         from the stop to hang_diagnosed, and the ranks it names
#   false alarms          CLEAN_RUNS failure-free runs of CLEAN_STEPS steps while another
#                         process keeps one core busy: straggler_detected events (want 0)
#   usage: bench/gray_failures.sh [build/elastrain]
#   STEPS=80 SLOW_AT=10 CLEAN_STEPS=1000 CLEAN_RUNS=3 FACTORS="2 1.5" (CLEAN_RUNS=0 skips the false-alarm runs)
#   PARTS="slow hang busy"   which parts to run
# Figures are printed, never asserted; exit 1 only when a run broke.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/build/elastrain}")
JQ=$(dirname "$BIN")/json_query
STEPS=${STEPS:-80}
SLOW_AT=${SLOW_AT:-10}
CLEAN_STEPS=${CLEAN_STEPS:-1000}
CLEAN_RUNS=${CLEAN_RUNS:-3}
FACTORS=${FACTORS:-2 1.5}
[ -x "$BIN" ] && [ -x "$JQ" ] || { echo "gray_failures: expected $BIN and $JQ (make build)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/elastrain_gray.XXXXXX)
BUSY=""
cleanup() {
  [ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null || true
  pkill -f "base_output_directory=$WORK" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
common=(model_name=small log_period=1 eval_interval=0 global_batch_size=8 per_device_batch_size=2
        max_target_length=128 checkpoint_period=20 threads_per_worker=1 dashboard_port=0 hardware_peak_tflops=1
        "base_output_directory=$WORK")
broken=0

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# ev RUN EVENT FIELD [FILTER]: FIELD of the first EVENT in RUN's events.jsonl
ev() { { "$JQ" --jsonl "$1/events.jsonl" "event=$2" ${4:+"$4"} "$3" 2>/dev/null || true; } | head -1; }
last_step() { "$JQ" --jsonl "$1/metrics.jsonl" step 2>/dev/null | tail -1; }
# median step time of RUN's steps from step FROM on (generation GEN when given), the first 2 of it left out
pace() {
  paste <("$JQ" --jsonl "$1/metrics.jsonl" ${3:+generation=$3} step 2>/dev/null) \
        <("$JQ" --jsonl "$1/metrics.jsonl" ${3:+generation=$3} step_time 2>/dev/null) |
    awk -v f="$2" '$1 >= f { print $2 }' | tail -n +3 | median
}

clean() {  # clean NAME WORKERS STEPS: runs a failure-free job; prints its median step time
  local run="$WORK/$1"
  "$BIN" train "${common[@]}" run_name="$1" num_workers="$2" steps="$3" >"$run.out" 2>&1 ||
    { echo "gray_failures: $1 failed: $(tail -2 "$run.out")" >&2; broken=1; echo nan; return; }
  pace "$run" 0
}

slowed() {  # slowed FACTOR POLICY
  local name="slow-$1-$2" run
  run="$WORK/$name"
  "$BIN" train "${common[@]}" run_name="$name" num_workers=3:4 steps="$STEPS" straggler_policy="$2" \
    >"$run.out" 2>&1 &
  local job=$!
  until [ "$(last_step "$run")" -ge "$SLOW_AT" ] 2>/dev/null; do
    kill -0 $job 2>/dev/null || { echo "gray_failures: $name ended early: $(tail -2 "$run.out")" >&2; broken=1; return; }
    sleep 0.1
  done
  local at
  at=$(last_step "$run")
  "$BIN" chaos slow --rank 1 --factor "$1" --run-dir "$run" >>"$run.out" 2>&1 ||
    { echo "gray_failures: chaos slow failed: $(tail -2 "$run.out")" >&2; broken=1; }
  wait $job || { echo "gray_failures: $name failed: $(tail -2 "$run.out")" >&2; broken=1; return; }
  local det rank host gen after
  det=$(ev "$run" straggler_detected step)
  rank=$(ev "$run" straggler_detected rank)
  host=$(ev "$run" straggler_detected host)
  if [ "$2" = exclude ] && [ -n "$(ev "$run" host_excluded host)" ]; then
    gen=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started generation | tail -1)
    after=$(pace "$run" 0 "$gen")
  else
    after=$(pace "$run" "${det:-$at}")
  fi
  printf "%-22s %8s %10s %6s %-10s %9s\n" "slowed ${1}x $2" "$at" "${det:+$((det - at))}" "${rank:--}" \
    "${host:--}" "$after"
  echo "$after" >"$WORK/$name.pace"
}

hang() {
  local run="$WORK/hang"
  "$BIN" train "${common[@]}" run_name=hang num_workers=4 steps=40 worker_heartbeat_timeout=5 >"$run.out" 2>&1 &
  local job=$! pid stopped
  until [ "$(last_step "$run")" -ge "$SLOW_AT" ] 2>/dev/null; do
    kill -0 $job 2>/dev/null || { echo "gray_failures: hang run ended early" >&2; broken=1; return; }
    sleep 0.1
  done
  pid=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started "members.1.pid" | tail -1)
  stopped=$(date +%s.%N)
  kill -STOP "$pid"
  wait $job || { echo "gray_failures: hang run failed: $(tail -2 "$run.out")" >&2; broken=1; return; }
  local at behind where
  at=$(ev "$run" hang_diagnosed time)
  behind=$(ev "$run" hang_diagnosed behind)
  where=$(ev "$run" hang_diagnosed reason)
  awk -v s="$stopped" -v a="$at" -v b="$behind" -v w="$where" 'BEGIN {
    if (a == "") { print "hang                   no hang_diagnosed"; exit }
    printf "hang (rank 1 SIGSTOP)  diagnosed %.2f s after the stop (worker_heartbeat_timeout=5), behind %s: %s\n", a - s, b, w }'
}

PARTS=${PARTS:-slow hang busy}
printf "%-22s %s\n" "machine" "$(nproc) cores; 4 workers of 1 thread; global batch 8 x 128 tokens; $STEPS steps"
if [[ " $PARTS " == *" slow "* ]]; then
c4=$(clean clean4 4 "$STEPS")
c3=$(clean clean3 3 "$STEPS")
printf "%-22s %s s per step\n%-22s %s s per step\n" "clean 4 workers" "$c4" "clean 3 workers" "$c3"
printf "%-22s %8s %10s %6s %-10s %9s\n" "run" "slowed at" "named after" "rank" "host" "step s"
for f in $FACTORS; do
  for p in alert exclude; do slowed "$f" "$p"; done
done
for f in $FACTORS; do
  for p in alert exclude; do
    [ -s "$WORK/slow-$f-$p.pace" ] && awk -v n="slowed ${f}x $p" -v x="$(cat "$WORK/slow-$f-$p.pace")" -v c3="$c3" \
      -v c4="$c4" 'BEGIN { printf "%-22s throughput %.2f of clean 3 workers, %.2f of clean 4\n", n, c3 / x, c4 / x }'
  done
done
fi
[[ " $PARTS " == *" hang "* ]] && hang
if [[ " $PARTS " == *" busy "* ]] && [ "$CLEAN_RUNS" -gt 0 ]; then
  (while :; do :; done) &
  BUSY=$!
  alarms=0
  for i in $(seq 1 "$CLEAN_RUNS"); do
    "$BIN" train "${common[@]}" run_name="busy$i" num_workers=4 steps="$CLEAN_STEPS" >"$WORK/busy$i.out" 2>&1 ||
      { echo "gray_failures: busy$i failed" >&2; broken=1; }
    n=$({ "$JQ" --jsonl "$WORK/busy$i/events.jsonl" event=straggler_detected rank 2>/dev/null || true; } | wc -l)
    alarms=$((alarms + n))
    printf "%-22s %s straggler_detected in %s steps, median step %s s\n" "busy core, run $i" "$n" "$CLEAN_STEPS" \
      "$(pace "$WORK/busy$i" 0)"
  done
  kill "$BUSY" 2>/dev/null || true
  BUSY=""
  printf "%-22s %s in %s runs\n" "false alarms" "$alarms" "$CLEAN_RUNS"
fi
exit $broken

#!/usr/bin/env bash
# What the coordination costs while training goes on (issue 20): the CPU time of every
# elastrain process that is not a training worker, during steady training of `small`,
# and in the same run how soon a killed worker is noticed.
#   embedded  `elastrain train`: controller, agent and job API in one process
#   cluster   `elastrain head` (controller, API) + one `elastrain agent` with all the
#             slots, over etcd on loopback (etcd's own CPU is shown apart: not ours)
# Per scenario: the run trains to step WARM, then the non-worker processes' utime+stime
# (/proc/PID/stat: their own threads, not the worker children) is read over WINDOW
# seconds of training in which this script only sleeps; then rank 1 is SIGKILLed and
# detect = kill -> the agent's worker_failed.detected_at (bench/recovery.sh's figure).
# Finally the wall time of a whole `small` 2-worker run (steps=STEPS), TRAIN_RUNS times.
#   usage: bench/coordinator_cpu.sh [build/elastrain] [BASELINE_elastrain]
# With a baseline binary every measurement runs for both, alternating (the machine may
# be shared: only a comparison inside one run means anything), and ratios are printed.
# Goal (issue 20): the non-worker processes together under 2% of one core; torchrun's
# agent is ~2 s of CPU in a 35 s run (~6%).
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
BASE=${2:+$(readlink -f "$2")}
JQ="$(dirname "$BIN")/json_query"
[ -x "$JQ" ] || JQ="$(dirname "$0")/../build/json_query"
WARM=${WARM:-3}
WINDOW=${WINDOW:-12}
STEPS=${STEPS:-30}
TRAIN_RUNS=${TRAIN_RUNS:-2}  # whole runs per binary for the training time; 0: none
WORK=$(mktemp -d /tmp/elastrain_coord_bench.XXXXXX)
# The head keeps its API token under $HOME/.elastrain: the bench's own, not the user's.
export HOME="$WORK/home"
mkdir -p "$HOME"
mkdir -p "$WORK/runs"
PIDS=()  # every process started, for the EXIT trap (some are disowned)
trap 'set +e; for p in "${PIDS[@]}"; do pkill -9 -P "$p"; kill -9 "$p"; done 2>/dev/null; kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
source "$(dirname "$0")/../tests/integration/etcd_lib.sh"
HZ=$(getconf CLK_TCK)
common=(model_name=small steps=100000 log_period=1 eval_interval=0 global_batch_size=8 per_device_batch_size=2
        max_target_length=128 checkpoint_period=100000 threads_per_worker=1 dashboard_port=0)

last_step() { "$JQ" --jsonl "$1/metrics.jsonl" step 2>/dev/null | tail -1 || true; }
ev() { "$JQ" --jsonl "$1/events.jsonl" event="$2" "${@:4}" "$3" 2>/dev/null | head -1 || true; }
cpu_ticks() { local p t=0; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
source "$(dirname "$0")/bench_lib.sh"  # now, wait_for
WAIT_FOR_POLL=0.1
at_step() { [ "$(last_step "$1")" -ge "$2" ] 2>/dev/null; }
detected() { [ -n "$(ev "$1" worker_failed detected_at)" ]; }
kill_tree() {
  local p
  for p in "$@"; do pkill -9 -P "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
}

# measure BIN MODE WORKERS: appends "ours_pct etcd_pct step_s detect_s" to $WORK/MODE-WORKERS-TAG.tsv
measure() {
  local bin=$1 mode=$2 n=$3 tag=$4 run ours=() etcd=()
  run="$WORK/runs/$mode-$n-$tag-$RANDOM"
  if [ "$mode" = embedded ]; then
    "$bin" train "${common[@]}" num_workers="$n" base_output_directory="$WORK/runs" run_name="$(basename "$run")" \
      >"$run.out" 2>&1 &
    ours=($!)
    PIDS+=("${ours[@]}")
    disown  # killed at the end: no "Killed" line from bash
  else
    start_etcd >/dev/null
    etcd=($ETCD_PID)
    "$bin" head --store "$ETCD_URL" --port 0 >"$run.head" 2>&1 &
    ours=($!)
    wait_for 30 test -s "$HOME/.elastrain/head_signing_key.pub"
    "$bin" agent --store "$ETCD_URL" --slots "$n" --id a1 --head-public-key "$HOME/.elastrain/head_signing_key.pub" \
      --allow-path "$WORK" \
      >"$run.agent" 2>&1 &
    ours+=($!)
    PIDS+=("${ours[@]}")
    disown -a
    local head=""
    wait_for 30 grep -q 'http://127.0.0.1:[0-9]*' "$run.head" && head=$(grep -o 'http://127.0.0.1:[0-9]*' "$run.head" | head -1)
    "$bin" submit --head "$head" "${common[@]}" num_workers="$n" base_output_directory="$WORK/runs" \
      run_name="$(basename "$run")" >"$run.out" 2>&1 || { echo "$mode $n: submit failed: $(cat "$run.out")" >&2; }
  fi
  if ! wait_for 300 at_step "$run" "$WARM"; then
    echo "$mode $n ($tag): no step $WARM: $(tail -2 "$run.out")" >&2
    kill_tree "${ours[@]}"; [ "$mode" = cluster ] && stop_etcd
    return 1
  fi
  local s0 t0 e0 w0 s1 t1 e1 w1
  s0=$(last_step "$run"); t0=$(cpu_ticks "${ours[@]}"); e0=$(cpu_ticks "${etcd[@]}"); w0=$(now)
  sleep "$WINDOW"
  s1=$(last_step "$run"); t1=$(cpu_ticks "${ours[@]}"); e1=$(cpu_ticks "${etcd[@]}"); w1=$(now)
  local pid killed det
  pid=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started "members.1.pid" | tail -1)
  killed=$(now)
  [ -n "$pid" ] && kill -9 "$pid"
  wait_for 60 detected "$run" && det=$(ev "$run" worker_failed detected_at) || det=nan
  kill_tree "${ours[@]}"
  [ "$mode" = cluster ] && stop_etcd
  awk -v a="$t0" -v b="$t1" -v c="$e0" -v d="$e1" -v w="$w1" -v v="$w0" -v hz="$HZ" -v s="$s1" -v r="$s0" \
      -v k="$killed" -v x="$det" \
    'BEGIN { secs = w - v; printf "%.3f\t%.3f\t%.3f\t%s\n", 100 * (b - a) / hz / secs, 100 * (d - c) / hz / secs,
             (s > r ? secs / (s - r) : 0), (x == "nan" ? "nan" : sprintf("%.3f", x - k)) }' >>"$WORK/$mode-$n-$tag.tsv"
}

# train_time BIN TAG: appends the wall seconds of one whole embedded run to $WORK/train-TAG.tsv
train_time() {
  local t0 t1
  t0=$(now)
  "$1" train "${common[@]}" steps="$STEPS" num_workers=2 base_output_directory="$WORK/runs" \
    run_name="train-$2-$RANDOM" >"$WORK/train-$2.out" 2>&1 || { echo "train ($2) failed" >&2; return 1; }
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' >>"$WORK/train-$2.tsv"
}

col() { cut -f"$2" "$1" 2>/dev/null | head -1; }
tags=(new)
[ -n "$BASE" ] && tags=(base new)
bin_of() { [ "$1" = base ] && echo "$BASE" || echo "$BIN"; }

echo "coordinator CPU: non-worker elastrain processes, % of one core over ${WINDOW} s of steady training (from step $WARM)"
echo "(small, global batch 8 x 128 tokens, threads_per_worker=1; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg))"
[ -n "$BASE" ] && echo "baseline: $BASE" && echo "new:      $BIN"
printf "%-10s %7s %5s %9s %11s %8s %8s %9s\n" mode workers bin "cpu %" "cpu s/min" "etcd %" "step s" "detect s"
for mode in embedded cluster; do
  for n in 2 4; do
    for tag in "${tags[@]}"; do measure "$(bin_of "$tag")" "$mode" "$n" "$tag" || true; done
    for tag in "${tags[@]}"; do
      f="$WORK/$mode-$n-$tag.tsv"
      if [ ! -s "$f" ]; then printf "%-10s %7s %5s  failed\n" "$mode" "$n" "$tag"; continue; fi
      etcd_col=$([ "$mode" = cluster ] && col "$f" 2 || echo -)
      printf "%-10s %7s %5s %9.2f %11.2f %8s %8.3f %9s\n" "$mode" "$n" "$tag" "$(col "$f" 1)" \
        "$(awk -v p="$(col "$f" 1)" 'BEGIN { print p * 0.6 }')" "$etcd_col" "$(col "$f" 3)" "$(col "$f" 4)"
    done
    if [ -n "$BASE" ] && [ -s "$WORK/$mode-$n-base.tsv" ] && [ -s "$WORK/$mode-$n-new.tsv" ]; then
      awk -v a="$(col "$WORK/$mode-$n-base.tsv" 1)" -v b="$(col "$WORK/$mode-$n-new.tsv" 1)" \
          -v c="$(col "$WORK/$mode-$n-base.tsv" 3)" -v d="$(col "$WORK/$mode-$n-new.tsv" 3)" \
        'BEGIN { printf "%-10s %7s %5s %9s %11s %8s %8s\n", "", "", "new/base", (a > 0 ? sprintf("%.3fx", b / a) : "-"), "",
                 "", (c > 0 ? sprintf("%.3fx", d / c) : "-") }'
    fi
  done
done

echo
echo "small, 2 workers, steps=$STEPS, embedded: wall seconds of the whole run (alternating binaries)"
for _ in $(seq 1 "$TRAIN_RUNS"); do for tag in "${tags[@]}"; do train_time "$(bin_of "$tag")" "$tag" || true; done; done
for tag in "${tags[@]}"; do
  [ -s "$WORK/train-$tag.tsv" ] && printf "  %-5s %s s\n" "$tag" "$(paste -sd' ' "$WORK/train-$tag.tsv")"
done
if [ -n "$BASE" ] && [ -s "$WORK/train-base.tsv" ] && [ -s "$WORK/train-new.tsv" ]; then
  awk 'NR == FNR { a += $1; n++; next } { b += $1; m++ } END { printf "  new/base %.3fx (mean %.2f s vs %.2f s)\n", (b / m) / (a / n), b / m, a / n }' \
    "$WORK/train-base.tsv" "$WORK/train-new.tsv"
fi
echo "goal: non-worker processes under 2% of one core (1.2 CPU s per minute of training); detect ~0.05 s"

#!/usr/bin/env bash
# Failure detection and recovery of `small` with 4 workers on this machine (issue 5):
# kills (or preempts) rank 1 in the middle of the step after KILL_STEP and reads the run's
# events.jsonl:
#   detect    kill -> the agent saw the death (worker_failed.detected_at)
#   resume    kill -> the new generation restored its state (memory or checkpoint)
#   recover   kill -> the first step of the new generation completed
#   redone    completed steps trained again (last step done before the failure minus
#             the step the new generation restored)
#   1st step  recover - resume: the new generation's first step (new shapes, warm-up)
#   step      median step time of the new generation
# Scenarios: elastic 2:4 (the survivors go on; the replacement joins at a checkpoint
# boundary), fixed 4 (waits for the replacement process), fixed 4 with FSDP and with
# tensor x FSDP, each once with the disk only (memory_snapshot_period=0: restore from the
# checkpoint) and once with the RAM tier (issue 18: restore from peers' RAM), and a
# preemption notice (SIGTERM). Then the RAM tier's cost: the median step time of
# failure-free FSDP runs with memory_snapshot_period=1 against 0, same shape.
#   usage: bench/recovery.sh [build/elastrain] [trials]
#   ONLY=TEXT   run only the scenarios whose name contains TEXT (and skip the overhead runs)
# Reference (issue 5, measured on this machine kind): torchrun (PyTorch 1.13, monitor
# interval 0.1 s) notices a killed worker in ~0.05 s, needs 4.2 s from the kill to the
# first step after the restart with 4 workers, and redoes half a checkpoint period.
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
TRIALS=${2:-3}
JQ="$(dirname "$BIN")/json_query"
WORK=$(mktemp -d /tmp/elastrain_bench.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
KILL_STEP=25
PERIOD=20
common=(model_name=small steps=34 log_period=1 eval_interval=0 global_batch_size=8 per_device_batch_size=2
        max_target_length=128 checkpoint_period=$PERIOD threads_per_worker=1 dashboard_port=0
        base_output_directory="$WORK")

ev() { "$JQ" --jsonl "$1/events.jsonl" event="$2" "${@:4}" "$3" 2>/dev/null | head -1 || true; }
median() { sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "nan" }'; }

# trial NAME SIGNAL ARGS...: one run; appends "detect resume recover redone step" to $WORK/NAME.tsv
trial() {
  local name=$1 sig=$2 run
  shift 2
  run="$WORK/$(tr -c "A-Za-z0-9._-" "_" <<<"$name")-$RANDOM"
  "$BIN" train "${common[@]}" run_name="$(basename "$run")" "$@" >"$run.out" 2>&1 &
  local job=$!
  until [ "$("$JQ" --jsonl "$run/metrics.jsonl" step 2>/dev/null | tail -1)" -ge $KILL_STEP ] 2>/dev/null; do
    kill -0 $job 2>/dev/null || { echo "$name: the run ended early: $(tail -2 "$run.out")" >&2; return 1; }
    sleep 0.02
  done
  local pid killed half gen next
  pid=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started "members.1.pid" | tail -1)
  gen=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started generation | tail -1)
  next=$((gen + 1))  # the generation after the kill (an elastic job may have resized before)
  # Mid-step: half a step after step KILL_STEP's line, as a failure strikes at any time
  # (right at a step's end is when a sharded job's RAM-tier copy is still on the wire).
  half=$("$JQ" --jsonl "$run/metrics.jsonl" step_time 2>/dev/null | tail -1 | awk '{ printf "%.3f", $1 / 2 }')
  sleep "${half:-0}"
  killed=$(date +%s.%N)
  kill "-$sig" "$pid"
  wait $job || { echo "$name: the job failed: $(tail -2 "$run.out")" >&2; return 1; }
  local detected first restored_step done_step ended restored
  detected=$(ev "$run" worker_failed detected_at)
  [ -z "$detected" ] && detected=$(ev "$run" worker_preempted time)
  first=$(ev "$run" generation_first_step first_step_time generation=$next)
  [ -z "$first" ] && first=$(ev "$run" generation_first_step step_time generation=$next)  # runs before first_step_time
  restored_step=$(ev "$run" state_restored step generation=$next)
  # the step generation `gen` ended at: its transition out of RUNNING (one per generation)
  done_step=$("$JQ" --jsonl "$run/events.jsonl" event=job_state from=RUNNING step 2>/dev/null | tail -n +$((gen + 1)) | head -1)
  restored=$(ev "$run" state_restored time generation=$next)
  local st
  st=$("$JQ" --jsonl "$run/metrics.jsonl" generation=$next step_time 2>/dev/null | tail -n +2 | median)
  awk -v k="$killed" -v d="$detected" -v r="$restored" -v f="$first" -v a="$done_step" -v b="$restored_step" -v s="$st" \
    'BEGIN { printf "%.3f\t%.3f\t%.3f\t%.3f\t%d\t%.3f\n", d - k, r - k, f - k, f - r, a - b, s }' >>"$WORK/$name.tsv"
}

printf "%-34s %9s %9s %9s %10s %7s %8s\n" "scenario (median of $TRIALS)" "detect s" "resume s" "recover s" "1st step s" \
  "redone" "step s"
scenario() {
  local name=$1 sig=$2
  shift 2
  [[ -z "${ONLY:-}" || "$name" == *"$ONLY"* ]] || return 0
  for _ in $(seq 1 "$TRIALS"); do trial "$name" "$sig" "$@" || true; done
  [ -s "$WORK/$name.tsv" ] || { printf "%-34s  failed\n" "$name"; return; }
  local cols=()
  for c in 1 2 3 4 5 6; do cols+=("$(cut -f$c "$WORK/$name.tsv" | median)"); done
  printf "%-34s %9.3f %9.3f %9.3f %10.3f %7s %8.3f\n" "$name" "${cols[@]}"
  echo "${cols[2]}" >"$WORK/$name.recover"
}
scenario "elastic 2:4, SIGKILL" 9 num_workers=2:4
scenario "fixed 4, SIGKILL" 9 num_workers=4
scenario "fixed 4 FSDP, disk, SIGKILL" 9 num_workers=4 ici_fsdp_parallelism=4 memory_snapshot_period=0
scenario "fixed 4 FSDP, RAM tier, SIGKILL" 9 num_workers=4 ici_fsdp_parallelism=4 memory_snapshot_period=1
scenario "fixed 4 TP2xFSDP2, disk, SIGKILL" 9 num_workers=4 ici_tensor_parallelism=2 ici_fsdp_parallelism=2 \
  memory_snapshot_period=0
scenario "fixed 4 TP2xFSDP2, RAM, SIGKILL" 9 num_workers=4 ici_tensor_parallelism=2 ici_fsdp_parallelism=2 \
  memory_snapshot_period=1
scenario "elastic 2:4, SIGTERM (preemption)" 15 num_workers=2:4
echo
# The RAM tier's cost on a step: failure-free FSDP runs, alternating with and without it.
steady() {  # steady PERIOD: median step time of one run's steps after the first
  local run="$WORK/steady-$1-$RANDOM"
  "$BIN" train "${common[@]}" steps=16 run_name="$(basename "$run")" num_workers=4 ici_fsdp_parallelism=4 \
    memory_snapshot_period="$1" >"$run.out" 2>&1 || { echo nan; return; }
  "$JQ" --jsonl "$run/metrics.jsonl" step_time 2>/dev/null | tail -n +3 | median
}
[ -n "${ONLY:-}" ] && exit 0
for _ in $(seq 1 "$TRIALS"); do
  echo "$(steady 0) $(steady 1)" >>"$WORK/overhead.tsv"
done
m0=$(cut -d' ' -f1 "$WORK/overhead.tsv" | median)
m1=$(cut -d' ' -f2 "$WORK/overhead.tsv" | median)
awk -v a="$m0" -v b="$m1" -v n="$TRIALS" 'BEGIN { printf "%-34s step %.3f s without, %.3f s with the RAM tier (median of %d runs): %+.1f%%\n",
  "RAM tier overhead (FSDP 4)", a, b, n, (b / a - 1) * 100 }'
for s in "fixed 4 FSDP, disk, SIGKILL" "fixed 4 FSDP, RAM tier, SIGKILL" "fixed 4 TP2xFSDP2, RAM, SIGKILL"; do
  [ -s "$WORK/$s.recover" ] && [ -s "$WORK/fixed 4, SIGKILL.recover" ] && \
    awk -v n="$s" -v r="$(cat "$WORK/$s.recover")" -v d="$(cat "$WORK/fixed 4, SIGKILL.recover")" \
      'BEGIN { printf "%-34s recovery %.2f s = %.2fx data parallel (fixed 4: %.2f s)\n", n, r, r / d, d }'
done
for s in "elastic 2:4, SIGKILL" "fixed 4, SIGKILL"; do
  [ -s "$WORK/$s.recover" ] && awk -v n="$s" -v r="$(cat "$WORK/$s.recover")" \
    'BEGIN { printf "%-34s recovery %.2f s = %.2fx torchrun'"'"'s 4.2 s (4 workers)\n", n, r, r / 4.2 }'
done
echo "torchrun redoes half a checkpoint period on average: $((PERIOD / 2)) steps at checkpoint_period=$PERIOD"
echo "(global batch 8 x 128 tokens; 4 workers of 1 thread share $(nproc) cores; kill after step $KILL_STEP)"

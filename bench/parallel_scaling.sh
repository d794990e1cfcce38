#!/usr/bin/env bash
# Parallel scaling of `small` on this machine: 1 worker with all cores against 2
# workers (data parallel, FSDP, tensor parallel) sharing the same cores, and the share
# of each step spent blocked in collectives. Reads the runs' metrics.jsonl.
#   usage: bench/parallel_scaling.sh [build/elastrain] [steps]
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
STEPS=${2:-12}
WORK=$(mktemp -d /tmp/elastrain_bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CORES=$(nproc)
common=(model_name=small steps=$STEPS log_period=1 eval_interval=0 eval_steps=1 global_batch_size=8
        per_device_batch_size=4 max_target_length=128 base_output_directory="$WORK")
# Median over steps 3.. (the first steps warm up) of a metrics field.
median() {
  grep -o "\"$2\":[0-9.e+-]*" "$1" | cut -d: -f2 | tail -n +3 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
printf "%-36s %10s %10s %12s %10s\n" "configuration" "ms/step" "comm ms" "comm share" "speed-up"
base=""
run() {
  local name=$1; shift
  "$BIN" train "${common[@]}" run_name="$name" "$@" >"$WORK/$name.out" 2>&1 || { echo "$name failed"; tail -3 "$WORK/$name.out"; return; }
  local m=$WORK/$name/metrics.jsonl st ct
  st=$(median "$m" step_time); ct=$(median "$m" comm_time)
  [ -z "$base" ] && base=$st
  awk -v n="$name" -v s="$st" -v c="$ct" -v b="$base" \
    'BEGIN { printf "%-36s %10.1f %10.1f %11.1f%% %9.2fx\n", n, s*1000, c*1000, 100*c/s, b/s }'
}
run "1-worker-x-$CORES-threads" num_workers=1
run 2-workers-data-parallel num_workers=2 ici_data_parallelism=2
run 2-workers-fsdp num_workers=2 ici_fsdp_parallelism=2
run 2-workers-tensor-parallel num_workers=2 ici_tensor_parallelism=2
echo "(same total cores: $CORES; each of 2 workers gets $((CORES / 2)) threads; global batch 8 x 128 tokens)"

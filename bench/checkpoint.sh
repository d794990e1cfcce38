#!/usr/bin/env bash
# Checkpoint costs for `small` and `gpt2-124m`: the training stall per async save (time
# the step loop is blocked), the background write throughput against this disk's
# sequential write speed (dd with fsync, measured in the same run), and restore time.
#   usage: bench/checkpoint.sh [build/elastrain]
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/elastrain_ckpt_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ddmb=$(dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 conv=fsync 2>&1 | awk '/copied/ {
  for (i = 1; i <= NF; i++) if ($i ~ /^s,$/) secs = $(i-1); print 1024 / secs }')
rm -f "$WORK/dd.bin"
printf "disk sequential write (dd 1 GiB, fsync): %.0f MB/s\n\n" "$ddmb"
printf "%-10s %9s %10s %10s %8s %10s %9s %10s\n" model ckpt_MB step_ms stall_ms stall% write_MB/s vs_disk restore_s
for model in small gpt2-124m; do
  # The period leaves time for a save to finish before the next, as a real run would.
  period=3; [ $model = gpt2-124m ] && period=4
  args=(model_name=$model steps=$((2 * period + 1)) checkpoint_period=$period save_checkpoint_on_completion=false log_period=1 eval_interval=0 eval_steps=1 per_device_batch_size=4
        max_target_length=64 max_num_checkpoints_to_keep=2 base_output_directory="$WORK" run_name=$model)
  "$BIN" train "${args[@]}" >"$WORK/$model.out" 2>&1 || { echo "$model failed"; tail -3 "$WORK/$model.out"; continue; }
  "$BIN" train "${args[@]}" steps=$((2 * period + 2)) >"$WORK/$model.restore.out" 2>&1 || { echo "$model restore failed"; continue; }
  ev=$WORK/$model/events.jsonl
  bytes=$(du -sb "$WORK/$model/checkpoints/$(cat "$WORK/$model/checkpoints/LATEST")" | cut -f1)
  step=$(grep -o '"step_time":[0-9.e-]*' "$WORK/$model/metrics.jsonl" | cut -d: -f2 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  # metrics.jsonl's checkpoint_stall: the save's own block plus the wait of the next
  # optimizer update for the background copy of the state.
  stall=$(grep -o '"checkpoint_stall":[0-9.e-]*' "$WORK/$model/metrics.jsonl" | cut -d: -f2 | sort -g | tail -1)
  write=$(grep '"checkpoint_saved"' "$ev" | grep -o '"write_seconds":[0-9.e-]*' | cut -d: -f2 | sort -g | head -1)
  restore=$(grep '"checkpoint_restored"' "$ev" | grep -o '"seconds":[0-9.e-]*' | cut -d: -f2 | tail -1)
  awk -v m="$model" -v b="$bytes" -v st="$step" -v sl="$stall" -v w="$write" -v r="$restore" -v d="$ddmb" 'BEGIN {
    mbps = b / 1e6 / w
    printf "%-10s %9.1f %10.1f %10.1f %7.1f%% %10.0f %8.0f%% %10.2f\n", m, b / 1e6, st * 1000, sl * 1000, 100 * sl / st, mbps, 100 * mbps / d, r }'
done
echo
echo "stall: the longest time a save blocked the step loop (waiting for a previous save, and the next"
echo "       optimizer update waiting for the background copy of the state)"
echo "step: median step time of the run, saves included (the background writer shares the cores)"
echo "write: checkpoint bytes / the fastest background write (shards + manifest + commit)"

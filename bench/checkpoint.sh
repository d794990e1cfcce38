#!/usr/bin/env bash
# Checkpoint costs for `small` and `gpt2-124m`: the training stall per async save (time
# the step loop is blocked), the background write throughput against this disk's
# sequential write speed (dd with fsync, measured in the same run, before and after the
# models: the mean is the reference), and the restore throughput against a dd read of
# the same files, both from a cold page cache when this user may drop it (root).
#   usage: bench/checkpoint.sh [build/elastrain]
set -euo pipefail
BIN=$(readlink -f "${1:-build/elastrain}")
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/elastrain_ckpt_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
dd_write() {  # MB/s of a 1 GiB sequential write with fsync
  dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 conv=fsync 2>&1 | awk '/copied/ {
    for (i = 1; i <= NF; i++) if ($i ~ /^s,$/) secs = $(i-1); print 1024 * 1048576 / 1e6 / secs }'
  rm -f "$WORK/dd.bin"
}
drop_caches() { sync; echo 3 2>/dev/null >/proc/sys/vm/drop_caches && echo cold || echo warm; }
dd_read() {  # MB/s of reading files $@ (bs=1M, one after the other)
  local bytes t0 t1
  bytes=$(stat -c %s "$@" | awk '{ s += $1 } END { print s }'); drop_caches >/dev/null
  t0=$(date +%s.%N); for f in "$@"; do dd if="$f" of=/dev/null bs=1M status=none; done; t1=$(date +%s.%N)
  awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN { print b / 1e6 / (z - a) }'
}
dd_before=$(dd_write)
rows=()
for model in small gpt2-124m; do
  # The period leaves time for a save to finish before the next, as a real run would.
  period=3; [ $model = gpt2-124m ] && period=6
  args=(model_name=$model steps=$((2 * period + 1)) checkpoint_period=$period save_checkpoint_on_completion=true log_period=1 eval_interval=0 eval_steps=1 per_device_batch_size=4
        max_target_length=64 max_num_checkpoints_to_keep=2 base_output_directory="$WORK" run_name=$model)
  "$BIN" train "${args[@]}" >"$WORK/$model.out" 2>&1 || { echo "$model failed"; tail -3 "$WORK/$model.out"; continue; }
  latest=$WORK/$model/checkpoints/$(cat "$WORK/$model/checkpoints/LATEST")
  ddread=$(dd_read "$latest"/*.safetensors)
  cache=$(drop_caches)
  "$BIN" train "${args[@]}" steps=$((2 * period + 2)) >"$WORK/$model.restore.out" 2>&1 || { echo "$model restore failed"; continue; }
  ev=$WORK/$model/events.jsonl
  bytes=$(du -sb "$latest" | cut -f1)
  step=$(grep -o '"step_time":[0-9.e-]*' "$WORK/$model/metrics.jsonl" | cut -d: -f2 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  # metrics.jsonl's checkpoint_stall: the save's own block plus the wait of the next
  # optimizer update for the background copy of the state.
  # (not the last step's: the final save first waits for the one before it)
  # stall per save: checkpoint_stall less checkpoint_wait (waiting for the previous save
  # to finish writing, which a period longer than the write time avoids: reported apart).
  stall=$(awk 'match($0, /"checkpoint_stall":[0-9.e-]+/) { s = substr($0, RSTART + 19, RLENGTH - 19);
      match($0, /"checkpoint_wait":[0-9.e-]+/); w = substr($0, RSTART + 18, RLENGTH - 18); if (s - w > m) m = s - w }
      END { print m + 0 }' <(head -n -1 "$WORK/$model/metrics.jsonl"))
  waited=$(grep -o '"checkpoint_wait":[0-9.e-]*' "$WORK/$model/metrics.jsonl" | head -n -1 | cut -d: -f2 | sort -g | tail -1)
  # Saves during training share the cores with it (the writer runs at lower priority);
  # the final save runs after the last step, alone.
  write=$(grep '"checkpoint_saved"' "$ev" | head -n -1 | grep -o '"write_seconds":[0-9.e-]*' | cut -d: -f2 | sort -g | head -1)
  final=$(grep '"checkpoint_saved"' "$ev" | tail -1 | grep -o '"write_seconds":[0-9.e-]*' | cut -d: -f2)
  restore=$(grep '"checkpoint_restored"' "$ev" | grep -o '"seconds":[0-9.e-]*' | cut -d: -f2 | tail -1)
  rows+=("$model $bytes $step $stall ${waited:-0} $write $final $restore $ddread $cache")
done
dd_after=$(dd_write)
d=$(awk -v a="$dd_before" -v b="$dd_after" 'BEGIN { print (a + b) / 2 }')
printf "disk sequential write (dd 1 GiB, fsync): %.0f MB/s before the models, %.0f MB/s after; mean %.0f MB/s\n\n" \
  "$dd_before" "$dd_after" "$d"
printf "%-10s %8s %8s %9s %7s %9s %10s %7s %10s %7s %9s %10s %9s %7s\n" model ckpt_MB step_ms stall_ms stall% waited_ms \
  busy_MB/s vs_dd final_MB/s vs_dd restore_s restore_MB/s ddread_MB/s vs_dd
for row in "${rows[@]}"; do
  read -r m b st sl wt w f r dr cache <<<"$row"
  awk -v m="$m" -v b="$b" -v st="$st" -v sl="$sl" -v wt="$wt" -v w="$w" -v f="$f" -v r="$r" -v d="$d" -v dr="$dr" \
      -v c="$cache" 'BEGIN {
    mbps = b / 1e6 / w; fmbps = b / 1e6 / f; rmbps = b / 1e6 / r
    printf "%-10s %8.1f %8.1f %9.1f %6.1f%% %9.1f %10.0f %6.0f%% %10.0f %6.0f%% %9.2f %12.0f %11.0f %6.0f%% (%s cache)\n", m,
           b / 1e6, st * 1000, sl * 1000, 100 * sl / st, wt * 1000, mbps, 100 * mbps / d, fmbps, 100 * fmbps / d, r,
           rmbps, dr, 100 * rmbps / dr, c }'
done
echo
echo "stall: the longest time a save itself blocked the step loop, including the next optimizer update"
echo "       waiting for the background copy of the state; waited: waiting for the previous save to finish"
echo "       writing (one save is in flight at a time; a period longer than the write time avoids it)"
echo "step: median step time of the run, saves included (the background writer shares the cores)"
echo "busy: checkpoint bytes / the fastest save written while training ran (shares the cores, lower priority)"
echo "final: the same for the save after the last step, with the cores free"
echo "restore: checkpoint bytes / the restore's time (manifest, reads, checksums); ddread: dd bs=1M of its"
echo "         shard files, one after the other; both after dropping the page cache (\"cold\") when allowed"

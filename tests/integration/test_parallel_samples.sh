# The samples all ranks consume at each step are exactly the single-process global
# batch, for dp = 1, 2, 3, 4 (global_batch_size 10: uneven shares for dp = 3, 4).
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 steps=6 global_batch_size=10 per_device_batch_size=2 eval_interval=0
        record_consumed_samples=1 base_output_directory="$WORK/runs")
# One line per step: "step: sorted indices", from every rank's record.
batches() {
  cat "$1"/samples/rank_*.jsonl | awk '{
      match($0, /"step":[0-9]+/); step = substr($0, RSTART + 7, RLENGTH - 7);
      match($0, /"indices":\[[^]]*\]/); idx = substr($0, RSTART + 11, RLENGTH - 12);
      all[step] = all[step] (all[step] == "" ? "" : ",") idx }
    END { for (s in all) { n = split(all[s], a, ","); for (i = 1; i <= n; i++) print s, a[i] } }' | sort -n -k1,1 -k2,2
}
for dp in 1 2 3 4; do
  "$BIN" train "${common[@]}" num_workers=$dp ici_data_parallelism=$dp run_name=dp$dp >/dev/null 2>&1 \
    || { fail "dp=$dp run failed"; continue; }
  batches runs/dp$dp > "$WORK/dp$dp.txt"
done
[ "$(wc -l < "$WORK/dp1.txt")" -eq 60 ] && pass "single process: 6 steps x 10 samples" || fail "dp1 lines: $(wc -l < "$WORK/dp1.txt")"
[ "$(sort -u -k2,2 "$WORK/dp1.txt" | wc -l)" -eq 60 ] && pass "no sample repeats within the epoch" || fail "repeats in dp1"
for dp in 2 3 4; do
  if cmp -s "$WORK/dp1.txt" "$WORK/dp$dp.txt"; then pass "dp=$dp: the ranks' union is the single-process batch at every step"
  else fail "dp=$dp differs: $(diff "$WORK/dp1.txt" "$WORK/dp$dp.txt" | head -3)"; fi
  # Disjoint: no index appears twice in a step.
  dups=$(uniq -d "$WORK/dp$dp.txt" | wc -l)
  [ "$dups" -eq 0 ] && pass "dp=$dp: shares are disjoint" || fail "dp=$dp: $dups duplicates"
done
finish

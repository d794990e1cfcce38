# Issue 19, point 3: MaxText's dtype=bfloat16 (GEMMs on bf16 operands with float32
# accumulation; master weights, optimizer state and every other kernel float32) trains
# the fortunes corpus to the loss of float32: after 300 steps the eval losses differ by
# less than 2% (docs/performance.md, "bf16 compute"), and the two runs really differ
# (bf16 rounding is in effect). weight_dtype other than float32 is refused.
# `tiny` (byte vocabulary) rather than `small`, to keep the suite fast; the `small`
# comparison is in docs/performance.md.
source "$(dirname "$0")/lib.sh"
CORPUS=/usr/share/games/fortunes
common=(model_name=tiny hardware_peak_tflops=1 vocab_size=256 dataset_type=text dataset_path=$CORPUS steps=300 learning_rate=3e-3
        max_target_length=32 per_device_batch_size=8 eval_interval=300 eval_steps=8 log_period=50
        enable_checkpointing=false threads_per_worker=1 dashboard_port=0 base_output_directory="$WORK/runs")
for d in float32 bfloat16; do
  "$BIN" train "${common[@]}" dtype=$d run_name=$d >"$WORK/$d.out" 2>&1 || fail "dtype=$d: $(tail -3 "$WORK/$d.out")"
done
if grep -q "no bf16 matmul" runs/bfloat16/train.log; then
  echo "SKIP: oneDNN has no bf16 matmul on this CPU: $(grep -m1 -o 'no bf16 matmul.*' runs/bfloat16/train.log)"
  finish
  exit 77
fi
grep -q "gemm onednn, dtype bfloat16" runs/bfloat16/train.log && pass "the bf16 run computed its GEMMs in bfloat16" \
  || fail "the bf16 run does not say so: $(grep -m1 'compute:' runs/bfloat16/train.log)"
f=$(eval_losses runs/float32/metrics.jsonl | tail -1)
b=$(eval_losses runs/bfloat16/metrics.jsonl | tail -1)
first=$(eval_losses runs/float32/metrics.jsonl | head -1)
awk -v f="$f" -v b="$b" -v s="$first" 'BEGIN { d = (b - f) / f; if (d < 0) d = -d; exit !(f != "" && b != "" && d < 0.02 && f < 0.7 * s) }' \
  && pass "eval loss after 300 steps: float32 $f, bfloat16 $b (within 2%; from $first)" \
  || fail "eval loss after 300 steps: float32 $f, bfloat16 $b (from $first)"
[ "$f" != "$b" ] && pass "the runs differ (bf16 rounding is in effect)" || fail "identical losses: bf16 not in effect"
expect_error "weight_dtype=bfloat16 refused" "weight_dtype" -- train model_name=tiny weight_dtype=bfloat16 steps=1 \
  base_output_directory="$WORK/runs" run_name=wd
finish

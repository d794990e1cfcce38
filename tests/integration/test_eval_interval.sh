# Issue 34: MaxText's `eval_interval: -1` (its base.yml's default) means no evaluation, and
# so does any value <= 0 here: no eval line in metrics.jsonl, train.log or the summary.
# A positive interval evaluates at the start, every interval and at the end (so the check
# can fail).
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 steps=6 log_period=1 threads_per_worker=1 enable_checkpointing=false
        base_output_directory="$WORK/runs")
# eval_steps NAME: the steps of NAME's eval lines in metrics.jsonl, space-separated.
eval_steps() { grep eval_loss "runs/$1/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' | cut -d: -f2 | tr '\n' ' ' || true; }
no_eval() {
  local name=$1 out=$2
  [ "$(losses "runs/$name/metrics.jsonl" | grep -c .)" -eq 6 ] || { fail "$name: did not train 6 steps: $(tail -3 "$out")"; return; }
  if grep -q eval_loss "runs/$name/metrics.jsonl" || grep -q "eval loss [0-9]" "runs/$name/train.log" "$out"; then
    fail "$name evaluated: metrics at steps '$(eval_steps "$name")', $(grep -m1 'eval loss' "$out")"
  else
    pass "$name: 6 steps, no evaluation ($(grep -m1 'eval loss' "$out" | sed 's/^ *//'))"
  fi
}
for v in -1 0; do
  "$BIN" train "${common[@]}" eval_interval=$v run_name=off$v >"$WORK/off$v.out" 2>&1 || fail "eval_interval=$v: $(tail -3 "$WORK/off$v.out")"
  no_eval "off$v" "$WORK/off$v.out"
done
grep -q "eval loss  none (eval_interval <= 0)" "$WORK/off-1.out" && pass "the summary says no evaluation ran" \
  || fail "summary: $(grep 'eval loss' "$WORK/off-1.out")"
# MaxText's base.yml as it ships (eval_interval: -1), a small shape on the command line.
"$BIN" train "$SRC/tests/fixtures/maxtext/base.yml" model_name=default base_emb_dim=16 base_num_query_heads=2 \
  base_num_kv_heads=2 base_mlp_dim=32 base_num_decoder_layers=1 head_dim=8 vocab_size=64 dataset_type=synthetic \
  max_target_length=16 per_device_batch_size=2 steps=6 log_period=1 hardware_peak_tflops=1 threads_per_worker=1 \
  enable_checkpointing=false base_output_directory="$WORK/runs" run_name=maxtext >"$WORK/maxtext.out" 2>&1 \
  || fail "MaxText base.yml: $(tail -3 "$WORK/maxtext.out")"
no_eval maxtext "$WORK/maxtext.out"
"$BIN" train "${common[@]}" eval_interval=3 eval_steps=1 run_name=on >"$WORK/on.out" 2>&1 || fail "eval_interval=3: $(tail -3 "$WORK/on.out")"
[ "$(eval_steps on)" = "0 3 6 " ] && pass "eval_interval=3: evaluations at steps 0, 3 and 6" \
  || fail "eval_interval=3: evaluations at steps '$(eval_steps on)'"
finish

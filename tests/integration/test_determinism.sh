# Same config and seeds give bit-identical losses; another init_weights_seed differs.
source "$(dirname "$0")/lib.sh"
run() { "$BIN" train model_name=tiny hardware_peak_tflops=1 steps=12 log_period=1 eval_interval=6 base_output_directory="$WORK/runs" "$@" >/dev/null 2>&1; }
for fam in tiny tiny-gpt2; do
  run model_name=$fam run_name=a_$fam
  run model_name=$fam run_name=b_$fam
  run model_name=$fam run_name=c_$fam init_weights_seed=1
  a=$(losses runs/a_$fam/metrics.jsonl); b=$(losses runs/b_$fam/metrics.jsonl); c=$(losses runs/c_$fam/metrics.jsonl)
  [ "$(echo "$a" | wc -l)" -eq 12 ] && pass "$fam: 12 loss lines" || fail "$fam: expected 12 loss lines, got: $a"
  [ "$a" = "$b" ] && pass "$fam: identical runs give identical losses" || fail "$fam: runs differ: $(diff <(echo "$a") <(echo "$b") | head -3)"
  [ "$(eval_losses runs/a_$fam/metrics.jsonl)" = "$(eval_losses runs/b_$fam/metrics.jsonl)" ] && pass "$fam: identical eval losses" || fail "$fam: eval losses differ"
  [ "$a" != "$c" ] && pass "$fam: another init_weights_seed differs" || fail "$fam: init_weights_seed had no effect"
done
finish

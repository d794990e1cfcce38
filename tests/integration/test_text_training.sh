# Trains on the fortunes corpus (bytes, and a sentencepiece tokenizer trained by the CLI)
# and checks the validation loss falls, the outputs exist, and the token cache is used.
# The first run is the suite's one training run that measures the SGEMM ceiling for MFU
# (hardware_peak_tflops left at 0); every other run gives hardware_peak_tflops.
source "$(dirname "$0")/lib.sh"
CORPUS=/usr/share/games/fortunes
out=$("$BIN" train model_name=tiny vocab_size=256 dataset_type=text dataset_path=$CORPUS steps=150 \
  learning_rate=3e-3 eval_interval=50 log_period=10 base_output_directory="$WORK/runs" run_name=bytes 2>&1)
m=runs/bytes/metrics.jsonl
first=$(eval_losses $m | head -1); last=$(eval_losses $m | tail -1)
echo "bytes: eval loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b <= 0.6 * a) }' && pass "eval loss fell by >= 40% ($first -> $last)" || fail "eval loss $first -> $last"
[ "$(eval_losses $m | wc -l)" -eq 4 ] && pass "eval at 0, 50, 100, 150" || fail "eval lines: $(eval_losses $m | wc -l)"
for f in config.yml metrics.jsonl train.log; do [ -s runs/bytes/$f ] && pass "wrote $f" || fail "missing $f"; done
grep -q '"tokens_per_sec"' $m && grep -q '"mfu"' $m && grep -q '"lr"' $m && grep -q '"time"' $m && pass "metrics fields" || fail "metrics fields missing"
ls runs/.cache/tokens-*.bin >/dev/null 2>&1 && pass "token cache under the output directory" || fail "no token cache"
# The resolved config.yml loads back and trains.
"$BIN" train runs/bytes/config.yml run_name=again steps=2 hardware_peak_tflops=1 >/dev/null 2>&1 && pass "config.yml loads back" || fail "config.yml does not load"
# sentencepiece: train a small BPE model on part of the corpus, then train with it.
"$BIN" tokenizer train --input $CORPUS/computers --input $CORPUS/science --vocab-size 600 --output "$WORK/tok/spm.model" >/dev/null 2>&1 \
  && pass "tokenizer train" || fail "tokenizer train failed"
"$BIN" train model_name=tiny vocab_size=600 dataset_type=text dataset_path=$CORPUS/computers hardware_peak_tflops=1 tokenizer_path="$WORK/tok/spm.model" \
  steps=5 base_output_directory="$WORK/runs" run_name=spm >/dev/null 2>&1 && pass "train with the sentencepiece model" || fail "train with spm"
expect_error "tokenizer too big for vocab" "vocabulary of 600 tokens does not fit vocab_size=256" -- \
  train model_name=tiny vocab_size=256 dataset_type=text dataset_path=$CORPUS/computers hardware_peak_tflops=1 tokenizer_path="$WORK/tok/spm.model" \
  steps=5 base_output_directory="$WORK/runs" run_name=spm2
finish

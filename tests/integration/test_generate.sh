# Issue 35: `elastrain generate` and `elastrain eval` on a checkpoint that 2 FSDP workers
# saved (loaded as one rank). eval reports the trainer's last eval loss (~1e-6 relative);
# greedy decoding gives the same tokens with and without the KV cache; a seed gives the
# same text; bad requests and damaged checkpoints get one clear line, never a crash.
source "$(dirname "$0")/lib.sh"
CORPUS=/usr/share/games/fortunes/computers
"$BIN" train model_name=tiny dataset_type=text dataset_path=$CORPUS max_target_length=64 per_device_batch_size=4 \
  steps=30 learning_rate=3e-3 eval_interval=15 eval_steps=3 log_period=10 hardware_peak_tflops=1 threads_per_worker=1 \
  num_workers=2 ici_fsdp_parallelism=2 collective_timeout=30 sample_period=15 \
  base_output_directory="$WORK/runs" run_name=fsdp >"$WORK/train.out" 2>&1 \
  || fail "training: $(tail -3 "$WORK/train.out")"
RUN=runs/fsdp
trainer=$(eval_losses $RUN/metrics.jsonl | tail -1)

# eval: the trainer's last eval loss, from the checkpoint of the last step.
"$BIN" eval --run-dir $RUN --json >"$WORK/eval.json" 2>"$WORK/eval.err" || fail "eval: $(cat "$WORK/eval.err")"
ours=$("$JQ" loss <"$WORK/eval.json" 2>/dev/null || true)
/usr/bin/python3 - "$trainer" "$ours" <<'EOF' && pass "eval loss $ours = the trainer's $trainer" || fail "eval loss '$ours' vs the trainer's '$trainer'"
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
print(f"relative difference {abs(a - b) / a:.2e}")
sys.exit(0 if abs(a - b) <= 1e-6 * a else 1)
EOF
grep -q '"step":30' "$WORK/eval.json" && pass "eval read step 30's checkpoint" || fail "eval: $(cat "$WORK/eval.json")"
"$BIN" eval --run-dir $RUN --max-batches 1 >"$WORK/eval1.out" 2>&1 && grep -q "4 samples, 256 tokens" "$WORK/eval1.out" \
  && grep -q "^perplexity " "$WORK/eval1.out" && pass "eval --max-batches 1: 4 samples, and a perplexity" \
  || fail "eval --max-batches 1: $(cat "$WORK/eval1.out")"

# generate: greedy with and without the KV cache, the same tokens.
gen() { "$BIN" generate --run-dir $RUN --prompt "The computer" --max-new-tokens 40 --print-ids "$@"; }
gen --temperature 0 >"$WORK/cached.out" 2>"$WORK/cached.err" || fail "generate: $(cat "$WORK/cached.err")"
gen --temperature 0 --no-kv-cache >"$WORK/full.out" 2>"$WORK/full.err" || fail "generate --no-kv-cache: $(cat "$WORK/full.err")"
ids=$(grep '^ids:' "$WORK/cached.out" || true)
[ "$(wc -w <<<"$ids")" -eq 41 ] && [ "$ids" = "$(grep '^ids:' "$WORK/full.out")" ] \
  && pass "greedy: the same 40 tokens with and without the KV cache" \
  || fail "greedy tokens differ: '$ids' vs '$(grep '^ids:' "$WORK/full.out")'"
head -1 "$WORK/cached.out" | grep -q "^The computer" && pass "prints the prompt and its continuation: $(head -1 "$WORK/cached.out")" \
  || fail "output: $(head -2 "$WORK/cached.out")"
grep -qE "prefill: 12 tokens in .* tokens/s\); decode: 39 tokens in .*tokens/s\)$" "$WORK/cached.err" \
  && pass "tokens/s on stderr: $(grep prefill "$WORK/cached.err")" || fail "no tokens/s: $(cat "$WORK/cached.err")"
# Sampling: a seed gives the same text, another seed another; the step's checkpoint
# directory and stdin work as well as --run-dir and --prompt.
step=$(ls -d $RUN/checkpoints/step_* | tail -1)
a=$(gen --seed 7 --num-samples 2 2>/dev/null)
b=$(echo -n "The computer" | "$BIN" generate --checkpoint "$step" --max-new-tokens 40 --print-ids --seed 7 --num-samples 2 2>/dev/null)
c=$(gen --seed 8 2>/dev/null | grep '^ids:')
[ -n "$a" ] && [ "$a" = "$b" ] && pass "seed 7 twice, from the run and from its step directory: the same samples" \
  || fail "seed 7: '$a' vs '$b'"
[ "$(grep -c '^ids:' <<<"$a")" -eq 2 ] && [ "$(grep '^ids:' <<<"$a" | sort -u | wc -l)" -eq 2 ] \
  && pass "--num-samples 2: two different samples" || fail "--num-samples 2: $a"
[ "$c" != "$(grep -m1 '^ids:' <<<"$a")" ] && pass "seed 8 differs from seed 7" || fail "seeds 7 and 8 gave the same tokens"

# A checkpoint of a tensor-parallel mesh (heads and MLP rows split) loads as one rank too.
"$BIN" train model_name=tiny dataset_type=text dataset_path=$CORPUS max_target_length=64 per_device_batch_size=4 \
  steps=6 eval_interval=6 eval_steps=2 log_period=3 hardware_peak_tflops=1 threads_per_worker=1 \
  num_workers=2 ici_tensor_parallelism=2 collective_timeout=30 \
  base_output_directory="$WORK/runs" run_name=tp >"$WORK/tp.out" 2>&1 || fail "tensor-parallel training: $(tail -3 "$WORK/tp.out")"
tp_trainer=$(eval_losses runs/tp/metrics.jsonl | tail -1)
tp_ours=$("$BIN" eval --run-dir runs/tp --json 2>/dev/null | "$JQ" loss || true)
/usr/bin/python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-6 * a else 1)" \
  "$tp_trainer" "$tp_ours" && pass "tensor-parallel checkpoint: eval loss $tp_ours = the trainer's $tp_trainer" \
  || fail "tensor-parallel checkpoint: eval loss '$tp_ours' vs the trainer's '$tp_trainer'"
t1=$("$BIN" generate --run-dir runs/tp --prompt "The computer" --max-new-tokens 20 --temperature 0 --print-ids 2>&1)
t2=$("$BIN" generate --run-dir runs/tp --prompt "The computer" --max-new-tokens 20 --temperature 0 --print-ids --no-kv-cache 2>&1 | grep '^ids:' || true)
[ -n "$t2" ] && [ "$(grep '^ids:' <<<"$t1")" = "$t2" ] && pass "tensor-parallel checkpoint: greedy tokens equal with and without the cache" \
  || fail "tensor-parallel checkpoint: generate: $t1 / $t2"

# sample_period: greedy samples in the log of a one-worker run; a sharded run says why not.
"$BIN" train model_name=tiny dataset_type=text dataset_path=$CORPUS max_target_length=64 per_device_batch_size=4 \
  steps=10 eval_interval=-1 sample_period=5 log_period=5 hardware_peak_tflops=1 threads_per_worker=1 \
  base_output_directory="$WORK/runs" run_name=samples >"$WORK/samples.out" 2>&1 || fail "sample_period run: $(tail -3 "$WORK/samples.out")"
[ "$(grep -cE 'step (5|10): sample: .* \| ' runs/samples/train.log)" -eq 2 ] \
  && /usr/bin/python3 -c "import sys; t = open(sys.argv[1], 'rb').read().decode('utf-8'); sys.exit(any(c < ' ' and c != '\n' for c in t))" \
     runs/samples/train.log \
  && pass "sample_period=5: samples at steps 5 and 10 in train.log: $(grep -m1 'sample:' runs/samples/train.log | cut -c1-120)" \
  || fail "sample_period=5: $(grep sample runs/samples/train.log | head -3)"
[ "$(grep -c "sample_period=15: no samples in this generation: rank 0 holds a shard" $RUN/train.log)" -eq 1 ] \
  && ! grep -q "sample:" $RUN/train.log && pass "sample_period on an FSDP mesh: one warning, no sample" \
  || fail "sample_period on FSDP: $(grep -m2 sample $RUN/train.log)"

# Hostile requests: one line on stderr, a non-zero exit.
expect_error "empty prompt" "prompt is empty" -- generate --run-dir $RUN --prompt ""
expect_error "huge --max-new-tokens" "context is 64 .*ask for at most 53 new tokens" -- \
  generate --run-dir $RUN --prompt "The computer" --max-new-tokens 1000000000
expect_error "bad temperature" "temperature=-1" -- generate --run-dir $RUN --prompt x --temperature -1
expect_error "missing run" "no such directory" -- generate --run-dir "$WORK/nope" --prompt x
expect_error "both sources" "exactly one of" -- eval --run-dir $RUN --checkpoint "$step"
expect_error "another model's config" "tensor embed.wte is \\[256, 64\\] in the checkpoint but the config's model .*expects \\[300, 64\\]" -- \
  eval --run-dir $RUN vocab_size=300
# A tokenizer with more ids than the model's 256: the prompt's ids do not fit.
"$BIN" tokenizer train --input $CORPUS --vocab-size 400 --output "$WORK/tok/spm.model" >/dev/null 2>&1 \
  || fail "tokenizer train"
expect_error "tokenizer larger than the model" "is id [0-9]+, but the model's vocab_size is 256" -- \
  generate --run-dir $RUN --prompt "The computer program" tokenizer_path="$WORK/tok/spm.model"
# Damaged checkpoints: a flipped byte in the parameters, a missing file, no COMMITTED.
cp -r "$step" "$WORK/bad"
f=$(ls "$WORK"/bad/params-*.safetensors | head -1)
printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") - 8 )) conv=notrunc status=none
expect_error "flipped bytes" "checksum|Corruption|corrupt" -- generate --checkpoint "$WORK/bad" --prompt x
rm "$f"
expect_error "missing shard file" "$(basename "$f")" -- eval --checkpoint "$WORK/bad"
rm "$WORK/bad/COMMITTED"
expect_error "uncommitted" "not a committed checkpoint" -- generate --checkpoint "$WORK/bad" --prompt x
finish

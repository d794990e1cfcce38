# MaxText's own config files (tests/fixtures/maxtext/, as MaxText ships them) train here
# with overrides on the command line, as `python3 -m MaxText.train base.yml run_name=...`
# would: base.yml with a model preset, base.yml with the shape on the command line, and a
# file that inherits from base.yml through base_config. Tiny shapes, a few steps each.
# Then every file of the checkout (maxtext_walk.py, issue 34 "Done when" 1): it trains the
# model it describes (each model key as MaxText's merge says) or is refused naming a key.
source "$(dirname "$0")/lib.sh"
MT="$SRC/tests/fixtures/maxtext"
# What MaxText's base.yml leaves to the command line: data elastrain has, a short run.
small=(dataset_type=synthetic hardware_peak_tflops=1 steps=3 log_period=1 eval_interval=0 max_target_length=32 per_device_batch_size=2
       enable_checkpointing=false threads_per_worker=1 base_output_directory="$WORK/runs")

# trained NAME OUT: NAME logged one loss for each of its 3 steps, and OUT (its output)
# reported the ignored MaxText keys in one line.
trained() {
  local n
  n=$(losses "runs/$1/metrics.jsonl" 2>/dev/null | grep -c . || true)
  [ "$n" -eq 3 ] && pass "$1: 3 steps trained" || fail "$1: $n loss lines: $(tail -3 "$2")"
  n=$(grep -c "ignoring [0-9]* MaxText keys that do not change what is trained" "$2" || true)
  local widest
  widest=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$2")
  [ "$n" -eq 1 ] && [ "$widest" -le 400 ] && pass "$1: ignored keys reported once, lines <= $widest columns" \
    || fail "$1: $n reports of ignored keys, widest line $widest columns"
}
# config_has NAME LINE: the run's resolved config.yml holds LINE (up to its comment).
config_has() {
  grep -q "^$2 " "runs/$1/config.yml" && pass "$1: config.yml has '$2'" || fail "$1: config.yml lacks '$2'"
}

# 1. base.yml with MaxText's model preset gpt3-52k (the preset replaces base.yml's shape).
"$BIN" train "$MT/base.yml" run_name=gpt3 model_name=gpt3-52k "${small[@]}" >"$WORK/gpt3.out" 2>&1 || true
trained gpt3 "$WORK/gpt3.out"
config_has gpt3 'base_emb_dim: 16'
config_has gpt3 'decoder_block: "gpt2"'
config_has gpt3 'dtype: "bfloat16"'
config_has gpt3 'learning_rate_schedule_steps: 3'
config_has gpt3 'max_num_checkpoints_to_keep: -1'

# 2. base.yml, model_name: default, the shape given on the command line (a small llama),
# with MaxText's spellings: 1_000 and a fractional per_device_batch_size over 2 workers.
"$BIN" train "$MT/base.yml" run_name=llama base_emb_dim=32 base_num_query_heads=4 base_num_kv_heads=2 head_dim=8 \
  base_mlp_dim=64 base_num_decoder_layers=2 vocab_size=1_000 "${small[@]}" per_device_batch_size=1.5 num_workers=2 \
  >"$WORK/llama.out" 2>&1 || true
trained llama "$WORK/llama.out"
config_has llama 'vocab_size: 1000'
config_has llama 'global_batch_size: 3'
config_has llama 'decoder_block: "llama"'

# 3. A file that inherits from base.yml (base_config), as MaxText's gpu_smoke_test.yml.
"$BIN" train "$MT/gpu/gpu_smoke_test.yml" run_name=smoke vocab_size=256 "${small[@]}" >"$WORK/smoke.out" 2>&1 || true
trained smoke "$WORK/smoke.out"
config_has smoke 'base_num_decoder_layers: 8'
config_has smoke 'head_dim: 16'

# 4. What elastrain cannot train is one clear line naming the key.
expect_error "MaxText's tfds data" "dataset_type=tfds: expected one of synthetic, text, llmc, nanogpt, megatron, jsonl \(MaxText's tfds" -- \
  train "$MT/base.yml" run_name=x base_output_directory="$WORK/runs"
expect_error "bfloat16 master weights" "vllm.yml: weight_dtype=bfloat16: expected one of float32 \(elastrain keeps master weights" -- \
  train "$MT/inference/vllm.yml" dataset_type=synthetic base_output_directory="$WORK/runs"
expect_error "misspelt key after a MaxText file" "unknown key 'model_nme'; did you mean 'model_name'" -- \
  train "$MT/base.yml" model_nme=gpt3-52k "${small[@]}"
expect_error "MaxText block elastrain lacks" "decoder_block=mixtral: expected one of llama, gpt2, mistral" -- \
  train "$MT/base.yml" decoder_block=mixtral "${small[@]}"
expect_error "a MoE model file" "mixtral-8x7b.yml: num_experts=8: not implemented; elastrain trains num_experts=1" -- \
  train "$MT/models/mixtral-8x7b.yml" decoder_block=mistral "${small[@]}"

# 5. Every file of the checkout.
/usr/bin/python3 -c "import yaml" 2>/dev/null || { fail "python3-yaml is not installed (scripts/install_deps.sh --test)"; finish; exit 1; }
walk=$(/usr/bin/python3 "$SRC/tests/integration/maxtext_walk.py" "$BIN" "$MT" "$WORK/walk" 2>&1) && rc=0 || rc=$?
echo "$walk" | grep -v "^ok" || true
ok=$(echo "$walk" | grep -c "^ok" || true)
[ "$rc" -eq 0 ] && pass "maxtext_walk.py: $ok checks, $(echo "$walk" | grep -o "[0-9]* files: .*")" \
  || fail "maxtext_walk.py exited $rc"
finish

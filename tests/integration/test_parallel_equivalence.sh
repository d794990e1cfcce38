# 20 steps of `tiny` (both families) on every mesh kind and world sizes 1..4 match the
# single-process run: per-step losses and final parameters within 1e-5. global_batch_size
# 10 does not divide by 3 or 4: those ranks take uneven shares of each batch.
# hardware_peak_tflops: no worker probes the SGEMM ceiling for MFU at its start (0.5 s
# of 2 cores for each of 22 short runs; MFU is not what this test checks).
source "$(dirname "$0")/lib.sh"
common=(steps=20 log_period=1 eval_interval=10 global_batch_size=10 per_device_batch_size=2 hardware_peak_tflops=1
        base_output_directory="$WORK/runs" collective_timeout=30)
meshes=(
  "num_workers=2 ici_data_parallelism=2"
  "num_workers=3 ici_data_parallelism=3"
  "num_workers=4 ici_data_parallelism=4"
  "num_workers=2 ici_fsdp_parallelism=2"
  "num_workers=3 ici_fsdp_parallelism=3"
  "num_workers=4 ici_fsdp_parallelism=4"
  "num_workers=4 ici_data_parallelism=2 ici_fsdp_parallelism=2"
  "num_workers=2 ici_tensor_parallelism=2"
  "num_workers=4 ici_data_parallelism=2 ici_tensor_parallelism=2"
  "num_workers=4 ici_fsdp_parallelism=2 ici_tensor_parallelism=2"
)
for model in tiny tiny-gpt2; do
  "$BIN" train model_name=$model "${common[@]}" run_name=${model}_single final_params_path="$WORK/${model}_single.bin" \
    >/dev/null 2>&1 || { fail "$model single process run"; continue; }
  for mesh in "${meshes[@]}"; do
    name=${model}_$(echo "$mesh" | tr ' =' '_-')
    # shellcheck disable=SC2086
    if ! "$BIN" train model_name=$model "${common[@]}" $mesh run_name=$name final_params_path="$WORK/$name.bin" \
      >"$WORK/$name.out" 2>&1; then
      fail "$model {$mesh}: run failed: $(tail -2 "$WORK/$name.out")"
      continue
    fi
    l=$(compare_losses runs/${model}_single/metrics.jsonl runs/$name/metrics.jsonl) \
      && pass "$model {$mesh}: losses: $l" || fail "$model {$mesh}: losses: $l"
    p=$(compare_params "$WORK/${model}_single.bin" "$WORK/$name.bin") \
      && pass "$model {$mesh}: params: $p" || fail "$model {$mesh}: params: $p"
  done
done
# The decoder families (docs/config.md, "Model families"): fewer steps and three meshes
# each -- FSDP, tensor parallelism (heads and MLP rows split; the per-head-dim QK-norm
# scales, post norms and tied embedding replicated), and data x tensor.
family_meshes=(
  "num_workers=2 ici_fsdp_parallelism=2"
  "num_workers=2 ici_tensor_parallelism=2"
  "num_workers=4 ici_data_parallelism=2 ici_tensor_parallelism=2"
)
family_common=(steps=8 log_period=1 eval_interval=10 global_batch_size=4 per_device_batch_size=2 max_target_length=16
               hardware_peak_tflops=1 base_output_directory="$WORK/runs" collective_timeout=30)
for model in tiny-llama31 tiny-mistral tiny-qwen2 tiny-qwen3 tiny-gemma tiny-gemma2 tiny-zloss tiny-gpt3 tiny-olmo3; do
  "$BIN" train model_name=$model "${family_common[@]}" run_name=${model}_single \
    final_params_path="$WORK/${model}_single.bin" >"$WORK/${model}_single.out" 2>&1 \
    || { fail "$model single process run: $(tail -2 "$WORK/${model}_single.out")"; continue; }
  for mesh in "${family_meshes[@]}"; do
    name=${model}_$(echo "$mesh" | tr ' =' '_-')
    # shellcheck disable=SC2086
    if ! "$BIN" train model_name=$model "${family_common[@]}" $mesh run_name=$name final_params_path="$WORK/$name.bin" \
      >"$WORK/$name.out" 2>&1; then
      fail "$model {$mesh}: run failed: $(tail -2 "$WORK/$name.out")"
      continue
    fi
    l=$(compare_losses runs/${model}_single/metrics.jsonl runs/$name/metrics.jsonl) \
      && pass "$model {$mesh}: losses: $l" || fail "$model {$mesh}: losses: $l"
    p=$(compare_params "$WORK/${model}_single.bin" "$WORK/$name.bin") \
      && pass "$model {$mesh}: params: $p" || fail "$model {$mesh}: params: $p"
  done
done
finish

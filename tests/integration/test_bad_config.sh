# Bad configurations exit non-zero with one clear line naming the key and the value.
source "$(dirname "$0")/lib.sh"
common=(base_output_directory="$WORK/runs" steps=2)
expect_error "unknown key" "unknown key 'per_device_batchsize'.*did you mean 'per_device_batch_size'" -- \
  train model_name=tiny per_device_batchsize=4 "${common[@]}"
expect_error "negative steps" "steps=-3: expected a positive integer" -- train model_name=tiny steps=-3
expect_error "non-numeric batch" "per_device_batch_size=abc: expected an integer" -- \
  train model_name=tiny per_device_batch_size=abc "${common[@]}"
expect_error "missing dataset" "dataset_path=$WORK/no/such/corpus.txt: no such file or directory" -- \
  train model_name=tiny dataset_type=text dataset_path="$WORK/no/such/corpus.txt" "${common[@]}"
expect_error "head_dim does not divide" "head_dim=7" -- train model_name=tiny-gpt2 head_dim=7 "${common[@]}"
expect_error "kv heads do not divide" "base_num_query_heads=8 is not divisible by base_num_kv_heads=3" -- \
  train model_name=tiny base_num_kv_heads=3 "${common[@]}"
expect_error "missing config file" "$WORK/nope.yml" -- train "$WORK/nope.yml"
expect_error "unknown model" "model_name=gpt5: unknown model" -- train model_name=gpt5 "${common[@]}"
expect_error "7B does not fit" "model_name=llama2-7b needs about [0-9.]+ GiB" -- \
  train model_name=llama2-7b "${common[@]}"
expect_error "mesh does not multiply" "ici_data_parallelism=2 x ici_fsdp_parallelism=2 x ici_tensor_parallelism=2 = 8 != num_workers=4" -- \
  train model_name=tiny num_workers=4 ici_data_parallelism=2 ici_fsdp_parallelism=2 ici_tensor_parallelism=2 "${common[@]}"
expect_error "tensor degree does not divide heads" "ici_tensor_parallelism=3" -- \
  train model_name=tiny num_workers=3 ici_tensor_parallelism=3 "${common[@]}"
# Nothing was written for the failed runs.
if [ -z "$(ls -A "$WORK/runs" 2>/dev/null)" ]; then pass "failed configs wrote nothing"; else fail "runs/ not empty: $(ls "$WORK/runs")"; fi
finish

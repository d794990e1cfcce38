# Bad configurations exit non-zero with one clear line naming the key and the value.
source "$(dirname "$0")/lib.sh"
common=(base_output_directory="$WORK/runs" steps=2 hardware_peak_tflops=1)
expect_error "unknown key" "unknown key 'per_device_batchsize'.*did you mean 'per_device_batch_size'" -- \
  train model_name=tiny per_device_batchsize=4 "${common[@]}"
expect_error "negative steps" "steps=-3: expected a positive integer" -- train model_name=tiny steps=-3
expect_error "non-numeric batch" "per_device_batch_size=abc: expected a number of rows" -- \
  train model_name=tiny per_device_batch_size=abc "${common[@]}"
expect_error "missing dataset" "dataset_path=$WORK/no/such/corpus.txt: no such file or directory" -- \
  train model_name=tiny dataset_type=text dataset_path="$WORK/no/such/corpus.txt" "${common[@]}"
expect_error "checkpoint_period neither steps nor auto" "checkpoint_period=often: expected a positive number of steps, or auto" -- \
  train model_name=tiny checkpoint_period=often "${common[@]}"
expect_error "checkpoint_period_max below min" "checkpoint_period_max=5: expected an integer >= checkpoint_period_min=10" -- \
  train model_name=tiny checkpoint_period=auto checkpoint_period_max=5 "${common[@]}"
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
ELASTRAIN_FAULT=kill_after_update@path=x expect_error "fault condition the point lacks" \
  "ELASTRAIN_FAULT: 'kill_after_update@path=x': this point's context has no path" -- train model_name=tiny "${common[@]}"
# Elastic settings and the cluster commands.
expect_error "worker range upside down" "num_workers=4:2: expected a positive integer N, or MIN:MAX with 1 <= MIN <= MAX" -- \
  train model_name=tiny num_workers=4:2 "${common[@]}"
expect_error "zero workers" "num_workers=0: expected a positive integer N" -- train model_name=tiny num_workers=0 "${common[@]}"
expect_error "unknown placement" "placement_strategy=RANDOM: expected one of PACK, SPREAD" -- \
  train model_name=tiny num_workers=2 placement_strategy=RANDOM "${common[@]}"
expect_error "failure budget below -1" "max_failures=-2: expected an integer >= -1" -- \
  train model_name=tiny max_failures=-2 "${common[@]}"
expect_error "unknown fail_mode" "fail_mode=explode: expected one of exit, kill, hang, preempt, kill_mid_snapshot" -- \
  train model_name=tiny fail_mode=explode "${common[@]}"
expect_error "fail_rank outside the world" "fail_rank=5: expected a rank in \[0, 2\)" -- \
  train model_name=tiny num_workers=2 fail_rank=5 fail_at_step=3 "${common[@]}"
# A public key of no head: these agents fail on their store before any job.
openssl genpkey -algorithm ed25519 2>/dev/null | openssl pkey -pubout -out "$WORK/some_head.pub"
expect_error "agent without the head's public key" "--head-public-key FILE is required.*--insecure-unsigned-jobs runs whatever the store holds" -- \
  agent --store etcd://127.0.0.1:9 --slots 1
expect_error "agent with a public key and --insecure-unsigned-jobs" "--head-public-key and --insecure-unsigned-jobs exclude each other" -- \
  agent --store etcd://127.0.0.1:9 --slots 1 --head-public-key "$WORK/some_head.pub" --insecure-unsigned-jobs
openssl genpkey -algorithm ed25519 -out "$WORK/some_head.key" 2>/dev/null
expect_error "agent with a private key for a public one" "not a PEM Ed25519 public key" -- \
  agent --store etcd://127.0.0.1:9 --slots 1 --head-public-key "$WORK/some_head.key"
expect_error "bad store URL" "--store 'redis://x': expected memory://, etcd://HOST:PORT or etcds://HOST:PORT" -- agent --store redis://x --slots 1 --head-public-key "$WORK/some_head.pub"
# Plain etcd:// to a host that is not loopback needs --insecure-store (issue #33); 192.0.2.1
# (TEST-NET-1) is never reached: the refusal comes first.
expect_error "plain etcd:// off loopback (agent)" "--store 'etcd://192.0.2.1:2379': plain etcd:// to 192.0.2.1:2379, which is not loopback.*read and rewrite.*pass --insecure-store" -- \
  agent --store etcd://192.0.2.1:2379 --slots 1 --store-wait 30 --head-public-key "$WORK/some_head.pub"
expect_error "plain etcd:// off loopback (head)" "plain etcd:// to etcd.example:2379, which is not loopback.*--insecure-store" -- \
  head --store etcd://etcd.example:2379 --port 0 --token-file "$WORK/insecure/head_token"
out=$(timeout 20 "$BIN" head --store etcd://192.0.2.1:2379 --insecure-store --store-wait 0 --port 0 \
  --token-file "$WORK/insecure/head_token" 2>&1 || true)
grep -q "\[warning\].*--insecure-store: plain etcd:// to 192.0.2.1:2379, which is not loopback.*read and rewrite" <<<"$out" &&
  ! grep -q "pass --insecure-store" <<<"$out" &&
  pass "--insecure-store: accepted with a warning naming the risk: $(grep -m1 -o -- '--insecure-store: plain.*not loopback' <<<"$out")" ||
  fail "--insecure-store: $out"
ELASTRAIN_TOKEN=x expect_error "unreachable head" "cannot reach the head at http://127.0.0.1:9" -- status --head http://127.0.0.1:9
expect_error "no token for a head" "no token for --head http://127.0.0.1:9: pass --token-file PATH or set ELASTRAIN_TOKEN" -- \
  status --head http://127.0.0.1:9
expect_error "run without a head_url" "--run-dir $WORK/none: no head_url there" -- stop --run-dir "$WORK/none"
expect_error "chaos needs a target" "expected one of --rank R or --host H" -- chaos kill --head http://127.0.0.1:9
expect_error "TLS certificate without its key" "dashboard_tls_key=: expected both dashboard_tls_cert and dashboard_tls_key" -- \
  train model_name=tiny num_workers=2 dashboard_tls_cert=server.crt "${common[@]}"
expect_error "--token on the command line" "--token is not accepted" -- stop --token abc --run-dir "$WORK/none"
expect_error "negative price" "cost_per_worker_hour=-1: expected a price >= 0" -- \
  train model_name=tiny cost_per_worker_hour=-1 "${common[@]}"
expect_error "report of a missing run" "$WORK/none: not a run directory \(expected $WORK/none/events.jsonl" -- \
  report "$WORK/none"
mkdir -p "$WORK/empty_run" && : >"$WORK/empty_run/events.jsonl"
expect_error "report of a run without events" "events.jsonl: no events with a time" -- report "$WORK/empty_run"
# Nothing was written for the failed runs.
if [ -z "$(ls -A "$WORK/runs" 2>/dev/null)" ]; then pass "failed configs wrote nothing"; else fail "runs/ not empty: $(ls "$WORK/runs")"; fi
finish

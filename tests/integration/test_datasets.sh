# Issue 35, "Datasets" (Done-when 2): `tiny` trains from an llm.c .bin, a Megatron
# .bin/.idx, a JSONL corpus and a weighted blend, each written by an independent numpy
# writer (write_datasets.py, the formats' published layouts). Each run (num_workers=2:3)
# loses a worker to a SIGKILL and later shrinks from 3 workers to 2 on a preemption
# notice; check_samples then finds every sample consumed exactly once per epoch across
# the generations and world sizes. Also: a token id past vocab_size,
# put at a known position by the writer, is refused naming that position (so the
# header and dtype are read where the writer put them), and nanoGPT's headerless file trains.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
W="$SRC/tests/integration/write_datasets.py"
mkdir -p data/llmc data/mega
$PY "$W" llmc data/llmc/shard_000.bin --tokens 2500 --version 1 --seed 1 >/dev/null
$PY "$W" llmc data/llmc/shard_001.bin --tokens 2000 --version 2 --seed 2 >/dev/null
$PY "$W" megatron data/mega/corpus --docs 140 --dtype uint16 --seed 3 >/dev/null
$PY "$W" jsonl data/docs.jsonl --docs 60 --field body --seed 4 >/dev/null
$PY "$W" nanogpt data/nano.bin --tokens 3000 --seed 5 >/dev/null
$PY "$W" llmc data/bad.bin --tokens 3000 --version 2 --bad-at 1234 >/dev/null
$PY "$W" megatron data/badmega --docs 50 --dtype int32 --bad-at 777 >/dev/null

common=(model_name=tiny hardware_peak_tflops=1 vocab_size=256 max_target_length=32 steps=24 global_batch_size=12
        per_device_batch_size=4 learning_rate=3e-3 eval_interval=0 log_period=1 checkpoint_period=4 threads_per_worker=1
        base_output_directory="$WORK/runs" dashboard_port=0)

# elastic_run NAME key=value...: the run of one dataset with a killed worker and a
# resize, checked. Rank 1 is SIGKILLed after step 4 (a failure: the agent starts a
# replacement), and rank 1 gets a preemption notice after step 18 (its slot is given up,
# so the world shrinks from 3 to 2 whatever the kill left: a resize). The first
# generation waits for all 3 workers to start (kStartupGraceSeconds), and a smaller one
# grows back to 3 at a checkpoint boundary (every 4 steps) once the replacement is up.
elastic_run() {
  local name=$1 run=runs/$1 rc=0
  shift
  ELASTRAIN_FAULT=kill_after_step@gen=0:rank=1:step=4,preempt_after_step@rank=1:step=18 timeout 120 "$BIN" train \
    "${common[@]}" "$@" run_name="$name" num_workers=2:3 record_consumed_samples=1 \
    >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc: $(tail -3 "$WORK/$name.err")"; return; fi
  local samples worlds
  worlds=$(ev $run generation_started world | tr '\n' ' ')
  [ -n "$(ev $run worker_failed time)" ] && [ -n "$(ev $run worker_preempted time)" ] \
    && pass "$name: a worker killed, one preempted; generations of $worlds workers" \
    || fail "$name: failed '$(ev $run worker_failed reason)', preempted '$(ev $run worker_preempted reason)'"
  samples=$("$TOOLS/check_samples" $run 24) && pass "$name: exactly once: $samples" || fail "$name: samples: $samples"
  grep -q "batch shards {2,3}" <<<"$samples" && pass "$name: read by worlds of 3 and of 2 workers" \
    || fail "$name: not resized: $samples"
}

elastic_run llmc dataset_type=llmc dataset_path="$WORK/data/llmc"
grep -q "llmc dataset $WORK/data/llmc: 4500 tokens in 2 files" "$WORK/llmc.out" \
  && pass "llm.c: both files (v1 uint16 and v2 uint32), 4500 tokens" || fail "llm.c: $(grep -m1 'llmc dataset' "$WORK/llmc.out")"
elastic_run megatron dataset_type=megatron dataset_path="$WORK/data/mega/corpus"
grep -q "megatron uint16, 140 documents in 140 sequences" "$WORK/megatron.out" \
  && pass "megatron: 140 documents" || fail "megatron: $(grep -m1 'megatron dataset' "$WORK/megatron.out")"
elastic_run jsonl dataset_type=jsonl dataset_path="$WORK/data/docs.jsonl" train_data_columns=body
elastic_run blend dataset_type=llmc dataset_path="0.25 $WORK/data/llmc/shard_000.bin 0.75 $WORK/data/llmc/shard_001.bin"
grep -q "blend of 2 sources" "$WORK/blend.out" && pass "blend: $(grep -m1 -o 'blend of 2 sources.*' "$WORK/blend.out" | cut -c1-160)" \
  || fail "blend: no blend in the log"

# nanoGPT's headerless uint16 file, one process.
timeout 60 "$BIN" train "${common[@]}" steps=3 run_name=nano dataset_type=nanogpt dataset_path="$WORK/data/nano.bin" \
  >"$WORK/nano.out" 2>&1 && pass "nanogpt: trained 3 steps" || fail "nanogpt: $(tail -3 "$WORK/nano.out")"

# Hostile token ids at positions the writer chose.
expect_error "llm.c: token 1234 past the vocabulary" "bad.bin: token 1234 \(byte offset 5960\) is 256, not below vocab_size=256" \
  -- train "${common[@]}" run_name=bad dataset_type=llmc dataset_path="$WORK/data/bad.bin"
expect_error "megatron: token 777 past the vocabulary" "badmega.bin: token 777 \(byte offset 3108\) is 256" \
  -- train "${common[@]}" run_name=badmega dataset_type=megatron dataset_path="$WORK/data/badmega"
finish

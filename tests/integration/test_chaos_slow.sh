# Issue 32: `elastrain chaos slow` and `chaos unslow` end to end, in an embedded job of two
# workers: the rank's agent throttles its worker (a cgroup v1 cpu child with the quota
# docs/faults.md states, where /sys/fs/cgroup/cpu is writable; else the stop/continue
# cycle), `chaos unslow` and `--seconds` undo it and leave no cgroup behind, and the job
# goes on. (Whether the slowed rank is named a straggler: test_gray_failures.sh.)
source "$(dirname "$0")/lib.sh"
EXPECT_STRAGGLERS=1  # a rank is slowed on purpose
make_corpus "$WORK/corpus.txt"
run=runs/slow
"$BIN" train model_name=tiny hardware_peak_tflops=1 vocab_size=256 max_target_length=32 dataset_type=text \
  dataset_path="$WORK/corpus.txt" steps=100000 global_batch_size=8 per_device_batch_size=4 eval_interval=0 log_period=1 \
  checkpoint_period=1000 base_output_directory="$WORK/runs" run_name=slow dashboard_port=0 num_workers=2 \
  threads_per_worker=1 >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
wait_step $run 20 120 || fail "the run did not reach step 20: $(tail -3 "$WORK/err")"

pid=$(rank_pid $run 1)
throttle_dir() { find /sys/fs/cgroup/cpu -maxdepth 4 -type d -name "elastrain-throttle-$pid" 2>/dev/null | head -1; }
no_throttle() { [ -z "$(throttle_dir)" ]; }
slowed() { grep -q "chaos slow: worker .* (pid $pid) at 1/$1 of" "$run/controller.log"; }
out=$("$BIN" chaos slow --rank 1 --factor 3 --run-dir $run 2>&1) && pass "$out" || fail "chaos slow: $out"
if wait_until 60 slowed 3; then
  how=$(grep -o "chaos slow: worker .* (pid $pid) at 1/3 of.*" "$run/controller.log" | tail -1)
  pass "the agent slowed rank 1 (pid $pid): ${how#*: }"
  if [[ "$how" == *"cgroup /"* ]]; then
    dir=$(throttle_dir)
    # The quota: a third of the CPU share rank 1 had (at most its one thread's core).
    [ -n "$dir" ] && grep -qx "$pid" "$dir/cgroup.procs" && [ "$(cat "$dir/cpu.cfs_quota_us")" -ge 1000 ] \
      && [ "$(cat "$dir/cpu.cfs_quota_us")" -le $(( $(cat "$dir/cpu.cfs_period_us") / 3 + 1 )) ] \
      && pass "rank 1 runs in $dir with quota $(cat "$dir/cpu.cfs_quota_us") of $(cat "$dir/cpu.cfs_period_us") us" \
      || fail "throttle cgroup '$dir' of pid $pid: $(cat "$dir/cgroup.procs" "$dir/cpu.cfs_quota_us" 2>&1 | tr '\n' ' ')"
  fi
else
  fail "the agent did not slow rank 1: $(grep "chaos" "$run/controller.log" | tail -3)"
fi
out=$("$BIN" chaos unslow --rank 1 --run-dir $run 2>&1) && pass "$out" || fail "chaos unslow: $out"
wait_until 60 grep -q "chaos unslow: worker .* runs at full speed again" "$run/controller.log" && wait_until 10 no_throttle \
  && pass "unslowed: at full speed again, no throttle cgroup left" || fail "unslow: $(grep "chaos" "$run/controller.log" | tail -3); cgroup '$(throttle_dir)'"
out=$("$BIN" chaos slow --rank 1 --factor 2 --seconds 1 --run-dir $run 2>&1) && pass "$out" || fail "chaos slow --seconds: $out"
wait_until 60 grep -q "chaos slow of worker .* ran its time: at full speed again" "$run/controller.log" && wait_until 10 no_throttle \
  && pass "a slow with --seconds 1 ends by itself" || fail "slow --seconds 1: $(grep "chaos" "$run/controller.log" | tail -3)"

step=$(last_step $run)
wait_step $run $((step + 5)) 120 && pass "the job goes on after the slows (step $(last_step $run))" \
  || fail "no step after $step: $(tail -3 "$WORK/err")"
out=$("$BIN" stop --run-dir $run 2>&1) && pass "elastrain stop: $out" || fail "stop: $out"
rc=0
wait $job || rc=$?
[ "$rc" -eq 4 ] && pass "the job ended STOPPED (exit 4)" || fail "exit $rc: $(tail -3 "$WORK/err")"
out=$("$BIN" chaos slow --rank 1 --factor 2 --run-dir $run 2>&1) && fail "chaos slow of an ended job: $out" \
  || pass "chaos slow of an ended job is refused: $out"
finish

# Issue 5, point 8: SIGTERM to one worker is a preemption notice: every rank stops after
# the same step, a checkpoint of that step is saved, the world shrinks without counting a
# failure, and no step is lost or redone. Then SIGTERM to the whole `elastrain train`
# (the machine's notice): it saves, exits 3, and the same command resumes where it left.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 log_period=1 eval_interval=0 checkpoint_period=50
        base_output_directory="$WORK/runs" dashboard_port=0)
run=runs/preempt
"$BIN" train "${common[@]}" num_workers=2:3 steps=100 record_consumed_samples=1 run_name=preempt \
  >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
wait_step $run 30 120 || fail "the run did not reach step 30: $(tail -3 "$WORK/err")"
pid=$(rank_pid $run 1)
kill -TERM "$pid"
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job completed (exit 0)" || fail "exit $rc: $(tail -3 "$WORK/err")"
[ -n "$(ev $run worker_preempted time pid="$pid")" ] && pass "worker_preempted: $(ev $run worker_preempted reason pid="$pid")" \
  || fail "no worker_preempted event"
[ -z "$(ev $run generation_failed time)" ] && pass "no failure counted" || fail "failures: $(ev $run generation_failed reason)"
stop=$(ev $run generation_started restore.step generation=1)
saved=$(ev $run checkpoint_saved step step="$stop")
[ -n "$stop" ] && [ "$stop" = "$saved" ] && [ $((stop % 50)) -ne 0 ] \
  && pass "a checkpoint of the stop step $stop was saved on notice (checkpoint_period=50)" \
  || fail "stop step '$stop', checkpoint '$saved'"
[ "$(ev $run generation_started world generation=1)" = "2" ] && pass "the world shrank to 2 ($(ev $run job_state reason to=RESIZING))" \
  || fail "generation 1 world: $(ev $run generation_started world generation=1)"
samples=$("$TOOLS/check_samples" $run 100) && pass "exactly once: $samples" || fail "samples: $samples"
grep -q "steps read by more than one generation: 0" <<<"$samples" && pass "no step redone after the notice" \
  || fail "steps redone: $samples"
[ "$(last_step $run)" -eq 100 ] && pass "all 100 steps done" || fail "last step $(last_step $run)"

# The whole machine gets the notice.
run=runs/machine
"$BIN" train "${common[@]}" num_workers=2 steps=300 run_name=machine >"$WORK/out2" 2>"$WORK/err2" &
job=$!
bg_track $job
wait_step $run 20 120 || fail "the second run did not reach step 20"
kill -TERM $job
rc=0
wait $job || rc=$?
[ "$rc" -eq 3 ] && pass "SIGTERM to elastrain train: exit 3 (preempted): $(grep preempted "$WORK/err2" | tail -1)" \
  || fail "exit $rc: $(tail -3 "$WORK/err2")"
[ -z "$(ev $run generation_failed time)" ] && pass "no failure on the notice" \
  || fail "a failure on the notice: $(ev $run generation_failed reason); $(grep -h -A3 'fatal signal' $run/logs/*.log | head -8)"
saved=$(ev $run checkpoint_saved step | tail -1)
[ -n "$saved" ] && [ "$saved" -ge 20 ] && pass "saved step $saved on the notice" || fail "saved: '$saved'"
"$BIN" train "${common[@]}" num_workers=2 steps=300 run_name=machine >"$WORK/out3" 2>"$WORK/err3" \
  && pass "the same command resumes and completes" || fail "resume failed: $(tail -3 "$WORK/err3")"
restored=$(ev $run checkpoint_restored step | tail -1)
[ -n "$restored" ] && [ "$restored" = "$saved" ] && pass "resumed from step $restored" || fail "restored '$restored', saved '$saved'"
finish

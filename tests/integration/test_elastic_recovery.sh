# Issue 5, points 1 and 2: num_workers=2:4, SIGKILL of one worker at about step 30 of 120.
# The job completes all 120 steps; events.jsonl shows the failure and the new generation;
# every sample is consumed exactly once per epoch (a small corpus: several epochs); and
# the final parameters equal a failure-free single-process run with the same
# global_batch_size within 1e-4 relative.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/corpus.txt"
common=(model_name=tiny hardware_peak_tflops=1 vocab_size=256 max_target_length=32 dataset_type=text dataset_path="$WORK/corpus.txt"
        steps=120 global_batch_size=16 per_device_batch_size=4 learning_rate=3e-3 eval_interval=0 log_period=1
        checkpoint_period=20 base_output_directory="$WORK/runs" dashboard_port=0)
"$BIN" train "${common[@]}" run_name=ref final_params_path="$WORK/ref.bin" >"$WORK/ref.out" 2>&1 \
  || fail "reference run failed: $(tail -3 "$WORK/ref.out")"

run=runs/elastic
"$BIN" train "${common[@]}" run_name=elastic num_workers=2:4 threads_per_worker=1 record_consumed_samples=1 \
  final_params_path="$WORK/elastic.bin" >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
wait_step $run 30 120 || fail "the run did not reach step 30: $(tail -3 "$WORK/err")"
pid=$(rank_pid $run 1)
killed=$(now)
kill -9 "$pid"
rc=0
wait $job || rc=$?
# A run that took far longer than usual (a few seconds) passes if its checks hold, but says
# where the time went: once in a clean-clone ctest run it took 64 s, with a generation 1 of
# 4 workers (the replacement ready in time); once more in 23 later runs (62 s, seen as this
# note began: fewer events than a normal run has, not kept), not in the others.
took=$(awk -v k="$killed" -v n="$(now)" 'BEGIN { printf "%.0f", n - k }')
if [ "$took" -gt "${NOTE_AFTER:-30}" ]; then
  echo "    note: the job ended $took s after the kill; its events (seconds after the kill):"
  tail -40 $run/events.jsonl | awk -v k="$killed" '{ t = match($0, /"time":[0-9.]+/) ? substr($0, RSTART + 7, RLENGTH - 7) : k
    printf "      %8.2f %s\n", t - k, substr($0, 1, 150) }'
  tail -5 "$WORK/err" | sed 's/^/      err: /'
fi
[ "$rc" -eq 0 ] && pass "the job completed (exit 0) after SIGKILL of rank 1 (pid $pid)" || fail "exit $rc: $(tail -3 "$WORK/err")"
[ "$(last_step $run)" -eq 120 ] && pass "all 120 steps done" || fail "last step $(last_step $run)"

failed=$(ev $run worker_failed reason pid="$pid")
[ -n "$failed" ] && pass "events.jsonl: worker_failed: $failed" || fail "no worker_failed event for pid $pid"
detected=$(ev $run worker_failed detected_at pid="$pid")
# The agent sees the process end (on an idle machine within 1 s, printed), not the 60 s
# heartbeat or collective timeout; 20 s keeps that apart on a loaded machine too.
awk -v k="$killed" -v d="$detected" 'BEGIN { printf "detected %.3f s after the kill\n", d - k; exit !(d - k < 20) }' \
  && pass "the agent saw the death, not a timeout" || fail "detection: killed $killed, detected $detected"
gens=$(ev $run generation_started generation | tr '\n' ' ')
restore=$(ev $run generation_started restore.kind generation=1)
world=$(ev $run generation_started world generation=1)
[ -n "$restore" ] && pass "generation 1 started with $world workers, $restore restore (generations: $gens)" \
  || fail "no generation 1: $gens"
[ "$(ev $run generation_failed failures)" = "1" ] && pass "one failure counted" || fail "failures: $(ev $run generation_failed failures)"

samples=$("$TOOLS/check_samples" $run 120) && pass "exactly once: $samples" || fail "samples: $samples"
params=$(compare_params_within "$WORK/ref.bin" "$WORK/elastic.bin" 1e-4) \
  && pass "final parameters equal the failure-free run's: $params" || fail "params: $params"
finish

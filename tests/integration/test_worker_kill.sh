# Issue 5, point 3: num_workers=3 (fixed) with max_failures=0: a SIGKILL of a worker fails
# the job at once with one line naming the rank, the host, the signal and the failure budget.
source "$(dirname "$0")/lib.sh"
run=runs/kill
"$BIN" train model_name=tiny hardware_peak_tflops=1 num_workers=3 max_failures=0 threads_per_worker=1 steps=100000 log_period=1 \
  eval_interval=0 collective_timeout=60 base_output_directory="$WORK/runs" run_name=kill dashboard_port=0 \
  >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
wait_step $run 3 120 || fail "training did not start: $(tail -3 "$WORK/err")"
pid=$(rank_pid $run 1)
kill -9 "$pid"
killed=$(now)
rc=0
wait $job || rc=$?
ended=$(now)
elapsed=$(awk -v a="$killed" -v b="$ended" 'BEGIN { printf "%.3f", b - a }')
echo "the job exited $rc, $elapsed s after the kill"
[ "$rc" -eq 1 ] && pass "exit code 1 (failure)" || fail "exit code $rc"
# Faster than the 60 s collective timeout would allow (a few seconds on an idle machine);
# 40 s keeps the two apart on a loaded one.
awk -v e="$elapsed" 'BEGIN { exit !(e < 40) }' && pass "failed fast: ${elapsed}s (collective_timeout 60s)" || fail "took ${elapsed}s"
lines=$(grep -c . "$WORK/err" || true)
errline=$(grep "error:" "$WORK/err" || true)
[ "$(grep -c "error:" "$WORK/err" || true)" -eq 1 ] && pass "one error line: $errline" || fail "error lines: $(grep error: "$WORK/err")"
for want in "rank 1" "pid $pid" "on host $(hostname)" "killed by signal 9 (SIGKILL)" "max_failures=0" "1 failure"; do
  grep -q -- "$want" <<<"$errline" && pass "it names '$want'" || fail "'$want' missing from: $errline"
done
[ "$(ev $run job_state to to=FAILED)" = "FAILED" ] && pass "events.jsonl: job_state -> FAILED" || fail "no FAILED event"
# The others noticed the lost peer through their collectives, and said so.
grep -l "rank 1 (pid $pid) on host $(hostname) is gone" runs/kill/logs/*.log >/dev/null \
  && pass "a surviving rank names the lost peer: $(grep -ho "failed on rank.*is gone" runs/kill/logs/*.log | head -1 | cut -c1-220)" \
  || fail "no survivor names the lost peer: $(grep -h 'failed' runs/kill/logs/*.log | head -2)"
finish

# Issue 7, last point: checkpoint_period=auto. An elastic job (num_workers=2, fixed)
# whose rank 1 is SIGKILLed twice changes its period as the failures accumulate: each
# generation after a failure starts with a shorter period (events.jsonl,
# checkpoint_period_changed), and the job completes. A small prior MTTI (10 s) makes
# the failures weigh against it within seconds. Periods scale as 1/step time: the tiny
# model's ~0.016 s steps give ~70 steps in generation 0 and ~50 in generation 1, and
# the job's 300 steps leave room for both even were steps 4x faster (at 100 steps and
# a 60 s prior, generation 1's first save was the final one, and the kill came too late). Also: the single-process path, and a
# bad value is one error line.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 log_period=1 eval_interval=0 checkpoint_period=auto
        checkpoint_mtti_prior_seconds=10 checkpoint_period_min=2 checkpoint_period_max=100000
        base_output_directory="$WORK/runs" dashboard_port=0)

expect_error "checkpoint_period=often" "checkpoint_period=often: expected a positive number of steps, or auto" -- \
  train model_name=tiny checkpoint_period=often

# One process: the period starts at checkpoint_period_min, then the first save sets it.
"$BIN" train "${common[@]}" steps=12 run_name=single >"$WORK/single.out" 2>&1 \
  && pass "single process with checkpoint_period=auto completed" || fail "single: $(tail -3 "$WORK/single.out")"
reasons=$(ev runs/single checkpoint_period_changed reason | tr '\n' ' ')
[ "$reasons" = "generation_start save_measured " ] && pass "single: periods $(ev runs/single checkpoint_period_changed to | tr '\n' ' ')($reasons)" \
  || fail "single: reasons '$reasons'"

run=runs/auto
"$BIN" train "${common[@]}" steps=300 run_name=auto num_workers=2 threads_per_worker=1 max_failures=5 \
  >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
# saved_in GEN: waits until generation GEN has committed a checkpoint (its first save is
# measured then, and the period re-evaluated).
saved_in() {
  wait_ev $run state_restored 60 generation="$1" || return 1
  local start deadline=$((SECONDS + 60))
  start=$(ev $run state_restored step generation="$1")
  until ev $run checkpoint_saved step | awk -v s="$start" '$1 > s { f = 1 } END { exit !f }'; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.05
  done
}
for g in 0 1; do
  saved_in $g || { fail "generation $g saved nothing: $(tail -3 "$WORK/err")"; break; }
  # The chief measures its first save on the step after it: generation 0's period must
  # come from that measurement before the kill, or generation 1 has nothing to shorten.
  if [ $g = 0 ]; then
    wait_ev $run checkpoint_period_changed 60 reason=save_measured generation=0 \
      || { fail "generation 0 measured no save: $(tail -3 "$WORK/err")"; break; }
  fi
  pid=$(rank_pid $run 1)
  kill -9 "$pid" && pass "generation $g: SIGKILL of rank 1 (pid $pid) at step $(last_step $run)"
done
saved_in 2 || fail "generation 2 saved nothing: $(tail -3 "$WORK/err")"
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job completed (exit 0) after two failures" || fail "exit $rc: $(tail -3 "$WORK/err")"
[ "$(last_step $run)" -eq 300 ] && pass "all 300 steps done" || fail "last step $(last_step $run)"
[ "$(ev $run generation_failed failures | tail -1)" = "2" ] && pass "two failures counted" \
  || fail "failures: $(ev $run generation_failed failures | tr '\n' ' ')"

echo "checkpoint_period_changed events:"
fields=(generation reason failures from to mtti_seconds stall_seconds step_seconds)
echo "  ${fields[*]}"
for f in "${fields[@]}"; do ev $run checkpoint_period_changed "$f" >"$WORK/col.$f"; done
(cd "$WORK" && paste -d' ' $(printf 'col.%s ' "${fields[@]}")) | sed 's/^/  /'
changes=$(ev $run checkpoint_period_changed to | grep -c . || true)
[ "$changes" -ge 4 ] && pass "$changes changes of the period" || fail "only $changes changes"
# The period the chief proposes for each generation after a failure is shorter than the
# one in force before it (its measurements carry over; the MTTI estimate falls).
for g in 1 2; do
  from=$(ev $run checkpoint_period_changed from reason=generation_start generation=$g)
  to=$(ev $run checkpoint_period_changed to reason=generation_start generation=$g)
  f=$(ev $run checkpoint_period_changed failures reason=generation_start generation=$g)
  [ -n "$to" ] && [ "$to" -lt "$from" ] && [ "$f" = "$g" ] \
    && pass "generation $g ($f failures): period $from -> $to steps" \
    || fail "generation $g: from '$from' to '$to' failures '$f'"
done
# Each saved step is the period after the previous save (or the generation's start).
saved=$(ev $run checkpoint_saved step | tr '\n' ' ')
[ -n "$saved" ] && pass "checkpoints saved at steps $saved" || fail "no checkpoint_saved"
finish

# Issue 16, "Records stay exact under faults": every completed step has exactly one
# metrics.jsonl line whatever dies when, no sample is read twice, and nothing is redone
# while a survivor holds the state.
#  1. Deterministic deaths right after a step's update (fault kill_after_update): rank 1 after
#     step 6's (when the loss was summed after the update, the chief then never learnt
#     the step's loss), the chief after step 12's (before it wrote the line). The
#     survivors applied both updates, so both steps keep a line.
#  2. FSDP (no copy of the state in memory): the chief dies after step 15's update, the
#     next generation restores the checkpoint of step 10 and redoes 11-15: step 15's line
#     comes from the survivor, and no redone step gets a second line; `elastrain report`
#     counts the 5 redone steps.
#  3. A job SIGKILLed as a whole after its last checkpoint, then run again: the rerun
#     redoes the steps after the checkpoint without a second line for them, and its events
#     name the step it restored, not step 0.
#  4. A storm: a random worker SIGKILLed every 2-4 s for STORM_SECONDS (24 s; issue 16 ran
#     40) (num_workers=2:4), then a stop: one line per step up to the stop step, no sample
#     read twice, and no step redone by a generation restored from memory.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 log_period=1 eval_interval=0 record_consumed_samples=1
        base_output_directory="$WORK/runs" dashboard_port=0)

# train_steps RUN: the step of each training line of metrics.jsonl, in file order.
# redone RUN: the redone steps `elastrain report` counts.
redone() { "$BIN" report "$1" --json --html "$WORK/report.html" | "$JQ" redone_steps; }

# --- 1. deaths between a step's update and its line ------------------------------------
run=runs/fault
rc=0
deaths=kill_after_update@gen=0:rank=1:step=6,kill_after_update@gen=1:rank=0:step=12
ELASTRAIN_FAULT=$deaths timeout 120 "$BIN" train "${common[@]}" num_workers=3 steps=20 run_name=fault \
  >"$WORK/fault.out" 2>"$WORK/fault.err" || rc=$?
[ "$rc" -eq 0 ] && pass "the job with two injected deaths completed" || fail "exit $rc: $(tail -3 "$WORK/fault.err")"
check_lines $run 20 "deaths after the updates of steps 6 and 12"
restored=$(ev $run state_restored step | tr '\n' ' ')
[ "$restored" = "0 6 12 " ] && pass "generations restored steps 0, 6, 12 (from memory)" || fail "restored: $restored"
recovered=$(ev $run step_line_recovered step | tr '\n' ' ')
[ "$recovered" = "12 " ] && pass "the new chief wrote the line of step 12 the old one died before writing" \
  || fail "lines recovered: '$recovered'"
[ "$(redone $run)" = 0 ] && pass "no step redone" || fail "redone steps: $(redone $run)"
samples=$("$TOOLS/check_samples" $run 20) && pass "exactly once: $samples" || fail "samples: $samples"

# --- 2. a death after an update, restored from an older checkpoint ------------------------
# (memory_snapshot_period=0: the disk path; restores from peers are test_ram_tier.sh's)
run=runs/fsdp
rc=0
ELASTRAIN_FAULT=kill_after_update@gen=0:rank=0:step=15 timeout 120 "$BIN" train "${common[@]}" num_workers=2 ici_fsdp_parallelism=2 steps=20 \
  checkpoint_period=10 memory_snapshot_period=0 run_name=fsdp >"$WORK/fsdp.out" 2>"$WORK/fsdp.err" || rc=$?
[ "$rc" -eq 0 ] && pass "the FSDP job whose chief died completed" || fail "exit $rc: $(tail -3 "$WORK/fsdp.err")"
check_lines $run 20 "FSDP, the chief killed after step 15's update"
restored="$(ev $run state_restored kind generation=1) $(ev $run state_restored step generation=1)"
[ "$restored" = "checkpoint 10" ] && pass "generation 1 restored the checkpoint of step 10" || fail "restored: $restored"
[ "$(ev $run step_line_recovered step)" = 15 ] && pass "step 15's line came from the survivor" \
  || fail "lines recovered: '$(ev $run step_line_recovered step)'"
redo="$(ev $run steps_redone from)..$(ev $run steps_redone to)"
[ "$redo" = "10..15" ] && pass "steps_redone: $redo" || fail "steps_redone: $redo"
[ "$(redone $run)" = 5 ] && pass "the report counts 5 redone steps" || fail "redone steps: $(redone $run)"
samples=$("$TOOLS/check_samples" $run 20) && pass "exactly once: $samples" || fail "samples: $samples"

# --- 3. a rerun after the whole job was killed -------------------------------------------
run=runs/rerun
"$BIN" train "${common[@]}" num_workers=2 steps=40 checkpoint_period=10 run_name=rerun \
  >"$WORK/rerun1.out" 2>"$WORK/rerun1.err" &
job=$!
bg_track $job
wait_step $run 14 120 || fail "the first run did not reach step 14: $(tail -3 "$WORK/rerun1.err")"
workers=$(pgrep -P $job | tr '\n' ' ')
kill -9 $job
wait $job 2>/dev/null || true
# Its workers die with it (PR_SET_PDEATHSIG); none may still write when the rerun starts.
gone() { for p in $workers; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_until 20 gone || fail "workers $workers outlived their job"
killed_at=$(last_step $run)
ckpt=$(ev $run checkpoint_saved step | sort -n | tail -1)
rc=0
"$BIN" train "${common[@]}" num_workers=2 steps=24 checkpoint_period=10 run_name=rerun \
  >"$WORK/rerun2.out" 2>"$WORK/rerun2.err" || rc=$?
[ "$rc" -eq 0 ] && pass "the rerun completed" || fail "rerun exit $rc: $(tail -3 "$WORK/rerun2.err")"
check_lines $run 24 "killed after step $killed_at (checkpoint $ckpt), run again"
gen0=$(grep '"generation_started"' $run/events.jsonl | tail -1)
state0=$(grep '"job_state"' $run/events.jsonl | grep -F '"to":"RUNNING"' | tail -1)
restored=$(ev $run state_restored step generation=0 | tail -1)
[ "$restored" = "$ckpt" ] && pass "the rerun restored the checkpoint of step $ckpt" || fail "restored '$restored', checkpoint '$ckpt'"
if grep -q 'step 0' <<<"$state0$gen0" || grep -q '"step":0' <<<"$gen0"; then
  fail "the rerun's events name step 0: $state0 $gen0"
else
  pass "the rerun's events do not claim step 0: $("$JQ" reason <<<"$state0")"
fi
redo=$(ev $run steps_redone to | tail -1)
[ "$redo" = "$killed_at" ] && [ "$(ev $run steps_redone from | tail -1)" = "$ckpt" ] \
  && pass "steps_redone: $ckpt..$redo" || fail "steps_redone from $(ev $run steps_redone from) to '$redo'"

# --- 4. the storm ------------------------------------------------------------------------
# Time-bound whatever the machine's speed: STORM_SECONDS of kills, then `elastrain stop`.
run=runs/storm
started=$SECONDS
"$BIN" train "${common[@]}" num_workers=2:4 max_failures=-1 steps=100000 global_batch_size=8 per_device_batch_size=2 \
  checkpoint_period=50 run_name=storm >"$WORK/storm.out" 2>"$WORK/storm.err" &
job=$!
bg_track $job
wait_step $run 3 120 || fail "the storm run did not start: $(tail -3 "$WORK/storm.err")"
kills=0
storm_end=$((SECONDS + ${STORM_SECONDS:-24}))
while [ $SECONDS -lt $storm_end ] && kill -0 $job 2>/dev/null; do
  sleep "$((2 + RANDOM % 2)).$((RANDOM % 10))"
  mapfile -t workers < <(pgrep -P $job -f ' worker' || true)
  [ "${#workers[@]}" -gt 0 ] || continue
  victim=${workers[$((RANDOM % ${#workers[@]}))]}
  kill -9 "$victim" 2>/dev/null && kills=$((kills + 1)) && echo "  kill $kills: pid $victim at step $(last_step $run)"
done
"$BIN" stop --run-dir $run >/dev/null 2>&1 || fail "elastrain stop refused"
rc=0
wait $job || rc=$?
steps=$(last_step $run)
echo "  storm run: $kills kills, $steps steps, $((SECONDS - started)) s"
[ "$rc" -eq 4 ] && pass "the job survived $kills kills and stopped when asked (exit 4)" \
  || fail "exit $rc: $(tail -3 "$WORK/storm.err")"
[ "$kills" -ge 5 ] && pass "$kills workers killed" || fail "only $kills kills"
check_lines $run $steps "storm"
samples=$("$TOOLS/check_samples" $run $steps) && pass "exactly once: $samples" || fail "samples: $samples"
check_no_redo_from_memory $run
finish

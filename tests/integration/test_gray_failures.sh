# Issue 32: a rank slowed by `elastrain chaos slow` (cgroup v1 cpu quota, or a stop/continue
# duty cycle) is named by straggler_detected -- the right rank and host -- and, under
# straggler_policy=exclude, taken out: host_excluded, then a generation of the others,
# which completes the job. Under alert the job keeps all its ranks. Figures (how fast it
# was named, the pace after) are bench/gray_failures.sh's; here only what must hold.
source "$(dirname "$0")/lib.sh"
EXPECT_STRAGGLERS=1
# small, not tiny: a straggler must lose at least 20 ms of compute per step to be named
# (elastic/straggler.h); tiny's steps compute in about a millisecond.
common=(model_name=small max_target_length=64 hardware_peak_tflops=1 threads_per_worker=1 log_period=1 eval_interval=0
        checkpoint_period=10 global_batch_size=8 per_device_batch_size=2 base_output_directory="$WORK/runs"
        dashboard_port=0)

slowed_run() {  # slowed_run NAME POLICY STEPS
  local run=runs/$1
  "$BIN" train "${common[@]}" run_name="$1" num_workers=2:4 steps="$3" straggler_policy="$2" \
    straggler_persistence_steps=6 >"$WORK/$1.out" 2>"$WORK/$1.err" &
  local job=$!
  bg_track $job
  wait_step $run 5 120 || fail "$1: the run did not reach step 5: $(tail -3 "$WORK/$1.err")"
  local out
  out=$("$BIN" chaos slow --rank 1 --factor 4 --run-dir $run 2>&1) && pass "$1: chaos slow --rank 1 --factor 4: $out" \
    || fail "$1: chaos slow: $out"
  local rc=0
  wait $job || rc=$?
  [ "$rc" -eq 0 ] && pass "$1: the job completed" || fail "$1: exit $rc: $(tail -3 "$WORK/$1.err")"
}

slowed_run exclude exclude 36
run=runs/exclude
# Rank 1 must be named; on a machine loaded beyond the one busy core the rule is made
# for (CI builds the fuzz tree beside this test), a clean rank may be named for a while
# too: noted, and the exclusion below must still take out only the slowed one.
[ -n "$(ev $run straggler_detected step rank=1)" ] \
  && pass "straggler_detected names rank 1 at step $(ev $run straggler_detected step rank=1 | head -1), $(ev $run straggler_detected slowdown rank=1 | head -1)x the median" \
  || fail "straggler_detected: $(ev $run straggler_detected rank | xargs) (want 1)"
others=$(ev $run straggler_detected rank | grep -vx 1 | sort -u | xargs || true)
[ -z "$others" ] || echo "    note: rank(s) $others (not slowed) named too on this loaded machine"
[ "$(ev $run straggler_detected host rank=1 | head -1)" = "$(ev $run generation_started members.1.host generation=0)" ] \
  && pass "and its host" || fail "straggler_detected host: $(ev $run straggler_detected host)"
[ -n "$(ev $run host_excluded reason)" ] && pass "host_excluded: $(ev $run host_excluded reason | head -1)" \
  || fail "no host_excluded under straggler_policy=exclude"
slow_pid=$("$JQ" --jsonl $run/events.jsonl event=generation_started generation=0 members.1.pid)
last_gen=$("$JQ" --jsonl $run/events.jsonl event=generation_started generation | tail -1)
members=$("$JQ" --jsonl $run/events.jsonl event=generation_started generation=$last_gen world)
pids=$("$JQ" --jsonl $run/events.jsonl event=generation_started generation=$last_gen members | grep -o '"pid":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
[ "$members" = "3" ] && ! grep -qw "$slow_pid" <<<"$pids" \
  && pass "generation $last_gen: 3 workers without the slowed one (pid $slow_pid)" \
  || fail "generation $last_gen: world $members, pids $pids (slowed: $slow_pid)"
[ "$(ev $run generation_failed reason)" = "" ] && pass "no failure counted" || fail "failures: $(ev $run generation_failed reason)"
[ "$(last_step $run)" -eq 36 ] && pass "all 36 steps done" || fail "last step $(last_step $run)"

slowed_run alert alert 24
run=runs/alert
[ -n "$(ev $run straggler_detected step rank=1)" ] && pass "alert: straggler_detected names rank 1" \
  || fail "alert: straggler_detected: $(ev $run straggler_detected rank | xargs)"
[ -z "$(ev $run host_excluded host)" ] && pass "alert: nobody excluded" || fail "alert: $(ev $run host_excluded reason)"
# The slowed worker's cgroup goes with the job.
left=$(find /sys/fs/cgroup/cpu -maxdepth 4 -type d -name 'elastrain-throttle-*' 2>/dev/null || true)
[ -z "$left" ] && pass "no throttle cgroup left behind" || fail "throttle cgroups left: $left"
finish

# Issue #17, Done-when 1: deploy/slurm/elastrain.sbatch on a real one-machine Slurm cluster
# (slurmctld and two slurmd on loopback, MUNGE; tests/deploy/slurm_lib.sh). One job,
# `--nodes=1-2`, one worker per node (num_workers=1:2), meets in turn:
#   a node's agent step SIGKILLed mid-run  -> host loss by lease: the job shrinks to one
#                                             worker and goes on (the allocation survives);
#   `scontrol requeue`                     -> the script runs again on a fresh allocation:
#                                             the job resumes from its latest checkpoint;
#   a node set to DRAIN                    -> the script sends its agent step SIGTERM, the
#                                             preemption notice (as --signal=TERM@T and Slurm's
#                                             preemption do): its workers save and leave, no
#                                             failure is counted;
# and finishes: the Slurm job COMPLETED with exit 0, one metrics line per step, and no
# process of the job left behind. Then a second job on the same job directory and run
# name (as after a time limit) goes on from the latest checkpoint.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
source "$SRC/tests/deploy/slurm_lib.sh"
STEPS=${STEPS:-300}
slurm_setup n1 n2

export ELASTRAIN="$BIN" ELASTRAIN_JOB_DIR="$WORK/job" ELASTRAIN_SLOTS_PER_NODE=1 ELASTRAIN_LEASE_SECONDS=3

# Bad settings end the batch script at once, naming the variable and what was expected.
bad_job() {  # VAR=VALUE PATTERN
  local j
  j=$(env "$1" "$SLURM_MARK" sbatch --parsable --chdir="$WORK" --output="$WORK/bad.out" "$SRC/deploy/slurm/elastrain.sbatch")
  wait_until 60 bash -c "[ \"\$(scontrol show job $j | grep -o 'JobState=[A-Z]*')\" = JobState=FAILED ]" &&
    grep -q "$2" "$WORK/bad.out" && pass "$1: the job FAILED: $(grep -m1 "$2" "$WORK/bad.out" | cut -c1-120)" ||
    fail "$1: $(job_field "$j" JobState): $(tail -2 "$WORK/bad.out")"
}
bad_job ELASTRAIN_SLOTS_PER_NODE=2x "ELASTRAIN_SLOTS_PER_NODE=2x: expected a count"
bad_job 'ELASTRAIN_STORE_PORT=80;rm' "ELASTRAIN_STORE_PORT=80;rm: expected a port"
JOB=$(slurm_sbatch --chdir="$WORK" --output="$WORK/job.out" "$SRC/deploy/slurm/elastrain.sbatch" \
  model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 steps=$STEPS log_period=1 eval_interval=0 checkpoint_period=10 \
  resource_wait_timeout=120 worker_heartbeat_timeout=30 collective_timeout=30 max_failures=10 preemption_notice_seconds=10)
[[ $JOB =~ ^[0-9]+$ ]] && pass "sbatch: job $JOB" || { fail "sbatch: $JOB"; finish; exit 1; }
RUN=$WORK/job/runs/elastrain-$JOB
CUR_JOB=$JOB  # the job whose head status_json asks
token() { ls "$WORK"/job/private/allocation-"$(job_field "$CUR_JOB" Restarts)"/head_token 2>/dev/null; }
status_json() {
  local t
  t=$(token) || return 0
  "$BIN" status --head "$(cat "$(dirname "$t")/head_url" 2>/dev/null)" --token-file "$t" --json 2>/dev/null || true
}
world() { status_json | "$JQ" world 2>/dev/null || true; }
world_is() { [ "$(world)" = "$1" ]; }
at_step() { [ "$(last_step "$RUN")" -ge "$1" ]; }
show() { echo "    job: $(job_field "$JOB" JobState) restarts $(job_field "$JOB" Restarts); $(tail -2 "$WORK/job.out" | tr '\n' ' ')"; }

wait_until 120 at_step 5 && pass "training on Slurm: step $(last_step "$RUN")" || { fail "no step 5"; show; tail -n 5 "$WORK"/job/logs/*; finish; exit 1; }
wait_until 60 world_is 2 && pass "both nodes' agents train: world 2, ranks on $(status_json | "$JQ" ranks.0.host) and $(status_json | "$JQ" ranks.1.host)" ||
  fail "world $(world), expected 2"
grep -q "num_workers=1:2" "$WORK/job.out" && pass "--nodes=1-2 with one slot per node: num_workers=1:2" ||
  fail "num_workers: $(grep -m1 num_workers "$WORK/job.out")"
grep -q "identity from Slurm" "$WORK"/job/logs/agent-n2-0.log && pass "agent learned its identity from Slurm: $(grep -m1 -o 'identity from.*' "$WORK"/job/logs/agent-n2-0.log)" ||
  fail "agent identity: $(head -3 "$WORK"/job/logs/agent-n2-0.log)"

# 1. n2's agent step SIGKILLed: host loss.
wait_until 120 at_step 15 || fail "no step 15"
step=$(step_of "$JOB" agent-n2)
s0=$(last_step "$RUN")
echo "    steps: $(squeue -h -s -j "$JOB" -o '%i %j %N' | xargs)"
# scancel may report a spurious "Kill job error ... No error" for a step whose tasks end at
# once: what counts is what follows.
out=$(scancel --signal=KILL "$step" 2>&1) || true
echo "    n2's agent step $step SIGKILLed at step $s0 ${out:+(scancel: $out)}"
wait_until 60 world_is 1 && pass "the job shrank to world 1 (generation $(status_json | "$JQ" generation))" || fail "world $(world) after the kill"
[ "$(status_json | "$JQ" ranks.0.host)" = n1 ] && pass "the survivor is n1's worker" || fail "rank 0 on $(status_json | "$JQ" ranks.0.host)"
wait_until 120 at_step $((s0 + 15)) && pass "training went on without n2: step $(last_step "$RUN")" || fail "stuck at step $(last_step "$RUN")"
[ "$(job_field "$JOB" JobState)" = RUNNING ] && pass "the allocation survived the node's step (--no-kill)" || fail "job state $(job_field "$JOB" JobState)"
wait_until 60 bash -c "ls '$RUN'/checkpoints 2>/dev/null | grep -q ." || true
ckpt=$("$JQ" --jsonl "$RUN/events.jsonl" event=checkpoint_saved step 2>/dev/null | sort -n | tail -1)
[ -n "$ckpt" ] && [ "$ckpt" -gt "$s0" ] && pass "a checkpoint after the shrink: step $ckpt" || fail "no checkpoint after step $s0 (latest ${ckpt:-none})"

# 2. scontrol requeue: the script runs again and resumes from the latest checkpoint.
requeue_step=$(last_step "$RUN")
scontrol requeue "$JOB" && pass "scontrol requeue $JOB at step $requeue_step" || fail "scontrol requeue"
restarted() { [ "$(job_field "$JOB" Restarts)" = 1 ] && [ "$(job_field "$JOB" JobState)" = RUNNING ]; }
# A requeued job waits for its begin time; release it at once.
wait_until 60 bash -c "[ \"\$(scontrol show job $JOB | grep -o 'JobState=[A-Z]*')\" = JobState=PENDING ]" &&
  scontrol update jobid="$JOB" StartTime=now 2>/dev/null || true
wait_until 120 restarted && pass "the job runs again (Restarts=1, $(job_field "$JOB" NodeList))" || { fail "not restarted"; show; }
restored() { [ -n "$("$JQ" --jsonl "$RUN/events.jsonl" event=state_restored kind=checkpoint step 2>/dev/null)" ]; }
wait_until 120 restored && pass "resumed from the checkpoint of step $("$JQ" --jsonl "$RUN/events.jsonl" event=state_restored kind=checkpoint step | tail -1) (requeued at step $requeue_step)" ||
  fail "no restore from a checkpoint: $(ev "$RUN" state_restored kind | xargs)"
grep -q "restart 1" "$WORK/job.out" && pass "the batch script ran again: $(grep -m1 'restart 1' "$WORK/job.out" | cut -c1-150)" || fail "no second run in job.out"

# 3. n2 drained by the administrator: the script sends its agent step SIGTERM (what
# `--signal=TERM@T` and Slurm's preemption send too), a preemption notice: n2's workers
# save and leave; no failure is counted.
wait_until 60 world_is 2 || fail "world $(world) after the requeue, expected 2"
failures=$(status_json | "$JQ" failures)
scontrol update NodeName=n2 State=DRAIN Reason=elastrain-test && echo "    n2 set to DRAIN at step $(last_step "$RUN")"
wait_until 30 grep -q "n2 is draining" "$WORK/job.out" && pass "the script saw the drain: $(grep -m1 -o 'n2 is draining.*' "$WORK/job.out")" ||
  fail "the script did not see n2 draining"
preempted() { [ -n "$(ev "$RUN" worker_preempted time)" ]; }
wait_until 60 preempted && pass "worker_preempted: $(ev "$RUN" worker_preempted reason | tail -1 | cut -c1-120)" || fail "no worker_preempted event"
wait_until 60 world_is 1 && pass "the job went on without n2's worker" || fail "world $(world) after the notice"
[ "$(status_json | "$JQ" failures)" = "$failures" ] && pass "no failure counted for the notice (failures $failures)" ||
  fail "failures $failures -> $(status_json | "$JQ" failures)"

# The end: COMPLETED, exit 0, every step once.
ended() { case $(job_field "$JOB" JobState) in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) true ;; *) false ;; esac; }
wait_until 600 ended || fail "the job did not end: $(job_field "$JOB" JobState) at step $(last_step "$RUN")"
state=$(job_field "$JOB" JobState) code=$(job_field "$JOB" ExitCode)
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] && pass "Slurm job $JOB COMPLETED, exit $code; $(grep -o 'the job ended.*' "$WORK/job.out" | tail -1)" ||
  { fail "Slurm job $JOB: $state, exit $code"; tail -20 "$WORK/job.out"; }
check_lines "$RUN" "$STEPS" "requeued Slurm job"
scontrol update NodeName=n2 State=RESUME
node_idle() { [ "$(sinfo -h -n n2 -o %t)" = idle ]; }
wait_until 60 node_idle || fail "n2 did not come back: $(sinfo -h -n n2 -o %t)"
# 4. A new job (after a time limit, say) with the same job directory and run name goes on
# from the run's latest checkpoint, to a larger `steps`; there node n2 is set DOWN by the
# administrator mid-run: Slurm ends its step (the allocation stays, --no-kill) and the
# job goes on without it.
MORE=$((STEPS + 150))
JOB2=$(ELASTRAIN_RUN_NAME=elastrain-$JOB slurm_sbatch --chdir="$WORK" --output="$WORK/job2.out" \
  "$SRC/deploy/slurm/elastrain.sbatch" model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 steps=$MORE log_period=1 \
  eval_interval=0 checkpoint_period=10 resource_wait_timeout=120 collective_timeout=30)
CUR_JOB=$JOB2
wait_until 120 at_step $((STEPS + 5)) && wait_until 60 world_is 2 && pass "a second job ($JOB2) on the same run: step $(last_step "$RUN"), world 2" ||
  fail "second job $JOB2: step $(last_step "$RUN"), world $(world)"
scontrol update NodeName=n2 State=DOWN Reason=elastrain-test && echo "    n2 set DOWN at step $(last_step "$RUN")"
wait_until 60 world_is 1 && pass "n2 DOWN: the job went on with world 1 (generation $(status_json | "$JQ" generation))" || fail "world $(world) after n2 went DOWN"
job2_ended() { [ "$(job_field "$JOB2" JobState)" = COMPLETED ] || [ "$(job_field "$JOB2" JobState)" = FAILED ]; }
wait_until 300 job2_ended && [ "$(job_field "$JOB2" JobState)" = COMPLETED ] &&
  pass "the second job went on from step $("$JQ" --jsonl "$RUN/events.jsonl" event=state_restored kind=checkpoint step | tail -1) to $MORE: COMPLETED" ||
  { fail "second job $JOB2: $(job_field "$JOB2" JobState)"; tail -5 "$WORK/job2.out"; }
check_lines "$RUN" "$MORE" "two Slurm jobs on one run"
left=$(_marked_pids | while read -r p; do { cat "/proc/$p/comm"; } 2>/dev/null; done | grep -xE 'elastrain|etcd|slurmstepd' | sort | uniq -c | xargs || true)
[ -z "$left" ] && pass "no process of the job left (etcd, head, agents, workers, step daemons)" || fail "left behind: $left"
finish

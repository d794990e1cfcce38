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
# Issue #33: another local user (made here, removed on exit) reads no log, token, password
# or etcd data of the job; no log holds the token or a password; a directory that user
# planted at the old predictable etcd path (/tmp/elastrain-etcd-JOB-RESTART) is not used;
# the agents' etcd credential cannot write the job's spec (its role), the head's can.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
source "$SRC/tests/deploy/slurm_lib.sh"
STEPS=${STEPS:-300}
slurm_setup n1 n2

# Another user of the machine: the attacker of issue #33. Removed on every exit path.
OTHER=elsec$$
useradd --no-create-home --shell /usr/sbin/nologin "$OTHER" || { fail "useradd $OTHER"; finish; exit 1; }
PLANTED=()
slurm_test_cleanup() {
  local d
  for d in "${PLANTED[@]}"; do rm -rf "$d"; done
  userdel "$OTHER" 2>/dev/null || true
}
as_other() { setpriv --reuid="$OTHER" --regid="$OTHER" --clear-groups "$@"; }
# The submit directory is open to others, as a home or project directory often is: the
# job directory's own modes must keep them out.
chmod 755 "$WORK"
# The old script's etcd data directory had a predictable name, ${TMPDIR:-/tmp}/elastrain-
# etcd-JOB-RESTART: plant one for each job id this test can get, holding a marker (where a
# database of the attacker's would be). In a TMPDIR of this test's own (sticky, open to
# all, as /tmp is; the jobs inherit it), so that no other test on this machine meets them.
export TMPDIR=$WORK/tmp
mkdir -m 1777 "$TMPDIR" && chmod 1777 "$TMPDIR"
for id in $(seq 1 6); do
  for r in 0 1; do
    d=$TMPDIR/elastrain-etcd-$id-$r
    PLANTED+=("$d")
    rm -rf "$d"
    as_other mkdir -m 0777 "$d" && as_other touch "$d/planted"
  done
done

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

# Issue #33: what another user can see of a running job (job directory $JD, Slurm output
# $JD.out).
secrets_checks() {
  SEC=$JD/private/allocation-0
  TOKEN=$(cat "$SEC/head_token" || true)
  open=$(find "$JD" -type d ! -perm 700 -printf '%m %p\n' | head -5)
  [ -z "$open" ] && pass "every directory of the job is 0700 ($(find "$JD" -type d | wc -l) directories)" ||
    fail "directories not 0700: $open"
  readable=0 files=0
  while read -r f; do
    files=$((files + 1))
    as_other cat "$f" >/dev/null 2>&1 && { readable=$((readable + 1)); echo "    $OTHER reads $f"; }
  done < <(find "$JD" -type f)
  as_other ls "$JD" >/dev/null 2>&1 && fail "$OTHER lists the job directory" || true
  [ "$readable" = 0 ] && [ "$files" -gt 5 ] &&
    pass "$OTHER reads none of the job's $files files (logs, head_token, passwords, keys, etcd's data)" ||
    fail "$OTHER reads $readable of $files files"
  leaks=$(grep -rlF -e "$TOKEN" -e "$(cat "$SEC/etcd-head.password")" -e "$(cat "$SEC/etcd-agent.password")" \
    "$JD/logs" "$JD.out" 2>/dev/null || true)
  grep -q "^dashboard: .*(token in $SEC/head_token, never printed" "$JD/logs/head-0.log" && [ -z "$leaks" ] &&
    pass "no log holds the token or a password; the head logs: $(grep -m1 '^dashboard: ' "$JD/logs/head-0.log" | cut -c1-110)" ||
    fail "a secret in a log: ${leaks:-none} / $(grep '^dashboard' "$JD/logs/head-0.log")"
  etcd_pid=$(_marked_pids | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = etcd ] && echo "$p"; done | head -1 || true)
  data=$(tr '\0' '\n' </proc/"$etcd_pid"/cmdline 2>/dev/null | grep -A1 -x -- --data-dir | tail -1 || true)
  [[ $data == "$SEC"/etcd-data.* ]] && [ "$(stat -c '%a %U' "$data")" = "700 root" ] &&
    pass "etcd's data in a fresh private directory: $data ($(stat -c '%a %U' "$data"))" || fail "etcd --data-dir '$data'"
  untouched=1
  for d in "${PLANTED[@]}"; do [ "$(ls -A "$d")" = planted ] || untouched=0; done
  [ "$untouched" = 1 ] && ! grep -q "elastrain-etcd-" "$JD/logs/etcd-0.log" &&
    pass "the ${#PLANTED[@]} directories $OTHER planted at \$TMPDIR/elastrain-etcd-JOB-RESTART were not used" ||
    fail "a planted directory was used or removed: $(for d in "${PLANTED[@]}"; do ls -A "$d" 2>&1 | xargs; done | sort -u)"
  # The agents' etcd credential (readable by every worker) cannot rewrite the job; the head's can.
  STORE_HP=$(grep -o 'etcds://[^ ,]*' "$JD/logs/head-0.log" | head -1 || true)
  STORE_HP=${STORE_HP#etcds://}
  etcd_as() {  # WHO PATH JSON: an etcd JSON call with WHO's certificate and password
    local tok
    tok=$(printf '{"name":"elastrain-%s","password":"%s"}' "$1" "$(cat "$SEC/etcd-$1.password")" |
      curl -sS --max-time 5 --cacert "$SEC/ca.crt" --cert "$SEC/$1.crt" --key "$SEC/$1.key" \
        "https://$STORE_HP/v3/auth/authenticate" --data-binary @- | "$JQ" token)
    printf '%s' "$3" | curl -sS --max-time 5 --cacert "$SEC/ca.crt" --cert "$SEC/$1.crt" --key "$SEC/$1.key" \
      -H "Authorization: $tok" "https://$STORE_HP$2" --data-binary @-
  }
  spec_key=$(printf elastrain/job/spec | base64 -w0)
  before=$(etcd_as head /v3/kv/range "{\"key\":\"$spec_key\"}" | "$JQ" kvs.0.mod_revision || true)
  put=$(etcd_as agent /v3/kv/put "{\"key\":\"$spec_key\",\"value\":\"$(printf x | base64)\"}" || true)
  after=$(etcd_as head /v3/kv/range "{\"key\":\"$spec_key\"}" | "$JQ" kvs.0.mod_revision || true)
  [[ $put == *"permission denied"* ]] && [ -n "$before" ] && [ "$before" = "$after" ] &&
    pass "the agents' etcd user cannot write elastrain/job/spec ($(echo "$put" | cut -c1-80)); spec unchanged (revision $after)" ||
    fail "agent credential writing the spec: $put (mod_revision $before -> $after)"
}

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
# 5. Issue #33, on a job of its own that trains until it is cancelled (so that nothing here
# races the job's end): another user reads nothing of it, no log holds a secret, etcd's
# data is in a fresh private directory, the agents' etcd user cannot write the spec.
JD=$WORK/job3
JOB3=$(ELASTRAIN_JOB_DIR=$JD slurm_sbatch --chdir="$WORK" --output="$JD.out" "$SRC/deploy/slurm/elastrain.sbatch" \
  model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 steps=1000000 log_period=10 eval_interval=0 checkpoint_period=50 \
  straggler_threshold=1000)  # not about stragglers: a loaded test machine must not raise one here
wait_until 120 bash -c "[ \"\$(tail -1 '$JD/runs/elastrain-$JOB3/metrics.jsonl' 2>/dev/null)\" ]" &&
  pass "job $JOB3 trains (for the secrets' checks)" || fail "job $JOB3 does not train: $(tail -3 "$JD.out")"
secrets_checks
scancel "$JOB3" 2>/dev/null || true
job3_ended() { case $(job_field "$JOB3" JobState) in COMPLETED | FAILED | CANCELLED) true ;; *) false ;; esac; }
wait_until 120 job3_ended || fail "job $JOB3 did not end after scancel: $(job_field "$JOB3" JobState)"
sleep 2
left=$(_marked_pids | while read -r p; do { cat "/proc/$p/comm"; } 2>/dev/null; done | grep -xE 'elastrain|etcd|slurmstepd' | sort | uniq -c | xargs || true)
[ -z "$left" ] && pass "no process of the job left (etcd, head, agents, workers, step daemons)" || fail "left behind: $left"
finish

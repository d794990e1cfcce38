# shellcheck shell=bash
# A one-machine Slurm cluster for the tests of deploy/slurm: MUNGE, slurmctld and one
# slurmd per emulated node (slurmd -N), all on loopback, every file under $WORK/slurm.
# Source after tests/integration/lib.sh and etcd_lib.sh (for _random_port), then
#   slurm_setup n1 n2        # exports SLURM_CONF; SKIP (exit 77) without Slurm or MUNGE
#   slurm_sbatch ARGS...     # sbatch --parsable with the job marked (see slurm_teardown)
#   job_field JOB FIELD      # a field of `scontrol show job`, e.g. JobState, Restarts
# Teardown is on every exit path: jobs cancelled, then every process that carries this
# test's marker in its environment (daemons, steps, whatever the job started) killed.
SLURM_DIR=$WORK/slurm
SLURM_MARK="ELASTRAIN_SLURM_TEST=$WORK"

_slurm_need() {
  local b
  for b in munged slurmctld slurmd sbatch srun scontrol squeue scancel sinfo; do
    command -v "$b" >/dev/null || { echo "SKIP: $b is not installed (Debian: slurm-wlm munge)"; exit 77; }
  done
}

# _marked_pids: every process whose environment holds this test's marker.
_marked_pids() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "$SLURM_MARK" && echo "${p#/proc/}"
  done
  return 0
}

slurm_teardown() {
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
    timeout 10 scancel --full --quiet --signal=KILL "$(squeue -h -o %i 2>/dev/null | xargs | tr ' ' ,)" 2>/dev/null || true
  fi
  local pids i
  for i in 1 2 3; do
    pids=$(_marked_pids | xargs)
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null || true
    sleep 0.2
  done
}

# _slurm_daemon NAME ARGS...: a daemon in the foreground of its own background job, marked.
_slurm_daemon() {
  local log=$SLURM_DIR/$1.out
  shift
  env "$SLURM_MARK" "$@" >"$log" 2>&1 &
  bg_track $!
}

slurm_setup() {
  _slurm_need
  mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
  (umask 077 && mkdir -p "$SLURM_DIR/munge" && head -c 1024 /dev/urandom >"$SLURM_DIR/munge/munge.key")
  chmod 400 "$SLURM_DIR/munge/munge.key"
  # A test's own cleanup (a user it made, ...) runs first when it defines slurm_test_cleanup.
  trap 'slurm_teardown; ! declare -F slurm_test_cleanup >/dev/null || slurm_test_cleanup; kill_tracked; [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT
  trap 'exit 130' INT TERM
  _slurm_daemon munged munged -F -f --socket="$SLURM_DIR/munge/sock" --key-file="$SLURM_DIR/munge/munge.key" \
    --log-file="$SLURM_DIR/munge/log" --pid-file="$SLURM_DIR/munge/pid" --seed-file="$SLURM_DIR/munge/seed"
  wait_until 10 test -S "$SLURM_DIR/munge/sock" || { echo "SKIP: munged did not start: $(tail -3 "$SLURM_DIR/munged.out")"; exit 77; }
  local ctld_port node nodes=() conf=$SLURM_DIR/slurm.conf
  ctld_port=$(_random_port)
  {
    echo "ClusterName=elastrain_test"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$ctld_port"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$SLURM_DIR/munge/sock"
    echo "CredType=cred/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$SLURM_DIR/state"
    echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
    echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
    echo "SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid"
    echo "SlurmctldLogFile=$SLURM_DIR/slurmctld.log"
    echo "SlurmdLogFile=$SLURM_DIR/slurmd-%n.log"
    echo "ProctrackType=proctrack/pgid"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=none"
    echo "SelectType=select/linear"
    echo "SchedulerType=sched/backfill"
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "SlurmdParameters=config_overrides"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    echo "InactiveLimit=0"
    echo "KillWait=15"
    echo "MinJobAge=600"
    for node in "$@"; do
      echo "NodeName=$node NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(_random_port) CPUs=$(nproc) State=UNKNOWN"
      nodes+=("$node")
    done
    echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$conf"
  export SLURM_CONF=$conf
  _slurm_daemon slurmctld slurmctld -D -f "$conf"
  for node in "${nodes[@]}"; do _slurm_daemon "slurmd-$node" slurmd -D -N "$node" -f "$conf"; done
  slurm_idle() { [ "$(sinfo -h -t idle -o %D 2>/dev/null | head -1)" = "${#nodes[@]}" ]; }
  wait_until 60 slurm_idle && pass "Slurm cluster: slurmctld and ${#nodes[@]} slurmd ($(sinfo -h -o '%N %t' | xargs)), MUNGE" ||
    { fail "Slurm nodes not idle: $(sinfo 2>&1 | tail -3) $(tail -3 "$SLURM_DIR/slurmctld.log")"; exit 1; }
}

slurm_sbatch() { env "$SLURM_MARK" sbatch --parsable "$@"; }

# job_field JOB FIELD: FIELD=value of `scontrol show job JOB` ("" when the job is unknown).
job_field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# step_of JOB NAME: the id (JOB.N) of the job's running step named NAME.
step_of() { squeue -h -s -j "$1" -o '%i %j' 2>/dev/null | awk -v n="$2" '$2 == n { print $1 }' | head -1; }

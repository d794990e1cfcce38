#!/usr/bin/env bash
# Recovery of a torchrun script (examples/ddp_train.py) after a worker is killed, under
# torchrun and under `elastrain launch`, cold and with warm spares:
#   torchrun   torchrun --standalone --nproc_per_node=N --max_restarts 3 --monitor_interval 0.1
#   cold       elastrain launch num_workers=N max_failures=3 dashboard_port=0
#   warm       the same with warm_spares=true (a spare program per worker waits, torch
#              already imported, in elastrain_worker.wait_for_assignment())
# Each run trains with --step-log (rank 0 appends "<time> <step> <restart count>" per
# step), SIGKILLs rank 1's python process once step KILL_STEP is done, and measures
#   recovery = the first step logged with a higher restart count - the kill
# (the same clock: time.time() and date +%s.%N). The run is stopped there. Runs of the
# three modes alternate, so a busy machine weighs on each alike.
#   usage: bench/launch_recovery.sh [build/elastrain]
#   RUNS=5          runs per cell (N, mode)
#   WORKERS="2 4"   the values of N
#   MODES="torchrun cold warm"   the modes to run
#   TRAIN_SCRIPT=examples/ddp_train.py   the script (it must take ddp_train.py's options)
#   PYTHON=/usr/bin/python3   the python with torch (1.13 needs tests/integration/torchrun_py311.py on 3.11)
#   KEEP=1          keep the work directory (run dirs, logs) and say where it is
# Goal (the launch issue): cold no slower than torchrun (median ratio <= 1), warm spares
# at most half of torchrun's time (<= 0.5). Timing never fails the script; exit 1 only
# when a run broke (no kill, no recovery, a process left over).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "${1:-build/elastrain}")
[ -x "$BIN" ] || { echo "no elastrain binary at $BIN (build it: cmake --build build --target elastrain)" >&2; exit 1; }
JQ="$(dirname "$BIN")/json_query"
PY=${PYTHON:-/usr/bin/python3}
RUNS=${RUNS:-5}
WORKERS=${WORKERS:-"2 4"}
KILL_STEP=${KILL_STEP:-20}
STEP_SLEEP=${STEP_SLEEP:-0.02}
START_DEADLINE=${START_DEADLINE:-120}     # seconds from the start to step KILL_STEP
RECOVER_DEADLINE=${RECOVER_DEADLINE:-120} # seconds from the kill to the first step after it
MODES=${MODES:-"torchrun cold warm"}
SCRIPT=$(readlink -f "${TRAIN_SCRIPT:-$ROOT/examples/ddp_train.py}")
TORCHRUN=("$PY" "$ROOT/tests/integration/torchrun_py311.py")
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/elastrain_launch_bench.XXXXXX")
SESSIONS=()  # the session (= pid of its leader) of every run started, for the sweeps
broken=0

# The pids of the processes of session $1 (every process a run started stays in it).
session_pids() { ps -eo pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'; }
kill_session() {
  local p
  for p in $(session_pids "$1"); do kill -9 "$p" 2>/dev/null || true; done
}
cleanup() {
  set +e
  local s
  for s in "${SESSIONS[@]}"; do kill_session "$s"; done
  if [ -n "${KEEP:-}" ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$(dirname "$0")/bench_lib.sh"  # now, wait_for
WAIT_FOR_POLL=0.02
last_line() { tail -n 1 "$1" 2>/dev/null || true; }
at_step() { local l; l=$(last_line "$1"); [ -n "$l" ] && [ "$(echo "$l" | cut -d' ' -f2)" -ge "$2" ] 2>/dev/null; }
# recovered LOG COUNT: a step was logged with a restart count above COUNT
recovered() { awk -v c="$2" '$3 > c { found = 1; exit } END { exit !found }' "$1" 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null; }
gone() { ! alive "$1"; }
cpu_ticks() { local p t=0; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
# spares_ready LOGDIR N: each of the N workers has a spare that is alive and used no CPU
# over 0.3 s (done importing, waiting for a rank); the spare is the last one its worker's
# log says it started.
spares_ready() {
  local f pids=() p t0
  for f in "$1"/*.log; do
    p=$(grep -o 'started spare .*(pid [0-9]*)' "$f" 2>/dev/null | tail -n 1 | grep -o '[0-9]*)$' | tr -d ')')
    [ -n "$p" ] && alive "$p" && ! grep -q "to the warm spare (pid $p)" "$f" && pids+=("$p")
  done
  [ "${#pids[@]}" -ge "$2" ] || return 1
  t0=$(cpu_ticks "${pids[@]}")
  sleep 0.3
  [ "$(cpu_ticks "${pids[@]}")" = "$t0" ]
}
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "nan" }'; }

# trial MODE N: one run; appends the recovery seconds to $WORK/MODE-N.tsv (and, for
# elastrain, "detect planned first_step recovery_seconds" to $WORK/MODE-N.detail)
trial() {
  local mode=$1 n=$2 run leader
  run=$(mktemp -d "$WORK/$mode-$n.XXXX")
  local train=("$SCRIPT" --checkpoint-dir "$run/ck" --steps 100000 --step-sleep "$STEP_SLEEP" --step-log "$run/steps.log")
  local cmd
  case $mode in
    torchrun) cmd=("${TORCHRUN[@]}" --standalone --nproc_per_node="$n" --max_restarts 3 --monitor_interval 0.1 "${train[@]}") ;;
    cold) cmd=("$BIN" launch num_workers="$n" max_failures=3 dashboard_port=0 base_output_directory="$run" run_name=job
               -- "$PY" "${train[@]}") ;;
    warm) cmd=("$BIN" launch num_workers="$n" max_failures=3 dashboard_port=0 warm_spares=true base_output_directory="$run"
               run_name=job -- "$PY" "${train[@]}") ;;
  esac
  # A session of its own: the leader writes its pid, every process of the run stays in
  # its session (the workers' own process groups included), and the sweep finds them.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$run/leader" "${cmd[@]}" >"$run/out" 2>&1 </dev/null &
  wait_for 10 test -s "$run/leader" || { echo "$mode N=$n: did not start" >&2; return 1; }
  leader=$(cat "$run/leader")
  SESSIONS+=("$leader")
  local ok=0 pid="" killed="" count=""
  if ! wait_for "$START_DEADLINE" at_step "$run/steps.log" "$KILL_STEP"; then
    echo "$mode N=$n: no step $KILL_STEP within ${START_DEADLINE}s: $(tail -n 2 "$run/out" | tr '\n' ' ')" >&2
  else
    count=$(last_line "$run/steps.log" | cut -d' ' -f3)
    local logs=("$run/out")
    [ "$mode" = torchrun ] || logs=("$run"/job/logs/*.log)
    pid=$(grep -h "^START rank=1 .*restart=$count " "${logs[@]}" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | tail -n 1)
    # Warm spares: the kill waits until every worker's spare is ready (idle in
    # wait_for_assignment, torch imported), as it would be long after the start.
    if [ "$mode" = warm ] && ! wait_for "$START_DEADLINE" spares_ready "$run/job/logs" "$n"; then
      echo "$mode N=$n: the warm spares were not all idle within ${START_DEADLINE}s; killing anyway" >&2
    fi
    if [ -z "$pid" ] || ! alive "$pid"; then
      echo "$mode N=$n: rank 1's pid not found (or not running) in ${logs[*]}" >&2
    else
      killed=$(now)
      kill -9 "$pid"
      if wait_for "$RECOVER_DEADLINE" recovered "$run/steps.log" "$count"; then
        ok=1
      else
        echo "$mode N=$n: no step after the kill within ${RECOVER_DEADLINE}s: $(tail -n 2 "$run/out" | tr '\n' ' ')" >&2
      fi
    fi
  fi
  # Stop the run: elastrain's launcher SIGTERM then SIGKILL, torchrun's process group;
  # then whatever is left of the session.
  if [ "$mode" = torchrun ]; then kill -TERM -- "-$leader" 2>/dev/null || true; else kill -TERM "$leader" 2>/dev/null || true; fi
  wait_for 10 gone "$leader" || kill -9 "$leader" 2>/dev/null || true
  kill_session "$leader"
  wait_for 10 test -z "$(session_pids "$leader")" || { echo "$mode N=$n: processes left over: $(session_pids "$leader" | tr '\n' ' ')" >&2; ok=0; }
  wait 2>/dev/null || true
  [ "$ok" = 1 ] || return 1
  awk -v c="$count" -v k="$killed" '$3 > c { printf "%.3f\n", $1 - k; exit }' "$run/steps.log" >>"$WORK/$mode-$n.tsv"
  if [ "$mode" != torchrun ] && [ -x "$JQ" ]; then
    # Where elastrain's time goes: kill -> the new generation planned -> its first step
    # (as the controller saw it), and the recovery the controller itself counted.
    local ev="$run/job/events.jsonl" g=$((count + 1)) de g1 fs rs
    de=$("$JQ" --jsonl "$ev" event=worker_error time 2>/dev/null | head -n 1 || true)
    g1=$("$JQ" --jsonl "$ev" event=generation_started generation=$g time 2>/dev/null | head -n 1 || true)
    fs=$("$JQ" --jsonl "$ev" event=generation_first_step generation=$g first_step_time 2>/dev/null | head -n 1 || true)
    [ -z "$fs" ] && fs=$("$JQ" --jsonl "$ev" event=generation_first_step generation=$g step_time 2>/dev/null | head -n 1 || true)
    rs=$("$JQ" --jsonl "$ev" event=generation_first_step generation=$g recovery_seconds 2>/dev/null | head -n 1 || true)
    awk -v k="$killed" -v d="${de:-nan}" -v g="${g1:-nan}" -v f="${fs:-nan}" -v r="${rs:-nan}" \
      'function since(t) { return t == "nan" ? "nan" : sprintf("%.3f", t - k) }
       BEGIN { printf "%s\t%s\t%s\t%s\n", since(d), since(g), since(f), r == "nan" ? r : sprintf("%.3f", r) }' >>"$WORK/$mode-$n.detail"
  fi
  [ -n "${KEEP:-}" ] || rm -rf "$run"
}

label() { case $1 in torchrun) echo "torchrun" ;; cold) echo "elastrain launch" ;; warm) echo "elastrain warm_spares" ;; esac; }

echo "launch recovery: ${SCRIPT#"$ROOT"/}, SIGKILL of rank 1 at step >= $KILL_STEP -> first step after the restart"
echo "(step sleep ${STEP_SLEEP}s, checkpoint every 10 steps; $RUNS runs per cell; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg))"
for n in $WORKERS; do
  for r in $(seq 1 "$RUNS"); do
    for mode in $MODES; do trial "$mode" "$n" || { broken=1; echo "$mode N=$n run $r failed" >&2; }; done
  done
done

echo
printf "%2s  %-22s %5s %8s %8s %8s %12s\n" N mode runs "min s" "median s" "max s" "vs torchrun"
declare -A med
for n in $WORKERS; do
  for mode in $MODES; do
    f="$WORK/$mode-$n.tsv"
    if [ ! -s "$f" ]; then printf "%2s  %-22s  failed\n" "$n" "$(label $mode)"; med[$mode-$n]=nan; continue; fi
    med[$mode-$n]=$(median <"$f")
    ratio=-
    [ "$mode" != torchrun ] && [ "${med[torchrun-$n]:-nan}" != nan ] && ratio=$(awk -v a="${med[$mode-$n]}" -v b="${med[torchrun-$n]}" 'BEGIN { printf "%.2fx", a / b }')
    printf "%2s  %-22s %5s %8.3f %8.3f %8.3f %12s\n" "$n" "$(label $mode)" "$(wc -l <"$f")" "$(sort -g "$f" | head -n 1)" \
      "${med[$mode-$n]}" "$(sort -g "$f" | tail -n 1)" "$ratio"
  done
done
echo
for n in $WORKERS; do
  [ "${med[torchrun-$n]:-nan}" = nan ] && continue
  for mode in cold warm; do
    [ "${med[$mode-$n]:-nan}" = nan ] && continue
    goal=1; [ $mode = warm ] && goal=0.5
    awk -v n="$n" -v m="$(label $mode)" -v a="${med[$mode-$n]}" -v b="${med[torchrun-$n]}" -v g="$goal" \
      'BEGIN { r = a / b; printf "N=%s %-22s median/torchrun %.2f (goal <= %s): %s\n", n, m, r, g, r <= g ? "met" : "NOT met" }'
  done
done
if [ -x "$JQ" ]; then
  echo
  echo "elastrain, medians in seconds from the kill (events.jsonl): detect = worker_error (the program's"
  echo "death reported); planned = the new generation's generation_started; first step = its"
  echo "generation_first_step.first_step_time; controller = its recovery_seconds (from the failure)"
  printf "%2s  %-22s %8s %8s %11s %11s\n" N mode detect planned "first step" controller
  for n in $WORKERS; do
    for mode in cold warm; do
      f="$WORK/$mode-$n.detail"
      [ -s "$f" ] || continue
      printf "%2s  %-22s %8s %8s %11s %11s\n" "$n" "$(label $mode)" "$(cut -f1 "$f" | median)" "$(cut -f2 "$f" | median)" \
        "$(cut -f3 "$f" | median)" "$(cut -f4 "$f" | median)"
    done
  done
fi
exit $broken

#!/usr/bin/env bash
# Goodput through a failure history (issue 37): a real job replays a trace
# (`elastrain chaos replay`), and `elastrain cost simulate` predicts the same window from
# the same trace; both by category, side by side. `small`, 4 workers of 1 thread each:
#   dp     data parallel, num_workers=2:4, on 4 hosts (a cluster on loopback: etcd, `elastrain
#          head`, 4 agents of one slot), through a trace of kills, preemptions with notice
#          (slots back after RETURN s) and host losses (the host's agent and worker die; a
#          replacement host, a new agent of the same name, arrives RETURN s later, as a
#          cloud's autoscaler would bring one). The prediction's costs are measured on the
#          same job *before* the window (calibration kills, a preemption and a host loss:
#          their recovery spans; the checkpoint stalls' share of a clean stretch), so the
#          window itself is predicted, not fitted. Without /usr/bin/etcd: embedded (one
#          host), no host losses
#   fsdp   FSDP 4 on one host (embedded) through kills and preemptions at the same rate,
#          with the RAM tier off, at memory_snapshot_period=1 and at auto
#   slow   a trace of slowdowns (and kills): straggler_policy=alert against exclude
#   usage: bench/goodput_trace.sh [build/elastrain]
#   MINUTES=10 RATE=150 (events per hour) RETURN=45 SEED=1 PARTS="dp fsdp slow" KEEP=0 (1: keep
#   the runs' directories)
# Figures are printed, never asserted; exit 1 only when a run broke.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/bench_lib.sh"  # wait_for
WAIT_FOR_POLL=1  # each look starts processes (elastrain report, status)
BIN=$(readlink -f "${1:-$ROOT/build/elastrain}")
JQ=$(dirname "$BIN")/json_query
MINUTES=${MINUTES:-10}
RATE=${RATE:-150}
RETURN=${RETURN:-45}
SEED=${SEED:-1}
PARTS=${PARTS:-dp fsdp slow}
[ -x "$BIN" ] && [ -x "$JQ" ] || { echo "goodput_trace: expected $BIN and $JQ (make build)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/elastrain_goodput.XXXXXX)
cleanup() {
  set +e
  # The cluster's head, agents (their workers die with them) and autoscaler, then etcd.
  [ -f "$WORK/pids" ] && while read -r p; do kill -9 "$p"; done <"$WORK/pids" 2>/dev/null
  declare -F stop_etcd >/dev/null && stop_etcd >/dev/null 2>&1
  pkill -f "base_output_directory=$WORK" 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
WINDOW=$((MINUTES * 60))
common=(model_name=small log_period=1 eval_interval=0 global_batch_size=8 per_device_batch_size=2
        max_target_length=128 checkpoint_period=50 threads_per_worker=1 dashboard_port=0 hardware_peak_tflops=1
        steps=100000000 max_failures=100000 host_failure_threshold=100000 preemption_notice_seconds=5
        worker_heartbeat_timeout=5 "base_output_directory=$WORK")
broken=0

# report_field RUN PATH: a value of `elastrain report --json` (a dotted path; 0 if none).
report_field() { "$BIN" report "$WORK/$1" --json 2>/dev/null | "$JQ" "$2" 2>/dev/null || echo 0; }
recoveries() { report_field "$1" recoveries | tr -d '[] ' | tr ',' '\n' | grep -c . || true; }
nth_recovery() { report_field "$1" "recoveries.$(($2 - 1))"; }  # nth_recovery RUN N (from 1)
training() { [ "$(last_step "$1")" -ge 5 ]; }
at_least_recoveries() { [ "$(recoveries "$1")" -ge "$2" ]; }
# last_step RUN: the newest step in metrics.jsonl (0 if none).
last_step() { grep -o '"step":[0-9]*' "$WORK/$1/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 || echo 0; }

# api RUN: how the CLI reaches RUN's job (the head in cluster mode).
api() { if [ -n "${HEAD:-}" ] && [ "$1" = dp ]; then echo "--head $HEAD"; else echo "--run-dir $WORK/$1"; fi; }
start_job() {  # start_job RUN key=value...
  local run=$1; shift
  if [ -n "${HEAD:-}" ] && [ "$run" = dp ]; then
    "$BIN" submit --head "$HEAD" "${common[@]}" run_name="$run" "$@" >"$WORK/$run.out" 2>&1 \
      || { echo "$run: submit failed: $(tail -3 "$WORK/$run.out")"; broken=1; return 1; }
  else
    "$BIN" train "${common[@]}" run_name="$run" "$@" >"$WORK/$run.out" 2>&1 &
  fi
  wait_for 300 training "$run" || { echo "$run: did not start training"; tail -5 "$WORK/$run.out"; broken=1; return 1; }
}
# job_over RUN: its job ended (stopped, succeeded or failed).
job_over() {
  local st
  st=$("$BIN" status $(api "$1") --json 2>/dev/null | "$JQ" state 2>/dev/null || echo)
  case "$st" in STOPPED | SUCCEEDED | FAILED) return 0 ;; esac
  [ -z "${HEAD:-}" ] || [ "$1" != dp ] || return 1
  ! pgrep -f "run_name=$1 " >/dev/null
}

# --- a cluster on loopback: etcd, the head, one agent of one slot per host ------------
HOSTS=(h1 h2 h3 h4)
start_agent() {  # start_agent HOST
  "$BIN" agent --store "$ETCD_URL" --slots 1 --id "$1" --host-name "$1" --lease-seconds 2 \
    --head-public-key "$HOME/.elastrain/head_signing_key.pub" --allow-path "$WORK" >>"$WORK/agent-$1.log" 2>&1 &
  echo $! >"$WORK/agent-$1.pid"
  echo $! >>"$WORK/pids"
  disown $!  # a lost host's agent is killed: no "Killed" line
}
# A lost host's replacement: RETURN s after its agent died, a new agent of the same name
# joins (a preemption's slot comes back through the agent itself, which lives on).
autoscaler() {
  declare -A dead
  while :; do
    for h in "${HOSTS[@]}"; do
      if kill -0 "$(cat "$WORK/agent-$h.pid")" 2>/dev/null; then unset "dead[$h]"; continue; fi
      [ -n "${dead[$h]:-}" ] || dead[$h]=$SECONDS
      if [ $((SECONDS - dead[$h])) -ge "$RETURN" ]; then
        start_agent "$h"
        unset "dead[$h]"
        echo "$(date +%s) host $h replaced" >>"$WORK/autoscaler.log"
      fi
    done
    sleep 1
  done
}
start_cluster() {
  export HOME="$WORK/home"  # the head keeps its token and key there: the bench's own
  mkdir -p "$HOME"
  source "$ROOT/tests/integration/etcd_lib.sh"
  start_etcd >/dev/null
  "$BIN" head --store "$ETCD_URL" --port 0 >"$WORK/head.log" 2>&1 &
  echo $! >>"$WORK/pids"
  disown $!
  wait_for 60 grep -q 'http://127.0.0.1:[0-9]*' "$WORK/head.log" || { echo "the head did not start"; return 1; }
  wait_for 60 test -s "$HOME/.elastrain/head_signing_key.pub" || { echo "no head key"; return 1; }
  HEAD=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/head.log" | head -1)
  for h in "${HOSTS[@]}"; do start_agent "$h"; done
  autoscaler &
  echo $! >>"$WORK/pids"
  disown $!
}
stop_cluster() {
  [ -f "$WORK/pids" ] && while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$WORK/pids"
  rm -f "$WORK/pids"
  stop_etcd >/dev/null 2>&1 || true
  HEAD=""
}

# replay RUN TRACE: the trace against the running job over WINDOW s, then stop it. Prints
# the replay's lines; leaves "$WORK/$RUN.replay".
replay() {
  "$BIN" chaos replay "$2" --seed "$SEED" $(api "$1") --end-seconds "$WINDOW" --stop-at-end \
    >"$WORK/$1.replay" 2>&1 || { echo "$1: replay failed"; tail -5 "$WORK/$1.replay"; broken=1; }
  wait_for 120 job_over "$1" || true
}
# measured RUN: "goodput productive redone recovery checkpoint waiting" (percent of the window).
measured() {
  awk '/^goodput over the replay:/ { sub("%", "", $5); g = $5 }
       /\(replay\)$/ { sub("%", "", $3); p[$1] = $3 }
       END { printf "%s %s %s %s %s %s", g, p["productive"], p["redone"], p["recovery"], p["checkpoint"], p["waiting"] }' \
    "$WORK/$1.replay"
}
# predicted ARGS...: the same six figures from `cost simulate` (one trial: the trace is the draw).
predicted() {
  "$BIN" cost simulate --trials 1 --horizon-seconds "$WINDOW" "$@" 2>&1 | awk -F'|' '/goodput [0-9.]+% \| productive/ {
      for (i = 1; i <= NF; ++i) { n = split($i, w, " "); v[i] = w[n]; sub("%", "", v[i]) }
      printf "%s %s %s %s %s %s", v[1], v[2], v[3], v[4], v[5], v[6] }'
}
side_by_side() {  # side_by_side LABEL "measured" "predicted"
  local m=($2) p=($3) names=(goodput productive redone recovery checkpoint waiting)
  printf "%s\n  %-12s %9s %9s %9s\n" "$1" "category" "measured" "predicted" "diff"
  for i in 0 1 2 3 4 5; do
    awk -v n="${names[$i]}" -v a="${m[$i]:-nan}" -v b="${p[$i]:-nan}" \
      'BEGIN { printf "  %-12s %8.1f%% %8.1f%% %+8.1f\n", n, a, b, a - b }'
  done
}

# --- dp -------------------------------------------------------------------------------
if [[ " $PARTS " == *" dp "* ]]; then
  trace=$WORK/dp.csv
  mix=kill:3,preempt:2
  if [ -x "${ETCD_BIN:-/usr/bin/etcd}" ] && start_cluster; then
    mix=kill:3,preempt:2,host_loss:1
    where="on 4 hosts (agents of one slot over etcd on loopback; a lost host replaced after $RETURN s)"
  else
    HEAD=""
    where="on one host (embedded: no /usr/bin/etcd for a cluster, so no host losses)"
  fi
  "$BIN" chaos trace --duration "$WINDOW" --rate "$RATE" --mix "$mix" --return-seconds "$RETURN" \
    --seed "$SEED" --output "$trace" >/dev/null
  events=$(grep -cE '^[0-9.]+,' "$trace")
  kills=$(grep -cE '^[0-9.]+,kill,' "$trace" || true)
  hosts_lost=$(grep -cE '^[0-9.]+,host_loss,' "$trace" || true)
  echo "dp: small, 4 data-parallel workers (num_workers=2:4) $where; $events events in $WINDOW s ($kills kills," \
       "$((events - kills - hosts_lost)) preemptions with notice, $hosts_lost host losses; slots and hosts back after" \
       "$RETURN s), seed $SEED"
  if start_job dp num_workers=2:4; then
    # Calibration, before the window: three kills, then a preemption whose slot returns.
    # A kill's cost is every recovery span it causes (a shrink, and a growth back if the
    # slot's new worker joins later), so the kills' spans are summed and divided by 3.
    for k in 1 2 3; do
      n=$(recoveries dp)
      "$BIN" chaos kill --rank 1 $(api dp) >/dev/null || true
      wait_for 120 at_least_recoveries dp $((n + 1)) || true
      sleep 8
    done
    n_kills=$(recoveries dp)
    r_kill=$(report_field dp recoveries | tr -d '[] ' | tr ',' '\n' | awk 'NF { s += $1 } END { printf "%.3f", s / 3 }')
    "$BIN" chaos preempt --rank 1 --seconds 15 $(api dp) >/dev/null || true
    wait_for 180 at_least_recoveries dp $((n_kills + 2)) || true
    r_shrink=$(nth_recovery dp $((n_kills + 1))); r_grow=$(nth_recovery dp $((n_kills + 2)))
    r_host=$r_shrink d_host=0
    if [ -n "$HEAD" ]; then  # a host lost (noticed through its lease) and replaced RETURN s later
      n=$(recoveries dp)
      lost_at=$(date +%s.%N)
      "$BIN" chaos kill --host h4 $(api dp) >/dev/null || true
      wait_for $((RETURN + 180)) at_least_recoveries dp $((n + 2)) || true
      r_host=$(nth_recovery dp $((n + 1)))
      # Until the lease expires the survivors wait on the lost rank: detection, which
      # the measured goodput books as work thrown away (the step in flight and the wait).
      d_host=$(grep '"event":"host_lost"' "$WORK/dp/events.jsonl" | tail -1 | grep -o '"time":[0-9.]*' | cut -d: -f2 |
        awk -v a="$lost_at" '{ printf "%.3f", $1 - a }' || echo 0)
    fi
    sleep 30  # a clean stretch, for the checkpoint stalls' share
    ckpt=$(report_field dp seconds.checkpoint); prod=$(report_field dp seconds.productive)
    share=$(awk -v c="$ckpt" -v p="$prod" 'BEGIN { printf "%.4f", (p > 0 ? c / p : 0) }')
    r_peer=$(awk -v a="$r_kill" -v b="$r_shrink" -v c="$r_host" -v k="$kills" -v h="$hosts_lost" -v n="$events" \
      'BEGIN { printf "%.3f", (k * a + (n - k - h) * b + h * c) / n }')  # the trace's mix
    # A kill loses the step in flight (half a step on average): the "snapshot" of a
    # data-parallel job is its last completed step.
    step=$(grep -o '"step_time":[0-9.e+-]*' "$WORK/dp/metrics.jsonl" | cut -d: -f2 | sort -g \
      | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }')
    printf "  calibration (same job, before the window): a kill's recoveries %.2fs (of 3); notice -> %.2fs;" \
      "$r_kill" "$r_shrink"
    [ -z "$HEAD" ] || printf " host lost -> %.2fs after %.2fs of detection (its lease);" "$r_host" "${d_host:-0}"
    printf " slot back -> %.2fs; step %.3fs; checkpoint stalls %.2f%% of compute\n" "$r_grow" "$step" \
      "$(awk -v s="$share" 'BEGIN { print 100 * s }')"
    replay dp "$trace"
    grep -E '^chaos replay: [0-9]+ of' "$WORK/dp.replay" | sed 's/^/  /'
    m=$(measured dp)
    # Kills and notices are noticed at once (the process's exit, the notice itself); a
    # host loss after d_host: the simulator takes one detection time, the trace's mean.
    detect=$(awk -v d="${d_host:-0}" -v h="$hosts_lost" -v n="$events" 'BEGIN { printf "%.3f", h * d / n }')
    p=$(predicted --trace "$trace" --hosts 4 --min-hosts 2 --interval-seconds 60 \
        --checkpoint-seconds "$(awk -v s="$share" 'BEGIN { print 60 * s }')" --detection-seconds "$detect" \
        --restart-seconds "$r_peer" --ram-tier-coverage 1 --snapshot-period-seconds "$step" \
        --peer-restore-seconds "$r_peer" --resize-seconds "$r_grow")
    side_by_side "dp: the window of $WINDOW s, measured (chaos replay) against predicted (cost simulate)" "$m" "$p"
  fi
  [ -z "$HEAD" ] || stop_cluster
fi

# --- fsdp -----------------------------------------------------------------------------
if [[ " $PARTS " == *" fsdp "* ]]; then
  trace=$WORK/fsdp.csv  # one host (embedded): kills and preemptions
  "$BIN" chaos trace --duration "$WINDOW" --rate "$RATE" --mix kill:3,preempt:2 \
    --return-seconds "$RETURN" --seed "$SEED" --output "$trace" >/dev/null
  # The MTTI a user expects before any failure (checkpoint_mtti_prior_seconds, which
  # memory_snapshot_period=auto starts from): the fleet's event rate, as `cost plan`'s
  # preemption model would give it; the same in every arm (only auto reads it here).
  prior=$((3600 / RATE))
  echo "fsdp: small, FSDP 4 (num_workers=2:4, ici_fsdp_parallelism=-1), one host, kills and preemptions at the" \
       "same rate; checkpoint_period=50," \
       "checkpoint_mtti_prior_seconds=$prior"
  echo "  (goodput counts a step slowed by its RAM copy as productive: the steps trained in the window are the work)"
  for period in 0 1 auto; do
    run=fsdp_p$period
    if start_job $run num_workers=2:4 ici_fsdp_parallelism=-1 memory_snapshot_period=$period \
         checkpoint_mtti_prior_seconds=$prior; then
      first=$(last_step $run)
      replay $run "$trace"
      m=($(measured $run))
      printf "  memory_snapshot_period=%-4s goodput %s%% (productive %s, redone %s, recovery %s, checkpoint %s, waiting %s);" \
        "$period" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
      printf " steps trained in the window %s\n" "$(($(last_step $run) - first))"
      if [ "$period" = auto ]; then
        printf "    auto chose (step: period, 0 = off): %s\n" "$(grep '"memory_snapshot_period_changed"' \
          "$WORK/$run/events.jsonl" | sed -E 's/.*"step":([0-9]+).*"to":([0-9]+).*/\1:\2/' | tr '\n' ' ')"
        grep '"memory_snapshot_period_changed"' "$WORK/$run/events.jsonl" | grep -v calibrating | tail -1 |
          sed -E 's/.*"copy_seconds":([0-9.e-]+).*"mtti_seconds":([0-9.e+-]+).*"step_seconds":([0-9.e-]+).*/    last choice: copy \1 s on a \3 s step, covered MTTI \2 s/'
      fi
    fi
  done
fi

# --- slow -----------------------------------------------------------------------------
if [[ " $PARTS " == *" slow "* ]]; then
  trace=$WORK/slow.csv
  "$BIN" chaos trace --duration "$WINDOW" --rate "$((RATE / 2))" --mix slow:3,kill:1 --slow-factor 4 \
    --slow-seconds 120 --seed "$SEED" --output "$trace" >/dev/null
  echo "slow: small, 4 data-parallel workers, $(grep -cE '^[0-9.]+,slow,' "$trace") slowdowns (4x, 120 s) and" \
       "$(grep -cE '^[0-9.]+,kill,' "$trace") kills in $WINDOW s"
  for policy in alert exclude; do
    run=slow_$policy
    if start_job $run num_workers=2:4 straggler_policy=$policy; then
      replay $run "$trace"
      m=($(measured $run))
      printf "  straggler_policy=%-8s goodput %s%% (productive %s, redone %s, recovery %s, checkpoint %s, waiting %s);" \
        "$policy" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
      printf " steps %s\n" "$(wc -l <"$WORK/$run/metrics.jsonl")"
    fi
  done
fi
exit $broken

#!/usr/bin/env bash
# Recovery per network fault on emulated hosts (issue #16; tests/cluster/README.md): etcd
# and the head on host `store`, agents of 2 slots on h1-h3 (lease LEASE s), `tiny` with
# num_workers=2:6. One job meets, in turn, each fault, and for each this prints
#   recover  the fault -> the first step of the next generation (generation_first_step)
#   restore  how the next generation got its state (memory / checkpoint) and its step
#   redone   completed steps trained again: the newest logged step at the fault minus the
#            step restored (0 when survivors carried the state)
# Faults: one worker SIGKILLed; a whole host SIGKILLed (a fresh agent comes back later);
# a host cut off (link down; healed after 3 leases); 20 ms + 5% loss on one host's
# egress (no generation change expected: the step time is reported instead).
#   usage: bench/partitions.sh [build/elastrain] [lease_seconds]   (root: network namespaces)
set -euo pipefail
BIN_ARG=$(readlink -f "${1:-build/elastrain}")
export LEASE=${2:-3}
source "$(dirname "$0")/../tests/integration/lib.sh" "$BIN_ARG"
source "$SRC/tests/cluster/netns_lib.sh"
source "$SRC/bench/bench_lib.sh"
source "$SRC/tests/cluster/job_lib.sh"
net_setup store h1 h2 h3
host_etcd store
start_head store >/dev/null
for h in h1 h2 h3; do start_agent $h; done
submit_job bench steps=100000 checkpoint_period=20 num_workers=2:6 max_failures=100 >/dev/null
gen_above() { local g; g=$(field generation); [ -n "$g" ] && [ "$g" -gt "$1" ]; }
# first_step_after GEN: the time of the first generation_first_step of a generation > GEN.
first_step_after() {
  awk -v g="$1" 'index($0, "\"event\":\"generation_first_step\"") && match($0, /"generation":[0-9]+/) {
    if (substr($0, RSTART + 13, RLENGTH - 13) + 0 > g && match($0, /"time":[0-9.]+/)) { print substr($0, RSTART + 7, RLENGTH - 7); exit } }' \
    "$RUN/events.jsonl"
}
restored_after() {  # restored_after GEN: "kind step" of the first state_restored of a generation > GEN
  awk -v g="$1" 'index($0, "\"event\":\"state_restored\"") && match($0, /"generation":[0-9]+/) {
    if (substr($0, RSTART + 13, RLENGTH - 13) + 0 > g) { match($0, /"kind":"[a-z]+"/); k = substr($0, RSTART + 8, RLENGTH - 9);
      match($0, /"step":[0-9]+/); print k, substr($0, RSTART + 7, RLENGTH - 7); exit } }' "$RUN/events.jsonl"
}
printf '%-24s %9s %-18s %7s\n' fault recover restore redone
# measure NAME: run after the fault was injected at $T0 in generation $G0 with $S0 logged.
measure() {
  wait_for 120 gen_above "$G0" || { printf '%-24s %9s\n' "$1" "no new generation within 120 s"; return; }
  has_first_step() { [ -n "$(first_step_after "$G0")" ]; }
  wait_for 120 has_first_step || true
  local t kind step redone
  t=$(first_step_after "$G0")
  read -r kind step < <(restored_after "$G0")
  redone=$((S0 - ${step:-0}))
  [ "$redone" -lt 0 ] && redone=0
  printf '%-24s %8.2fs %-18s %7d\n' "$1" "$(awk -v a="${t:-0}" -v b="$T0" 'BEGIN { print a - b }')" "$kind@$step" "$redone"
}
fault() { G0=$(field generation); S0=$(run_step); T0=$(now); }
wait_for 180 world_is 6 && wait_for 120 at_step 30

fault; kill -9 "$(worker_pid h2)"
measure "worker SIGKILL"
wait_for 180 world_is 6; wait_for 60 at_step $(($(run_step) + 10))

fault; host_kill h1
measure "host SIGKILL"
start_agent h1; wait_for 180 world_is 6; wait_for 60 at_step $(($(run_step) + 10))

fault; host_cut h3
measure "host cut off"
sleep $((3 * LEASE)); host_heal h3; wait_for 180 world_is 6; wait_for 60 at_step $(($(run_step) + 10))

per_step() { awk -v a="$(now)" -v b="$1" 'BEGIN { print (a - b) / 20 }'; }
s=$(run_step); t=$(now); wait_for 60 at_step $((s + 20)); base=$(per_step "$t")
host_shape h2 --delay 20 --loss 5 --direction out
g=$(field generation); s=$(run_step); t=$(now); wait_for 300 at_step $((s + 20)); shaped=$(per_step "$t")
host_heal h2
printf '%-24s %s\n' "20 ms + 5% loss (h2 out)" "$(printf 'step %.3fs vs %.3fs unshaped (%.2fx); generation %s -> %s' "$shaped" "$base" "$(awk -v a="$shaped" -v b="$base" 'BEGIN { print a / b }')" "$g" "$(field generation)")"
host_exec store "$BIN" stop --head "$HEAD" >/dev/null 2>&1 || true

# shellcheck shell=bash
# An elastrain cluster on the emulated hosts of netns_lib.sh, for the tests and benches of
# tests/cluster/: source after tests/integration/lib.sh and netns_lib.sh, then
#   net_setup store h1 h2; host_etcd store
#   start_head store                   # HEAD=http://IP:8080, the head inside `store`
#   start_agent h1                     # $AGENT_SLOTS slots (2), lease $LEASE (default 3 s), id h1-1, h1-2, ...
#   submit_job NAME key=value ...      # RUN=$WORK/runs/NAME; fails the test if refused
#   field world; run_step; wait_until 60 at_step 20; check_one_line_per_step $STEPS
LEASE=${LEASE:-3}
HEAD_HOST=""
declare -A AGENT_N=()

# start_head H [LOG]: `elastrain head` inside H, its API on H's address; HEAD is its URL,
# HEAD_PID its process. LOG defaults to $WORK/head.log (a restarted head: another file).
start_head() {
  HEAD_HOST=$1
  HEAD=http://$(host_ip "$1"):8080
  local log=${2:-$WORK/head.log}
  host_bg "$1" "$log" "$BIN" head --store "$NET_ETCD_URL" --insecure-store --host "$(host_ip "$1")" --port 8080 \
    --signing-key "$HEAD_KEY"
  HEAD_PID=$BG_PID
  wait_until 30 grep -q "$HEAD" "$log" || fail "head did not start: $(tail -3 "$log")"
}
# The head's signing key (made by the first head) and its public half, which every
# agent is given: agents run only what the head signed (store/signed_records.h).
HEAD_KEY=$WORK/head_signing_key
head_key_ready() { wait_until 30 test -s "$HEAD_KEY.pub" || fail "no $HEAD_KEY.pub: start the head first"; }

# start_agent H: a fresh agent of AGENT_SLOTS (2) slots inside H (a new id each time, as after a reboot);
# its log is $WORK/agent_H_N.log.
start_agent() {
  AGENT_N[$1]=$((${AGENT_N[$1]:-0} + 1))
  head_key_ready
  host_bg "$1" "$WORK/agent_$1_${AGENT_N[$1]}.log" "$BIN" agent --store "$NET_ETCD_URL" --insecure-store --slots "${AGENT_SLOTS:-2}" \
    --id "$1-${AGENT_N[$1]}" --host-name "$1" --address "$(host_ip "$1")" --lease-seconds "$LEASE" \
    --head-public-key "$HEAD_KEY.pub"
}

# submit_job NAME KEY=VALUE...: `tiny`, one metrics line per step, checkpoints every 10
# steps, generous timeouts and failure budget, then the caller's keys. RUN is its run dir.
submit_job() {
  local name=$1 out
  shift
  RUN=$WORK/runs/$name
  out=$(host_exec "$HEAD_HOST" "$BIN" submit --head "$HEAD" model_name=tiny hardware_peak_tflops=1 threads_per_worker=1 log_period=1 \
    eval_interval=0 checkpoint_period=10 resource_wait_timeout=120 worker_heartbeat_timeout=30 collective_timeout=30 \
    max_failures=10 base_output_directory="$WORK/runs" run_name="$name" "$@" 2>&1) &&
    pass "submit: $out" || fail "submit: $out"
}

# field PATH: a field of `elastrain status --json` (json_query PATH), "" when unknown.
field() { host_exec "$HEAD_HOST" "$BIN" status --head "$HEAD" --json 2>/dev/null | "$JQ" "$1" 2>/dev/null || true; }
world_is() { [ "$(field world)" = "$1" ]; }
job_succeeded() { [ "$(field state)" = SUCCEEDED ]; }
# run_step: the newest step in $RUN/metrics.jsonl (0 before the first line); at_step N.
run_step() { last_step "$RUN"; }
at_step() { [ "$(run_step)" -ge "$1" ]; }

# check_one_line_per_step STEPS: exactly one training line for each step 1..STEPS.
check_one_line_per_step() { check_lines "$RUN" "$1" "metrics.jsonl"; }

# worker_pid H: the pid of one `elastrain worker` process inside H ("" if none).
worker_pid() {
  local p
  for p in $(ip netns pids "$(host_ns "$1")"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q ' worker ' && { echo "$p"; return 0; }
  done
  return 0
}

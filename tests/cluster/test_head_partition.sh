# Issue #16, Done-when 3, on emulated hosts (tests/cluster/README.md): etcd on host `store`,
# the head alone on host `head`, agents of 2 slots on h1 and h2 (lease 3 s).
#   The head's host cut off for several leases: the workers and agents need no head to
#   train, so steps go on; the head writes nothing meanwhile (it cannot reach the store).
#   Healed: the head takes its lease again and resumes control: a worker killed after
#   the heal is noticed and replaced (a new generation), and the job ends SUCCEEDED with
#   one metrics line per step.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
LEASE=3
STEPS=220
net_setup store head h1 h2
host_etcd store
HEAD=http://$(host_ip head):8080
host_bg head "$WORK/head.log" "$BIN" head --store "$NET_ETCD_URL" --host "$(host_ip head)" --port 8080
wait_until 30 grep -q "$HEAD" "$WORK/head.log" || fail "head did not start: $(tail -3 "$WORK/head.log")"
for h in h1 h2; do
  host_bg $h "$WORK/agent_$h.log" "$BIN" agent --store "$NET_ETCD_URL" --slots 2 --id $h --host-name $h \
    --address "$(host_ip $h)" --lease-seconds "$LEASE"
done
RUN=$WORK/runs/headcut
out=$(host_exec head "$BIN" submit --head "$HEAD" model_name=tiny threads_per_worker=1 steps=$STEPS log_period=1 \
  eval_interval=0 checkpoint_period=10 num_workers=2:4 resource_wait_timeout=120 worker_heartbeat_timeout=30 \
  collective_timeout=30 max_failures=10 base_output_directory="$WORK/runs" run_name=headcut 2>&1) &&
  pass "submit: $out" || fail "submit: $out"
field() { host_exec head "$BIN" status --head "$HEAD" --json 2>/dev/null | "$JQ" "$1" 2>/dev/null || true; }
last_step() { tail -n 1 "$RUN/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' | cut -d: -f2 || true; }
at_step() { local s; s=$(last_step); [ -n "$s" ] && [ "$s" -ge "$1" ]; }
world_is() { [ "$(field world)" = "$1" ]; }
wait_until 120 world_is 4 && wait_until 120 at_step 15 && pass "training on 4 workers (step $(last_step))" ||
  fail "no step 15 on 4 workers: world $(field world), step $(last_step)"

gen0=$(field generation)
s0=$(last_step)
cut_time=$(date +%s.%N)
host_cut head
sleep $((3 * LEASE))
s1=$(last_step)
[ "${s1:-0}" -gt "$((s0 + 5))" ] && pass "head cut off for $((3 * LEASE)) s: training went on (step $s0 -> $s1)" ||
  fail "training stopped with the head cut off (step $s0 -> $s1)"
# The controller's events name their source; none may be dated inside the cut.
late=$(grep '"source":"controller"' "$RUN/events.jsonl" | awk -v t="$cut_time" -v d="$((3 * LEASE))" '
  match($0, /"time":[0-9.]+/) { w = substr($0, RSTART + 7, RLENGTH - 7) + 0; if (w > t + 0.5 && w < t + d) print }' | head -3 || true)
[ -z "$late" ] && pass "the head wrote no event while cut off" || fail "head events during the cut: $late"
host_heal head
wait_until 60 bash -c "[ -n \"\$(ip netns exec $(host_ns head) '$BIN' status --head '$HEAD' --json 2>/dev/null | '$JQ' state)\" ]" &&
  pass "the head answers again: $(field state), generation $(field generation) (was $gen0)" || fail "the head does not answer after the heal"

# Control: a worker killed after the heal is noticed and the job goes on in a new generation.
victim=$(for p in $(ip netns pids "$(host_ns h1)"); do
  tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q ' worker ' && echo "$p"; done | head -1 || true)
gen1=$(field generation)
[ -n "$victim" ] && kill -9 "$victim"
newer() { local g; g=$(field generation); [ -n "$g" ] && [ "$g" -gt "$gen1" ]; }
wait_until 60 newer && pass "a worker killed after the heal (pid $victim): generation $gen1 -> $(field generation)" ||
  fail "the head did not react to a worker's death (generation $(field generation), pid ${victim:-none})"
done_ok() { [ "$(field state)" = SUCCEEDED ]; }
wait_until 300 done_ok && pass "job SUCCEEDED (failures $(field failures))" || fail "job: $(field state) $(field reason)"
lines=$(grep -c '"loss"' "$RUN/metrics.jsonl" || true)
uniq_steps=$(grep '"loss"' "$RUN/metrics.jsonl" | grep -o '"step":[0-9]*' | sort -u | wc -l)
[ "$lines" = "$STEPS" ] && [ "$uniq_steps" = "$STEPS" ] && pass "metrics.jsonl: $lines lines, one per step" ||
  fail "metrics.jsonl: $lines loss lines, $uniq_steps distinct steps, expected $STEPS"
finish

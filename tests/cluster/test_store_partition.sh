# Issue #16, Done-when 4, on emulated hosts (tests/cluster/README.md): etcd and the head on
# host `store`, agents of 2 slots on h1 and h2 (lease 4 s), num_workers=2:4.
#   etcd cut off for a quarter of the lease: no generation change, no self-fencing,
#     no metrics line lost (lines are held while the store cannot confirm them);
#   etcd cut off for three leases: every agent fences its workers; once etcd is back the
#     agents register again and the job resumes from its latest committed checkpoint,
#     finishing with one metrics line per step (the redone steps get no second line).
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
LEASE=4
source "$SRC/tests/cluster/job_lib.sh"
STEPS=200
net_setup store h1 h2
host_etcd store
start_head store
for h in h1 h2; do start_agent $h; done
submit_job store steps=$STEPS num_workers=2:4
wait_until 120 world_is 4 && wait_until 120 at_step 15 && pass "training on 4 workers (step $(run_step))" ||
  fail "no step 15 on 4 workers: world $(field world), step $(run_step)"

# A short outage: 1 s, a quarter of the 4 s lease.
gen0=$(field generation)
s0=$(run_step)
host_cut store
sleep 1
host_heal store
wait_until 120 at_step $((s0 + 15)) || fail "no progress after a short etcd outage (step $(run_step))"
[ "$(field generation)" = "$gen0" ] && pass "etcd cut for 1 s at step $s0: still generation $gen0 at step $(run_step)" ||
  fail "generation changed after a short etcd outage: $gen0 -> $(field generation)"
! grep -q "self-fencing:" "$WORK"/agent_h*_1.log && pass "no agent fenced itself" || fail "an agent fenced itself: $(grep -h "self-fencing:" "$WORK"/agent_h*_1.log | head -1)"

# A long outage: three leases.
s1=$(run_step)
latest=$(cat "$RUN/checkpoints/LATEST" 2>/dev/null || true)
host_cut store
sleep $((3 * LEASE))
fenced=$(grep -l "self-fencing:" "$WORK"/agent_h*_1.log 2>/dev/null | wc -l)
[ "$fenced" = 2 ] && pass "etcd cut for $((3 * LEASE)) s at step $s1: both agents fenced their workers" ||
  fail "$fenced of 2 agents fenced themselves"
left=$(for h in h1 h2; do ip netns pids "$(host_ns $h)"; done | wc -l)
echo "    processes left on h1 and h2 (agents and fresh idle workers): $left"
latest_cut=$(cat "$RUN/checkpoints/LATEST" 2>/dev/null || true)
host_heal store
wait_until 300 job_succeeded &&
  pass "the job SUCCEEDED after etcd came back (failures $(field failures))" || fail "job: $(field state) $(field reason)"
# The generation after the outage restored from disk (its workers were all fenced); a
# later resize restores from memory.
restored=$(grep '"state_restored"' "$RUN/events.jsonl" | grep '"kind":"checkpoint"' | head -1 |
  grep -o '"step":[0-9]*' | cut -d: -f2 || true)
[ -n "$latest_cut" ] && [ "$latest_cut" = "$(printf 'step_%08d' "${restored:-0}")" ] &&
  pass "resumed from the latest committed checkpoint ($latest_cut; LATEST before the cut: $latest)" ||
  fail "restored step ${restored:-none}, LATEST at the end of the cut: ${latest_cut:-none}"
check_one_line_per_step "$STEPS"
finish

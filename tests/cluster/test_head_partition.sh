# Issue #16, Done-when 3, on emulated hosts (tests/cluster/README.md): etcd on host `store`,
# the head alone on host `head`, agents of 2 slots on h1 and h2 (lease 3 s).
#   The head's host cut off for several leases: the workers and agents need no head to
#   train, so steps go on; the head writes nothing meanwhile (it cannot reach the store).
#   Healed: the head takes its lease again and resumes control: a worker killed after
#   the heal is noticed and replaced (a new generation), and the job ends SUCCEEDED with
#   one metrics line per step.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
source "$SRC/tests/cluster/job_lib.sh"
# Enough steps that the control below (a kill after the heal) lands long before the end:
# `tiny` runs ~20 steps/s here, and the cut alone lasts 3 leases.
STEPS=600
net_setup store head h1 h2
host_etcd store
start_head head
for h in h1 h2; do start_agent $h; done
submit_job headcut steps=$STEPS num_workers=2:4
wait_until 120 world_is 4 && wait_until 120 at_step 15 && pass "training on 4 workers (step $(run_step))" ||
  fail "no step 15 on 4 workers: world $(field world), step $(run_step)"

gen0=$(field generation)
s0=$(run_step)
cut_time=$(date +%s.%N)
host_cut head
sleep $((3 * LEASE))
s1=$(run_step)
[ "${s1:-0}" -gt "$((s0 + 5))" ] && pass "head cut off for $((3 * LEASE)) s: training went on (step $s0 -> $s1)" ||
  fail "training stopped with the head cut off (step $s0 -> $s1)"
# The controller's events name their source; none may be dated inside the cut.
late=$(grep '"source":"controller"' "$RUN/events.jsonl" | awk -v t="$cut_time" -v d="$((3 * LEASE))" '
  match($0, /"time":[0-9.]+/) { w = substr($0, RSTART + 7, RLENGTH - 7) + 0; if (w > t + 0.5 && w < t + d) print }' | head -3 || true)
[ -z "$late" ] && pass "the head wrote no event while cut off" || fail "head events during the cut: $late"
host_heal head
head_answers() { [ -n "$(field state)" ]; }
wait_until 60 head_answers &&
  pass "the head answers again: $(field state), generation $(field generation) (was $gen0)" || fail "the head does not answer after the heal"

# Control: a worker killed after the heal is noticed and the job goes on in a new generation.
victim=$(worker_pid h1)
gen1=$(field generation)
at_kill=$(run_step)
[ "${at_kill:-0}" -lt "$((STEPS - 100))" ] || fail "the job is nearly over (step $at_kill of $STEPS): the control below proves nothing"
[ -n "$victim" ] && kill -9 "$victim"
newer() { local g; g=$(field generation); [ -n "$g" ] && [ "$g" -gt "$gen1" ]; }
wait_until 60 newer && pass "a worker killed after the heal (pid $victim): generation $gen1 -> $(field generation)" ||
  fail "the head did not react to a worker's death (generation $(field generation), pid ${victim:-none})"
wait_until 300 job_succeeded && pass "job SUCCEEDED (failures $(field failures))" || fail "job: $(field state) $(field reason)"
check_one_line_per_step "$STEPS"
finish

# Issue 36 on emulated hosts (tests/cluster/README.md): etcd on `store`, head A on hA and
# head B on hB (one signing key and one token), agents of 1 slot on h1, h2, h3 (lease 3 s).
# The job commands name both heads (--head A,B) and run from `store`.
#   1. A leads; hA is cut off during training: B leads within the lease + 1 s (3 s + 1 s,
#      timed from the cut to B's head_elected), a worker killed right after the takeover is
#      replaced by B (a new generation), and A writes no decision after the cut.
#   2. hA heals: A stands by ("lost the lead"), never leads again on its own; B still leads.
#   3. status keeps answering through the list while A is cut off and while B is down.
#   4. Both heads killed: training goes on; A started again resumes control (leader again,
#      controller_resumed) and the job ends SUCCEEDED with one metrics line per step. Then
#      `submit` and `stop` through the list with B down, and again with A down.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
source "$SRC/tests/cluster/job_lib.sh"
STEPS=1200
AGENT_SLOTS=1  # 3 workers: what is tested is the heads; 6 workers only cost CPU
TTL=3  # the head's lease (controller.h kDefaultLeaderTtl)
net_setup store hA hB h1 h2 h3
host_etcd store

# head_on H LOG: a head inside H (the shared key and token); HPID is its process.
head_on() {
  host_bg "$1" "$2" "$BIN" head --store "$NET_ETCD_URL" --insecure-store --host "$(host_ip "$1")" --port 8080 \
    --signing-key "$HEAD_KEY"
  HPID=$BG_PID
  wait_until 30 grep -qs "API at" "$2" || fail "head on $1 did not start: $(tail -3 "$2")"
}
head_on hA "$WORK/headA.log"
A_PID=$HPID
head_key_ready
head_on hB "$WORK/headB.log"
B_PID=$HPID
A=http://$(host_ip hA):8080
B=http://$(host_ip hB):8080
HEAD="$A,$B"
HEAD_HOST=store
ELASTRAIN_TOKEN=$(cat "$HOME/.elastrain/head_token")
export ELASTRAIN_TOKEN
for h in h1 h2 h3; do start_agent $h; done
submit_job heads steps=$STEPS num_workers=2:3
leader_pid() { field leader | sed 's/.*://'; }
leads() { [ "$(leader_pid)" = "$1" ]; }
wait_until 120 world_is 3 && wait_until 120 at_step 20 && pass "training on 3 workers (step $(run_step))" ||
  fail "no step 20 on 3 workers: world $(field world), step $(run_step)"
leads $A_PID && pass "head A (pid $A_PID) leads; B (pid $B_PID) stands by: $(grep -c 'stands by' "$WORK/headB.log") line" ||
  fail "leader is '$(field leader)', expected A (pid $A_PID)"

# 1. A cut off: B takes over within the lease + 1 s.
gen0=$(field generation)
cut=$(date +%s.%N)
host_cut hA
wait_until 30 leads $B_PID && pass "status through the list with A cut off: B leads" || fail "B did not take the lead: $(field leader)"
elected=$("$JQ" --jsonl "$RUN/events.jsonl" event=head_elected previous="$(hostname):$A_PID" time 2>/dev/null | tail -1)
took=$(awk -v a="$cut" -v b="${elected:-0}" 'BEGIN { printf "%.2f", b - a }')
if [ -n "$elected" ] && awk -v t="$took" -v l="$TTL" 'BEGIN { exit !(t >= 0 && t <= l + 1) }'; then
  pass "B elected $took s after A was cut off (lease $TTL s + 1 s)"
else
  fail "B's head_elected ${elected:-missing}, $took s after the cut (expected within $((TTL + 1)) s)"
fi
grep -q '"event":"head_lost"' "$RUN/events.jsonl" && pass "head_lost names A: $(grep '"event":"head_lost"' "$RUN/events.jsonl" | tail -1 | cut -c1-160)" ||
  fail "no head_lost event"
victim=$(worker_pid h1)
gen1=$(field generation)
[ -n "$victim" ] && kill -9 "$victim"
newer() { local g; g=$(field generation); [ -n "$g" ] && [ "$g" -gt "$gen1" ]; }
wait_until 60 newer && pass "a worker killed after the takeover (pid $victim): B planned generation $(field generation) (was $gen1, $gen0 before the cut)" ||
  fail "B did not replace the killed worker (generation $(field generation), pid ${victim:-none})"
sleep 2

# 2. A heals: it stands by, never a second leader.
heal=$(date +%s.%N)
host_heal hA
wait_until 30 grep -q "lost the lead" "$WORK/headA.log" && pass "A, healed: $(grep -o 'lost the lead.*' "$WORK/headA.log" | head -1 | cut -c1-120)" ||
  fail "A does not say it lost the lead: $(tail -3 "$WORK/headA.log")"
sleep $((TTL + 1))
leads $B_PID && pass "B still leads $((TTL + 1)) s after A healed" || fail "leader after the heal: $(field leader)"
# A decides nothing from the cut on: no job event line in its log after it.
decided=$(awk -v t="$cut" '
  match($0, /^\[[0-9-]+ [0-9:.]+\]/) {
    cmd = "date -d \"" substr($0, 2, RLENGTH - 2) "\" +%s.%N"; cmd | getline s; close(cmd)
    if (s + 0 > t + 0 && $0 ~ /job [^ ]+: /) print }' "$WORK/headA.log" | grep -v "head_" | head -3 || true)
[ -z "$decided" ] && pass "A logged no decision after it was cut off" || fail "A decided after the cut: $decided"

# 3 and 4. B down: A leads again, status through the list; then both down.
host_kill hB
wait_until 30 leads $A_PID && pass "B killed: A leads again; status through the list with B down" ||
  fail "A did not take the lead after B died: $(field leader)"
kill -9 "$A_PID"; { wait "$A_PID"; } 2>/dev/null || true
s0=$(run_step)
sleep 4
s1=$(run_step)
[ "${s1:-0}" -gt "$((s0 + 5))" ] && pass "both heads down for 4 s: training went on (step $s0 -> $s1)" ||
  fail "training stopped with both heads down (step $s0 -> $s1)"
[ "$s1" -lt "$((STEPS - 200))" ] || fail "the job is nearly over (step $s1 of $STEPS): what follows proves little"
head_on hA "$WORK/headA2.log"
A2_PID=$HPID
wait_until 30 leads $A2_PID && pass "A started again leads (pid $A2_PID)" || fail "A2 does not lead: $(field leader)"
grep -q '"event":"controller_resumed"' "$RUN/events.jsonl" && pass "controller_resumed" || fail "no controller_resumed"
wait_until 300 job_succeeded && pass "job SUCCEEDED (failures $(field failures), generation $(field generation))" ||
  fail "job: $(field state) $(field reason)"
check_one_line_per_step "$STEPS"
submit_job second steps=100000 num_workers=2:3
wait_until 120 at_step 5 || fail "the second job does not train: $(field state)"
out=$(host_exec store "$BIN" stop --head "$HEAD" 2>&1) && pass "stop through the list with B down: $out" || fail "stop: $out"
stopped() { [ "$(field state)" = STOPPED ]; }
wait_until 120 stopped || true
st=$(field state)
[ "$st" = STOPPED ] && pass "the second job stopped" || fail "the second job is $st after stop"
# And with A down: B started again, A's host killed.
head_on hB "$WORK/headB2.log"
B2_PID=$HPID
host_kill hA
wait_until 30 leads $B2_PID && pass "A's host killed: B (pid $B2_PID) leads" || fail "B2 does not lead: $(field leader)"
submit_job third steps=100000 num_workers=2:3
wait_until 120 at_step 5 || fail "the third job does not train: $(field state)"
out=$(host_exec store "$BIN" stop --head "$HEAD" 2>&1) && pass "stop through the list with A down: $out" || fail "stop: $out"
wait_until 120 stopped || true
st=$(field state)
[ "$st" = STOPPED ] && pass "the third job stopped" || fail "the third job is $st after stop"
finish

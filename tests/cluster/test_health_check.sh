# Issue #32, Done-when 4, on emulated hosts (tests/cluster/README.md): etcd and the head
# on host `store`, agents of 2 slots on h1 and h2, num_workers=2:4, straggler_policy=exclude.
#   Health checks: h2's agent runs `--health-check` with a script that fails until a file
#   exists, checked every 3 s while idle. h2 is never planned while it fails and the
#   host_health event says why; once the file exists, the next periodic check passes and
#   the job grows onto h2.
#   A slow host: both of h2's workers slowed 4x by their cgroups (`chaos slow`, for a
#   while): straggler_detected names them, host_excluded takes h2 out, the job goes on
#   with h1. The head is killed and a new one started during the cool-down: h2 stays out.
#   After the cool-down, h2's passing check (newer than the exclusion) re-admits it and
#   the job grows back to 4.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
source "$SRC/tests/cluster/job_lib.sh"
EXPECT_STRAGGLERS=1
COOLDOWN=30
net_setup store h1 h2
host_etcd store
start_head store
start_agent h1
cat >"$WORK/check_h2.sh" <<CHECK
#!/bin/sh
test -f "$WORK/h2_repaired" && exit 0
echo "h2: GPU 3 reports uncorrectable ECC errors"
exit 1
CHECK
chmod +x "$WORK/check_h2.sh"
head_key_ready
host_bg h2 "$WORK/agent_h2.log" "$BIN" agent --store "$NET_ETCD_URL" --insecure-store --slots 2 --id h2-1 --host-name h2 --head-public-key "$HEAD_KEY.pub" \
  --address "$(host_ip h2)" --lease-seconds "$LEASE" --health-check "$WORK/check_h2.sh" --health-check-period 3
# small, not tiny: a straggler must lose 20 ms of compute per step to be named.
submit_job health steps=100000 checkpoint_period=10 num_workers=2:4 global_batch_size=8 per_device_batch_size=2 \
  model_name=small max_target_length=64 straggler_policy=exclude straggler_persistence_steps=6 host_cooldown_seconds=$COOLDOWN
wait_until 120 at_step 5 && pass "training on h1 (world $(field world), step $(run_step))" ||
  fail "no step 5: $(field state) $(field reason)"
wait_ev "$RUN" host_health 60 host=h2 && pass "a host_health event for h2" || fail "no host_health event for h2"
why=$(ev "$RUN" host_health reason host=h2 | head -1)
[[ "$why" == *"uncorrectable ECC errors"* ]] && pass "its reason is the check's output: $why" ||
  fail "host_health reason: '$why'"
# Several periodic checks later, h2 is still out of every plan.
sleep 6
planned_h2() { grep '"event":"generation_started"' "$RUN/events.jsonl" | grep -q '"host":"h2"'; }
planned_h2 && fail "a generation was planned on the failing h2" || pass "h2 never planned while failing (world $(field world))"
[ "$(field world)" = 2 ] && pass "world 2 while h2 fails" || fail "world $(field world) while h2 fails"
said=$(host_exec store "$BIN" status --head "$HEAD" 2>&1 | grep 'agent h2-1 on h2 is not planned' || true)
[[ "$said" == *"uncorrectable ECC errors"* ]] && pass "status says why:$said" || fail "status: '$said'"
grep -q 'health check failed' "$WORK/agent_h2.log" && pass "h2's agent logged its failing checks" ||
  fail "h2's agent log: $(tail -3 "$WORK/agent_h2.log")"
touch "$WORK/h2_repaired"
wait_until 120 world_is 4 && pass "after the check passed, the job grew onto h2 (world 4)" ||
  fail "no growth onto h2: world $(field world), $(field reason)"
planned_h2 && pass "a generation planned on h2" || fail "no generation on h2"
healthy=$(ev "$RUN" host_health healthy host=h2 | tail -1)
[ "$healthy" = true ] && pass "host_health says h2 is healthy again" || fail "last host_health of h2: healthy=$healthy"

# A slow host: both of h2's ranks at a quarter of their CPU for 50 s.
h2_ranks=$(for ((i = 0; i < 4; i++)); do [ "$(field ranks.$i.host)" = h2 ] && echo $i; done | xargs)
[ "$(wc -w <<<"$h2_ranks")" = 2 ] || fail "h2's ranks: '$h2_ranks'"
for r in $h2_ranks; do
  out=$(host_exec store "$BIN" chaos slow --rank "$r" --factor 4 --seconds 50 --head "$HEAD" 2>&1) &&
    pass "chaos slow --rank $r --factor 4 --seconds 50: $out" || fail "chaos slow --rank $r: $out"
done
wait_ev "$RUN" host_excluded 120 host=h2 && pass "host_excluded: $(ev "$RUN" host_excluded reason host=h2)" ||
  fail "h2 not excluded: stragglers $(ev "$RUN" straggler_detected rank | xargs), $(field reason)"
named=$(ev "$RUN" straggler_detected host | sort -u | xargs)
[ "$named" = h2 ] && pass "straggler_detected named ranks $(ev "$RUN" straggler_detected rank | sort -u | xargs) on h2" ||
  fail "straggler_detected hosts: '$named'"
excluded_gen=$(ev "$RUN" generation_started generation | tail -1)
wait_until 60 world_is 2 && pass "the job goes on without h2 (world 2)" || fail "world $(field world) after the exclusion"

# The head killed and a new one started during the cool-down.
kill -9 "$HEAD_PID"
wait "$HEAD_PID" 2>/dev/null || true
start_head store "$WORK/head2.log"
head_answers() { [ -n "$(field state)" ]; }
wait_until 60 head_answers && pass "a new head answers: $(field state), world $(field world)" || fail "the new head does not answer"
status_json=$(host_exec store "$BIN" status --head "$HEAD" --json 2>/dev/null || true)
excluded_until=""
for ((i = 0; i < 4; i++)); do
  [ "$("$JQ" hosts.$i.host <<<"$status_json" 2>/dev/null)" = h2 ] && excluded_until=$("$JQ" hosts.$i.excluded_until <<<"$status_json")
done
awk -v u="$excluded_until" -v now="$(date +%s.%N)" 'BEGIN { exit !(u > now) }' &&
  pass "the new head keeps h2 excluded (for $(awk -v u="$excluded_until" -v now="$(date +%s.%N)" 'BEGIN { printf "%.0f", u - now }') s more)" ||
  fail "h2's exclusion after the head restart: excluded_until '$excluded_until'"
sleep 4
[ "$(field world)" = 2 ] && ! grep '"event":"generation_started"' "$RUN/events.jsonl" | awk -v g="$excluded_gen" \
  'match($0, /"generation":[0-9]+/) && substr($0, RSTART + 13, RLENGTH - 13) + 0 > g' | grep -q '"host":"h2"' &&
  pass "h2 not planned during its cool-down" || fail "h2 planned during its cool-down: world $(field world)"

readmitted() { [ -n "$(ev "$RUN" host_health reason host=h2 | grep re-admitted)" ]; }
wait_until $((COOLDOWN + 60)) readmitted && pass "$(ev "$RUN" host_health reason host=h2 | grep re-admitted)" ||
  fail "h2 not re-admitted: $(field reason)"
wait_until 120 world_is 4 && pass "the job grew back onto h2 (world 4, generation $(field generation))" ||
  fail "no growth after the re-admission: world $(field world), $(field reason)"
host_exec store "$BIN" stop --head "$HEAD" >/dev/null 2>&1 || fail "elastrain stop refused"
stopped() { [[ "$(field state)" == STOPPED || "$(field state)" == SUCCEEDED ]]; }
wait_until 120 stopped && pass "stopped ($(field state))" || fail "job: $(field state) $(field reason)"
finish

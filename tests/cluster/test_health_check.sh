# Issue #32, Done-when 4 (health checks), on emulated hosts (tests/cluster/README.md):
# etcd and the head on host `store`, agents of 2 slots on h1 and h2, num_workers=2:4. h2's
# agent runs `--health-check` with a script that fails until a file exists, checked every
# 3 s while idle. h2 is never planned while it fails and the host_health event says why;
# once the file exists, the next periodic check passes and the job grows onto h2.
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
source "$SRC/tests/cluster/job_lib.sh"
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
host_bg h2 "$WORK/agent_h2.log" "$BIN" agent --store "$NET_ETCD_URL" --slots 2 --id h2-1 --host-name h2 \
  --address "$(host_ip h2)" --lease-seconds "$LEASE" --health-check "$WORK/check_h2.sh" --health-check-period 3
submit_job health steps=100000 checkpoint_period=20 num_workers=2:4 global_batch_size=8 per_device_batch_size=2
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
host_exec store "$BIN" stop --head "$HEAD" >/dev/null 2>&1 || fail "elastrain stop refused"
stopped() { [[ "$(field state)" == STOPPED || "$(field state)" == SUCCEEDED ]]; }
wait_until 120 stopped && pass "stopped ($(field state))" || fail "job: $(field state) $(field reason)"
finish

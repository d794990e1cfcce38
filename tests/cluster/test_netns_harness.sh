# shellcheck shell=bash
# Issue 16: the multi-host harness (tests/cluster/netns_lib.sh) checked by measurement on
# three hosts: reachability, host_cut and host_heal, host_shape's delay, loss and one-way
# loss, TCP through the relay (etcd in one host, a client in another), host_kill; and
# nothing left behind after a normal end, a `set -e` abort, SIGTERM midway, or (through
# the next net_setup) SIGKILL.
#   bash tests/cluster/test_netns_harness.sh PATH/TO/elastrain [scenario|abort|hold]
# Without a role it runs each role in a child bash and checks what the child left. The
# binary itself is not run: any file will do as long as net_relay is beside it or NET_RELAY
# names it. Exits 77 (ctest: skipped) where network namespaces cannot be made.
SELF=$(readlink -f "$0")
source "$(dirname "$0")/../integration/lib.sh"
source "$SRC/tests/cluster/netns_lib.sh"
ROLE=${2:-}

# record PID...: the child notes processes that must be gone once it has exited.
record() { [ -z "${NETNS_STATE:-}" ] || echo "$*" >>"$NETNS_STATE"; }
# pings FROM TO COUNT [INTERVAL]: ping's summary ("N received", "rtt min/avg/...").
pings() { host_exec "$1" ping -n -q -c "$3" -i "${4:-0.05}" -W 1 "$(host_ip "$2")" 2>&1 || true; }
# received SUMMARY, rtt_min SUMMARY, rtt_avg SUMMARY: from pings' output (bash's own
# matching: every process costs on a loaded machine).
received() { if [[ $1 =~ ([0-9]+)\ received ]]; then echo "${BASH_REMATCH[1]}"; else echo 0; fi; }
rtt_min() { if [[ $1 =~ rtt\ [^=]*=\ ([0-9.]+)/([0-9.]+)/ ]]; then echo "${BASH_REMATCH[1]}"; fi; }
rtt_avg() { if [[ $1 =~ rtt\ [^=]*=\ ([0-9.]+)/([0-9.]+)/ ]]; then echo "${BASH_REMATCH[2]}"; fi; }
# ms_in A LO HI: LO <= A < HI (decimals).
ms_in() { awk -v a="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(a != "" && a >= lo && a < hi) }'; }
# shape H ARGS...: host_shape, and the new relay recorded.
shape() {
  host_shape "$@"
  record "$(ip netns pids "$NET_SW")"
}
rx_packets() { host_exec "$1" cat /sys/class/net/eth0/statistics/rx_packets; }

scenario() {
  local t0=$SECONDS out r
  net_setup h1 h2 h3
  pass "net_setup h1 h2 h3: $(host_ip h1), $(host_ip h2), $(host_ip h3) in namespaces ${NET_PREFIX}-*"
  if ip -4 -o addr show | grep -q " $NET_SUBNET\."; then fail "an address of $NET_SUBNET.0/24 in the root namespace"; fi
  out=$(host_exec h1 ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | xargs)
  [ "$out" = "lo eth0" ] && pass "h1 has lo and eth0 only ($out); nothing in the root namespace" ||
    fail "h1's links: $out"

  local from to=h1 base
  for from in h3 h2 h1; do  # a ring: each host sends once and answers once
    out=$(pings "$from" "$to" 3)
    [ "$(received "$out")" = 3 ] || fail "ping $from -> $to: $out"
    to=$from
  done
  out=$(pings h1 h2 10)
  base=$(rtt_avg "$out")
  ms_in "$base" 0 20 && pass "h1 -> h2 -> h3 -> h1 ping; RTT h1 -> h2 ${base} ms" || fail "h1 -> h2 before shaping: $out"

  # host_cut: no way through either way, while h2's processes run on.
  host_bg h2 "$WORK/sleep_h2.log" sleep 600
  local sleeper=$BG_PID
  host_bg h1 "$WORK/sleep_h1.log" sleep 600
  local bystander=$BG_PID
  record "$sleeper $bystander"
  host_cut h2
  out=$(pings h1 h2 3)
  r=$(pings h2 h1 2)
  [ "$(received "$out")" = 0 ] && [ "$(received "$r")" = 0 ] &&
    pass "host_cut h2: h1 -> h2 and h2 -> h1 get no reply" || fail "host_cut h2: $out / $r"
  _net_alive "$sleeper" && pass "host_cut h2: a process in h2 keeps running (pid $sleeper)" ||
    fail "the process in h2 died on host_cut"
  host_heal h2
  out=$(pings h1 h2 5)
  [ "$(received "$out")" = 5 ] && pass "host_heal h2: 5/5 pings from h1" || fail "host_heal h2: $out"

  # host_shape --delay: one-way latency on each shaped direction; others untouched.
  shape h2 --delay 20
  out=$(pings h1 h2 5)
  r=$(pings h1 h3 5)
  ms_in "$(rtt_min "$out")" 40 1000 && ms_in "$(rtt_avg "$r")" 0 20 &&
    pass "host_shape h2 --delay 20: RTT h1 -> h2 min $(rtt_min "$out") ms (>= 2 x 20), h1 -> h3 still $(rtt_avg "$r") ms" ||
    fail "host_shape h2 --delay 20: h1 -> h2: $out; h1 -> h3: $r"
  shape h2 --delay 20 --direction out
  out=$(pings h1 h2 5)
  ms_in "$(rtt_min "$out")" 20 40 && pass "host_shape h2 --delay 20 --direction out: RTT min $(rtt_min "$out") ms (>= 20, < 40)" ||
    fail "--direction out: $out"

  # TCP through the relay, as elastrain uses it: etcd in h2, a client in h1, 400 KB each way.
  host_etcd h2
  record "$NET_ETCD_PID"
  { head -c 300000 /dev/urandom | base64 -w0; echo; } >"$WORK/value"
  printf '{"key":"a2V5","value":"%s"}' "$(cat "$WORK/value")" >"$WORK/put.json"
  local url=http://${NET_ETCD_URL#etcd://}
  out=$(host_exec h1 curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -d @"$WORK/put.json" "$url/v3/kv/put" 2>&1 || true)
  host_exec h1 curl -sS --max-time 20 -d '{"key":"a2V5"}' "$url/v3/kv/range" 2>&1 |
    grep -o '"value":"[^"]*"' | cut -d'"' -f4 >"$WORK/got" || true
  [ "$out" = 200 ] && cmp -s "$WORK/value" "$WORK/got" &&
    pass "TCP through the relay: h1 put and read back 300000 bytes (base64: $(wc -c <"$WORK/value")) at $NET_ETCD_URL (etcd in h2)" ||
    fail "etcd in h2 from h1 through the relay: HTTP $out, read back $(wc -c <"$WORK/got") bytes; relay log: $(cat "$WORK/net_relay_h2.log")"

  # --loss: 30% each way, so a round trip is lost with 1 - 0.7^2 = 51%.
  shape h2 --loss 30
  out=$(pings h1 h2 100 0.01)
  r=$((100 - $(received "$out")))
  [ "$r" -ge 20 ] && [ "$r" -le 80 ] && pass "host_shape h2 --loss 30: $r of 100 pings lost (expected ~51)" ||
    fail "host_shape h2 --loss 30: $out"
  host_heal h2
  out=$(pings h1 h2 100 0.01)
  [ "$(received "$out")" = 100 ] && pass "host_heal h2: 0 of 100 lost" || fail "after heal: $out"

  # One-way: h2 hears everything and answers nothing.
  shape h2 --loss 100 --direction out
  local rx0 rx1
  rx0=$(rx_packets h2)
  out=$(pings h1 h2 10)
  rx1=$(rx_packets h2)
  [ "$(received "$out")" = 0 ] && [ $((rx1 - rx0)) -ge 10 ] &&
    pass "host_shape h2 --loss 100 --direction out: h1 gets 0 of 10 replies, h2's eth0 received $((rx1 - rx0)) frames" ||
    fail "one-way loss: $out; h2 rx $rx0 -> $rx1"
  host_heal h2

  # host_kill: every process in h2 (the sleep and etcd), none elsewhere.
  host_kill h2
  ! _net_alive "$sleeper" && ! _net_alive "$NET_ETCD_PID" && [ -z "$(ip netns pids "$(host_ns h2)")" ] &&
    _net_alive "$bystander" && pass "host_kill h2: its sleep and etcd are gone, h1's sleep runs on" ||
    fail "host_kill h2: h2 holds $(ip netns pids "$(host_ns h2)" | xargs), h1's sleep alive: $(_net_alive "$bystander" && echo yes || echo no)"

  # Misuse is one clear line, not a half-made network.
  out=$(host_shape h2 --loss 150 2>&1) && fail "--loss 150 accepted" || pass "host_shape --loss 150 refused: $out"
  out=$(host_exec h9 true 2>&1) && fail "host_exec h9 ran" || pass "host_exec on an unknown host refused: $out"
  echo "scenario took $((SECONDS - t0)) s"
  finish
}

# abort: set -e ends the test after it has made a network, a relay and a process.
abort() {
  net_setup h1
  host_shape h1 --delay 5
  host_bg h1 "$WORK/sleep.log" sleep 600
  record "$(ip netns pids "$NET_SW") $BG_PID"
  false
  echo "not reached"
}
# hold: the same, then waits to be signalled.
hold() {
  net_setup h1
  host_shape h1 --delay 5
  host_bg h1 "$WORK/sleep.log" sleep 600
  record "$(ip netns pids "$NET_SW") $BG_PID"
  echo "$WORK" >"$NETNS_STATE.work"  # a SIGKILL runs no trap: the parent removes it
  touch "$NETNS_STATE.ready"
  while :; do sleep 0.05; done
}

case "$ROLE" in
  scenario | abort | hold) "$ROLE"; exit ;;
  "") ;;
  *) echo "unknown role '$ROLE' (scenario, abort, hold)" >&2; exit 2 ;;
esac

# --- the driver: each role in a child bash, then what it left ------------------------
# child ROLE: starts the role in a child bash ($CHILD, whose $$ names its namespaces
# elastrain-$CHILD-*), its output in $WORK/ROLE.out and its record in $WORK/ROLE.state.
child() {
  : >"$WORK/$1.state"
  NETNS_STATE=$WORK/$1.state bash "$SELF" "$BIN" "$1" >"$WORK/$1.out" 2>&1 &
  CHILD=$!
  bg_track "$CHILD"
}
# child_wait PID: waits for the child (60 s bound); CHILD_RC is its status. Quiet: bash
# would report a killed child ("Killed") on stderr.
child_wait() {
  { wait_until 60 eval "! _net_alive $1" || echo "child $1 still running after 60 s" >&2; } 2>/dev/null
  CHILD_RC=0
  wait "$1" 2>/dev/null || CHILD_RC=$?
}
# left_behind ROLE PID: child PID's namespaces and recorded processes that are still there.
left_behind() {
  local p left
  left=$(ip netns list | awk '{print $1}' | grep "^elastrain-$2-" | xargs || true)
  for p in $(cat "$WORK/$1.state"); do
    if _net_alive "$p"; then left+=" pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null))"; fi
  done
  echo "$left"
}
# check_clean ROLE PID WHAT: nothing of child PID's left.
check_clean() {
  local left
  left=$(left_behind "$1" "$2")
  [ -z "$left" ] && pass "$3: no namespace and none of its $(wc -w <"$WORK/$1.state") relay and host processes left" ||
    fail "$3: left behind: $left"
}

# The scenario runs beside the other children: two tests at once on the same subnet, and
# the SIGKILL sweep must leave a live test's namespaces alone.
T0=$(now)
child scenario
SCENARIO=$CHILD
# Its first record follows net_setup; a SKIP ends it before.
wait_until 30 eval "[ -s '$WORK/scenario.state' ] || ! _net_alive $SCENARIO" || true
if ! _net_alive "$SCENARIO"; then
  child_wait "$SCENARIO"
  cat "$WORK/scenario.out"
  [ "$CHILD_RC" -ne 77 ] || exit 77
fi

child abort
child_wait "$CHILD"
[ "$CHILD_RC" -eq 1 ] && ! grep -q "not reached" "$WORK/abort.out" && pass "abort: set -e ended the child (exit 1)" ||
  fail "abort: exit $CHILD_RC: $(cat "$WORK/abort.out")"
check_clean abort "$CHILD" "after a set -e abort"

child hold
wait_until 30 test -e "$WORK/hold.state.ready" || fail "hold did not set up: $(cat "$WORK/hold.out")"
kill -TERM "$CHILD"
child_wait "$CHILD"
[ "$CHILD_RC" -eq 143 ] && pass "SIGTERM midway: the child exited 143" || fail "SIGTERM: exit $CHILD_RC: $(cat "$WORK/hold.out")"
check_clean hold "$CHILD" "after SIGTERM midway"

# SIGKILL runs no trap: the namespaces stay until the next net_setup, which removes those
# whose owner is gone (called here directly, while the scenario's owner still runs).
rm -f "$WORK/hold.state.ready"
child hold
wait_until 30 test -e "$WORK/hold.state.ready" || fail "hold did not set up: $(cat "$WORK/hold.out")"
kill -KILL "$CHILD"
child_wait "$CHILD"
[ -n "$(left_behind hold "$CHILD")" ] || fail "SIGKILL: expected leftovers to clean"
_net_reap_stale
check_clean hold "$CHILD" "after SIGKILL and the next net_setup's sweep"
# Its work directory too (lib.sh's EXIT trap did not run): only one of lib.sh's making.
hold_work=$(cat "$WORK/hold.state.work" 2>/dev/null || true)
case "$hold_work" in /tmp/elastrain_it.*) rm -rf "$hold_work" ;; esac

child_wait "$SCENARIO"
sed 's/^/    /' "$WORK/scenario.out"
[ "$CHILD_RC" -eq 0 ] && pass "scenario passed, beside the other children" || fail "scenario exited $CHILD_RC"
check_clean scenario "$SCENARIO" "after the scenario's normal end"

echo "took $(awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
finish

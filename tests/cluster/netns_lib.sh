# shellcheck shell=bash
# Emulated hosts on a real network for multi-host tests (tests/cluster/README.md): one
# Linux network namespace per host, all wired to a bridge in a "switch" namespace of the
# test's own. Source after tests/integration/lib.sh (which sets $BIN, $WORK, bg_track,
# wait_until and an EXIT trap that this file chains into):
#   source "$SRC/tests/cluster/netns_lib.sh"
#   net_setup h1 h2 h3                  # or: SKIP line and exit 77 without root/netns
#   host_bg h1 "$WORK/agent1.log" "$BIN" agent --store "$URL" --address "$(host_ip h1)" ...
#   host_cut h2; host_heal h2; host_shape h3 --delay 50 --loss 5; host_kill h2
# Everything it makes (namespaces, processes in them, relays) goes on every exit path.

[ -z "${_NET_LIB_LOADED:-}" ] || return 0
_NET_LIB_LOADED=1

# host_shape's relay (tests/tools/net_relay.cpp), built beside the binary.
NET_RELAY=${NET_RELAY:-$(dirname "$BIN")/net_relay}
# Every namespace name starts with this, the pid making it unique per test run; the
# addresses live only inside them, so concurrent tests may use the same subnet.
NET_PREFIX=elastrain-$$
NET_SUBNET=10.99.0
NET_SW=""                # the switch namespace, once made
NET_NAMESPACES=()        # every namespace made, the switch first
NET_HOSTS=()             # host names in net_setup's order
declare -A NET_IP=() NET_NS=() NET_PORT=() NET_SHAPED=() NET_RELAY_PID=()

_net_err() { echo "netns_lib.sh: $*" >&2; }
_net_skip() {
  echo "SKIP: $*"
  exit 77
}
# _net_run CMD...: runs CMD; on failure says which command failed and what it printed.
_net_run() {
  local out
  out=$("$@" 2>&1) && return 0
  _net_err "'$*' failed: $out"
  return 1
}
# _net_host H: true (quietly) for a host of net_setup; says so otherwise.
_net_host() {
  [ -n "${1:-}" ] && [ -n "${NET_NS[$1]:-}" ] && return 0
  _net_err "no host '${1:-}' (hosts: ${NET_HOSTS[*]:-none; call net_setup first})"
  return 1
}

# _net_kill_ns NS: SIGKILL every process in NS and wait (5 s bound) until none is left.
# A killed child of this shell is a zombie until reaped; zombies have left the
# namespace, so `ip netns pids` no longer lists them. Bash's "Killed" notices for its
# own jobs would come on stderr meanwhile, so callers run it with 2>/dev/null and report
# its failure themselves.
_net_kill_ns() {
  local pids i
  for ((i = 0; i < 100; i++)); do
    pids=$(ip netns pids "$1" 2>/dev/null) || return 0
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.05
  done
  return 1
}

# Namespaces of an earlier run that was SIGKILLed (no trap ran) are removed when their
# owner pid is gone; another test's, whose owner lives, are left alone.
_net_reap_stale() {
  local ns pid
  while read -r ns _; do
    [[ $ns =~ ^elastrain-([0-9]+)- ]] || continue
    pid=${BASH_REMATCH[1]}
    kill -0 "$pid" 2>/dev/null && continue
    _net_kill_ns "$ns" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
  done < <(ip netns list 2>/dev/null)
}

# net_setup NAME...: the switch namespace ($NET_SW, bridge br0) and one namespace per
# NAME with lo up and eth0 at $NET_SUBNET.(10+i)/24 (h1 of `net_setup h1 h2` gets .11),
# its peer p<i> a port of br0. Hosts reach each other by host_ip; nothing is routed
# outside the switch. Exits 77 with a SKIP line where namespaces cannot be made.
net_setup() {
  [ $# -ge 1 ] || { _net_err "usage: net_setup NAME..."; return 1; }
  [ -z "$NET_SW" ] || { _net_err "net_setup: already set up (${NET_HOSTS[*]})"; return 1; }
  [ "$(id -u)" -eq 0 ] || _net_skip "network namespaces need root (uid $(id -u))"
  [ -e /proc/self/ns/net ] || _net_skip "this kernel has no network namespaces (CONFIG_NET_NS)"
  command -v ip >/dev/null || { _net_err "no ip command (scripts/install_deps.sh --test: iproute2)"; return 1; }
  command -v ethtool >/dev/null || { _net_err "no ethtool (scripts/install_deps.sh --test: ethtool)"; return 1; }
  local h seen=" "
  for h in "$@"; do
    [[ $h =~ ^[A-Za-z0-9_.]{1,32}$ ]] || { _net_err "net_setup: bad host name '$h' (letters, digits, _ and ., at most 32)"; return 1; }
    [ "$h" != sw ] || { _net_err "net_setup: 'sw' is the switch's name"; return 1; }
    [[ $seen != *" $h "* ]] || { _net_err "net_setup: host '$h' named twice"; return 1; }
    seen+="$h "
  done
  [ $# -le 200 ] || { _net_err "net_setup: at most 200 hosts"; return 1; }
  _net_reap_stale

  local out
  out=$(ip netns add "$NET_PREFIX-sw" 2>&1) || _net_skip "cannot create a network namespace: $out"
  NET_SW=$NET_PREFIX-sw
  NET_NAMESPACES+=("$NET_SW")
  # No IPv6 in any namespace: the switch is pure layer 2, and hosts talk IPv4 only, so no
  # autoconfiguration chatter lands in counters or relays.
  _net_no_ipv6 "$NET_SW"
  out=$(ip -n "$NET_SW" link add br0 type bridge 2>&1) || _net_skip "cannot create a bridge (CONFIG_BRIDGE): $out"
  _net_run ip -n "$NET_SW" link set br0 up || return 1

  local i=0 ns ip port
  for h in "$@"; do
    i=$((i + 1))
    ns=$NET_PREFIX-$h ip=$NET_SUBNET.$((10 + i)) port=p$i
    _net_run ip netns add "$ns" || return 1
    NET_NAMESPACES+=("$ns")
    NET_HOSTS+=("$h")
    NET_NS[$h]=$ns NET_IP[$h]=$ip NET_PORT[$h]=$port
    _net_no_ipv6 "$ns"
    # Both ends made in their namespaces at once: nothing appears in the root namespace.
    out=$(ip link add eth0 netns "$ns" type veth peer name "$port" netns "$NET_SW" 2>&1) ||
      { [ $i -eq 1 ] && _net_skip "cannot create a veth pair (CONFIG_VETH): $out"; _net_err "veth for $h: $out"; return 1; }
    _net_run ip -n "$ns" addr add "$ip/24" dev eth0 || return 1
    _net_run ip -n "$ns" link set lo up || return 1
    _net_run ip -n "$ns" link set eth0 up || return 1
    # Whole, checksummed frames of at most the MTU: with veth's default offloads the
    # stack hands over 64 KiB TCP frames with the checksum left undone, which the relay of
    # host_shape cannot send and the receiving host would drop. Off for every host from
    # the start, so a test behaves the same shaped or not.
    _net_run ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off || return 1
    _net_run ip -n "$NET_SW" link set "$port" master br0 up || return 1
  done
}

_net_no_ipv6() {
  # shellcheck disable=SC2016  # $f is the inner shell's
  ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; do
    [ -w "$f" ] && echo 1 >"$f"; done; true' 2>/dev/null || true
}

# host_ip H: H's IPv4 address. host_ns H: its namespace's name (for ip -n, ip netns exec).
host_ip() { _net_host "${1:-}" && echo "${NET_IP[$1]}"; }
host_ns() { _net_host "${1:-}" && echo "${NET_NS[$1]}"; }

# host_exec H CMD...: runs CMD (a program, not a shell function) inside H, in the
# foreground; its status is CMD's.
host_exec() {
  _net_host "${1:-}" || return 1
  local ns=${NET_NS[$1]}
  shift
  ip netns exec "$ns" "$@"
}

# host_bg H LOGFILE CMD...: starts CMD inside H in the background, stdin from /dev/null,
# stdout and stderr to LOGFILE; sets BG_PID (CMD's own pid: `ip netns exec` execs it) and
# tracks it (lib.sh's bg_track). Call it directly, not in $(...), so BG_PID lands here.
host_bg() {
  _net_host "${1:-}" || return 1
  [ $# -ge 3 ] || { _net_err "usage: host_bg H LOGFILE CMD..."; return 1; }
  local ns=${NET_NS[$1]} log=$2
  shift 2
  ip netns exec "$ns" "$@" </dev/null >"$log" 2>&1 &
  BG_PID=$!
  bg_track "$BG_PID"
}

# host_etcd H: a single-member etcd inside H listening on H's address only, port 2379
# (H's namespace is the test's own, so the port is free), data and log in $WORK
# (etcd_H.data, etcd_H.log). Sets NET_ETCD_URL=etcd://IP:2379 and NET_ETCD_PID once it
# serves a linearizable read from inside H (15 s bound); other hosts reach it at that URL
# as far as the network lets them. Needs curl (scripts/install_deps.sh --test).
# shellcheck disable=SC2034  # NET_ETCD_URL and NET_ETCD_PID are for the caller
host_etcd() {
  local ip
  ip=$(host_ip "${1:-}") || return 1
  local h=$1 url=http://$ip:2379 peer=http://$ip:2380 bin=${ETCD_BIN:-/usr/bin/etcd}
  [ -x "$bin" ] || { _net_err "host_etcd: no etcd at $bin (Debian: etcd-server; or set ETCD_BIN)"; return 1; }
  # Short heartbeat and election timeout, as in etcd_lib.sh: it elects itself in ~0.1 s.
  host_bg "$h" "$WORK/etcd_$h.log" "$bin" --name "$h" --data-dir "$WORK/etcd_$h.data" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$h=$peer" \
    --heartbeat-interval 10 --election-timeout 100
  NET_ETCD_PID=$BG_PID  # for the caller, like NET_ETCD_URL
  if ! wait_until 15 _net_etcd_answers "$h" "$url"; then
    _net_err "host_etcd $h: etcd did not answer at $url within 15 s; $WORK/etcd_$h.log ends: $(tail -n 5 "$WORK/etcd_$h.log")"
    return 1
  fi
  NET_ETCD_URL=etcd://$ip:2379
}
_net_etcd_answers() {
  host_exec "$1" curl -sf --max-time 2 -o /dev/null -d '{"key":"AA==","count_only":true}' "$2/v3/kv/range"
}

# host_kill H: SIGKILL every process in H (a host losing power); returns once they are
# gone and, for this shell's children, reaped (kill -0 on them then fails). H keeps its
# address and link: processes started after it run as on a rebooted host.
host_kill() {
  _net_host "${1:-}" || return 1
  local pids p
  pids=$(ip netns pids "${NET_NS[$1]}")
  _net_kill_ns "${NET_NS[$1]}" 2>/dev/null ||
    { _net_err "host_kill $1: processes left after SIGKILL: $(ip netns pids "${NET_NS[$1]}" | xargs)"; return 1; }
  for p in $pids; do wait "$p" 2>/dev/null || true; done
}

# host_cut H: cuts H off both ways: its port on the switch goes down. Its processes keep
# running; H sees its eth0 lose carrier (NO-CARRIER), as when a cable is pulled.
host_cut() {
  _net_host "${1:-}" || return 1
  _net_run ip -n "$NET_SW" link set "${NET_PORT[$1]}" down
}

# host_heal H: undoes host_cut and host_shape: the port back on the bridge directly, up.
host_heal() {
  _net_host "${1:-}" || return 1
  _net_unshape "$1" || return 1
  _net_run ip -n "$NET_SW" link set "${NET_PORT[$1]}" up
}

# host_shape H [--delay MS] [--loss PCT] [--direction in|out|both]: adds MS of one-way
# latency and drops PCT percent of the frames at random, on the frames into H (in), out
# of H (out) or each of both (the default; a round trip through H then takes 2*MS more and
# survives (1-PCT/100)^2 of the time). The other direction is left as it is. Calling it
# again replaces the shaping; host_heal removes it. H's port leaves the bridge for a
# relay in the switch namespace:  eth0 (H) == p<i> <-net_relay-> q<i> == r<i> -- br0.
host_shape() {
  _net_host "${1:-}" || return 1
  local h=$1 delay=0 loss=0 direction=both
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --delay) delay=${2:-} ;;
      --loss) loss=${2:-} ;;
      --direction) direction=${2:-} ;;
      *) _net_err "host_shape: unknown argument '$1' (--delay MS --loss PCT --direction in|out|both)"; return 1 ;;
    esac
    shift 2 || { _net_err "host_shape: $1 needs a value"; return 1; }
  done
  [[ $delay =~ ^[0-9]+(\.[0-9]+)?$ ]] || { _net_err "host_shape: --delay wants milliseconds, got '$delay'"; return 1; }
  if ! [[ $loss =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v l="$loss" 'BEGIN { exit !(l <= 100) }'; then
    _net_err "host_shape: --loss wants a percentage 0..100, got '$loss'"
    return 1
  fi
  case "$direction" in
    in | out | both) ;;
    *) _net_err "host_shape: --direction wants in, out or both, got '$direction'"; return 1 ;;
  esac
  # The relay's a side is H's port, its b side the bridge: a->b is out of H, b->a into H.
  local out_args=(--delay-ms-ab 0 --loss-ab 0) in_args=(--delay-ms-ba 0 --loss-ba 0)
  if [ "$direction" != in ]; then out_args=(--delay-ms-ab "$delay" --loss-ab "$loss"); fi
  if [ "$direction" != out ]; then in_args=(--delay-ms-ba "$delay" --loss-ba "$loss"); fi
  [ -x "$NET_RELAY" ] || { _net_err "host_shape needs net_relay, not found at $NET_RELAY (build tests/tools/net_relay.cpp or set NET_RELAY)"; return 1; }

  local i=${NET_PORT[$h]#p} port=${NET_PORT[$h]}
  if [ -n "${NET_SHAPED[$h]:-}" ]; then
    _net_stop_relay "$h"
  else
    # The relay's pair: r<i> on the bridge, q<i> free for the relay. Frames reach it
    # already whole (net_setup turned the hosts' offloads off), so it needs no ethtool.
    NET_SHAPED[$h]=1
    { _net_run ip -n "$NET_SW" link add "r$i" type veth peer name "q$i" &&
      _net_run ip -n "$NET_SW" link set "r$i" master br0 up &&
      _net_run ip -n "$NET_SW" link set "q$i" up &&
      _net_run ip -n "$NET_SW" link set "$port" nomaster; } || { _net_unshape "$h"; return 1; }
  fi
  # Ready once it prints its "relaying" line (both sockets bound); the log is appended to,
  # so one line more than before. A failed start leaves a line naming the interface there.
  local log=$WORK/net_relay_$h.log before k
  touch "$log"
  before=$(grep -c relaying "$log" || true)
  ip netns exec "$NET_SW" "$NET_RELAY" --a "$port" --b "q$i" "${out_args[@]}" "${in_args[@]}" \
    ${NET_RELAY_SEED:+--seed "$NET_RELAY_SEED"} </dev/null >>"$log" 2>&1 &
  NET_RELAY_PID[$h]=$!
  for ((k = 0; k < 200; k++)); do
    [ "$(grep -c relaying "$log" || true)" -gt "$before" ] && return 0
    _net_alive "${NET_RELAY_PID[$h]}" || break
    sleep 0.05
  done
  _net_err "host_shape $h: net_relay did not start; $log ends: $(tail -n 5 "$log")"
  _net_unshape "$h"  # back to the direct path rather than left cut off
  return 1
}

# _net_alive PID: PID runs (a child that exited is a zombie until reaped, and kill -0
# still succeeds on it: the state in /proc tells).
_net_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# _net_stop_relay H: stops H's relay (SIGTERM so it logs its counts; SIGKILL after 5 s).
_net_stop_relay() {
  local pid=${NET_RELAY_PID[$1]:-} i
  [ -n "$pid" ] || return 0
  NET_RELAY_PID[$1]=""
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    _net_alive "$pid" || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# _net_unshape H: the relay stopped, its pair gone, H's port back on the bridge.
_net_unshape() {
  local i=${NET_PORT[$1]#p}
  [ -n "${NET_SHAPED[$1]:-}" ] || return 0
  _net_stop_relay "$1"
  if ip -n "$NET_SW" link show "r$i" >/dev/null 2>&1; then
    _net_run ip -n "$NET_SW" link del "r$i" || return 1  # takes q<i> with it
  fi
  _net_run ip -n "$NET_SW" link set "${NET_PORT[$1]}" master br0 || return 1
  NET_SHAPED[$1]=""
}

# net_teardown: kills every process in the namespaces (relays included) and deletes the
# namespaces. Idempotent; the EXIT trap calls it on every exit path.
net_teardown() {
  local - ns h
  set +e
  for h in "${!NET_RELAY_PID[@]}"; do _net_stop_relay "$h"; done
  for ns in "${NET_NAMESPACES[@]}"; do
    _net_kill_ns "$ns" 2>/dev/null || _net_err "processes left in namespace $ns after SIGKILL: $(ip netns pids "$ns" | xargs)"
  done
  for ns in "${NET_NAMESPACES[@]}"; do
    ip netns del "$ns" 2>/dev/null || _net_err "could not delete namespace $ns"
  done
  NET_NAMESPACES=() NET_HOSTS=() NET_SW=""
  NET_IP=() NET_NS=() NET_PORT=() NET_SHAPED=() NET_RELAY_PID=()
}

# Chain net_teardown in front of the EXIT trap already set (lib.sh's, perhaps etcd_lib's):
# `trap -p` prints the old handler shell-quoted; `set --` unquotes it.
_NET_PREV_EXIT_TRAP=$(trap -p EXIT)
_net_on_exit() {
  net_teardown
  if [ -n "$_NET_PREV_EXIT_TRAP" ]; then
    eval "set -- ${_NET_PREV_EXIT_TRAP#trap -- }"
    eval "$1"
  fi
}
trap _net_on_exit EXIT
# A test interrupted or terminated exits through the EXIT trap too (bash skips it on a
# fatal signal otherwise). Bash runs the trap once its foreground command returns.
trap 'exit 130' INT
trap 'exit 143' TERM

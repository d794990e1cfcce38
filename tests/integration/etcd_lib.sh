# etcd for integration tests. Source after lib.sh (which sets WORK and an EXIT trap):
#   source "$SRC/tests/integration/etcd_lib.sh"
#   start_etcd              # exports ETCD_URL=etcd://127.0.0.1:PORT, ETCD_PORT, ETCD_PID
#   ... "$BIN" ... --store "$ETCD_URL" ...
#   stop_etcd               # optional: the EXIT trap stops it too
# Call start_etcd directly, not in $(...): ETCD_PID must land in the test's own shell.
# Needs only bash (readiness is probed over /dev/tcp; curl and etcdctl may be missing).

ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
ETCD_PID=${ETCD_PID:-}

# _etcd_answers PORT: true once etcd serves a linearizable read on PORT (so it has
# elected itself leader), not merely once the port accepts connections.
_etcd_answers() {
  local port=$1
  (
    body='{"key":"AA==","count_only":true}'
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    printf 'POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
      "${#body}" "$body" >&3
    IFS= read -r -t 2 status <&3 || exit 1
    [[ $status == "HTTP/1.1 200"* ]]
  ) 2>/dev/null
}

# _port_in_use PORT: something on loopback accepts connections there.
_port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

_random_port() {
  local port
  while :; do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    _port_in_use "$port" || { echo "$port"; return; }
  done
}

# start_etcd: a single-member etcd on 127.0.0.1 with its data in $WORK/etcd.data and its
# log in $WORK/etcd.log; returns once it answers (15 s bound). A port taken between the
# pick and etcd's bind is retried with fresh ports (5 tries).
start_etcd() {
  if [ ! -x "$ETCD_BIN" ]; then
    echo "etcd_lib.sh: etcd is not installed: expected an executable at $ETCD_BIN (Debian: apt-get install etcd-server; or set ETCD_BIN)" >&2
    return 1
  fi
  if [ -n "$ETCD_PID" ]; then
    echo "etcd_lib.sh: start_etcd: etcd already running (pid $ETCD_PID, $ETCD_URL)" >&2
    return 1
  fi
  local attempt client peer i
  for attempt in 1 2 3 4 5; do
    client=$(_random_port)
    peer=$(_random_port)
    [ "$client" != "$peer" ] || continue
    rm -rf "$WORK/etcd.data"
    # Short heartbeat and election timeout: a single member elects itself in ~0.1 s, and
    # the minimum lease TTL (1.5 election timeouts, rounded up to seconds) drops from 2 s to 1 s.
    "$ETCD_BIN" --name it --data-dir "$WORK/etcd.data" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "it=http://127.0.0.1:$peer" \
      --heartbeat-interval 10 --election-timeout 100 \
      </dev/null >"$WORK/etcd.log" 2>&1 &
    ETCD_PID=$!
    for ((i = 0; i < 150; i++)); do
      if ! kill -0 "$ETCD_PID" 2>/dev/null; then
        wait "$ETCD_PID" 2>/dev/null || true
        ETCD_PID=
        break
      fi
      if _etcd_answers "$client"; then
        ETCD_PORT=$client
        ETCD_URL="etcd://127.0.0.1:$client"
        export ETCD_URL ETCD_PORT ETCD_PID
        echo "etcd_lib.sh: etcd $ETCD_URL (pid $ETCD_PID) ready after ~$((i * 100)) ms"
        return 0
      fi
      sleep 0.1
    done
    if [ -n "$ETCD_PID" ]; then  # alive but silent for 15 s: not a port clash
      stop_etcd
      echo "etcd_lib.sh: etcd on port $client did not answer within 15 s; $WORK/etcd.log ends:" >&2
      tail -n 20 "$WORK/etcd.log" >&2
      return 1
    fi
    grep -q "address already in use" "$WORK/etcd.log" || break
  done
  echo "etcd_lib.sh: etcd exited at startup (attempt $attempt); $WORK/etcd.log ends:" >&2
  tail -n 20 "$WORK/etcd.log" >&2
  return 1
}

# stop_etcd: SIGTERM, then SIGKILL after 5 s; safe to call twice or when none runs.
stop_etcd() {
  [ -n "${ETCD_PID:-}" ] || return 0
  local pid=$ETCD_PID i
  ETCD_PID=
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# Chain stop_etcd in front of the EXIT trap already set (lib.sh's rm -rf "$WORK"), so
# etcd never outlives the test and its data dir goes with $WORK. `trap -p` prints the
# old handler shell-quoted; `set --` unquotes it.
_ETCD_PREV_EXIT_TRAP=$(trap -p EXIT)
_etcd_on_exit() {
  stop_etcd || true
  if [ -n "$_ETCD_PREV_EXIT_TRAP" ]; then
    eval "set -- ${_ETCD_PREV_EXIT_TRAP#trap -- }"
    eval "$1"
  fi
}
trap _etcd_on_exit EXIT

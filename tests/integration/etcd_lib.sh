# etcd for integration tests. Source after lib.sh (which sets WORK and an EXIT trap):
#   source "$SRC/tests/integration/etcd_lib.sh"
#   start_etcd              # exports ETCD_URL=etcd://127.0.0.1:PORT, ETCD_PORT, ETCD_PID
#   ... "$BIN" ... --store "$ETCD_URL" ...
#   stop_etcd               # optional: the EXIT trap stops it too
# or, over TLS with client certificates and etcd's user/role authentication:
#   start_etcd_tls CERT_DIR [TOKEN_TTL]
#                           # CERT_DIR from scripts/make_certs.sh; exports ETCD_URL=etcds://...
#                           # and ETCD_CERTS, ETCD_USER (elastrain), ETCD_PASSWORD_FILE,
#                           # ETCD_ROOT_PASSWORD_FILE
# Call start_etcd directly, not in $(...): ETCD_PID must land in the test's own shell.
# start_etcd needs only bash (readiness is probed over /dev/tcp; curl and etcdctl may be
# missing); start_etcd_tls needs curl.

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
start_etcd() { _launch_etcd http _etcd_answers; }

# _etcd_tls_curl ARGS...: curl to the TLS etcd with the test CA and the CN-less client
# certificate (etcd's gateway refuses one with a Common Name once auth is on).
_etcd_tls_curl() {
  curl -sS --max-time 5 --cacert "$ETCD_CERTS/ca.crt" --cert "$ETCD_CERTS/etcd-client.crt" \
    --key "$ETCD_CERTS/etcd-client.key" "$@"
}
_etcd_tls_answers() {
  _etcd_tls_curl -o /dev/null -w '%{http_code}' "https://127.0.0.1:$1/v3/kv/range" \
    -d '{"key":"AA==","count_only":true}' 2>/dev/null | grep -q '^200$'
}
# etcd_tls_call PATH JSON [TOKEN]: POSTs JSON (which may hold a password: it goes through
# stdin, not curl's argv) to the TLS etcd, with TOKEN as its auth token; prints the answer;
# fails unless it is HTTP 200.
etcd_tls_call() {
  local out headers=()
  [ -z "${3:-}" ] || headers=(-H "Authorization: $3")
  out=$(printf '%s' "$2" | _etcd_tls_curl -w '\nHTTP %{http_code}' "${headers[@]}" \
    "https://127.0.0.1:$ETCD_PORT$1" --data-binary @-) || true
  [[ $out == *$'\nHTTP 200' ]] || { echo "etcd_lib.sh: POST $1: $out" >&2; return 1; }
  printf '%s\n' "${out%$'\n'HTTP 200}"
}
# etcd_tls_token USER PASSWORD_FILE: prints a token for USER.
etcd_tls_token() {
  etcd_tls_call /v3/auth/authenticate "{\"name\":\"$1\",\"password\":\"$(cat "$2")\"}" |
    grep -o '"token":"[^"]*"' | cut -d'"' -f4
}
# _etcd_tls_auth PATH JSON: one call of etcd's auth API before auth is enabled.
_etcd_tls_auth() { etcd_tls_call "$1" "$2" >/dev/null; }

# start_etcd_tls CERT_DIR: as start_etcd, but https only (client and peer), with
# --client-cert-auth against CERT_DIR/ca.crt, and etcd's authentication enabled with
# users root (role root) and elastrain (role elastrain: readwrite on the key prefix
# "elastrain/" and nothing else), each with a random password in a 0600 file under
# $WORK. TOKEN_TTL (seconds, default etcd's 300) is how long a token lives unused, to
# exercise re-authentication. (Not an ETCD_* variable: etcd reads those as its flags.)
start_etcd_tls() {
  ETCD_CERTS=$(readlink -f "${1:?usage: start_etcd_tls CERT_DIR}")
  command -v curl >/dev/null || { echo "etcd_lib.sh: start_etcd_tls needs curl" >&2; return 1; }
  _launch_etcd https _etcd_tls_answers \
    --cert-file "$ETCD_CERTS/server.crt" --key-file "$ETCD_CERTS/server.key" \
    --trusted-ca-file "$ETCD_CERTS/ca.crt" --client-cert-auth \
    --peer-cert-file "$ETCD_CERTS/server.crt" --peer-key-file "$ETCD_CERTS/server.key" \
    --peer-trusted-ca-file "$ETCD_CERTS/ca.crt" --peer-client-cert-auth \
    --auth-token simple --auth-token-ttl "${2:-300}" || return 1
  ETCD_URL="etcds://127.0.0.1:$ETCD_PORT"
  ETCD_USER=elastrain
  ETCD_PASSWORD_FILE=$WORK/etcd-elastrain.password
  ETCD_ROOT_PASSWORD_FILE=$WORK/etcd-root.password
  (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$ETCD_PASSWORD_FILE"
   od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$ETCD_ROOT_PASSWORD_FILE")
  local root_pw el_pw
  root_pw=$(cat "$ETCD_ROOT_PASSWORD_FILE")
  el_pw=$(cat "$ETCD_PASSWORD_FILE")
  # base64("elastrain/") and base64("elastrain0"): the prefix and its range end.
  _etcd_tls_auth /v3/auth/user/add "{\"name\":\"root\",\"password\":\"$root_pw\"}" &&
    _etcd_tls_auth /v3/auth/user/grant "{\"user\":\"root\",\"role\":\"root\"}" &&
    _etcd_tls_auth /v3/auth/user/add "{\"name\":\"elastrain\",\"password\":\"$el_pw\"}" &&
    _etcd_tls_auth /v3/auth/role/add '{"name":"elastrain"}' &&
    _etcd_tls_auth /v3/auth/role/grant \
      '{"name":"elastrain","perm":{"permType":"READWRITE","key":"ZWxhc3RyYWluLw==","range_end":"ZWxhc3RyYWluMA=="}}' &&
    _etcd_tls_auth /v3/auth/user/grant '{"user":"elastrain","role":"elastrain"}' &&
    _etcd_tls_auth /v3/auth/enable '{}' || { stop_etcd; return 1; }
  export ETCD_URL ETCD_CERTS ETCD_USER ETCD_PASSWORD_FILE ETCD_ROOT_PASSWORD_FILE
  echo "etcd_lib.sh: etcd $ETCD_URL with client-cert-auth and auth enabled (users root, elastrain)"
}

# _launch_etcd SCHEME PROBE [ETCD_ARGS...]: start_etcd's loop; PROBE PORT says it answers.
_launch_etcd() {
  local scheme=$1 probe=$2
  shift 2
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
      --listen-client-urls "$scheme://127.0.0.1:$client" --advertise-client-urls "$scheme://127.0.0.1:$client" \
      --listen-peer-urls "$scheme://127.0.0.1:$peer" --initial-advertise-peer-urls "$scheme://127.0.0.1:$peer" \
      --initial-cluster "it=$scheme://127.0.0.1:$peer" \
      --heartbeat-interval 10 --election-timeout 100 "$@" \
      </dev/null >"$WORK/etcd.log" 2>&1 &
    ETCD_PID=$!
    for ((i = 0; i < 150; i++)); do
      if ! kill -0 "$ETCD_PID" 2>/dev/null; then
        wait "$ETCD_PID" 2>/dev/null || true
        ETCD_PID=
        break
      fi
      if "$probe" "$client"; then
        ETCD_PORT=$client
        if [ "$scheme" = https ]; then ETCD_URL="etcds://127.0.0.1:$client"; else ETCD_URL="etcd://127.0.0.1:$client"; fi
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
# A test interrupted or terminated exits through the EXIT trap too (bash skips it on a
# fatal signal otherwise), so etcd never outlives it.
trap 'exit 130' INT
trap 'exit 143' TERM

# Issue 14, point 2: cluster mode over etcds:// against an etcd that serves only
# HTTPS, demands client certificates (--client-cert-auth) and has its authentication on
# (users root and elastrain; role elastrain may read and write the prefix "elastrain/" and
# nothing else). A head and two agents of one slot each run a tiny job to SUCCEEDED: the
# head and agent h1 take their credentials from flags, agent h2 from ELASTRAIN_ETCD_*,
# and every worker from the environment its agent gives it; the head serves its API over
# HTTPS and refuses clients without its token. Then the refusals: no client
# certificate, a wrong password, plain etcd:// to the TLS port, an untrusted CA, a client
# certificate with a Common Name, a key file others can read, credentials over etcd://.
# Tokens live 2 s unused here, so expired tokens are met and renewed along the way.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
bash "$SRC/scripts/make_certs.sh" "$WORK/certs" >/dev/null
start_etcd_tls "$WORK/certs" 2
C=$ETCD_CERTS
# creds [CA CERT KEY PASSWORD_FILE]: the store flags, each defaulting to the good one.
creds() {
  CREDS=(--store-ca "${1:-$C/ca.crt}" --store-cert "${2:-$C/etcd-client.crt}" --store-key "${3:-$C/etcd-client.key}"
         --store-user "$ETCD_USER" --store-password-file "${4:-$ETCD_PASSWORD_FILE}")
}
creds
PASSWORD=$(cat "$ETCD_PASSWORD_FILE")

# The head's API, in one place: submit and status, over HTTPS against the test CA (the
# token is the head's own, ~/.elastrain/head_token in this test's HOME). 300 s bounds a hang.
api() {
  local cmd=$1
  shift
  timeout 300 "$BIN" "$cmd" --head "$HEAD" --ca-cert "$C/ca.crt" "$@"
}

# --- refusals -------------------------------------------------------------------------
rc=0
out=$(curl -sS --max-time 5 --cacert "$C/ca.crt" "https://127.0.0.1:$ETCD_PORT/v3/kv/range" \
  -d '{"key":"AA=="}' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && pass "etcd refuses curl without a client certificate (curl exit $rc): $out" \
  || fail "curl without a client certificate got an answer: $out"
out=$(_etcd_tls_curl "https://127.0.0.1:$ETCD_PORT/v3/kv/range" -d '{"key":"ZWxhc3RyYWluL3g="}' 2>&1 || true)
grep -q "user name is empty" <<<"$out" && pass "a client certificate alone reads nothing: $out" \
  || fail "a request without a token: $out"

expect_error "head without a client certificate" "etcds://127.0.0.1:$ETCD_PORT.*client certificate.*--store-cert" -- \
  head --port 0 --store "$ETCD_URL" --store-ca "$C/ca.crt" --store-user "$ETCD_USER" \
  --store-password-file "$ETCD_PASSWORD_FILE"
printf 'not-the-password\n' >"$WORK/wrong.password"
chmod 600 "$WORK/wrong.password"
creds "" "" "" "$WORK/wrong.password"
expect_error "wrong password" "authenticate as etcd user 'elastrain'.*authentication failed" -- \
  head --port 0 --store "$ETCD_URL" "${CREDS[@]}"
expect_error "plain etcd:// to the TLS port" "etcd://127.0.0.1:$ETCD_PORT.*use etcds://" -- \
  head --port 0 --store "etcd://127.0.0.1:$ETCD_PORT"
creds "$C/other-ca.crt"
expect_error "untrusted CA" "etcds://127.0.0.1:$ETCD_PORT.*certificate failed verification" -- \
  head --port 0 --store "$ETCD_URL" "${CREDS[@]}"
creds "" "$C/client.crt" "$C/client.key"
expect_error "client certificate with a Common Name" "without a Common Name" -- \
  head --port 0 --store "$ETCD_URL" "${CREDS[@]}"
cp "$C/etcd-client.key" "$WORK/open.key"
chmod 644 "$WORK/open.key"
creds "" "" "$WORK/open.key"
expect_error "key file readable by others" "--store-key or ELASTRAIN_ETCD_KEY '$WORK/open.key' is readable by group or others \(mode 0644\)" -- \
  head --port 0 --store "$ETCD_URL" "${CREDS[@]}"
creds
# A user without the elastrain role: authenticated, but its reads are refused.
(umask 077; printf 'narrow-password\n' >"$WORK/narrow.password")
root_token=$(etcd_tls_token root "$ETCD_ROOT_PASSWORD_FILE")
etcd_tls_call /v3/auth/user/add '{"name":"narrow","password":"narrow-password"}' "$root_token" >/dev/null \
  || fail "cannot add user narrow"
expect_error "a user without the role" "permission denied.*etcd user 'narrow' needs a role with readwrite on the prefix 'elastrain/'" -- \
  head --port 0 --store "$ETCD_URL" "${CREDS[@]:0:6}" --store-user narrow --store-password-file "$WORK/narrow.password"
# A name of this host that resolves to loopback but is not in the certificate (make_certs
# names localhost and 127.0.0.1): the certificate is valid, but not for that host.
other_name=$(hostname)
if [ "$other_name" != localhost ] && getent hosts "$other_name" | grep -q '^127\.0\.0\.1 '; then
  expect_error "certificate not valid for the host" "etcds://$other_name:$ETCD_PORT.*not valid for host '$other_name'" -- \
    head --port 0 --store "etcds://$other_name:$ETCD_PORT" "${CREDS[@]}"
else
  echo "skip - host name check: $other_name does not resolve to 127.0.0.1"
fi
expect_error "credentials over plain etcd://" "plain HTTP.*use etcds://" -- \
  head --port 0 --store "etcd://127.0.0.1:$ETCD_PORT" "${CREDS[@]}"

# --- a job --------------------------------------------------------------------------
# A port that serves plain HTTP (a throwaway head's API): etcds:// there fails the handshake.
"$BIN" head --store memory:// --port 0 --token-file "$WORK/plain/head_token" >"$WORK/plain.log" 2>&1 &
bg_track $!
plain_url() { PLAIN=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/plain.log" | head -1 || true); [ -n "$PLAIN" ]; }
wait_until 60 plain_url || fail "the plain head did not start: $(cat "$WORK/plain.log")"
expect_error "etcds:// to a plain HTTP port" "TLS handshake .* failed.*wants etcd://" -- \
  head --port 0 --store "etcds://${PLAIN#http://}" "${CREDS[@]}"

# The head: etcd over TLS with a client certificate and a user, its API over HTTPS.
"$BIN" head --store "$ETCD_URL" "${CREDS[@]}" --port 0 --tls-cert "$C/server.crt" --tls-key "$C/server.key" \
  >"$WORK/head.log" 2>&1 &
HEAD_PID=$!
bg_track $HEAD_PID
head_url() { HEAD=$(grep -o 'https://127.0.0.1:[0-9]*' "$WORK/head.log" | head -1 || true); [ -n "$HEAD" ]; }
wait_until 60 head_url && pass "head up over $ETCD_URL: $(head -1 "$WORK/head.log")" \
  || fail "head did not start: $(cat "$WORK/head.log")"
# The head refuses a client without its token, and a client without the CA refuses the head.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$C/ca.crt" "$HEAD/api/v1/job" || true)
[ "$code" = 401 ] && pass "the head answers 401 to a request without a token" || fail "no token: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$C/ca.crt" -X POST -H 'Content-Type: application/json' \
  -d '{"config_yaml":"model_name: tiny"}' "$HEAD/api/v1/jobs" || true)
[ "$code" = 401 ] && pass "POST /api/v1/jobs without a token: 401" || fail "submit without a token: HTTP $code"
expect_error "status without the CA" "certificate" -- status --head "$HEAD"
head_pub_ready
"$BIN" agent --store "$ETCD_URL" "${CREDS[@]}" --slots 1 --id h1 --host-name h1 --head-public-key "$HEAD_PUB" \
  >"$WORK/h1.log" 2>&1 &
bg_track $!
ELASTRAIN_ETCD_CA="$C/ca.crt" ELASTRAIN_ETCD_CERT="$C/etcd-client.crt" ELASTRAIN_ETCD_KEY="$C/etcd-client.key" \
  ELASTRAIN_ETCD_USER="$ETCD_USER" ELASTRAIN_ETCD_PASSWORD_FILE="$ETCD_PASSWORD_FILE" \
  "$BIN" agent --store "$ETCD_URL" --slots 1 --id h2 --host-name h2 --head-public-key "$HEAD_PUB" >"$WORK/h2.log" 2>&1 &
bg_track $!
# The head is frozen for longer than a token lives (2 s unused), so its token expires;
# etcd logs the refused token, and the head must go on with a fresh one.
kill -STOP "$HEAD_PID"
sleep 4
kill -CONT "$HEAD_PID"
expired() { grep -q "invalid auth token" "$WORK/etcd.log"; }
wait_until 30 expired && pass "a token expired: $(grep -m1 -o 'invalid auth token' "$WORK/etcd.log")" \
  || fail "no token expired within 30 s"

rc=0
out=$(api submit --wait model_name=tiny num_workers=2 threads_per_worker=1 steps=12 \
  log_period=1 eval_interval=0 checkpoint_period=6 resource_wait_timeout=120 \
  base_output_directory="$WORK/runs" run_name=tls 2>&1) || rc=$?
[ "$rc" -eq 0 ] && grep -q SUCCEEDED <<<"$out" && pass "job SUCCEEDED over etcds://: $(tail -1 <<<"$out")" \
  || fail "submit exit $rc: $out; head: $(tail -5 "$WORK/head.log"); h1: $(tail -5 "$WORK/h1.log"); h2: $(tail -5 "$WORK/h2.log")"
run=$WORK/runs/tls
hosts=$("$JQ" --jsonl "$run/events.jsonl" event=generation_started members 2>/dev/null | grep -o '"h[12]"' | sort -u | tr '\n' ' ' || true)
[ "$(last_step "$run")" -eq 12 ] && pass "12 steps, 2 workers on hosts $hosts(rendezvous in etcd over TLS)" \
  || fail "last step $(last_step "$run"), hosts $hosts"
[ "$(api status --json | "$JQ" state)" = SUCCEEDED ] && pass "status: SUCCEEDED" || fail "status: $(api status 2>&1)"

# The password went nowhere but its file: not on a command line, not in a log.
leaks=$(grep -rl -F -- "$PASSWORD" "$WORK"/*.log "$run" 2>/dev/null || true)
[ -z "$leaks" ] && pass "the password is in no log" || fail "the password is in: $leaks"
finish

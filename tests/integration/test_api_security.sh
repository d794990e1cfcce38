# Issue 14: the control API's authentication and request hygiene, with curl against an
# `elastrain head --store memory://` (no etcd, no workers):
#  - every route needs the bearer token (POST /jobs too: nothing is created without it),
#    but the page `/` and, only when turned on, /metrics; a 401 names the token file;
#  - a Host header that does not name the server is refused (DNS rebinding);
#  - POSTs: text/plain is 415, a 2 MB body 413 before it is read (the RSS stays), a POST
#    without body or Content-Length (curl -X POST) is an empty body, chunked is 411;
#  - a run's pre-existing token file of mode 0644, or a symlink, stops `elastrain train`
#    naming the file, and the file is left as it was;
#  - the CLI sends a token only to the URL recorded beside it: a --head elsewhere is
#    refused before anything is sent (a capturing fake server sees no request);
#    --token on the command line is refused;
#  - HTTPS (scripts/make_certs.sh), a head and an embedded run: status with --ca-cert
#    works, without the CA it fails with a certificate error, plain http to it fails.
source "$(dirname "$0")/lib.sh"
# (lib.sh gives the test its own HOME, where the default token and head_url live.)
CAPTURE="$TOOLS/tcp_capture"

# start_head NAME ARGS...: an `elastrain head` on a free port; sets PID_<NAME>.
start_head() {
  local name=$1
  shift
  "$BIN" head --store memory:// --port 0 "$@" >"$WORK/$name.log" 2>&1 &
  bg_track $!
  eval "PID_$name=$!"
  wait_until 30 grep -q '^dashboard: ' "$WORK/$name.log" || { fail "head $name did not start: $(cat "$WORK/$name.log")"; finish; exit 1; }
}
# code CURL_ARGS...: the HTTP status, and curl's exit code when it failed ("000 (curl exit 55)").
code() {
  local rc=0
  : >"$WORK/body"
  curl -s -m 10 -o "$WORK/body" -w '%{http_code}' "$@" || rc=$?
  [ "$rc" -eq 0 ] || printf ' (curl exit %s)' "$rc"
}
expect_code() {  # NAME WANT CURL_ARGS...
  local name=$1 want=$2
  shift 2
  local got
  got=$(code "$@")
  [ "$got" = "$want" ] && pass "$name: $got $(head -c 160 "$WORK/body")" || fail "$name: HTTP $got, expected $want: $(head -c 300 "$WORK/body")"
}

# --- the default head: ~/.elastrain/head_token and head_url ----------------------------
start_head main
TOKEN_FILE="$HOME/.elastrain/head_token"
URL=$(cat "$HOME/.elastrain/head_url")
TOKEN=$(cat "$TOKEN_FILE")
PORT=${URL##*:}
[ "$(stat -c %a "$HOME/.elastrain")" = 700 ] && [ "$(stat -c %a "$TOKEN_FILE")" = 600 ] \
  && grep -qE '^[0-9a-f]{64}$' "$TOKEN_FILE" && pass "head token created: dir 0700, file 0600, 64 hex digits; URL $URL" \
  || fail "head token: $(stat -c '%a %n' "$HOME/.elastrain" "$TOKEN_FILE")"
[ "$(stat -c %a "$HOME/.elastrain/head_url")" = 600 ] && pass "head_url is 0600 (issue 34)" \
  || fail "head_url: $(stat -c '%a %n' "$HOME/.elastrain/head_url")"
grep -qF "dashboard: $URL/ (token in $TOKEN_FILE, never printed" "$WORK/main.log" && ! grep -qF "$TOKEN" "$WORK/main.log" \
  && pass "the printed dashboard line names the token file, not the token: $(grep -m1 '^dashboard: ' "$WORK/main.log")" \
  || fail "dashboard line: $(grep dashboard "$WORK/main.log")"
AUTH=(-H "Authorization: Bearer $TOKEN")
JSON=(-H 'Content-Type: application/json')
job_yaml() { printf '{"config_yaml": "model_name: tiny\\nsteps: 5\\nnum_workers: 1\\nbase_output_directory: %s\\nrun_name: %s\\n"}' "$WORK/runs" "$1"; }

# --- authentication ---------------------------------------------------------------------
expect_code "POST /api/v1/jobs without a token" 401 -X POST "${JSON[@]}" -d "$(job_yaml sneaky)" "$URL/api/v1/jobs"
grep -q "Bearer <the token in $TOKEN_FILE>" "$WORK/body" && ! grep -q "$TOKEN" "$WORK/body" \
  && pass "the 401 names the token file, not the token" || fail "401 body: $(cat "$WORK/body")"
sleep 0.5
[ ! -e "$WORK/runs/sneaky" ] && [ -z "$(curl -s -m 10 "${AUTH[@]}" "$URL/api/v1/job" | grep sneaky)" ] \
  && pass "no run directory and no job after the refused submit" || fail "the refused submit left $WORK/runs/sneaky or a job"
grep -q "api: refused POST /api/v1/jobs from 127.0.0.1: HTTP 401" "$WORK/main.log" \
  && pass "the head logs the refusal: $(grep -m1 -o 'api: refused.*' "$WORK/main.log")" \
  || fail "no refusal in the head's log: $(tail -3 "$WORK/main.log")"
expect_code "POST /api/v1/jobs with a wrong token" 401 -X POST "${JSON[@]}" -H "Authorization: Bearer $(tr 0-9a-f 1-9a-f0 <<<"$TOKEN")" \
  -d "$(job_yaml sneaky)" "$URL/api/v1/jobs"
for route in job events dashboard checkpoints goodput; do
  expect_code "GET /api/v1/$route without a token" 401 "$URL/api/v1/$route"
done
expect_code "GET /metrics without a token" 401 "$URL/metrics"
expect_code "GET /metrics with the token" 200 "${AUTH[@]}" "$URL/metrics"
expect_code "POST /api/v1/stop without a token" 401 -X POST "${JSON[@]}" -d '{}' "$URL/api/v1/stop"
expect_code "POST /api/v1/chaos without a token" 401 -X POST "${JSON[@]}" -d '{"action":"kill","rank":0}' "$URL/api/v1/chaos"
expect_code "GET / (the page, no data) without a token" 200 "$URL/"
grep -q 'elastrain_token' "$WORK/body" && ! grep -q "$TOKEN" "$WORK/body" && pass "the page reads the token from its fragment and holds none" \
  || fail "the page does not handle #token="
[ -z "$(curl -s -m 10 -D - -o /dev/null "$URL/" | grep -i '^access-control')" ] && pass "no CORS headers" || fail "CORS headers sent"

# --- request hygiene ----------------------------------------------------------------------
expect_code "a Host that names another server" 421 "${AUTH[@]}" -H "Host: evil.example:$PORT" "$URL/api/v1/job"
expect_code "the page under another Host" 421 -H "Host: evil.example:$PORT" "$URL/"
expect_code "Host localhost:$PORT on a loopback bind" 404 "${AUTH[@]}" -H "Host: localhost:$PORT" "$URL/api/v1/job"
expect_code "a text/plain POST with the token" 415 -X POST "${AUTH[@]}" -H 'Content-Type: text/plain' -d '{}' "$URL/api/v1/stop"
expect_code "a form POST with the token" 415 -X POST "${AUTH[@]}" -d "config_yaml=x" "$URL/api/v1/jobs"
expect_code "a chunked POST" 411 -X POST "${AUTH[@]}" "${JSON[@]}" -H 'Transfer-Encoding: chunked' -d '{}' "$URL/api/v1/stop"
expect_code "a wrong JSON type in /jobs" 400 -X POST "${AUTH[@]}" "${JSON[@]}" -d '{"config_yaml": 7}' "$URL/api/v1/jobs"
grep -q 'config_yaml' "$WORK/body" && pass "the 400 names the field" || fail "400 body: $(cat "$WORK/body")"
head -c 2000000 /dev/zero | tr '\0' ' ' >"$WORK/big.json"
head -c 64000000 /dev/zero | tr '\0' ' ' >"$WORK/huge.json"
rss_before=$(ps -o rss= -p "$PID_main")
expect_code "a 2 MB body" 413 -X POST "${AUTH[@]}" "${JSON[@]}" --data-binary @"$WORK/big.json" "$URL/api/v1/jobs"
# Sent at once, the body is read and discarded before the 413: a server that closed with
# it unread reset about 2 connections in 100 before curl read the answer (curl exit 55).
resets=""
for i in $(seq 30); do
  got=$(code -X POST "${AUTH[@]}" "${JSON[@]}" -H 'Expect:' --data-binary @"$WORK/big.json" "$URL/api/v1/jobs")
  [ "$got" = 413 ] || resets="$resets try $i: $got;"
done
[ -z "$resets" ] && pass "a 2 MB body without 'Expect: 100-continue', 30 times: 413 each time, $(head -c 160 "$WORK/body")" \
  || fail "a 2 MB body without 'Expect: 100-continue':$resets"
code -X POST "${JSON[@]}" -H 'Expect:' --data-binary @"$WORK/huge.json" "$URL/api/v1/jobs" >/dev/null || true
rss_after=$(ps -o rss= -p "$PID_main")
[ $((rss_after - rss_before)) -lt 4096 ] && pass "the head's RSS stayed ($rss_before -> $rss_after KiB after 2 MB and 64 MB bodies)" \
  || fail "RSS jumped: $rss_before -> $rss_after KiB"
expect_code "a POST without body or Content-Length (curl -X POST) on /stop, no job yet" 404 -X POST "${AUTH[@]}" "$URL/api/v1/stop"
grep -q 'no job has been submitted' "$WORK/body" && pass "... handled as an empty body: $(cat "$WORK/body")" || fail "empty POST: $(cat "$WORK/body")"
expect_code "an empty POST to /jobs names the expected fields" 400 -X POST "${AUTH[@]}" "$URL/api/v1/jobs"
grep -q 'config_yaml' "$WORK/body" && pass "... $(cat "$WORK/body")" || fail "empty submit: $(cat "$WORK/body")"
expect_code "submit with the token" 200 -X POST "${AUTH[@]}" "${JSON[@]}" -d "$(job_yaml ok)" "$URL/api/v1/jobs"
started=$SECONDS
expect_code "curl -X POST (no body, no Content-Length) with the token on /api/v1/stop" 200 -X POST "${AUTH[@]}" "$URL/api/v1/stop"
[ $((SECONDS - started)) -lt 3 ] && pass "... answered at once (not after a read timeout)" || fail "empty POST took $((SECONDS - started)) s"

# --- the CLI and its tokens -----------------------------------------------------------------
out=$("$BIN" status --json 2>&1) && grep -q '"job"' <<<"$out" && pass "elastrain status: the default head with the default token" \
  || fail "status: $out"
"$CAPTURE" "$WORK/fake.port" "$WORK/fake.capture" 120 &
bg_track $!
wait_until 10 test -s "$WORK/fake.port" || fail "tcp_capture did not start"
FAKE="http://127.0.0.1:$(cat "$WORK/fake.port")"
expect_error "stop --head elsewhere: the default token is not sent" "no token for --head $FAKE" -- stop --head "$FAKE"
ELASTRAIN_TOKEN=$TOKEN "$BIN" status --head "$FAKE" >/dev/null 2>&1 || true  # a token the user gave, to a head the user named: sent
wait_until 5 grep -q 'Authorization: Bearer' "$WORK/fake.capture" && pass "the fake server works (it saw the ELASTRAIN_TOKEN request)" \
  || fail "the fake server saw nothing: $(cat "$WORK/fake.capture")"
: >"$WORK/fake.capture"
mkdir -p "$WORK/runs/embedded"
chmod 700 "$WORK/runs/embedded"
cp "$TOKEN_FILE" "$WORK/runs/embedded/token"
echo "$URL" >"$WORK/runs/embedded/head_url"
expect_error "stop --run-dir with another --head" "--head $FAKE is not the API the run at .* recorded \($URL" -- \
  stop --run-dir "$WORK/runs/embedded" --head "$FAKE"
"$BIN" stop --head "$FAKE" >/dev/null 2>&1 || true
"$BIN" chaos kill --rank 0 --head "$FAKE" >/dev/null 2>&1 || true
sleep 0.5
[ ! -s "$WORK/fake.capture" ] && pass "the fake server at $FAKE saw no request (and no Authorization header) from the refused commands" \
  || fail "the fake server saw: $(head -c 400 "$WORK/fake.capture")"
expect_error "--token on the command line" "--token is not accepted .*--token-file PATH.*ELASTRAIN_TOKEN" -- stop --token "$TOKEN" --head "$URL"
expect_error "--token-file without --head" "a token you give is sent only to a --head URL you name" -- status --token-file "$TOKEN_FILE"
chmod 644 "$WORK/runs/embedded/token"
expect_error "--run-dir with a token file of mode 0644" "has mode 0644; expected 0600" -- status --run-dir "$WORK/runs/embedded"

# --- an embedded run refuses an untrusted token file --------------------------------------
for kind in mode644 symlink; do
  run="$WORK/runs/bad_$kind"
  mkdir -p "$run"
  if [ $kind = mode644 ]; then
    printf '%064d\n' 7 >"$run/token"
    chmod 644 "$run/token"
    want="$run/token has mode 0644"
  else
    printf '%064d\n' 7 >"$WORK/planted"
    chmod 600 "$WORK/planted"
    ln -s "$WORK/planted" "$run/token"
    want="$run/token is a symbolic link"
  fi
  before=$(stat -c '%a %F %s %Y' "$run/token"; sha256sum <"$run/token")
  rc=0
  out=$("$BIN" train model_name=tiny steps=5 num_workers=2 threads_per_worker=1 base_output_directory="$WORK/runs" \
    run_name="bad_$kind" dashboard_port=0 2>&1) || rc=$?
  after=$(stat -c '%a %F %s %Y' "$run/token"; sha256sum <"$run/token")
  [ "$rc" -eq 2 ] && grep -qF "$want" <<<"$out" && pass "train with a $kind token file: exit 2: $(grep -F "$want" <<<"$out")" \
    || fail "train with a $kind token file: exit $rc: $out"
  [ "$before" = "$after" ] && [ ! -e "$run/head_url" ] && pass "... the file is unchanged and no API started" \
    || fail "the $kind token file changed: $before -> $after"
done

# --- metrics_without_token ----------------------------------------------------------------
start_head open --token-file "$WORK/open/head_token" --metrics-without-token
OPEN=$(cat "$WORK/open/head_url")
expect_code "/metrics with --metrics-without-token, no token" 200 "$OPEN/metrics"
expect_code "... but /api/v1/job still needs it" 401 "$OPEN/api/v1/job"

# --- HTTPS ---------------------------------------------------------------------------------
bash "$SRC/scripts/make_certs.sh" "$WORK/certs" >/dev/null
start_head tls --token-file "$WORK/tls/head_token" --tls-cert "$WORK/certs/server.crt" --tls-key "$WORK/certs/server.key"
TLS=$(cat "$WORK/tls/head_url")
case "$TLS" in https://127.0.0.1:*) pass "the TLS head records $TLS" ;; *) fail "TLS head URL '$TLS'" ;; esac
out=$("$BIN" submit --head "$TLS" --token-file "$WORK/tls/head_token" --ca-cert "$WORK/certs/ca.crt" model_name=tiny steps=5 hardware_peak_tflops=1 \
  num_workers=1 base_output_directory="$WORK/runs" run_name=tls 2>&1) && pass "submit over HTTPS with --ca-cert: $out" || fail "submit: $out"
out=$("$BIN" status --head "$TLS" --token-file "$WORK/tls/head_token" --ca-cert "$WORK/certs/ca.crt" 2>&1) \
  && grep -q 'job tls-' <<<"$out" && pass "status over HTTPS with --ca-cert: $(head -1 <<<"$out")" || fail "status over HTTPS: $out"
out=$(ELASTRAIN_CA_CERT="$WORK/certs/ca.crt" "$BIN" status --head "$TLS" --token-file "$WORK/tls/head_token" 2>&1) \
  && pass "status over HTTPS with ELASTRAIN_CA_CERT" || fail "status with ELASTRAIN_CA_CERT: $out"
expect_error "status over HTTPS without the CA" "TLS certificate of $TLS did not verify" -- \
  status --head "$TLS" --token-file "$WORK/tls/head_token"
expect_error "status over HTTPS with another CA" "did not verify" -- \
  status --head "$TLS" --token-file "$WORK/tls/head_token" --ca-cert "$WORK/certs/other-ca.crt"
expect_error "plain http to the HTTPS head" "cannot reach the head at http://" -- \
  status --head "http://${TLS#https://}" --token-file "$WORK/tls/head_token"
expect_code "curl over HTTPS with the CA and token" 200 --cacert "$WORK/certs/ca.crt" -H "Authorization: Bearer $(cat "$WORK/tls/head_token")" "$TLS/api/v1/job"
expect_code "curl over HTTPS without a token" 401 --cacert "$WORK/certs/ca.crt" "$TLS/api/v1/job"

# An embedded run over HTTPS (dashboard_tls_cert/key): --run-dir finds https:// in head_url.
run="$WORK/runs/tlsrun"
"$BIN" train model_name=tiny hardware_peak_tflops=1 num_workers=2 threads_per_worker=1 steps=100000 log_period=1 checkpoint_period=1000 \
  base_output_directory="$WORK/runs" run_name=tlsrun dashboard_port=0 \
  dashboard_tls_cert="$WORK/certs/server.crt" dashboard_tls_key="$WORK/certs/server.key" >"$WORK/tlsrun.out" 2>&1 &
TLSRUN=$!
bg_track $TLSRUN
wait_step "$run" 1 120 || fail "the HTTPS run did not start: $(tail -3 "$WORK/tlsrun.out")"
grep -q '^https://127.0.0.1:' "$run/head_url" && pass "an embedded run with dashboard_tls_cert records $(cat "$run/head_url")" \
  || fail "head_url of the HTTPS run: $(cat "$run/head_url")"
[ "$(stat -c %a "$run/head_url")" = 600 ] && pass "an embedded run's head_url is 0600" \
  || fail "the embedded run's head_url: $(stat -c '%a %n' "$run/head_url")"
out=$("$BIN" status --run-dir "$run" --ca-cert "$WORK/certs/ca.crt" 2>&1) && pass "status --run-dir over HTTPS: $(head -1 <<<"$out")" \
  || fail "status --run-dir over HTTPS: $out"
expect_error "status --run-dir over HTTPS without the CA" "did not verify" -- status --run-dir "$run"
out=$("$BIN" stop --run-dir "$run" --ca-cert "$WORK/certs/ca.crt" 2>&1) && pass "stop --run-dir over HTTPS" || fail "stop: $out"
rc=0
wait $TLSRUN || rc=$?
[ "$rc" -eq 4 ] && [ ! -e "$run/head_url" ] && pass "the HTTPS run stopped (exit 4) and removed its head_url" \
  || fail "the HTTPS run: exit $rc, head_url $(cat "$run/head_url" 2>&1)"

grep -qF "$TOKEN" "$WORK/main.log" && fail "the token is in the head's log" \
  || pass "the token appears nowhere in the head's output"
finish

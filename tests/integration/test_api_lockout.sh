# Issue 33, "no lock-out without a token": an attacker without the token holds 100 slow
# connections (one header byte every 3 s) and 2,000 idle ones against an `elastrain head`
# (--store memory://, run under `ulimit -n 1024`, the common default), reopening every
# connection the server closes; for LOCKOUT_SECONDS (25 in the suite, two and a half of the
# server's 10 s request deadlines; issue 33's figure is LOCKOUT_SECONDS=60) an authenticated
# `elastrain status` runs every second and must answer within 1 s every time (and a curl
# with the token, the server's own time). Then the same against the API of an embedded
# `elastrain train` for LOCKOUT_TRAIN_SECONDS (10). Before the accept gate
# (monitor/http_gate.h) 10 slow connections made every request time out for 75 s and
# ~1,000 idle ones took the server's descriptors. Also: a request line with terminal
# escape sequences is logged escaped, with its peer address, on its 400.
source "$(dirname "$0")/lib.sh"
DURATION=${LOCKOUT_SECONDS:-25}
TRAIN_DURATION=${LOCKOUT_TRAIN_SECONDS:-10}
IDLE=${LOCKOUT_IDLE:-2000}
SLOW=${LOCKOUT_SLOW:-100}

# The measured client (status, curl) runs at nice -5 where it may (root): on a shared
# 2-core test machine, a process start alone takes up to ~0.35 s at a load of 10-20 (0.04 s
# of it CPU); the server and the attacker keep the normal priority.
CLIENT=(nice -n -5)
"${CLIENT[@]}" true 2>/dev/null || CLIENT=()

# figures NAME MS...: "N NAME: min A ms, median B ms, max C ms"
figures() {
  local name=$1
  shift
  local sorted n
  sorted=$(printf '%s\n' "$@" | sort -n)
  n=$#
  echo "$n $name: min $(head -1 <<<"$sorted") ms, median $(sed -n "$(((n + 1) / 2))p" <<<"$sorted") ms, max $(tail -1 <<<"$sorted") ms"
}

# siege NAME SERVER_PID URL TOKEN SECONDS STATUS_ARGS...: the flood against URL's port;
# meanwhile `elastrain status STATUS_ARGS...` and a curl with TOKEN every second.
siege() {
  local name=$1 pid=$2 url=$3 token=$4 seconds=$5
  shift 5
  local port=${url##*:} i t0 t1 t2 ms rc c cms left fds
  local lat=() curl_lat=() bad=0 bad_curl=0 max_fds=0
  rm -f "$WORK/flood.ready"
  (ulimit -n $((IDLE + SLOW + 256)) && exec "$TOOLS/conn_flood" "$port" "$IDLE" "$SLOW" 3 $((seconds + 15)) \
    "$WORK/flood.ready" >"$WORK/flood.$name.out" 2>&1) &
  local flood=$!
  bg_track $flood
  wait_until 30 test -s "$WORK/flood.ready" || fail "$name: the flood did not start"
  sleep 3  # the connections are in: the slow ones have sent their first bytes
  for ((i = 0; i < seconds; i++)); do
    t0=$(date +%s%N)
    rc=0
    timeout 10 "${CLIENT[@]}" "$BIN" status "$@" >"$WORK/status.out" 2>&1 || rc=$?
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    lat+=("$ms")
    if [ "$rc" -ne 0 ] || [ "$ms" -gt 1000 ]; then
      bad=$((bad + 1))
      echo "  $name: status #$i: exit $rc after $ms ms: $(tr -d '\n' <"$WORK/status.out" | head -c 200)"
    fi
    c=$("${CLIENT[@]}" curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}' -H "Authorization: Bearer $token" "$url/api/v1/job" || true)
    cms=$(awk '{printf "%d", $2 * 1000}' <<<"$c")
    curl_lat+=("$cms")
    if [ "${c%% *}" != 200 ] || [ "$cms" -gt 1000 ]; then
      bad_curl=$((bad_curl + 1))
      echo "  $name: curl #$i: $c"
    fi
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    [ "$fds" -gt "$max_fds" ] && max_fds=$fds
    t2=$(date +%s%N)
    left=$((1000 - (t2 - t0) / 1000000))
    [ "$left" -gt 0 ] && sleep "0.$(printf '%03d' "$left")"
  done
  kill -TERM $flood 2>/dev/null || true
  wait $flood 2>/dev/null || true
  local sf cf
  sf=$(figures "authenticated \`elastrain status\` calls" "${lat[@]}")
  cf=$(figures "authenticated curl GET /api/v1/job" "${curl_lat[@]}")
  echo "  $name: $sf"
  echo "  $name: $cf"
  echo "  $name: $(cat "$WORK/flood.$name.out")"
  echo "  $name: open descriptors at most $max_fds (limit 1024)"
  [ "$bad" -eq 0 ] && pass "$name: every status answered within 1 s during the flood ($sf)" \
    || fail "$name: $bad status calls failed or took over 1 s ($sf)"
  [ "$bad_curl" -eq 0 ] && pass "$name: every curl answered 200 within 1 s during the flood ($cf)" \
    || fail "$name: $bad_curl curl calls failed or took over 1 s ($cf)"
  local closed
  closed=$(sed -n 's/.*closed by the server \([0-9]*\).*/\1/p' "$WORK/flood.$name.out")
  [ "${closed:-0}" -gt 0 ] && pass "$name: the server closed $closed of the attacker's connections" \
    || fail "$name: the attacker's connections were never closed: $(cat "$WORK/flood.$name.out")"
  [ "$max_fds" -lt 1024 ] && pass "$name: below its descriptor limit ($max_fds open at most)" \
    || fail "$name: $max_fds descriptors open"
  kill -0 "$pid" 2>/dev/null && pass "$name: still running" || fail "$name: died"
}

# --- the head -------------------------------------------------------------------------------
(ulimit -n 1024 && exec "$BIN" head --store memory:// --port 0 >"$WORK/head.log" 2>&1) &
HEAD=$!
bg_track $HEAD
wait_until 30 grep -q '^dashboard: ' "$WORK/head.log" || { fail "the head did not start: $(cat "$WORK/head.log")"; finish; exit 1; }
URL=$(cat "$HOME/.elastrain/head_url")
PORT=${URL##*:}
TOKEN=$(cat "$HOME/.elastrain/head_token")
grep -E 'api: at most [0-9]+ connections' "$WORK/head.log" | head -1 | sed 's/^/  head: /' || true
out=$("$BIN" submit model_name=tiny steps=5 num_workers=1 base_output_directory="$WORK/runs" run_name=lockout 2>&1) \
  && pass "a job submitted (it waits for agents): $(tail -1 <<<"$out")" || fail "submit: $out"

# A request line with escape sequences: 400, logged escaped with its peer.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /\033[2J\033]0;pwned\007 HTTP/9.9\r\nHost: 127.0.0.1:%s\r\n\r\n' "$PORT" >&3
answer=$(timeout 10 cat <&3 || true)
exec 3<&- 3>&-
grep -q '^HTTP/1.1 400' <<<"$answer" && pass "a request line with escape sequences: $(head -1 <<<"$answer" | tr -d '\r')" \
  || fail "raw request: '$answer'"
want="refused 'GET /\\x1b[2J\\x1b]0;pwned\\x07 HTTP/9.9' from 127.0.0.1: HTTP 400"
wait_until 10 grep -qF "$want" "$WORK/head.log" && pass "logged escaped with its peer: $(grep -F "$want" "$WORK/head.log" | tail -1)" \
  || fail "no line '$want' in the head's log: $(grep refused "$WORK/head.log" | tail -3)"
! grep -q $'\033\|\007' "$WORK/head.log" && pass "no ESC or BEL byte in the head's log" || fail "raw control bytes in the head's log"

siege head $HEAD "$URL" "$TOKEN" "$DURATION" --json
grep 'api: closed' "$WORK/head.log" | tail -1 | sed 's/^/  head: /' || true
grep -q 'connection(s) in the last' "$WORK/head.log" && pass "the gate's summary is in the head's log" || fail "no gate summary in the head's log"

# --- an embedded trainer ----------------------------------------------------------------
if [ "$TRAIN_DURATION" -gt 0 ]; then
  run="$WORK/runs/train"
  # At nice 10: its two busy workers would otherwise take the test machine's cores (2)
  # from the measured client, whose own start is most of the status time. The flood
  # slows the workers unevenly, so a straggler alarm there is no false one.
  EXPECT_STRAGGLERS=1
  (ulimit -n 1024 && exec nice -n 10 "$BIN" train model_name=tiny hardware_peak_tflops=1 num_workers=2 threads_per_worker=1 \
    steps=1000000 log_period=10 checkpoint_period=1000000 base_output_directory="$WORK/runs" run_name=train \
    dashboard_port=0 >"$WORK/train.out" 2>&1) &
  TRAIN=$!
  bg_track $TRAIN
  wait_step "$run" 1 120 || fail "the embedded run did not start: $(tail -3 "$WORK/train.out")"
  siege train $TRAIN "$(cat "$run/head_url")" "$(cat "$run/token")" "$TRAIN_DURATION" --run-dir "$run"
  out=$("$BIN" stop --run-dir "$run" 2>&1) || fail "stop: $out"
  rc=0
  timeout 60 bash -c "while kill -0 $TRAIN 2>/dev/null; do sleep 0.1; done" || rc=$?
  [ "$rc" -eq 0 ] && pass "the embedded run stopped on request after the flood" || fail "the embedded run did not stop"
fi
finish

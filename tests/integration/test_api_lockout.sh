# Issue 33, "no lock-out without a token": an attacker without the token holds 100 slow
# connections (one header byte every 3 s) and 2,000 idle ones against an `elastrain head`
# (--store memory://, run under `ulimit -n 1024`, the common default), reopening every
# connection the server closes; for LOCKOUT_SECONDS (60) an authenticated
# `elastrain status` runs every second and must answer within 1 s every time. Before the
# accept gate (monitor/http_gate.h) 10 slow connections made every request time out for
# 75 s and ~1,000 idle ones took the head's descriptors. Also: a request line with
# terminal escape sequences is logged escaped, with its peer address, on its 400.
# The embedded `elastrain train` serves the same JobApiServer (test_api_security starts
# one over HTTPS).
source "$(dirname "$0")/lib.sh"
DURATION=${LOCKOUT_SECONDS:-60}
IDLE=${LOCKOUT_IDLE:-2000}
SLOW=${LOCKOUT_SLOW:-100}

(ulimit -n 1024 && exec "$BIN" head --store memory:// --port 0 >"$WORK/head.log" 2>&1) &
HEAD=$!
bg_track $HEAD
wait_until 30 grep -q '^dashboard: ' "$WORK/head.log" || { fail "the head did not start: $(cat "$WORK/head.log")"; finish; exit 1; }
URL=$(cat "$HOME/.elastrain/head_url")
PORT=${URL##*:}
grep -E 'api: at most [0-9]+ connections' "$WORK/head.log" | head -1 | sed 's/^/  head: /'
out=$("$BIN" submit model_name=tiny steps=5 num_workers=1 base_output_directory="$WORK/runs" run_name=lockout 2>&1) \
  && pass "a job submitted (it waits for agents): $(tail -1 <<<"$out")" || fail "submit: $out"

# --- a request line with escape sequences ----------------------------------------------
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

# --- the flood ----------------------------------------------------------------------------
(ulimit -n $((IDLE + SLOW + 256)) && exec "$TOOLS/conn_flood" "$PORT" "$IDLE" "$SLOW" 3 $((DURATION + 15)) \
  "$WORK/flood.ready" >"$WORK/flood.out" 2>&1) &
FLOOD=$!
bg_track $FLOOD
wait_until 30 test -s "$WORK/flood.ready" || fail "the flood did not start"
sleep 3  # the connections are in: the slow ones have sent their first bytes
lat=()
curl_lat=()
bad=0
bad_curl=0
TOKEN=$(cat "$HOME/.elastrain/head_token")
max_fds=0
for ((i = 0; i < DURATION; i++)); do
  t0=$(date +%s%N)
  rc=0
  timeout 10 "$BIN" status --json >"$WORK/status.out" 2>&1 || rc=$?
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  lat+=("$ms")
  if [ "$rc" -ne 0 ] || ! grep -q '"job"' "$WORK/status.out" || [ "$ms" -gt 1000 ]; then
    bad=$((bad + 1))
    echo "  status #$i: exit $rc after $ms ms: $(tr -d "\n" <"$WORK/status.out" | head -c 200)"
  fi
  # The server's own answer time, without a process start: curl with the token.
  c=$(curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}' -H "Authorization: Bearer $TOKEN" "$URL/api/v1/job" || true)
  cms=$(awk '{printf "%d", $2 * 1000}' <<<"$c")
  curl_lat+=("$cms")
  if [ "${c%% *}" != 200 ] || [ "$cms" -gt 1000 ]; then
    bad_curl=$((bad_curl + 1))
    echo "  curl #$i: $c"
  fi
  fds=$(ls "/proc/$HEAD/fd" 2>/dev/null | wc -l)
  [ "$fds" -gt "$max_fds" ] && max_fds=$fds
  t2=$(date +%s%N)
  left=$((1000 - (t2 - t0) / 1000000))
  [ "$left" -gt 0 ] && sleep "0.$(printf '%03d' "$left")"
done
kill -TERM $FLOOD 2>/dev/null || true
wait $FLOOD 2>/dev/null || true
# figures NAME MS...: "N NAME: min A ms, median B ms, max C ms"
figures() {
  local name=$1
  shift
  local sorted n
  sorted=$(printf '%s\n' "$@" | sort -n)
  n=$#
  echo "$n $name: min $(head -1 <<<"$sorted") ms, median $(sed -n "$(((n + 1) / 2))p" <<<"$sorted") ms, max $(tail -1 <<<"$sorted") ms"
}
figures=$(figures "authenticated \`elastrain status\` calls" "${lat[@]}")
curl_figures=$(figures "authenticated curl GET /api/v1/job" "${curl_lat[@]}")
echo "  $figures"
echo "  $curl_figures"
echo "  $(cat "$WORK/flood.out")"
echo "  the head's open descriptors: at most $max_fds (limit 1024)"
grep 'api: closed' "$WORK/head.log" | tail -1 | sed 's/^/  head: /'
[ "$bad" -eq 0 ] && pass "every status answered within 1 s during the flood ($figures)" || fail "$bad status calls failed or took over 1 s ($figures)"
[ "$bad_curl" -eq 0 ] && pass "every curl answered 200 within 1 s during the flood ($curl_figures)" || fail "$bad_curl curl calls failed or took over 1 s ($curl_figures)"
closed=$(sed -n 's/.*closed by the server \([0-9]*\).*/\1/p' "$WORK/flood.out")
[ "${closed:-0}" -gt 0 ] && pass "the server closed $closed of the attacker's connections" || fail "the attacker's connections were never closed: $(cat "$WORK/flood.out")"
[ "$max_fds" -lt 1024 ] && pass "the head kept below its descriptor limit ($max_fds open at most)" || fail "the head had $max_fds descriptors open"
grep -q 'past the 10 s request deadline' "$WORK/head.log" && pass "the gate's summary is logged" || fail "no gate summary in the head's log"
kill -0 $HEAD 2>/dev/null && pass "the head is still running" || fail "the head died: $(tail -5 "$WORK/head.log")"
finish

# Issue 6: /metrics, the dashboard, the token-guarded control API and the goodput
# accounting of a job with an injected failure (num_workers=2:3, rank 1 SIGKILLed at
# step 60 by fail_at_step).
#  1. promtool check metrics accepts /metrics scraped during the run.
#  2. headless Chromium renders the live dashboard: the loss chart has points, the
#     timeline lists the failure; screenshots go to build/test-artifacts/.
#  3. Requests without the token or with a wrong one get 401 and change nothing; the token
#     file has mode 0600; the server listens on loopback. (The whole of the API's
#     security: test_api_security.sh.)
#  4. The goodput categories sum to the wall time within 1%, and the recovery category
#     equals the recovery time the controller wrote in events.jsonl.
#  5. Issue 32: /metrics has per-rank gauges, `status` a per-rank table, the dashboard a
#     per-rank panel (a row per rank, bars once the ranks report their step anatomy) and
#     a hosts panel; a `chaos slow` with a bad factor is refused (400 naming the field);
#     gray-failure events stand out in the report. (Slowing a rank for real:
#     test_chaos_slow.sh; this test must raise no straggler_detected.)
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/corpus.txt"
run=runs/obs
started=$(now)
"$BIN" train model_name=tiny hardware_peak_tflops=1 vocab_size=256 max_target_length=32 dataset_type=text dataset_path="$WORK/corpus.txt" \
  steps=100000 global_batch_size=8 per_device_batch_size=4 eval_interval=100 log_period=1 checkpoint_period=50 \
  base_output_directory="$WORK/runs" run_name=obs dashboard_port=0 num_workers=2:3 threads_per_worker=1 \
  fail_rank=1 fail_at_step=60 fail_mode=kill cost_per_worker_hour=2.5 >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
wait_ev $run generation_first_step 120 generation=1 || fail "no recovery from the injected failure: $(tail -3 "$WORK/err")"
wait_step $run 300 120 || fail "the run did not reach step 300: $(tail -3 "$WORK/err")"
url=$(cat $run/head_url)

# --- 3. token and loopback -------------------------------------------------------------
mode=$(stat -c %a $run/token)
[ "$mode" = 600 ] && pass "the token file has mode 0600" || fail "token mode $mode"
grep -qE '^[0-9a-f]{64}$' $run/token && pass "the token is 64 hex digits" || fail "token: $(head -c 80 $run/token)"
port=${url##*:}
case "$url" in http://127.0.0.1:*) pass "the API URL is on loopback: $url" ;; *) fail "API URL $url" ;; esac
listen=$(ss -Hltn "sport = :$port" | awk '{print $4}' | sort -u | tr '\n' ' ')
[ "$listen" = "127.0.0.1:$port " ] && pass "listening on $listen only" || fail "listening on '$listen'"

gen_before=$("$BIN" status --run-dir $run --json | "$JQ" generation)
post() { curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' "$@"; }
code=$(post -d '{}' "$url/api/v1/stop")
[ "$code" = 401 ] && pass "POST /api/v1/stop without a token: 401 ($(cat "$WORK/body"))" || fail "stop without token: $code"
code=$(post -H "Authorization: Bearer $(tr 0-9a-f 1-9a-f0 <$run/token)" -d '{}' "$url/api/v1/stop")
[ "$code" = 401 ] && pass "POST /api/v1/stop with a wrong token: 401" || fail "stop with a wrong token: $code"
code=$(post -H "Authorization: Bearer x" -d '{"action":"kill","rank":0}' "$url/api/v1/chaos")
[ "$code" = 401 ] && pass "POST /api/v1/chaos with a wrong token: 401" || fail "chaos with a wrong token: $code"
code=$(post -d '{"action":"kill","rank":0}' "$url/api/v1/chaos")
[ "$code" = 401 ] && pass "POST /api/v1/chaos without a token: 401" || fail "chaos without token: $code"
code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' "$url/api/v1/dashboard")
[ "$code" = 401 ] && pass "GET /api/v1/dashboard without a token: 401" || fail "dashboard without token: $code"
rc=0
out=$(ELASTRAIN_TOKEN=$(tr 0-9a-f 1-9a-f0 <$run/token) "$BIN" chaos kill --rank 0 --head "$url" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q unauthorized <<<"$out" && pass "elastrain chaos with a wrong ELASTRAIN_TOKEN: exit $rc: $out" \
  || fail "chaos with a wrong token: exit $rc: $out"
sleep 2
st=$("$BIN" status --run-dir $run --json)
[ "$("$JQ" state <<<"$st")" = RUNNING ] && [ "$("$JQ" generation <<<"$st")" = "$gen_before" ] \
  && [ "$("$JQ" failures <<<"$st")" = 1 ] && [ -z "$(ev $run stop_requested time)" ] \
  && pass "nothing changed: still RUNNING, generation $gen_before, 1 failure, no stop requested" \
  || fail "the job changed after refused POSTs: $st"

# --- 1. /metrics -------------------------------------------------------------------------
curl -s -m 10 -H "Authorization: Bearer $(cat $run/token)" "$url/metrics" >"$ARTIFACTS/metrics.txt"
lint=$(promtool check metrics <"$ARTIFACTS/metrics.txt" 2>&1) && pass "promtool check metrics accepts /metrics ($(grep -c '^elastrain_' "$ARTIFACTS/metrics.txt") samples)" \
  || fail "promtool check metrics: $lint"
# The failure starts generation 1 (2 survivors); the replacement worker may join it at
# once or grow the world back at the next checkpoint boundary (generation 2).
gen=$(grep -E '^elastrain_generation ' "$ARTIFACTS/metrics.txt" | cut -d' ' -f2)
for want in 'elastrain_job_state{state="RUNNING"} 1' 'elastrain_failures_total 1' "elastrain_restarts_total $gen" \
            "elastrain_recovery_seconds_count $gen" 'elastrain_world_size 3'; do
  grep -qF "$want" "$ARTIFACTS/metrics.txt" && pass "/metrics: $want" || fail "/metrics lacks '$want'"
done
grep -qE '^elastrain_rank_compute_seconds\{rank="0",host="[^"]+"\} [0-9.e-]+$' "$ARTIFACTS/metrics.txt" \
  && grep -qE '^elastrain_rank_wait_seconds\{rank="1",host="[^"]+"\} ' "$ARTIFACTS/metrics.txt" \
  && pass "/metrics: per-rank gauges ($(grep -c '^elastrain_rank_' "$ARTIFACTS/metrics.txt") samples)" \
  || fail "/metrics lacks per-rank gauges: $(grep '^elastrain_rank_' "$ARTIFACTS/metrics.txt" | head -3)"
grep -qE '^elastrain_loss [0-9.]+$' "$ARTIFACTS/metrics.txt" && grep -qE '^elastrain_estimated_cost_usd 0\.0[0-9]*[1-9]' "$ARTIFACTS/metrics.txt" \
  && pass "/metrics: $(grep -E '^elastrain_(loss|goodput_ratio|estimated_cost_usd) ' "$ARTIFACTS/metrics.txt" | tr '\n' ' ')" \
  || fail "/metrics loss or cost: $(grep -E '^elastrain_(loss|estimated_cost_usd) ' "$ARTIFACTS/metrics.txt")"

# --- 2. the dashboard in Chromium ------------------------------------------------------
# The page takes the token from its URL's fragment, as elastrain prints it.
page="$url/#token=$(cat $run/token)"
grep "^dashboard: " "$WORK/out" | grep -qF "$url/ (token in " && grep "^dashboard: " "$WORK/out" | grep -qF "$run/token, never printed" && ! grep -qF "$(cat $run/token)" "$WORK/out" \
  && pass "elastrain train printed the dashboard URL and the token's file, not the token" \
  || fail "no dashboard URL in the output, or the token in it: $(grep dashboard "$WORK/out")"
chrome --virtual-time-budget=5000 --dump-dom "$url/" >"$WORK/dom_no_token.html" || true
grep -q 'no token: open the URL elastrain printed' "$WORK/dom_no_token.html" && ! grep -q 'data-points="[1-9]' "$WORK/dom_no_token.html" \
  && pass "without #token= the page draws nothing and says why" || fail "the page without a token: $(grep -o 'id="updated"[^<]*' "$WORK/dom_no_token.html")"
chrome --virtual-time-budget=5000 --dump-dom "$page" >"$WORK/dom.html" || fail "chromium --dump-dom failed: $(tail -3 "$WORK/chrome.log")"
points=$(grep -o 'data-points="[0-9]*"' "$WORK/dom.html" | head -1 | grep -o '[0-9]*' || echo 0)
[ "${points:-0}" -gt 100 ] && pass "the loss chart has $points points" || fail "loss chart points: '$points'"
rows=$(grep -oE 'class="event failure" data-event="[a-z_]+"' "$WORK/dom.html" | sort -u | sed 's/.*data-event=//' | tr '\n' ' ')
grep -q worker_failed <<<"$rows" && pass "the timeline shows the injected failure: $rows" || fail "timeline failure rows: '$rows'"
grep -q 'class="marker failure"' "$WORK/dom.html" && pass "the timeline chart marks the failure" || fail "no failure marker"
grep -qE 'recovered in [0-9.]+ s' "$WORK/dom.html" && pass "the timeline shows the recovery" || fail "no recovery row"
grep -qE '<span>leading head</span><b>[^<:]+:[0-9]+</b>' "$WORK/dom.html" && pass "the summary names the leading head: $(grep -oE '<span>leading head</span><b>[^<]*' "$WORK/dom.html" | sed 's/.*<b>//')" \
  || fail "no leading head in the summary: $(grep -o 'leading head.\{0,40\}' "$WORK/dom.html")"
# The per-rank panel: a row per rank of the generation; bars once the ranks report their
# step anatomy (compute and wait seconds).
st=$("$BIN" status --run-dir $run --json)
world=$("$JQ" world <<<"$st")
nranks=$(grep -o 'data-ranks="[0-9]*"' "$WORK/dom.html" | grep -o '[0-9]*' || echo none)
nrows=$(grep -o 'class="rank-row"' "$WORK/dom.html" | wc -l)
[ "$nranks" = "$world" ] && [ "$nrows" = "$world" ] && pass "the per-rank panel has a row for each of the $world ranks" \
  || fail "per-rank panel: data-ranks '$nranks', $nrows rows, world $world"
bars=$(grep -o 'data-bars="[0-9]*"' "$WORK/dom.html" | grep -o '[0-9]*' || echo 0)
timed=$("$JQ" ranks.0.timed_steps <<<"$st")
if [ "${timed:-0}" -gt 0 ]; then
  [ "${bars:-0}" -gt 0 ] && pass "the per-rank panel draws $bars compute/wait bars" || fail "ranks are timed ($timed steps) but no bars"
else
  [ "${bars:-0}" = 0 ] && pass "no rank reports its step anatomy yet: the panel draws no bars" || fail "$bars bars of untimed ranks"
fi
grep -q 'no host health records' "$WORK/dom.html" && pass "the hosts panel says an embedded job has no health records" \
  || fail "hosts panel: $(grep -o 'id="hosts"[^/]*' "$WORK/dom.html" | head -1)"
out=$("$BIN" status --run-dir $run)
grep -qE '^  RANK +HOST +PID +STEP +PHASE +COMPUTE_S +WAIT_S +LAST_COLLECTIVE +WORKER$' <<<"$out" \
  && [ "$(grep -cE '^  [0-9]+ ' <<<"$out")" -ge "$world" ] && pass "elastrain status prints the per-rank table" \
  || fail "status table: $out"
chrome --virtual-time-budget=5000 --screenshot="$ARTIFACTS/dashboard.png" "$page" >/dev/null
[ -s "$ARTIFACTS/dashboard.png" ] && pass "screenshot: $ARTIFACTS/dashboard.png ($(stat -c %s "$ARTIFACTS/dashboard.png") bytes)" \
  || fail "no screenshot"

# --- 5. chaos slow: a bad factor is refused (slowing a rank: test_chaos_slow.sh) ------------
expect_error "chaos slow without --factor" 'slow --factor 0: expected a number in \(1, 100\]' -- chaos slow --rank 1 --run-dir $run
code=$(post -H "Authorization: Bearer $(cat $run/token)" -d '{"action":"slow","rank":1,"factor":500}' "$url/api/v1/chaos")
[ "$code" = 400 ] && grep -q "field 'factor': 500 is out of range" "$WORK/body" \
  && pass "POST /api/v1/chaos with factor 500: 400 ($(cut -c1-90 "$WORK/body"))" || fail "factor 500: $code $(cat "$WORK/body")"

# --- stop with the token (read from the run directory) -----------------------------------
out=$("$BIN" stop --run-dir $run 2>&1) && pass "elastrain stop with the run's token: $out" || fail "stop: $out"
rc=0
wait $job || rc=$?
ended=$(now)
[ "$rc" -eq 4 ] && pass "the job ended STOPPED (exit 4)" || fail "exit $rc: $(tail -3 "$WORK/err")"

# --- 4. goodput ------------------------------------------------------------------------
"$BIN" report $run --json >"$WORK/goodput.json" || fail "elastrain report failed"
"$BIN" report $run >"$WORK/report.txt" && cat "$WORK/report.txt" | sed 's/^/     /'
g() { "$JQ" "$1" <"$WORK/goodput.json"; }
wall=$(g wall_seconds)
sum=0
for c in productive redone recovery checkpoint waiting initialisation; do sum=$(awk -v a="$sum" -v b="$(g seconds.$c)" 'BEGIN { print a + b }'); done
awk -v s="$sum" -v w="$wall" 'BEGIN { d = s - w; if (d < 0) d = -d; exit !(w > 0 && d <= 0.01 * w) }' \
  && pass "the six categories sum to $sum s, the wall time is $wall s" || fail "categories $sum s vs wall $wall s"
# The wall time is the job's: from its submission to its end (the times of those records
# in events.jsonl), inside what this test saw. Order, not a margin: a loaded machine may
# take any time to start the job and to end the process after it.
submitted=$(ev $run job_submitted time | head -1)
stopped=$(ev $run job_state time to=STOPPED | head -1)
awk -v s="$(g start)" -v e="$(g end)" -v w="$wall" -v js="$submitted" -v je="$stopped" -v a="$started" -v b="$ended" '
  function near(x, y) { return x - y < 1e-6 && y - x < 1e-6 }
  BEGIN { exit !(js != "" && je != "" && near(s, js) && near(e, je) && near(w, e - s) && a <= s && s <= e && e <= b) }' \
  && pass "wall time $wall s: job_submitted to STOPPED, within the $(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.2f", b - a }') s the test measured" \
  || fail "wall time $wall s ($(g start)..$(g end)) vs job_submitted '$submitted', STOPPED '$stopped', measured $started..$ended"
recovery=$(g seconds.recovery)
from_events=$(ev $run generation_first_step recovery_seconds | awk '{ s += $1 } END { print s + 0 }')
# Within 1% + 10 ms: the two are computed from different records of the same moments
# (the accountant's from job_state and metrics.jsonl times, the controller's from its own
# observation), which a loaded machine writes a few ms apart (once 5 ms of a 0.12 s recovery).
awk -v a="$recovery" -v b="$from_events" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.01 * b + 0.01) }' \
  && pass "recovery category $recovery s = recovery_seconds in events.jsonl ($from_events s)" \
  || fail "recovery category $recovery s vs events.jsonl $from_events s"
spans=$(g recoveries | tr -cd , | wc -c)
firsts=$(ev $run generation_first_step recovery_seconds | grep -c .)
[ "$((spans + 1))" = "$firsts" ] && pass "$firsts recovery spans, one per generation after the first" \
  || fail "recoveries $(g recoveries) vs $firsts generation_first_step events with recovery_seconds"
# The failure was at step 60, right after a save at step 50 would have been redone, but
# generation 1 restored from memory at step 60: nothing redone.
[ "$(g redone_steps)" = 0 ] && pass "no steps redone (memory restore)" || fail "redone steps $(g redone_steps)"

# The HTML report has the same charts, with the data inlined.
[ -s $run/report.html ] && grep -q ELASTRAIN_DATA $run/report.html && pass "report.html written" || fail "no report.html"
chrome --virtual-time-budget=3000 --dump-dom "file://$WORK/$run/report.html" >"$WORK/report_dom.html"
points=$(grep -o 'data-points="[0-9]*"' "$WORK/report_dom.html" | head -1 | grep -o '[0-9]*' || echo 0)
[ "${points:-0}" -gt 100 ] && grep -q 'class="event failure"' "$WORK/report_dom.html" \
  && pass "the report renders offline: loss chart $points points, the failure in the timeline" || fail "report render: $points points"
chrome --virtual-time-budget=3000 --screenshot="$ARTIFACTS/report.png" "file://$WORK/$run/report.html" >/dev/null
# Gray-failure events stand out: a copy of the run with two such events added.
cp -r $run "$WORK/gray"
printf '%s\n' "{\"time\": $(g end), \"event\": \"straggler_detected\", \"source\": \"controller\", \"generation\": 1, \"rank\": 1, \"worker\": \"w\", \"host\": \"hx\", \"slowdown\": 2.1, \"compute_seconds\": 0.2, \"median_compute_seconds\": 0.1, \"since_step\": 40, \"step\": 50, \"policy\": \"alert\"}" \
  "{\"time\": $(g end), \"event\": \"hang_diagnosed\", \"source\": \"controller\", \"generation\": 1, \"trigger\": \"silent_rank\", \"behind\": [1], \"hosts\": [\"hx\"], \"ranks\": [], \"reason\": \"\"}" >>"$WORK/gray/events.jsonl"
"$BIN" report "$WORK/gray" --html "$WORK/gray.html" >/dev/null || fail "elastrain report of the gray copy failed"
chrome --virtual-time-budget=3000 --dump-dom "file://$WORK/gray.html" >"$WORK/gray_dom.html"
gray=$(grep -oE 'class="event gray" data-event="[a-z_]+"' "$WORK/gray_dom.html" | sed 's/.*data-event=//' | sort -u | tr '\n' ' ')
[[ "$gray" == *straggler_detected* && "$gray" == *hang_diagnosed* ]] && grep -q 'class="marker gray"' "$WORK/gray_dom.html" \
  && grep -q 'rank 1 on hx: 2.10x the median compute since step 40' "$WORK/gray_dom.html" \
  && pass "gray-failure events stand out in the timeline: $gray" || fail "gray events in the report: '$gray'"
rm -rf "$WORK/gray"  # its made-up straggler_detected is no alarm of this run's
[ -s "$ARTIFACTS/report.png" ] && pass "screenshot: $ARTIFACTS/report.png" || fail "no report screenshot"
finish

# Issue 37: `elastrain chaos replay` drives a running job through a failure trace, each
# event at its time (scaled): here an embedded job of 4 workers (num_workers=2:4) gets a
# kill, a preemption notice whose slot returns, a slowdown and a hang, and recovers from
# each: 2 failures counted (the kill and the hang), the preemption not; the job shrinks
# to 3 and grows back to 4 once the preempted capacity returns. `chaos trace` writes the
# same trace for the same seed; `cost simulate --trace` reads a failure trace, and the
# traces shipped in configs/traces/; at its end the replay prints the goodput over its
# own window too. Hostile
# traces (unknown events, negative or unordered times, bad targets, huge files, JSON with
# unknown keys) are refused with one line naming the file, the line or event, and what
# was expected, before anything is sent.
source "$(dirname "$0")/lib.sh"
EXPECT_STRAGGLERS=1  # a rank is slowed on purpose

# --- hostile traces: refused before any job is asked ---------------------------------
head='time_seconds,event,target,factor,seconds'
bad() {  # bad NAME PATTERN CONTENT: chaos replay of a file holding CONTENT fails naming it
  printf '%s\n' "$3" >"$WORK/$1"
  expect_error "replay $1" "$2" -- chaos replay "$WORK/$1" --run-dir "$WORK/none"
}
bad unknown.csv "unknown.csv:3: event 'explode': expected one of kill, hang, preempt, host_loss, slow, unslow" \
  "$head"$'\n''1,kill,any,,'$'\n''2,explode,any,,'
bad negative.csv "negative.csv:2: time_seconds '-5': expected a number of seconds in \[0," "$head"$'\n''-5,kill,any,,'
bad order.csv "order.csv:3: time_seconds 10: expected times in order" "$head"$'\n''20,kill,any,,'$'\n''10,kill,any,,'
bad rank.csv "rank.csv:2: target 'x1': expected a rank" "$head"$'\n''1,kill,x1,,'
bad factor.csv "factor.csv:2: factor '500': slow expects a factor in \(1, 100\]" "$head"$'\n''1,slow,0,500,'
bad header.csv "header.csv:1:1: .*time_seconds" 'when,what'$'\n''1,kill'
bad keys.json "keys.json: events\[0\]: unknown key 'command'" '{"events": [{"time_seconds": 1, "event": "kill", "command": "sh"}]}'
{ echo "$head"; yes '1,kill,any,,' | head -c 5000000 || true; } >"$WORK/huge.csv"
expect_error "replay huge.csv" "huge.csv: [0-9]+ bytes: expected a trace of at most 4194304 bytes" \
  -- chaos replay "$WORK/huge.csv" --run-dir "$WORK/none"
expect_error "replay of a missing file" "none.csv: cannot open it" -- chaos replay "$WORK/none.csv"
expect_error "chaos trace --mix explode" "--mix 'explode': bad entry 'explode'" -- chaos trace --mix explode

# --- chaos trace: seeded, and read back by cost simulate ----------------------------
gen=(chaos trace --duration 36000 --rate 3 --mix kill:2,preempt:1,slow:1 --seed 5)
"$BIN" "${gen[@]}" >"$WORK/a.csv" && "$BIN" "${gen[@]}" >"$WORK/b.csv" && cmp -s "$WORK/a.csv" "$WORK/b.csv" \
  && pass "chaos trace: the same seed gives the same trace ($(grep -c ',' "$WORK/a.csv") lines)" \
  || fail "chaos trace differs between two runs of one seed"
"$BIN" "${gen[@]:0:8}" --seed 6 >"$WORK/c.csv" && ! cmp -s "$WORK/a.csv" "$WORK/c.csv" \
  && pass "another seed, another trace" || fail "seeds 5 and 6 gave the same trace"
n=$(grep -cE '^[0-9.]+,(kill|preempt|hang|host_loss),' "$WORK/a.csv" || true)
out=$("$BIN" cost simulate --work-hours 10 --hosts 4 --checkpoint-seconds 10 --interval-seconds 600 --trials 5 \
  --trace "$WORK/a.csv" 2>&1) && grep -q "interruptions replayed from $WORK/a.csv ($n events)" <<<"$out" \
  && pass "cost simulate --trace reads the failure trace: $n interruptions (the slowdowns are none)" \
  || fail "cost simulate --trace: $out (expected $n events)"

# The traces shipped in configs/traces/ (derived from published spot statistics) parse,
# in full, and carry a comment naming where their rate comes from.
for t in "$SRC"/configs/traces/*.csv; do
  n=$(grep -cE '^[0-9.]+,(kill|preempt|hang|host_loss),' "$t" || true)
  out=$("$BIN" cost simulate --work-hours 100 --hosts 64 --checkpoint-seconds 60 --trials 1 --trace "$t" 2>&1) \
    && grep -q "($n events)" <<<"$out" && [ "$n" -ge 10 ] && grep -qE '^# .*(cloud\.google\.com|aws\.amazon\.com|arXiv)' "$t" \
    && pass "shipped trace $(basename "$t"): $n events, its source named" || fail "shipped trace $t: $out"
done

# --- a replay against a running job --------------------------------------------------
# Trace seconds at --time-scale 5: the kill at 1 s, the notice at 3 s (its slot back 6 s
# later), the slowdown 5-7 s, the hang at 9 s. The job's one host is not cooled down
# after its two failures (host_failure_threshold=10): the growth back to 4 is checked.
cat >"$WORK/trace.csv" <<'EOF'
# a kill, a preemption with notice and return, a slowdown, a hang
time_seconds,event,target,factor,seconds
5,kill,any,,
15,preempt,1,,30
25,slow,0,4,10
45,hang,any,,
EOF
run=runs/replay
"$BIN" train model_name=tiny hardware_peak_tflops=1 steps=100000 log_period=1 eval_interval=0 checkpoint_period=40 \
  num_workers=2:4 max_failures=10 worker_heartbeat_timeout=4 preemption_notice_seconds=5 threads_per_worker=1 \
  host_failure_threshold=10 \
  dashboard_port=0 base_output_directory="$WORK/runs" run_name=replay >"$WORK/out" 2>"$WORK/err" &
job=$!
bg_track $job
out=$(timeout 300 "$BIN" chaos replay "$WORK/trace.csv" --time-scale 5 --seed 3 --run-dir $run 2>&1) || fail "replay: exit $?"
echo "$out" | sed 's/^/    /'
[ "$(grep -c ': requested$' <<<"$out")" = 4 ] && grep -q "4 of 4 events requested, 0 skipped" <<<"$out" \
  && pass "all 4 events requested, each at its time" || fail "replay: $(tail -1 <<<"$out")"
grep -q "preempt rank 1, its slot back in 6s: requested" <<<"$out" && pass "the preemption's return scaled: 30 s of trace, 6 s" \
  || fail "no scaled preempt in: $out"
grep -qE "^goodput of the job so far: [0-9.]+% of [0-9.]+s" <<<"$out" && grep -qE "^  productive +[0-9.]+s" <<<"$out" \
  && grep -qE "^  recovery +[0-9.]+s" <<<"$out" && grep -qE "^goodput over the replay: [0-9.]+% of [0-9.]+s" <<<"$out" \
  && grep -qE "^  recovery +[0-9.]+s +[0-9.]+%  \(replay\)" <<<"$out" \
  && pass "at the end, the job's goodput by category, and over the replay's window: $(grep '^goodput' <<<"$out" | tr '\n' ' ')" \
  || fail "no goodput at the end of the replay"
wait_ev $run worker_hung 60 && pass "the hang was found: $(ev $run worker_hung reason | head -1 | cut -c1-100)" \
  || fail "no worker_hung"
[ -n "$(ev $run worker_failed time)" ] && pass "the kill was a failure: $(ev $run worker_failed reason | head -1 | cut -c1-100)" \
  || fail "no worker_failed"
[ -n "$(ev $run worker_preempted time)" ] && pass "the notice: $(ev $run worker_preempted reason | head -1)" \
  || fail "no worker_preempted"
grep -q "chaos slow: worker .* at 1/4 of" $run/controller.log && pass "rank 0 was slowed 4x" \
  || fail "no slow in the controller's log: $(grep chaos $run/controller.log | tail -2)"
back_to_4() {  # a generation of 4 after the one that lost the preempted rank
  local g
  g=$(ev $run worker_preempted generation | head -1)
  [ -n "$g" ] && "$JQ" --jsonl $run/events.jsonl event=generation_started world | tail -1 | grep -qx 4 \
    && [ "$(ev $run generation_started generation | tail -1)" -gt "$g" ]
}
wait_until 120 back_to_4 && pass "the preempted capacity returned: generation $(ev $run generation_started generation | tail -1) on 4 workers" \
  || fail "no generation of 4 after the preemption: worlds $(ev $run generation_started world | xargs)"
out=$("$BIN" stop --run-dir $run 2>&1) || fail "stop: $out"
rc=0
wait $job || rc=$?
[ "$rc" -eq 4 ] && pass "the job ended STOPPED (exit 4)" || fail "exit $rc: $(tail -3 "$WORK/err")"
failures=$(ev $run job_state failures | tail -1)
[ "$failures" = 2 ] && pass "2 failures counted (the kill and the hang; a preemption is none)" \
  || fail "failures counted: '$failures' (expected 2): $(ev $run generation_failed reason | xargs)"
check_lines $run "$(last_step $run)" "replay"

# A replay whose (embedded) job is over says so once its wait is up.
expect_error "replay against a finished job" "no head_url there \\(is the job running" \
  -- chaos replay "$WORK/trace.csv" --run-dir $run --wait-seconds 1
finish

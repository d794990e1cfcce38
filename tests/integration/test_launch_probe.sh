# Issue 15 (elastrain launch), without torch: a small program (tests/tools/launch_probe.cpp,
# which talks through include/elastrain_worker.h) gets torchrun's environment and no
# secrets; its step reports reach metrics.jsonl; a failing exit code is counted and named;
# a SIGSTOPped program that reports steps is killed as hung and the job recovers;
# `elastrain stop` stops it at a step and the same command resumes; bad command lines
# get one clear error.
source "$(dirname "$0")/lib.sh"
PROBE="$TOOLS/launch_probe"
common=(threads_per_worker=1 log_period=1 dashboard_port=0 base_output_directory="$WORK/runs")

# --- the contract -----------------------------------------------------------------
mkdir -p "$WORK/p1"
rc=0
ELASTRAIN_TOKEN=0123456789abcdef ELASTRAIN_ETCD_PASSWORD_FILE=/nonexistent ELASTRAIN_ETCD_USER=root \
  "$BIN" launch num_workers=3 max_failures=5 checkpoint_period=auto run_name=contract "${common[@]}" -- \
  "$PROBE" --out "$WORK/p1" --steps 8 --step-ms 20 --report >"$WORK/out1" 2>"$WORK/err1" || rc=$?
[ "$rc" -eq 0 ] && pass "launch num_workers=3 exits 0" || fail "exit $rc: $(tail -3 "$WORK/err1")"
grep -q "Launched job finished: 1 generations, 0 failures" "$WORK/out1" && pass "summary: $(grep -m1 Launched "$WORK/out1")" \
  || fail "no summary: $(cat "$WORK/out1")"
getenv() { grep -m1 "^$2=" "$WORK/p1/env.$1.0" | cut -d= -f2-; }
ports=""
for r in 0 1 2; do
  [ -f "$WORK/p1/env.$r.0" ] || { fail "rank $r wrote no environment"; continue; }
  ok=1
  for kv in RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_RANK=$r \
            ROLE_WORLD_SIZE=3 ROLE_NAME=default MASTER_ADDR=127.0.0.1 TORCHELASTIC_RESTART_COUNT=0 \
            TORCHELASTIC_MAX_RESTARTS=5 TORCHELASTIC_RUN_ID=contract TORCHELASTIC_USE_AGENT_STORE=False \
            OMP_NUM_THREADS=1 ELASTRAIN_GENERATION=0 ELASTRAIN_WORLD_SIZE=3 ELASTRAIN_MIN_WORKERS=3 \
            ELASTRAIN_MAX_WORKERS=3 ELASTRAIN_RUN_DIR="$WORK/runs/contract" ELASTRAIN_CHANNEL_FD=3; do
    [ "$(getenv $r "${kv%%=*}")" = "${kv#*=}" ] || { fail "rank $r: ${kv%%=*}='$(getenv $r "${kv%%=*}")', expected '${kv#*=}'"; ok=0; }
  done
  [ $ok -eq 1 ] && pass "rank $r has torchrun's variables and ELASTRAIN_*"
  ports="$ports $(getenv $r MASTER_PORT)"
  if grep -qE "^(ELASTRAIN_TOKEN|ELASTRAIN_ETCD_)" "$WORK/p1/env.$r.0"; then
    fail "rank $r inherited a secret: $(grep -E '^(ELASTRAIN_TOKEN|ELASTRAIN_ETCD_)' "$WORK/p1/env.$r.0" | cut -d= -f1)"
  else
    pass "rank $r got neither ELASTRAIN_TOKEN nor ELASTRAIN_ETCD_*"
  fi
done
[ "$(tr ' ' '\n' <<<"$ports" | grep . | sort -u | wc -l)" -eq 1 ] && [ "$(tr -d ' ' <<<"$ports" | cut -c1-5)" -gt 0 ] \
  && pass "one MASTER_PORT for all ranks:$ports" || fail "MASTER_PORT differs or is empty:$ports"
run=runs/contract
[ "$(last_step $run)" -eq 8 ] && pass "metrics.jsonl carries the reported steps up to 8" || fail "last step $(last_step $run)"
loss8=$("$JQ" --jsonl $run/metrics.jsonl step=8 loss)
[ "$loss8" = "0.125" ] && pass "the reported loss of step 8 (1/8) is in metrics.jsonl" || fail "loss of step 8: '$loss8'"
[ -n "$(ev $run generation_first_step time)" ] && pass "the controller saw the first step (generation_first_step)" \
  || fail "no generation_first_step"
[ -n "$(ev $run checkpoint_saved time step=8)" ] && pass "rank 0's checkpoint reports are checkpoint_saved events" \
  || fail "no checkpoint_saved for step 8"
[ -n "$(ev $run checkpoint_period_changed to)" ] \
  && pass "checkpoint_period=auto: the period is computed for the program ($(ev $run checkpoint_period_changed reason | tr '\n' ' '))" \
  || fail "no checkpoint_period_changed event"
out=$("$BIN" report $run 2>&1) && grep -q "productive" <<<"$out" && pass "elastrain report on a launched run: $(grep -m1 productive <<<"$out")" \
  || fail "report: $out"

# --- a failing program: its exit code is named and counted -------------------------
mkdir -p "$WORK/p2"
rc=0
"$BIN" launch num_workers=2 max_failures=0 run_name=fails "${common[@]}" -- \
  "$PROBE" --out "$WORK/p2" --steps 50 --step-ms 20 --exit-at 3 7 >"$WORK/out2" 2>"$WORK/err2" || rc=$?
[ "$rc" -eq 1 ] && pass "max_failures=0: the job fails (exit 1)" || fail "exit $rc"
grep -q "exited with code 7" "$WORK/err2" && pass "the error names the exit code: $(grep -m1 -o 'program.*code 7' "$WORK/err2")" \
  || fail "no exit code in: $(tail -2 "$WORK/err2")"

# --- a SIGSTOPped program that reports steps is killed as hung --------------------
mkdir -p "$WORK/p3"
"$BIN" launch num_workers=2 max_failures=3 worker_heartbeat_timeout=3 run_name=hang "${common[@]}" -- \
  "$PROBE" --out "$WORK/p3" --steps 200 --step-ms 40 --report >"$WORK/out3" 2>"$WORK/err3" &
job=$!
bg_track $job
run=runs/hang
wait_step $run 10 120 || fail "the probe did not reach step 10: $(tail -3 "$WORK/err3")"
pid=$(grep -ho "START rank=1 .* pid=[0-9]*" $run/logs/*.log | head -1 | grep -o "pid=[0-9]*" | cut -d= -f2)
kill -STOP "$pid"
stopped=$(now)
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job recovered and finished (exit 0)" || fail "exit $rc: $(tail -3 "$WORK/err3")"
hung=$(ev $run worker_hung time)
[ -n "$hung" ] && pass "worker_hung: $(ev $run worker_hung reason | head -1)" || fail "no worker_hung event"
awk -v s="$stopped" -v h="$hung" 'BEGIN { d = h - s; printf "detected %.2f s after SIGSTOP (worker_heartbeat_timeout 3 s)\n", d; exit !(d > 0 && d <= 63) }' \
  && pass "detected by the heartbeat" || fail "not detected in time"
[ "$(last_step $run)" -eq 200 ] && pass "all 200 steps done" || fail "last step $(last_step $run)"
# Issue 32: the hang's diagnosis names the stopped rank and its host.
g=$(ev $run worker_hung generation | head -1)
[ "$(ev $run hang_diagnosed behind generation="$g")" = "[1]" ] && [ -n "$(ev $run hang_diagnosed hosts.0 generation="$g")" ] \
  && pass "hang_diagnosed: $(ev $run hang_diagnosed reason generation="$g")" \
  || fail "hang_diagnosed of generation $g: behind '$(ev $run hang_diagnosed behind generation="$g")'"
# The probe marks its stand-in collectives (include/elastrain_worker.h): rank 0's is named.
[ "$(ev $run hang_diagnosed ranks.0.collective_kind generation="$g")" = barrier ] \
  && pass "rank 0's last collective in the diagnosis: #$(ev $run hang_diagnosed ranks.0.collective_seq generation="$g") (barrier)" \
  || fail "rank 0 in the diagnosis: $(ev $run hang_diagnosed ranks generation="$g")"
# Gone, or a zombie its new parent (init) has not reaped yet: nothing of it runs.
runs_still() { [ -r /proc/$1/stat ] && [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != "Z" ]; }
runs_still "$pid" && fail "the stopped program (pid $pid) still runs: $(cat /proc/$pid/stat)" || pass "the stopped program is gone"
from=$(grep -ho "START rank=0 world=2 restart=1 resumed_from=[0-9]*" $run/logs/*.log | head -1 | grep -o "[0-9]*$")
[ "${from:-0}" -ge 10 ] && pass "generation 1 resumed from the checkpoint (step $from)" || fail "generation 1 did not resume: '$from'"

# --- chaos, status and the API on a launched job -----------------------------------
mkdir -p "$WORK/p6"
"$BIN" launch num_workers=2 max_failures=3 run_name=chaos "${common[@]}" -- \
  "$PROBE" --out "$WORK/p6" --steps 150 --step-ms 40 --report >"$WORK/out6" 2>"$WORK/err6" &
job=$!
bg_track $job
run=runs/chaos
wait_step $run 5 120 || fail "no step 5: $(tail -3 "$WORK/err6")"
st=$("$BIN" status --run-dir $run 2>&1) && grep -q RUNNING <<<"$st" && pass "elastrain status: $(head -1 <<<"$st")" \
  || fail "status: $st"
url=$(cat $run/head_url)
body=$(curl -s -m 10 -H "Authorization: Bearer $(cat $run/token)" "$url/api/v1/job")
[ "$("$JQ" state <<<"$body")" = RUNNING ] && [ "$("$JQ" world <<<"$body")" = 2 ] \
  && pass "the API (/api/v1/job) shows the launched job RUNNING with 2 ranks" || fail "/api/v1/job: ${body:0:200}"
curl -s -m 10 -H "Authorization: Bearer $(cat $run/token)" "$url/metrics" | grep -q "^elastrain_step" \
  && pass "/metrics has the launched job's step" || fail "no elastrain_step on /metrics"
out=$("$BIN" chaos kill --rank 1 --run-dir $run 2>&1) && pass "elastrain chaos kill --rank 1: $out" || fail "chaos: $out"
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job recovered from the chaos kill and finished" || fail "exit $rc: $(tail -3 "$WORK/err6")"
[ -n "$(ev $run generation_failed time)" ] && pass "generation_failed: $(ev $run generation_failed reason | head -1 | cut -c1-140)" \
  || fail "no generation_failed after the chaos kill"

# --- elastrain stop: the program stops at a step; the same command resumes ---------
mkdir -p "$WORK/p4"
args=(launch num_workers=2 run_name=stop "${common[@]}" -- "$PROBE" --out "$WORK/p4" --steps 60 --step-ms 40 --report)
"$BIN" "${args[@]}" >"$WORK/out4" 2>"$WORK/err4" &
job=$!
bg_track $job
run=runs/stop
wait_step $run 5 120 || fail "no step 5: $(tail -3 "$WORK/err4")"
"$BIN" stop --run-dir $run >/dev/null 2>&1 && pass "elastrain stop accepted" || fail "elastrain stop refused"
rc=0
wait $job || rc=$?
[ "$rc" -eq 4 ] && pass "the launcher exits 4 (stopped)" || fail "exit $rc: $(tail -3 "$WORK/err4")"
grep -q "STOPPED rank=0 .*reason=user" $run/logs/*.log && pass "the program saw a user stop" || fail "no user stop seen"
saved=$(cat "$WORK/p4/checkpoint")
rc=0
"$BIN" "${args[@]}" >"$WORK/out5" 2>"$WORK/err5" || rc=$?
[ "$rc" -eq 0 ] && pass "the same command finishes the job" || fail "rerun exit $rc: $(tail -3 "$WORK/err5")"
grep -q "resumed_from=$saved " $run/logs/*.log && pass "the rerun resumed from step $saved" || fail "no resume from $saved"

# --- bad command lines ----------------------------------------------------------------
expect_error "launch without a program" "expected the program after .--." -- launch num_workers=2 run_name=x "${common[@]}"
expect_error "launch of a missing program" "program /nonexistent/prog: no such file" -- \
  launch num_workers=2 run_name=x "${common[@]}" -- /nonexistent/prog
expect_error "train with launch_program" "launch_program is set" -- train launch_program='["true"]'
expect_error "launch_program not an array" "launch_program.*JSON array" -- launch launch_program=python3 run_name=x
finish

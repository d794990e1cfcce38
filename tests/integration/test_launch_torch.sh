# Issue 15 (elastrain launch) with Debian's python3-torch (CPU, gloo), on the unmodified
# DDP script examples/ddp_train.py:
#   1. it reaches the same final loss under torchrun --standalone --nproc_per_node=2 and
#      under `elastrain launch num_workers=2`; torch 1.13's torchrun needs the wrapper
#      tests/integration/torchrun_py311.py on Python 3.11 (Std.NONE is not iterated);
#   2. num_workers=2:3: a SIGKILLed program fails its generation (counted), the next one
#      resumes from the script's checkpoint; a preempted worker (SIGTERM) takes its slot
#      away and the script resumes with WORLD_SIZE=2; the job reaches the same final loss;
#      no process of the killed generation survives;
#   3. a program that does not talk, SIGSTOPped: its peers' collective timeout (the
#      script's init_process_group timeout) fails the generation and the job recovers;
#   4. SIGTERM to the launcher: the script saves within the notice, the launcher exits 3,
#      and the same command resumes.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c "import torch" 2>/dev/null || { fail "python3-torch is not installed (scripts/install_deps.sh --test)"; finish; exit 1; }
SCRIPT="$SRC/examples/ddp_train.py"
common=(threads_per_worker=1 log_period=1 dashboard_port=0 base_output_directory="$WORK/runs")
final_loss() { grep -ho "FINAL step=[0-9]* loss=[0-9.e-]*" "$@" | head -1 | sed 's/.*loss=//'; }
same_loss() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * (a < 0 ? -a : a)) }'; }
# alive PID: running (a zombie not yet reaped by its new parent does not count).
alive() { [ -r /proc/$1/stat ] && [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != "Z" ]; }
# starts RUN: the script's START lines, from its workers' logs.
starts() { grep -ho "START rank=[0-9]* world=[0-9]* restart=[0-9]* resumed_from=[0-9]* pid=[0-9]*" "$1"/logs/*.log; }
field() { grep -o "$1=[0-9]*" | cut -d= -f2; }

# --- 1. the same final loss under torchrun and elastrain launch ----------------------
steps=80
"$PY" "$SRC/tests/integration/torchrun_py311.py" --standalone --nproc_per_node=2 "$SCRIPT" --steps $steps \
  --checkpoint-dir "$WORK/ck_torchrun" >"$WORK/torchrun.out" 2>&1 && pass "torchrun ran the script" \
  || fail "torchrun failed: $(tail -3 "$WORK/torchrun.out")"
ref=$(final_loss "$WORK/torchrun.out")
rc=0
"$BIN" launch num_workers=2 run_name=same "${common[@]}" -- "$PY" "$SCRIPT" --steps $steps \
  --checkpoint-dir "$WORK/ck_same" >"$WORK/same.out" 2>"$WORK/same.err" || rc=$?
[ "$rc" -eq 0 ] && pass "elastrain launch ran the script" || fail "launch exit $rc: $(tail -3 "$WORK/same.err")"
got=$(final_loss runs/same/logs/*.log)
same_loss "$ref" "$got" && pass "the same final loss: torchrun $ref, elastrain launch $got" \
  || fail "final loss torchrun '$ref' vs elastrain launch '$got'"
# The script's step reports (python/elastrain_worker.py) are the run's metrics.
reported=$("$JQ" --jsonl runs/same/metrics.jsonl step=$steps loss)
same_loss "$got" "$reported" && pass "metrics.jsonl has the reported loss of step $steps ($reported)" \
  || fail "metrics.jsonl step $steps loss '$reported'"

# --- warm spares: a restart hands the ranks to programs started ahead -------------------
run=runs/warm
"$BIN" launch num_workers=2 warm_spares=true run_name=warm "${common[@]}" -- "$PY" "$SCRIPT" --steps $steps \
  --step-sleep 0.05 --checkpoint-dir "$WORK/ck_warm" >"$WORK/warm.out" 2>"$WORK/warm.err" &
job=$!
bg_track $job
wait_step $run 20 180 || fail "no step 20 with warm spares: $(tail -3 "$WORK/warm.err")"
# The script marks its collectives (elastrain_worker.collective): they reach status.
st=$("$BIN" status --run-dir $run --json 2>/dev/null || true)
seq=$("$JQ" ranks.1.collective_seq <<<"$st" 2>/dev/null || true)
kind=$("$JQ" ranks.1.collective_kind <<<"$st" 2>/dev/null || true)
[ "${seq:-0}" -gt 20 ] 2>/dev/null && [[ $kind =~ ^(allreduce|barrier)$ ]] \
  && pass "the script's collective marks reach status: rank 1 last entered #$seq ($kind)" \
  || fail "rank 1's collective in status: seq '$seq', kind '$kind'"
kill -9 "$(starts $run | grep "rank=1 .*restart=0 " | field pid)"
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "warm_spares=true: the job finished after a SIGKILL" || fail "exit $rc: $(tail -3 "$WORK/warm.err")"
n=$(grep -h "generation 1: rank . of 2 to the warm spare" $run/logs/*.log | wc -l)
[ "$n" -eq 2 ] && pass "both ranks of generation 1 went to warm spares" || fail "$n ranks of generation 1 to warm spares"
echo "    recovery with warm spares: $(ev $run generation_first_step recovery_seconds generation=1) s (generation_first_step)"
# A program that never calls wait_for_assignment(): its spare dies, the worker says why
# and starts it cold.
rc=0
"$BIN" launch num_workers=2 warm_spares=true run_name=nowarm "${common[@]}" -- "$PY" "$SCRIPT" --steps 20 \
  --no-report --checkpoint-dir "$WORK/ck_nowarm" >"$WORK/nowarm.out" 2>"$WORK/nowarm.err" || rc=$?
[ "$rc" -eq 0 ] && pass "a script without wait_for_assignment() still runs with warm_spares=true" \
  || fail "exit $rc: $(tail -3 "$WORK/nowarm.err")"
grep -hq "later generations start cold" runs/nowarm/logs/*.log && pass "the worker says the spare died and why" \
  || fail "no warning about the spare"

# --- 2. SIGKILL of a program, then a preempted worker, with num_workers=2:3 ----------
run=runs/kill
"$BIN" launch num_workers=2:3 max_failures=3 run_name=kill "${common[@]}" -- "$PY" "$SCRIPT" --steps $steps \
  --step-sleep 0.05 --checkpoint-dir "$WORK/ck_kill" >"$WORK/kill.out" 2>"$WORK/kill.err" &
job=$!
bg_track $job
wait_step $run 20 180 || fail "the script did not reach step 20: $(tail -3 "$WORK/kill.err")"
# The generation now running (usually 0; a loaded machine may have started the third
# worker after the first plan, and the job then grew at a checkpoint boundary).
g_kill=$("$BIN" status --run-dir $run --json | "$JQ" generation)
gen0=$(starts $run | grep "restart=$g_kill " | field pid | tr '\n' ' ')
victim=$(starts $run | grep "rank=1 .*restart=$g_kill " | field pid | tail -1)
if [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; then
  pass "SIGKILL to rank 1's program (pid $victim) at step $(last_step $run); generation $g_kill ran pids $gen0"
else
  fail "rank 1's program of generation $g_kill is not running (pid [$victim]): $(starts $run | tr '\n' ';')"
fi
wait_ev $run generation_first_step 120 generation=$((g_kill + 1)) || fail "generation $((g_kill + 1)) did not train"
# A preemption notice to one worker (the elastrain worker of rank 2): its slot goes away.
w=$("$BIN" status --run-dir $run --json | "$JQ" ranks.2.pid)
kill -TERM "$w"
pass "SIGTERM (a preemption notice) to the worker of rank 2 (pid $w)"
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job finished (exit 0)" || fail "exit $rc: $(tail -3 "$WORK/kill.err")"
[ "$(ev $run generation_failed failures | head -1)" = "1" ] \
  && pass "generation_failed: $(ev $run generation_failed reason | head -1 | cut -c1-160)" || fail "no generation_failed event"
gens=$(ev $run generation_started generation | sort -u | wc -l)
[ "$gens" -ge 3 ] && pass "$gens generations in events.jsonl" || fail "only $gens generations"
ok=1
while read -r line; do
  g=$(field restart <<<"$line"); w=$(field world <<<"$line")
  planned=$("$JQ" --jsonl $run/events.jsonl event=generation_started generation="$g" members | grep -o '"rank"' | wc -l)
  [ "$w" = "$planned" ] || { fail "generation $g: the script saw WORLD_SIZE=$w, the plan had $planned ranks"; ok=0; }
done < <(starts $run)
[ $ok -eq 1 ] && pass "every generation's WORLD_SIZE is its plan's world"
resumed=$(starts $run | grep "world=2 " | grep -v "resumed_from=0 " | head -1)
[ -n "$resumed" ] && pass "the script resumed from its checkpoint with WORLD_SIZE=2: $resumed" \
  || fail "no resume with WORLD_SIZE=2: $(starts $run)"
got=$(final_loss $run/logs/*.log)
same_loss "$ref" "$got" && pass "and reached the same final loss ($got)" || fail "final loss '$got', uninterrupted '$ref'"
left=""
for p in $gen0; do alive "$p" && left="$left $p"; done
[ -z "$left" ] && pass "no process of generation $g_kill survives" || fail "still running from generation $g_kill:$left"

# --- 3. a program that does not talk, SIGSTOPped: the collective timeout ---------------
run=runs/silent
"$BIN" launch num_workers=2 max_failures=3 run_name=silent "${common[@]}" -- "$PY" "$SCRIPT" --steps 60 \
  --step-sleep 0.05 --timeout 5 --no-report --checkpoint-dir "$WORK/ck_silent" >"$WORK/silent.out" 2>"$WORK/silent.err" &
job=$!
bg_track $job
wait_until 120 bash -c "grep -hq 'START rank=1 .*restart=0' $run/logs/*.log 2>/dev/null" || fail "no START"
sleep 2  # a few steps in
stopped=$(starts $run | grep "rank=1 .*restart=0 " | field pid)
kill -STOP "$stopped"
t_stop=$(now)
rc=0
wait $job || rc=$?
[ "$rc" -eq 0 ] && pass "the job recovered and finished (exit 0)" || fail "exit $rc: $(tail -3 "$WORK/silent.err")"
t_fail=$(ev $run generation_failed time | head -1)
awk -v s="$t_stop" -v f="$t_fail" 'BEGIN { d = f - s; printf "generation failed %.1f s after the SIGSTOP (collective timeout 5 s)\n", d; exit !(f != "" && d >= 4 && d <= 90) }' \
  && pass "the peers' collective timeout ended the generation: $(ev $run generation_failed reason | head -1 | cut -c1-150)" \
  || fail "no timely generation_failed"
alive "$stopped" && fail "the stopped program $stopped still runs" || pass "the stopped program was killed"

# --- 4. SIGTERM to the launcher: save, exit 3, resume ---------------------------------
run=runs/term
args=(launch num_workers=2 preemption_notice_seconds=30 run_name=term "${common[@]}" -- "$PY" "$SCRIPT"
      --steps $steps --step-sleep 0.05 --checkpoint-every 1000 --checkpoint-dir "$WORK/ck_term")
"$BIN" "${args[@]}" >"$WORK/term.out" 2>"$WORK/term.err" &
job=$!
bg_track $job
wait_step $run 15 180 || fail "no step 15: $(tail -3 "$WORK/term.err")"
kill -TERM $job
rc=0
wait $job || rc=$?
[ "$rc" -eq 3 ] && pass "SIGTERM: the launcher exits 3 (preempted)" || fail "exit $rc: $(tail -3 "$WORK/term.err")"
saved=$(grep -ho "STOPPED rank=0 step=[0-9]*" $run/logs/*.log | field step)
[ -n "$saved" ] && [ "$saved" -ge 15 ] && pass "the script saved step $saved on SIGTERM (its periodic saves are off)" \
  || fail "no save on SIGTERM: $(grep -h STOPPED $run/logs/*.log)"
rc=0
"$BIN" "${args[@]}" >"$WORK/term2.out" 2>"$WORK/term2.err" || rc=$?
[ "$rc" -eq 0 ] && pass "the same command finishes" || fail "rerun exit $rc: $(tail -3 "$WORK/term2.err")"
starts $run | grep -q "rank=0 .*resumed_from=$saved " && pass "the rerun resumed from step $saved" \
  || fail "no resume from $saved: $(starts $run)"
got=$(final_loss $run/logs/*.log)
same_loss "$ref" "$got" && pass "and reached the same final loss ($got)" || fail "final loss '$got', uninterrupted '$ref'"
finish

# SIGKILL of one worker mid-run: the others fail fast (well under collective_timeout)
# naming the lost peer, and the run exits non-zero with that reason.
source "$(dirname "$0")/lib.sh"
start=$(date +%s.%N)
"$BIN" train model_name=tiny num_workers=3 ici_data_parallelism=3 steps=100000 log_period=1 eval_interval=0 \
  collective_timeout=60 base_output_directory="$WORK/runs" run_name=kill >"$WORK/out" 2>"$WORK/err" &
launcher=$!
# Wait until training is under way (a few steps logged), then kill rank 1.
for _ in $(seq 1 300); do
  [ -f runs/kill/metrics.jsonl ] && [ "$(grep -c '"loss"' runs/kill/metrics.jsonl)" -ge 3 ] && break
  sleep 0.1
done
pid=$(grep -o '"1":[0-9]*' runs/kill/workers.json | cut -d: -f2)
kill -9 "$pid"
killed=$(date +%s.%N)
rc=0
wait $launcher || rc=$?
ended=$(date +%s.%N)
elapsed=$(awk -v a="$killed" -v b="$ended" 'BEGIN { printf "%.3f", b - a }')
echo "launcher exited $rc, $elapsed s after the kill"
[ "$rc" -ne 0 ] && pass "run exits non-zero ($rc)" || fail "run exited 0"
awk -v e="$elapsed" 'BEGIN { exit !(e < 10) }' && pass "failed fast: ${elapsed}s (collective_timeout 60s)" || fail "took ${elapsed}s"
grep -q "worker rank 1 (pid $pid) was killed by signal 9 (SIGKILL)" "$WORK/err" \
  && pass "reason names the rank and signal: $(cat "$WORK/err")" || fail "stderr: $(cat "$WORK/err")"
for r in 0 2; do
  grep -q "rank 1 (pid $pid) is gone" runs/kill/logs/rank_$r.log \
    && pass "rank $r names the lost peer: $(grep -o 'error: .*' runs/kill/logs/rank_$r.log | head -1 | cut -c1-200)" \
    || fail "rank $r log: $(tail -2 runs/kill/logs/rank_$r.log)"
done
finish

# Checkpoint failures: SIGKILL at several points of a save, an injected write error, a
# real full filesystem, a flipped byte. The previous checkpoint always survives.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 steps=30 log_period=5 eval_interval=0 checkpoint_period=10 base_output_directory="$WORK/runs")

# 1. SIGKILL inside the save of step 20, at each point of the protocol.
for point in crash_after_shard crash_before_manifest crash_before_commit crash_before_latest; do
  rc=0
  ELASTRAIN_FAULT="$point@path=step_00000020" "$BIN" train "${common[@]}" run_name=$point >/dev/null 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && pass "$point: the run died (exit $rc)" || { fail "$point: the run survived"; continue; }
  latest=runs/$point/checkpoints/$(cat runs/$point/checkpoints/LATEST)
  "$BIN" checkpoint verify "$latest" >/dev/null 2>&1 && pass "$point: LATEST ($(basename "$latest")) verifies" \
    || fail "$point: LATEST $latest fails verify"
  [ "$(basename "$latest")" = step_00000010 ] && pass "$point: LATEST is the previous checkpoint" || fail "$point: LATEST is $latest"
  "$BIN" train "${common[@]}" run_name=$point >"$WORK/$point.out" 2>&1 && pass "$point: the next run completes" \
    || fail "$point: rerun failed: $(tail -1 "$WORK/$point.out")"
  grep -q '"event":"checkpoint_restored","full_state":true,"seconds":[0-9.e-]*,"step":10' runs/$point/events.jsonl \
    && pass "$point: resumed from step 10" || fail "$point: $(grep restored runs/$point/events.jsonl)"
done

# 2. An injected write error at step 20: reported, partial directory removed, step 10 intact, training goes on.
ELASTRAIN_FAULT="fail_write@path=step_00000020" "$BIN" train "${common[@]}" run_name=werr >"$WORK/werr.out" 2>&1 \
  && pass "write error: training continued (checkpoint_failure_policy=continue)" || fail "write error run: $(tail -1 "$WORK/werr.out")"
grep -q '"event":"checkpoint_failed"' runs/werr/events.jsonl && pass "write error is an event: $(grep -o '"error":"[^"]*' runs/werr/events.jsonl | head -1 | cut -c1-150)" \
  || fail "no checkpoint_failed event"
[ ! -e runs/werr/checkpoints/step_00000020 ] && pass "partial step_00000020 removed" || fail "step_00000020 left behind"
"$BIN" checkpoint verify runs/werr/checkpoints/step_00000010 >/dev/null 2>&1 && pass "step_00000010 intact" || fail "step 10 broken"
[ "$(cat runs/werr/checkpoints/LATEST)" = step_00000030 ] && pass "the next save (step 30) succeeded" || fail "LATEST $(cat runs/werr/checkpoints/LATEST)"
rc=0
ELASTRAIN_FAULT="fail_write@path=step_00000020" "$BIN" train "${common[@]}" run_name=werr_fail checkpoint_failure_policy=fail \
  >/dev/null 2>"$WORK/werr_fail.err" || rc=$?
[ "$rc" -ne 0 ] && grep -q "step_00000020" "$WORK/werr_fail.err" && pass "policy fail: exit $rc: $(cut -c1-160 "$WORK/werr_fail.err")" \
  || fail "policy fail: rc=$rc $(cat "$WORK/werr_fail.err")"

# 3. A real full filesystem (a 2 MiB tmpfs; one checkpoint of tiny takes 1.3 MB).
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=2200k tmpfs "$WORK/small" 2>/dev/null; then
  "$BIN" train "${common[@]}" base_output_directory="$WORK/small" run_name=full >"$WORK/full.out" 2>&1 || true
  grep -q '"event":"checkpoint_failed"' "$WORK/small/full/events.jsonl" 2>/dev/null \
    && pass "full disk reported: $(grep -o 'No space left[^"]*' "$WORK/small/full/events.jsonl" | head -1)" || fail "full disk not reported: $(tail -2 "$WORK/full.out")"
  "$BIN" checkpoint verify "$WORK/small/full/checkpoints/step_00000010" >/dev/null 2>&1 \
    && pass "full disk: step_00000010 intact" || fail "full disk: step 10 broken"
  [ "$(cat "$WORK/small/full/checkpoints/LATEST")" = step_00000010 ] && pass "full disk: LATEST stays step_00000010" || fail "full disk LATEST"
  umount "$WORK/small"
else
  echo "skip - full filesystem: cannot mount a tmpfs here"
fi

# 4. A flipped byte in the newest checkpoint: verify names it; a restore falls back.
"$BIN" train "${common[@]}" run_name=flip >/dev/null 2>&1 || fail "flip run"
f=runs/flip/checkpoints/step_00000030/params-00000.safetensors
size=$(stat -c %s "$f")
printf '\xff' | dd of="$f" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
out=$("$BIN" checkpoint verify runs/flip/checkpoints/step_00000030 2>&1) && fail "verify passed a flipped byte" \
  || pass "verify catches the flipped byte: $(echo "$out" | head -1 | cut -c1-160)"
grep -q "params-00000.safetensors" <<<"$out" && grep -q "lm_head" <<<"$out" && pass "verify names file and tensor" || fail "verify output: $out"
"$BIN" train "${common[@]}" steps=35 run_name=flip >"$WORK/flip.out" 2>&1 && pass "restore fell back and trained on" \
  || fail "restore after flip: $(tail -2 "$WORK/flip.out")"
grep -q '"event":"checkpoint_restore_fallback"' runs/flip/events.jsonl && \
  grep -q '"event":"checkpoint_restored","full_state":true,"seconds":[0-9.e-]*,"step":20' runs/flip/events.jsonl \
  && pass "fell back to step 20 with a warning event" || fail "events: $(grep -o '"event":"[a-z_]*"' runs/flip/events.jsonl | tr '\n' ' ')"
finish

# Issue 33: a checkpoint whose data (not its manifest) is damaged is moved aside when a run
# resumes, never deleted. The manifest validates, so only the failed restore tells: the
# run falls back to the previous checkpoint, and the damaged directory must survive as
# checkpoints/damaged-step_N-<unix time>, byte for byte, with the reason logged.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 log_period=5 eval_interval=0 checkpoint_period=10
        base_output_directory="$WORK/runs" run_name=dmg)
"$BIN" train "${common[@]}" steps=30 >/dev/null 2>&1 || fail "the first run failed"
f=runs/dmg/checkpoints/step_00000030/params-00000.safetensors
size=$(stat -c %s "$f")
printf '\xff' | dd of="$f" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
damaged_sum=$(sha256sum <"$f")
"$BIN" checkpoint verify runs/dmg/checkpoints/step_00000030 >/dev/null 2>&1 && fail "the manifest-valid damage is not there"
out=$("$BIN" train "${common[@]}" steps=25 2>&1) && pass "the resumed run fell back and trained on" \
  || fail "the resumed run failed: $(tail -2 <<<"$out")"
grep -q '"event":"checkpoint_restore_fallback"' runs/dmg/events.jsonl && pass "checkpoint_restore_fallback event" \
  || fail "no fallback event"
aside=$(find runs/dmg/checkpoints -maxdepth 1 -name 'damaged-step_00000030-*' | head -1)
[ -n "$aside" ] && pass "moved aside to $aside" || fail "no damaged-step_00000030-*: $(ls runs/dmg/checkpoints)"
[ -n "$aside" ] && [ "$(sha256sum <"$aside/params-00000.safetensors")" = "$damaged_sum" ] \
  && pass "the damaged data is kept byte for byte" || fail "the damaged data is gone or changed"
why=$(grep -o "moved [^ ]*step_00000030 to .*" <<<"$out" | head -1)
grep -q "its data did not restore" <<<"$why" && pass "logged: $(cut -c1-200 <<<"$why")" || fail "no log line says why: $why"
finish

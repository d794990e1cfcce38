# Hostile files and values (security issue #14): a checkpoint whose manifest step is
# negative beside good ones, shape keys near 2^61 (config and manifest), safetensors
# headers whose length or data offset is near 2^63, an export of a [2^32, 2^32] tensor,
# a non-numeric field in metrics.jsonl. Each must end with an exit code, never a signal
# (< 128), with a message naming the file or key and the field, and change nothing on
# disk (no file changed, added or removed) except where stated. lib.sh's EXIT trap
# removes the work directory on every exit path.
source "$(dirname "$0")/lib.sh"
common=(model_name=tiny hardware_peak_tflops=1 steps=30 log_period=5 eval_interval=0 checkpoint_period=10 base_output_directory="$WORK/runs")
HUGE=2305843009213693952   # 2^61

# snapshot DIR: every path with its type, and every file's sha256, sorted.
snapshot() { (cd "$1" && find . -printf '%y %p\n' | sort && find . -type f -exec sha256sum {} + | sort); }

# refused NAME PATTERN DIR -- ARGS...: `elastrain ARGS` exits non-zero but below 128 (not
# killed by a signal) within 120 s (it once hung), its output (stdout and stderr) matches
# PATTERN (grep -E), and nothing under DIR changed.
refused() {
  local name=$1 pattern=$2 dir=$3
  shift 4
  local before after out rc=0
  before=$(snapshot "$dir")
  out=$(timeout -s KILL 120 "$BIN" "$@" 2>&1) || rc=$?
  after=$(snapshot "$dir")
  if [ "$rc" -eq 137 ]; then fail "$name: killed after 120 s (a hang) or by a signal: $(tail -c 300 <<<"$out")"; return; fi
  if [ "$rc" -eq 0 ]; then fail "$name: exit code 0, expected an error: $(tail -c 300 <<<"$out")"; return; fi
  if [ "$rc" -ge 128 ]; then fail "$name: killed by a signal (exit $rc): $(tail -c 300 <<<"$out")"; return; fi
  if ! grep -qE -e "$pattern" <<<"$out"; then fail "$name: output does not match /$pattern/: $(tail -c 400 <<<"$out")"; return; fi
  if [ "$before" != "$after" ]; then fail "$name: the disk changed: $(diff <(echo "$before") <(echo "$after") | head -5)"; return; fi
  pass "$name (exit $rc): $(grep -E -m1 -e "$pattern" <<<"$out" | cut -c1-220)"
}

# A run with committed checkpoints at steps 10, 20 and 30 (LATEST), metrics and events.
"$BIN" train "${common[@]}" run_name=good >"$WORK/good.out" 2>&1 || { fail "setup run: $(tail -3 "$WORK/good.out")"; finish; exit 1; }
[ "$(cat runs/good/checkpoints/LATEST)" = step_00000030 ] && pass "setup: checkpoints 10, 20, 30" || fail "setup: LATEST $(cat runs/good/checkpoints/LATEST)"
copy_run() { rm -rf "runs/$1"; cp -a runs/good "runs/$1"; }
ck=checkpoints/step_00000030

# 1. A manifest whose step is negative, beside good checkpoints.
copy_run neg
sed -i 's/^ "step": 30,$/ "step": -30,/' runs/neg/$ck/manifest.json
grep -q '^ "step": -30,$' runs/neg/$ck/manifest.json || fail "could not craft the negative step"
field_step="step_00000030/manifest.json: field 'step': -30 is out of range"
refused "negative step: verify" "$field_step" runs/neg -- checkpoint verify runs/neg/$ck
refused "negative step: inspect" "$field_step" runs/neg -- checkpoint inspect runs/neg/$ck
refused "negative step: export" "$field_step" "$WORK" -- checkpoint export runs/neg/$ck "$WORK/export_neg/model.safetensors"
# Training resumes from step 20 instead: the good checkpoints are untouched, and the
# damaged one is moved aside, never deleted (it once deleted every checkpoint, then aborted).
good_before=$(cd runs/neg/checkpoints && sha256sum step_00000010/* step_00000020/* | sort)
damaged_before=$(cd runs/neg/$ck && sha256sum ./* | sort)
rc=0
"$BIN" train "${common[@]}" run_name=neg >"$WORK/neg.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] && pass "negative step: training resumed and finished" || fail "negative step: train exit $rc: $(tail -2 "$WORK/neg.out")"
grep -q "does not restore (.*$field_step" "$WORK/neg.out" && pass "negative step: the fallback names the file and field" \
  || fail "negative step: no warning naming manifest.json 'step': $(grep -i warn "$WORK/neg.out" | head -2)"
grep -q '"event":"checkpoint_restored".*"step":20' runs/neg/events.jsonl && pass "negative step: restored from step 20" \
  || fail "negative step: $(grep restored runs/neg/events.jsonl)"
good_after=$(cd runs/neg/checkpoints && sha256sum step_00000010/* step_00000020/* 2>&1 | sort || true)
[ "$good_before" = "$good_after" ] && pass "negative step: checkpoints 10 and 20 unchanged" || fail "negative step: a good checkpoint changed"
moved=$(ls -d runs/neg/checkpoints/damaged-step_00000030-* 2>/dev/null | head -1 || true)
if [ -n "$moved" ] && [ "$(cd "$moved" && sha256sum ./* | sort || true)" = "$damaged_before" ]; then
  pass "negative step: the damaged checkpoint was kept, moved to $(basename "$moved")"
else
  fail "negative step: the damaged checkpoint is gone or changed ($(ls runs/neg/checkpoints))"
fi

# 2. Shape keys near 2^61: from the command line, and in a manifest.
refused "huge layers: plan" "base_num_decoder_layers=$HUGE: expected an integer in \[1, 4096\]" "$WORK" -- \
  plan model_name=tiny base_num_decoder_layers=$HUGE
refused "huge vocab: train" "vocab_size=$HUGE: expected an integer in \[1, 16777216\]" "$WORK" -- \
  train "${common[@]}" run_name=huge vocab_size=$HUGE
refused "huge width: plan" "base_emb_dim=$HUGE" "$WORK" -- plan model_name=tiny base_emb_dim=$HUGE
refused "huge steps x batch: plan" "steps\*global batch .*overflows" "$WORK" -- \
  plan model_name=tiny steps=1099511627776 global_batch_size=1073741824
refused "huge micro-batch activations: plan" "activation memory of a micro-batch" "$WORK" -- \
  plan model_name=llama3-8b per_device_batch_size=1048576 max_target_length=1048576
copy_run shape
# embed.wte's shape (the first tensor): [256, 64] -> [2^32, 2^32], whose element count wraps to 0 in 64 bits.
perl -0pi -e 's/"shape": \[\n    256,\n    64\n   \]/"shape": [4294967296, 4294967296]/' runs/shape/$ck/manifest.json
grep -q '"shape": \[4294967296, 4294967296\]' runs/shape/$ck/manifest.json || fail "could not craft the [2^32, 2^32] shape"
field_shape="manifest.json: field 'tensors\[0\]\.shape': .*overflows"
refused "[2^32, 2^32] manifest shape: verify" "$field_shape" runs/shape -- checkpoint verify runs/shape/$ck
# 3. Export of that tensor: an error, and no output file or directory (it once wrote an
# empty tensor and exited 0). Into a new directory, and into an existing one.
refused "[2^32, 2^32] export (new directory)" "$field_shape" "$WORK" -- \
  checkpoint export runs/shape/$ck "$WORK/export_new/model.safetensors"
mkdir -p "$WORK/export_dir"
refused "[2^32, 2^32] export (existing directory)" "$field_shape" "$WORK" -- \
  checkpoint export runs/shape/$ck "$WORK/export_dir/model.safetensors"
# [2^30, 2^30] fits 64 bits but not the files: refused before allocating 4 EiB.
copy_run bigshape
perl -0pi -e 's/"shape": \[\n    256,\n    64\n   \]/"shape": [1073741824, 1073741824]/' runs/bigshape/$ck/manifest.json
refused "[2^30, 2^30] export" "tensor 'embed.wte' has shape \[1073741824, 1073741824\] .* hold only" "$WORK" -- \
  checkpoint export runs/bigshape/$ck "$WORK/export_dir/model.safetensors"

# 4. Safetensors headers: a header length of 2^63, and a data offset near 2^63 (the
# header rewritten to the same length, so the file keeps the size the manifest records).
copy_run stlen
printf '\x00\x00\x00\x00\x00\x00\x00\x80' | dd of=runs/stlen/$ck/params-00000.safetensors bs=1 count=8 conv=notrunc status=none
refused "safetensors header length 2^63: verify" \
  "params-00000.safetensors: header length 9223372036854775808 does not fit the file" runs/stlen -- checkpoint verify runs/stlen/$ck
copy_run stoff
f=runs/stoff/$ck/params-00000.safetensors
len=$(od -An -t u8 -N8 "$f" | tr -d ' ')
hdr='{"t":{"dtype":"F32","shape":[1],"data_offsets":[9223372036854775000,9223372036854775807]}}'
{ head -c 8 "$f"; printf '%s%*s' "$hdr" $((len - ${#hdr})) ''; tail -c +$((9 + len)) "$f"; } >"$WORK/st.tmp"
[ "$(stat -c %s "$WORK/st.tmp")" = "$(stat -c %s "$f")" ] && cat "$WORK/st.tmp" >"$f" && rm "$WORK/st.tmp" \
  || fail "could not craft the data offset"
refused "safetensors data offset near 2^63: verify" \
  "params-00000.safetensors: safetensors header: tensor 't': data_offsets \[9223372036854775000, 9223372036854775807\] outside" \
  runs/stoff -- checkpoint verify runs/stoff/$ck

# 5. A non-numeric field in metrics.jsonl: `elastrain report` skips that line with a
# warning naming file:line and the field, and writes only its report (it once aborted
# with nlohmann's type_error).
copy_run metrics
sed -i '2s/"loss":[^,]*/"loss":"abc"/' runs/metrics/metrics.jsonl
sed -i '3s/"step":[0-9]*/"step":{"x":1}/' runs/metrics/metrics.jsonl
before=$(snapshot runs/metrics)
rc=0
out=$("$BIN" report runs/metrics 2>&1) || rc=$?
after=$(snapshot runs/metrics)
[ "$rc" -lt 128 ] && pass "non-numeric metrics: report exit $rc (no signal)" || fail "non-numeric metrics: report killed (exit $rc): $out"
grep -q "metrics.jsonl:2: field 'loss' is string (\"abc\"), expected a number; line skipped" <<<"$out" \
  && grep -q "metrics.jsonl:3: field 'step' is object" <<<"$out" \
  && pass "non-numeric metrics: warnings name file:line and field" || fail "non-numeric metrics: no file:line warning: $out"
[ "$rc" -eq 0 ] && grep -q "HTML report" <<<"$out" && pass "non-numeric metrics: the report is printed" || fail "report: $out"
changed=$(diff <(echo "$before") <(echo "$after") | grep '^[<>]' || true)
if [ -z "$(grep -v 'report.html' <<<"$changed" || true)" ]; then
  pass "non-numeric metrics: nothing changed but the new report.html"
else
  fail "non-numeric metrics: the disk changed: $(head -5 <<<"$changed")"
fi

finish

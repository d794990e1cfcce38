# A crafted run directory (docs/security.md): links planted in it are refused, never
# followed; the victim files they point at stay as they were; a refused job ends with one
# clear error; what elastrain creates is private to the user (umask 077).
source "$(dirname "$0")/lib.sh"
RUNS="$WORK/runs"
VICTIM="$WORK/victim"          # stands for ~/.bashrc
printf 'keep me\n' >"$VICTIM"
victim_sum=$(sha256sum "$VICTIM")
victim_ok() { [ "$(sha256sum "$VICTIM")" = "$victim_sum" ]; }
tiny=(model_name=tiny hardware_peak_tflops=1 steps=2 base_output_directory="$RUNS" log_level=warn dashboard_port=0)

# run NAME: a fresh run directory of our own (0700), for a link to be planted in.
fresh_run() { rm -rf "${RUNS:?}/$1"; mkdir -p "$RUNS/$1"; chmod 700 "$RUNS" "$RUNS/$1"; }

# expect_refused NAME PATTERN ARGS...: the command ends with an error (an exit code, not a
# signal) whose message matches PATTERN, and the victim is untouched.
expect_refused() {
  local name=$1 pattern=$2 out rc=0
  shift 2
  out=$(timeout 120 "$BIN" "$@" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then fail "$name: exit $rc: $(tail -3 <<<"$out")"; return; fi
  if ! grep -qE -e "$pattern" <<<"$out"; then fail "$name: no error matching /$pattern/: $(tail -3 <<<"$out")"; return; fi
  if ! victim_ok; then fail "$name: the victim file changed: $(cat "$VICTIM")"; return; fi
  pass "$name (exit $rc): $(grep -m1 -oE -e "$pattern.*" <<<"$out" | cut -c1-160)"
}

# 1. events.jsonl -> victim: the embedded controller would append events (text a job's
#    submitter chooses, such as its run_name) to it.
fresh_run r1
ln -s "$VICTIM" "$RUNS/r1/events.jsonl"
expect_refused "embedded job, events.jsonl is a link" "events.jsonl: is a symbolic link" \
  train "${tiny[@]}" run_name=r1 num_workers=2

# 2. metrics.jsonl -> victim, one process.
fresh_run r2
ln -s "$VICTIM" "$RUNS/r2/metrics.jsonl"
expect_refused "single process, metrics.jsonl is a link" "metrics.jsonl: is a symbolic link" train "${tiny[@]}" run_name=r2

# 3. checkpoints/ -> a folder elsewhere: nothing is written there.
fresh_run r3
mkdir -p "$WORK/elsewhere"
ln -s "$WORK/elsewhere" "$RUNS/r3/checkpoints"
# A save that cannot be written is an error of that save (the run goes on, as on a full
# disk); it names the link.
out=$(timeout 120 "$BIN" train "${tiny[@]}" run_name=r3 checkpoint_period=1 2>&1) || true
grep -qE "checkpoint at step 1 failed: .*r3/checkpoints: is not a directory \(or is a symbolic link\)" <<<"$out" \
  && pass "checkpoints/ is a link: $(grep -m1 -o 'checkpoint at step 1 failed.*' <<<"$out" | cut -c1-120)" \
  || fail "checkpoints/ is a link: no error naming it: $(tail -3 <<<"$out")"
[ -z "$(ls -A "$WORK/elsewhere")" ] && pass "nothing was written into the linked folder" \
  || fail "the linked folder got files: $(ls -A "$WORK/elsewhere")"

# 4. The run directory itself is a link.
mkdir -p "$WORK/real_run"
chmod 700 "$WORK/real_run"
ln -s "$WORK/real_run" "$RUNS/r4"
expect_refused "the run directory is a link" "runs/r4.*symbolic link" train "${tiny[@]}" run_name=r4
[ -z "$(ls -A "$WORK/real_run")" ] && pass "nothing was written behind the linked run directory" \
  || fail "files behind the linked run directory: $(ls -A "$WORK/real_run")"

# 5. A run directory others may write to (someone could plant links while it runs).
fresh_run r5
chmod 777 "$RUNS/r5"
expect_refused "a run directory writable by others" "writable by others \(mode 0777\)" train "${tiny[@]}" run_name=r5
[ -z "$(ls -A "$RUNS/r5")" ] && pass "nothing was written into the open run directory" \
  || fail "files in the open run directory: $(ls -A "$RUNS/r5")"

# 6. run_name is one folder name.
expect_refused "run_name climbs out" "run_name=\.\./escape: expected one folder name" \
  train "${tiny[@]}" run_name=../escape
[ ! -e "$WORK/escape" ] && pass "nothing was made outside base_output_directory" || fail "$WORK/escape exists"

# 8. logs/ -> a folder elsewhere: the workers' logs cannot be opened there; the job fails
#    at once naming the link (before issue 33 the agent retried the spawn forever).
fresh_run r8
mkdir -p "$WORK/elsewhere_logs"
ln -s "$WORK/elsewhere_logs" "$RUNS/r8/logs"
expect_refused "logs/ is a link" "r8/logs: .*symbolic link" train "${tiny[@]}" run_name=r8 num_workers=2
[ -z "$(ls -A "$WORK/elsewhere_logs")" ] && pass "nothing was written into the linked logs folder" \
  || fail "the linked logs folder got files: $(ls -A "$WORK/elsewhere_logs")"

# 7. What a good run creates is private: files 0600, folders 0700 (the API's head_url too).
make_corpus "$WORK/corpus.txt"
out=$(timeout 300 "$BIN" train "${tiny[@]}" run_name=ok num_workers=2 checkpoint_period=1 dataset_type=text \
  vocab_size=256 max_target_length=32 dataset_path="$WORK/corpus.txt" 2>&1) || fail "a good run failed: $(tail -3 <<<"$out")"
# The token cache (a copy of the training text) is under $RUNS/.cache.
open_files=$(find "$RUNS/ok" "$RUNS/.cache" -perm /077)
[ -n "$(find "$RUNS/ok" -name '*.safetensors' -print -quit)" ] && [ -n "$(ls "$RUNS/.cache")" ] && [ -z "$open_files" ] \
  && pass "a run's files and folders, and the token cache, are private ($(find "$RUNS/ok" "$RUNS/.cache" | wc -l) entries)" \
  || fail "not private: $open_files"
victim_ok && pass "the victim file is unchanged" || fail "the victim file changed"

finish

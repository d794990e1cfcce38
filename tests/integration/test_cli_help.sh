# Issue 34: every command's and every subcommand's --help prints its own page (its name,
# its own flags, not a sibling's), on stdout, exit 0. `cost plan --help` printed the whole
# cost page and `chaos kill --help` the chaos page before.
source "$(dirname "$0")/lib.sh"

# check "ARGS" MUST_HAVE... -- MUST_NOT_HAVE...: `elastrain ARGS --help`.
check() {
  local args=$1 out rc=0 ok=1 want=1 w
  shift
  out=$("$BIN" $args --help 2>"$WORK/err") || rc=$?
  [ "$rc" -eq 0 ] || { fail "$args --help: exit $rc: $(head -2 "$WORK/err")"; return; }
  [ -s "$WORK/err" ] && { fail "$args --help wrote on stderr: $(head -2 "$WORK/err")"; return; }
  grep -qiE "usage: elastrain $args( |$)" <<<"$out" || { fail "$args --help does not name 'elastrain $args': $(head -2 <<<"$out")"; return; }
  for w in "$@"; do
    if [ "$w" = -- ]; then want=0; continue; fi
    if [ $want -eq 1 ] && ! grep -qF -e "$w" <<<"$out"; then fail "$args --help lacks '$w'"; ok=0; fi
    if [ $want -eq 0 ] && grep -qF -e "$w" <<<"$out"; then fail "$args --help shows a sibling's '$w'"; ok=0; fi
  done
  [ $ok -eq 1 ] && pass "$args --help: $(grep -im1 usage <<<"$out" | cut -c1-90)"
}

for c in train worker tokenizer plan cost checkpoint head agent submit status stop chaos report launch; do
  check "$c"
done
check "cost interval" --checkpoint-seconds --mtti-seconds -- --deadline --work-hours
check "cost plan" --deadline --budget --mfu -- --mtti-seconds --trials
check "cost simulate" --trials --work-hours --offer -- --mtti-seconds --deadline
check "chaos kill" --rank --host --hang --run-dir -- --factor --seconds
check "chaos hang" --rank --run-dir -- --host --factor --hang
check "chaos slow" --rank --factor --seconds -- --host --hang
check "chaos unslow" --rank -- --factor --seconds --host
check "checkpoint list" run_dir -- --json ckpt_dir
check "checkpoint verify" ckpt_dir -- --json run_dir
check "checkpoint inspect" ckpt_dir --json -- run_dir
check "checkpoint export" ckpt_dir out -- --json run_dir
check "tokenizer train" --input --vocab-size --output
check generate --run-dir --checkpoint --prompt --max-new-tokens --temperature --top-k --top-p --seed --no-kv-cache -- --max-batches
check eval --run-dir --checkpoint --max-batches --split -- --prompt --temperature
# An action among the flags is found too; -h is --help.
out=$("$BIN" chaos --rank 1 slow -h 2>&1) && grep -q "Usage: elastrain chaos slow" <<<"$out" \
  && pass "chaos --rank 1 slow -h: the slow page" || fail "chaos --rank 1 slow -h: $(head -2 <<<"$out")"
out=$("$BIN" cost plan model_name=tiny -h 2>&1) && grep -q "usage: elastrain cost plan" <<<"$out" \
  && pass "cost plan model_name=tiny -h: the plan page" || fail "cost plan ... -h: $(head -2 <<<"$out")"
finish

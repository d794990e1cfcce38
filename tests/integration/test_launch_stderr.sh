# Issue 34: a launched program that fails names its cause, not only its exit code. A
# Python program that fails at import: the launcher's error, the worker_error event and
# the worker's log line quote the end of its stderr (the traceback's last line), bounded
# (the last 10 lines, 2 KiB) and made printable (no terminal escape, no invalid UTF-8).
# No torch needed.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no $PY"; exit 77; }
common=(num_workers=1 max_failures=0 threads_per_worker=1 dashboard_port=0 base_output_directory="$WORK/runs")

printf 'import sys\nprint("loading the model", file=sys.stderr)\nimport no_such_module\n' >"$WORK/prog.py"
rc=0
"$BIN" launch run_name=imp "${common[@]}" -- "$PY" "$WORK/prog.py" >"$WORK/out1" 2>"$WORK/err1" || rc=$?
[ "$rc" -eq 1 ] && pass "a program failing at import fails the job (exit 1)" || fail "exit $rc"
cause="ModuleNotFoundError: No module named 'no_such_module'"
last=$(tail -1 "$WORK/err1")
grep -qF "exited with code 1 [its stderr ended: " <<<"$last" && grep -qF "$cause]" <<<"$last" \
  && pass "the launcher's error quotes the program's stderr: ${last:0:400}" || fail "launcher's error: $last"
grep -qF "import no_such_module" <<<"$last" && pass "... with the lines before the last (the traceback)" \
  || fail "no traceback lines in: $last"
reason=$(ev runs/imp worker_error reason | head -1)
grep -qF "$cause" <<<"$reason" && pass "the worker_error event quotes it" || fail "worker_error reason: $reason"
grep -F "(failed)" runs/imp/logs/local-w0.log | grep -qF "$cause" && pass "the worker's log line quotes it" \
  || fail "worker log: $(tail -3 runs/imp/logs/local-w0.log)"
grep -qx "  File \"$WORK/prog.py\", line 3, in <module>" runs/imp/logs/local-w0.log \
  && pass "the worker's log still has the whole traceback, as the program wrote it" \
  || fail "the traceback is not in the worker's log: $(cat runs/imp/logs/local-w0.log)"

# Hostile stderr: megabytes of it, terminal escapes, bytes that are not UTF-8. The quote is
# the last 10 lines within 2 KiB, printable.
cat >"$WORK/noisy.py" <<'PYEOF'
import sys
for i in range(200000):
    sys.stderr.write("noise line %d\n" % i)
sys.stderr.buffer.write(b"\x1b[2J\x1b[31mfatal:\x07 bad \xff\xfe bytes\n")
sys.stderr.flush()
sys.exit(3)
PYEOF
rc=0
"$BIN" launch run_name=noisy "${common[@]}" -- "$PY" "$WORK/noisy.py" >"$WORK/out2" 2>"$WORK/err2" || rc=$?
[ "$rc" -eq 1 ] && pass "a program exiting 3 after 200000 lines on stderr fails the job (exit 1)" || fail "exit $rc"
last=$(tail -1 "$WORK/err2")
quote=$(grep -o '\[its stderr ended: .*\]' <<<"$last" || true)
grep -qF '?[2J?[31mfatal:? bad ?? bytes]' <<<"$quote" && pass "escapes and invalid bytes are '?': ${quote: -60}" \
  || fail "quote: ${quote: -200}"
grep -qF "noise line 199991 |" <<<"$quote" && ! grep -qF "noise line 199990 " <<<"$quote" \
  && pass "the last 10 lines only" || fail "not the last 10 lines: ${quote:0:200}"
[ "${#quote}" -le 2200 ] && pass "bounded: ${#quote} bytes" || fail "the quote is ${#quote} bytes"
LC_ALL=C grep -q $'\x1b' "$WORK/err2" && fail "a raw escape reached the launcher's stderr" \
  || pass "no raw escape on the launcher's stderr"
[ "$(grep -c '^noise line' runs/noisy/logs/local-w0.log)" -eq 200000 ] \
  && pass "the worker's log has all 200000 lines" || fail "log lines: $(grep -c '^noise line' runs/noisy/logs/local-w0.log)"
finish

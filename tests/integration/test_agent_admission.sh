# Issue 33, "Agents decide what they run": the head's token lets a user submit any job,
# but an agent runs a launched program only from its --allow-program list (none: only
# elastrain's own trainer) and a job's paths only inside its --allow-path directories
# (default: its working directory). A head, one agent allowing only the directory
# $WORK/allowed; each refused job fails (or is not taken) with the reason named, and
# nothing refused ran or was written:
#   1. a launched program outside the list (python3, a script of the attacker's);
#   2. final_params_path outside the allowed directories (written by the trainer);
#   3. a run directory outside them: the agent writes nothing there (no worker logs), the
#      job waits out resource_wait_timeout and fails.
# The allowed case is test_launch_cluster.sh (its agents pass --allow-program python3).
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
start_etcd
mkdir -p "$WORK/allowed" "$WORK/agent" "$WORK/runs"
cat >"$WORK/evil.sh" <<EOF
#!/bin/sh
touch "$WORK/pwned"
EOF
chmod +x "$WORK/evil.sh"
"$BIN" head --store "$ETCD_URL" --port 0 >"$WORK/head.log" 2>&1 &
bg_track $!
head_url() { HEAD=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/head.log" | head -1 || true); [ -n "$HEAD" ]; }
wait_until 60 head_url || fail "head did not start: $(cat "$WORK/head.log")"
head_pub_ready
# The agent's working directory is its own ($WORK/agent): the runs below $WORK/runs are
# allowed only through --allow-path.
(cd "$WORK/agent" && exec "$BIN" agent --store "$ETCD_URL" --slots 1 --id h1 --head-public-key "$HEAD_PUB" \
  --allow-program "$WORK/allowed" --allow-path "$WORK/runs" >"$WORK/h1.log" 2>&1) &
bg_track $!
wait_until 30 grep -q "runs elastrain's trainer and $WORK/allowed; job paths within $WORK/runs" "$WORK/h1.log" &&
  pass "the agent says what it admits: $(grep -o "agent h1: runs.*" "$WORK/h1.log")" || fail "agent: $(tail -3 "$WORK/h1.log")"
common=(model_name=tiny num_workers=1 threads_per_worker=1 steps=20 log_period=1 eval_interval=0
        resource_wait_timeout=3 max_failures=3)
# ended RUN_NAME PATTERN: the job of RUN_NAME ended FAILED, its reason matching PATTERN.
ended_with() {
  local out
  out=$("$BIN" status --head "$HEAD" --json 2>/dev/null || true)
  [ "$("$JQ" state <<<"$out" 2>/dev/null)" = FAILED ] && grep -qE -e "$1" <<<"$("$JQ" reason <<<"$out")"
}
submit() {  # NAME ARGS...
  local name=$1
  shift
  "$BIN" submit --head "$HEAD" "${common[@]}" base_output_directory="$WORK/runs" run_name="$name" "$@" >"$WORK/$name.out" 2>&1 ||
    fail "submit $name: $(cat "$WORK/$name.out")"
}

# 1. Programs outside the list.
submit py -- /usr/bin/python3 -c "open('$WORK/pwned', 'w')"
wait_until 60 ended_with "agent h1 does not allow launch_program /usr/bin/python3" &&
  pass "python3 refused: $("$BIN" status --head "$HEAD" --json | "$JQ" reason | cut -c1-200)" ||
  fail "python3: $("$BIN" status --head "$HEAD" --json 2>&1 | cut -c1-300)"
submit evil -- "$WORK/evil.sh"
wait_until 60 ended_with "agent h1 does not allow launch_program $WORK/evil.sh" &&
  pass "a script of the attacker's refused: $("$BIN" status --head "$HEAD" --json | "$JQ" reason | cut -c1-160)" ||
  fail "evil.sh: $("$BIN" status --head "$HEAD" --json 2>&1 | cut -c1-300)"
[ ! -e "$WORK/pwned" ] && pass "no refused program ran" || fail "a refused program ran"

# 2. A path the trainer would write, outside the allowed directories.
submit params final_params_path="$WORK/elsewhere/params.bin"
wait_until 60 ended_with "agent h1 refuses final_params_path=$WORK/elsewhere/params.bin.*--allow-path" &&
  pass "final_params_path outside: $("$BIN" status --head "$HEAD" --json | "$JQ" reason | cut -c1-200)" ||
  fail "final_params_path: $("$BIN" status --head "$HEAD" --json 2>&1 | cut -c1-300)"
[ ! -e "$WORK/elsewhere" ] && pass "nothing written outside" || fail "$WORK/elsewhere was made"

# 3. A run directory outside: the agent does not take the job.
"$BIN" submit --head "$HEAD" "${common[@]}" base_output_directory="$WORK/elsewhere" run_name=outside >"$WORK/outside.out" 2>&1 ||
  fail "submit outside: $(cat "$WORK/outside.out")"
wait_until 30 grep -q "refuses the run directory=$WORK/elsewhere/outside" "$WORK/h1.log" &&
  pass "the agent refuses the run directory: $(grep -o -m1 "refuses the run directory.*" "$WORK/h1.log" | cut -c1-200)" ||
  fail "run directory: $(tail -3 "$WORK/h1.log")"
wait_until 60 ended_with "." && pass "that job failed (nobody took it): $("$BIN" status --head "$HEAD" --json | "$JQ" reason | cut -c1-160)" ||
  fail "the outside job: $("$BIN" status --head "$HEAD" --json 2>&1 | cut -c1-300)"
# (The head writes its controller.log and events.jsonl there, and makes logs/: it runs what its token's
# holders submit, as its own user; docs/security.md.)
[ -z "$(ls -A "$WORK/elsewhere/outside/logs" 2>/dev/null)" ] && pass "the agent wrote nothing there (no worker log): $(ls "$WORK/elsewhere/outside" 2>/dev/null | xargs)" ||
  fail "the agent wrote in the refused run directory: $(find "$WORK/elsewhere" | head -5)"

# 4. (Issue 33's smaller findings) <run>/logs planted as a link: the head fails the job,
# naming it, instead of agents retrying the spawn for ever.
mkdir -p "$WORK/runs/linked" "$WORK/planted"
ln -s "$WORK/planted" "$WORK/runs/linked/logs"
submit linked
wait_until 60 ended_with "runs/linked/logs: is a symbolic link" &&
  pass "a linked logs/ fails the job: $("$BIN" status --head "$HEAD" --json | "$JQ" reason | cut -c1-160)" ||
  fail "linked logs: $("$BIN" status --head "$HEAD" --json 2>&1 | cut -c1-300)"
[ -z "$(ls -A "$WORK/planted")" ] && pass "nothing written through the link" || fail "written through the link: $(ls "$WORK/planted")"
finish

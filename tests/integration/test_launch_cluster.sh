# Issue 15, point 5: `elastrain submit ... -- PROGRAM` in cluster mode (etcd over TLS with
# auth, a head, two agents of one slot standing for hosts): the agents run the unmodified
# DDP script; SIGKILL of one agent (host loss) shrinks the job to one worker, the script
# resumes from its checkpoint with WORLD_SIZE=1 and reaches the same final loss as an
# uninterrupted run.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
PY=/usr/bin/python3
"$PY" -c "import torch" 2>/dev/null || { fail "python3-torch is not installed (scripts/install_deps.sh --test)"; finish; exit 1; }
SCRIPT="$SRC/examples/ddp_train.py"
unset ELASTRAIN_TOKEN
final_loss() { grep -ho "FINAL step=[0-9]* loss=[0-9.e-]*" "$@" | head -1 | sed 's/.*loss=//'; }
starts() { grep -ho "START rank=[0-9]* world=[0-9]* restart=[0-9]* resumed_from=[0-9]* pid=[0-9]*" "$1"/logs/*.log; }
steps=80

# The reference: the same script, uninterrupted, one worker.
"$BIN" launch num_workers=1 run_name=ref dashboard_port=0 base_output_directory="$WORK/runs" -- "$PY" "$SCRIPT" \
  --steps $steps --checkpoint-dir "$WORK/ck_ref" >"$WORK/ref.out" 2>&1 || fail "reference run: $(tail -3 "$WORK/ref.out")"
ref=$(final_loss runs/ref/logs/*.log)

bash "$SRC/scripts/make_certs.sh" "$WORK/certs" >/dev/null
start_etcd_tls "$WORK/certs"
export ELASTRAIN_ETCD_CA="$ETCD_CERTS/ca.crt" ELASTRAIN_ETCD_CERT="$ETCD_CERTS/etcd-client.crt" \
  ELASTRAIN_ETCD_KEY="$ETCD_CERTS/etcd-client.key" ELASTRAIN_ETCD_USER="$ETCD_USER" \
  ELASTRAIN_ETCD_PASSWORD_FILE="$ETCD_PASSWORD_FILE"
"$BIN" head --store "$ETCD_URL" --port 0 >"$WORK/head.log" 2>&1 &
bg_track $!
head_url() { HEAD=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/head.log" | head -1 || true); [ -n "$HEAD" ]; }
wait_until 60 head_url || fail "head did not start: $(cat "$WORK/head.log")"
declare -A AGENT
for h in h1 h2; do
  head_pub_ready
  "$BIN" agent --store "$ETCD_URL" --slots 1 --id $h --host-name $h --lease-seconds 2 --head-public-key "$HEAD_PUB" \
    --allow-program "$PY" \
    >"$WORK/$h.log" 2>&1 &
  AGENT[$h]=$!
  bg_track $!
done
run=runs/cluster
out=$("$BIN" submit --head "$HEAD" num_workers=1:2 max_failures=3 threads_per_worker=1 log_period=1 \
  resource_wait_timeout=120 base_output_directory="$WORK/runs" run_name=cluster -- \
  "$PY" "$SCRIPT" --steps $steps --step-sleep 0.05 --checkpoint-dir "$WORK/ck_cluster" 2>&1) \
  && pass "submit -- python3 examples/ddp_train.py: $out" || fail "submit: $out"
field() { "$BIN" status --head "$HEAD" --json 2>/dev/null | "$JQ" "$1" 2>/dev/null || true; }
wait_until 120 bash -c "[ \"\$('$BIN' status --head '$HEAD' --json 2>/dev/null | '$JQ' world 2>/dev/null)\" = 2 ]" \
  && pass "2 workers on 2 hosts" || fail "world $(field world): $(field reason)"
wait_step $run 20 180 || fail "the script did not reach step 20 in the cluster"
victim=${AGENT[h2]}
kill -9 "$victim"
pass "SIGKILL to agent h2 (pid $victim) at step $(last_step $run)"
wait_ev $run host_lost 60 && pass "host_lost: $(ev $run host_lost reason | head -1 | cut -c1-150)" || fail "no host_lost event"
deadline=$((SECONDS + 240))
until [ "$(field state)" = SUCCEEDED ] || [ "$(field state)" = FAILED ] || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
[ "$(field state)" = SUCCEEDED ] && pass "the job finished: $(field reason)" || fail "state $(field state): $(field reason)"
resumed=$(starts $run | grep "world=1 " | grep -v "resumed_from=0 " | head -1)
[ -n "$resumed" ] && pass "the script resumed with WORLD_SIZE=1: $resumed" || fail "no resume with WORLD_SIZE=1: $(starts $run)"
got=$(final_loss $run/logs/*.log)
awk -v a="$ref" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * a) }' \
  && pass "the same final loss as the uninterrupted run ($got)" || fail "final loss '$got', reference '$ref'"
pgrep -f "ck_cluster" >/dev/null && fail "a program of the job still runs: $(pgrep -af ck_cluster)" \
  || pass "no program of the job is left"
finish

# Issue 33, "Done when" 2: the store is not a trust boundary. etcd over TLS with client
# certificates and authentication on (tests/integration/etcd_lib.sh); a head with its
# signing key, two agents given its public key (--head-public-key). The attacker holds
# the limited `elastrain` etcd role -- enough to write every elastrain/ key -- and no head
# token. Each attack is refused with a logged reason and changes nothing:
#   1. a forged job spec whose launch_program is the attacker's script (before any job):
#      the head does not run it, the agents do not load it, the script never runs;
#   2. a forged command (kill a worker as hung) under an agent's prefix: refused;
#   3. a signed plan of an earlier generation put back (a replay): refused;
#   4. a forged spec in the middle of the job: refused; the job completes.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
bash "$SRC/scripts/make_certs.sh" "$WORK/certs" >/dev/null
start_etcd_tls "$WORK/certs" 60
C=$ETCD_CERTS
CREDS=(--store-ca "$C/ca.crt" --store-cert "$C/etcd-client.crt" --store-key "$C/etcd-client.key"
       --store-user "$ETCD_USER" --store-password-file "$ETCD_PASSWORD_FILE")
mkdir -m 700 "$WORK/head"
KEY=$WORK/head/signing_key

# The attacker's writes: the elastrain role's own credentials, straight to etcd.
ATTACKER_TOKEN=$(etcd_tls_token "$ETCD_USER" "$ETCD_PASSWORD_FILE")
[ -n "$ATTACKER_TOKEN" ] || fail "no etcd token for the elastrain role"
b64() { printf '%s' "$1" | base64 -w0; }
etcd_put() { etcd_tls_call /v3/kv/put "{\"key\":\"$(b64 "$1")\",\"value\":\"$(b64 "$2")\"}" "$ATTACKER_TOKEN" >/dev/null; }
etcd_get() {
  etcd_tls_call /v3/kv/range "{\"key\":\"$(b64 "$1")\"}" "$ATTACKER_TOKEN" | grep -o '"value":"[^"]*"' | cut -d'"' -f4 | base64 -d
}
cat >"$WORK/evil.sh" <<EOF
#!/bin/sh
touch "$WORK/pwned"
EOF
chmod +x "$WORK/evil.sh"
evil_spec() {  # evil_spec JOB_ID: a spec whose program is the attacker's
  printf '{"job_id":"%s","run_dir":"%s","submitted_at":1,"config_yaml":"model_name: tiny\\nlaunch_program: %s\\nbase_output_directory: %s\\nrun_name: evil\\n"}' \
    "$1" "$WORK/runs/evil" "$WORK/evil.sh" "$WORK/runs"
}

"$BIN" head --store "$ETCD_URL" "${CREDS[@]}" --port 0 --token-file "$WORK/head/head_token" --signing-key "$KEY" \
  >"$WORK/head.log" 2>&1 &
bg_track $!
head_url() { HEAD=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/head.log" | head -1 || true); [ -n "$HEAD" ]; }
wait_until 60 head_url && pass "head up: $(grep -m1 'signing key' "$WORK/head.log")" || fail "head: $(cat "$WORK/head.log")"
[ "$(stat -c %a "$KEY")" = 600 ] && [ -s "$KEY.pub" ] && pass "the signing key is 0600, its public half beside it" \
  || fail "key modes: $(stat -c '%a %n' "$KEY" "$KEY.pub" 2>&1)"
for h in h1 h2; do
  "$BIN" agent --store "$ETCD_URL" "${CREDS[@]}" --slots 1 --id $h --host-name $h --head-public-key "$KEY.pub" \
    >"$WORK/$h.log" 2>&1 &
  bg_track $!
done
api() { timeout 300 "$BIN" "$1" --head "$HEAD" --token-file "$WORK/head/head_token" "${@:2}"; }

# 1. A forged spec before any job.
etcd_put elastrain/job/spec "$(evil_spec evil-1)" || fail "the attacker's put failed"
refused() { grep -q "refused elastrain/job/spec: .*unsigned" "$1"; }
wait_until 30 refused "$WORK/head.log" && pass "the head: $(grep -m1 -o 'refused elastrain/job/spec.*' "$WORK/head.log")" \
  || fail "the head did not refuse the forged spec: $(tail -3 "$WORK/head.log")"
wait_until 30 refused "$WORK/h1.log" && wait_until 30 refused "$WORK/h2.log" \
  && pass "both agents: $(grep -m1 -o 'refused elastrain/job/spec.*' "$WORK/h1.log")" \
  || fail "the agents did not refuse it: $(tail -2 "$WORK/h1.log")"
sleep 3
[ ! -e "$WORK/pwned" ] && [ ! -e "$WORK/runs/evil" ] && pass "the attacker's program never ran, no run directory made" \
  || fail "the forged spec ran: $(ls "$WORK")"

# The real job, submitted through the head's API (the spec the head signs replaces it).
out=$(api submit model_name=tiny num_workers=2 threads_per_worker=1 steps=400 log_period=1 eval_interval=0 \
  checkpoint_period=10 resource_wait_timeout=120 base_output_directory="$WORK/runs" run_name=signed 2>&1) \
  && pass "submit: $out" || fail "submit: $out"
run=$WORK/runs/signed
wait_step "$run" 10 120 || fail "no step 10: $(tail -3 "$WORK/head.log")"
# Issue 34: during the cluster job, status and the head's /metrics report the newest
# checkpoint and the goodput (they said "latest checkpoint step -1" and 0).
saved() { [ -n "$(ev "$run" checkpoint_saved step | awk '$1 >= 10' | head -1)" ]; }
wait_until 120 saved || fail "no checkpoint at step >= 10: $(ev "$run" checkpoint_saved step | tr '\n' ' ')"
ckpt_seen() { [ "$(api status --json | "$JQ" latest_checkpoint_step)" -ge 10 ] 2>/dev/null; }
wait_until 30 ckpt_seen && line=$(api status | grep -o "latest checkpoint step [0-9]*") \
  && [ "${line##* }" -ge 10 ] && pass "status: $line" || fail "status: $(api status | grep -m1 latest)"
metrics=$(curl -sS --max-time 10 -H "Authorization: Bearer $(cat "$WORK/head/head_token")" "$HEAD/metrics" || true)
m() { grep -m1 "^elastrain_$1 " <<<"$metrics" | cut -d' ' -f2; }
awk -v c="$(m checkpoint_latest_step)" -v g="$(m goodput_ratio)" 'BEGIN { exit !(c >= 10 && g > 0 && g <= 1) }' \
  && pass "the head's /metrics: checkpoint_latest_step $(m checkpoint_latest_step), goodput_ratio $(m goodput_ratio)" \
  || fail "the head's /metrics: checkpoint_latest_step '$(m checkpoint_latest_step)', goodput_ratio '$(m goodput_ratio)'"
gen0=$(api status --json | "$JQ" generation)
plan0=$(etcd_get elastrain/job/plan)
grep -q '"signature"' <<<"$plan0" && pass "the plan in etcd is signed" || fail "plan: ${plan0:0:200}"

# 2. A forged command: kill h1's worker as hung.
pid1=$(api status --json | "$JQ" ranks.0.pid)
worker1=$(api status --json | "$JQ" ranks.0.worker)
agent1=$(api status --json | "$JQ" ranks.0.agent)
etcd_put "elastrain/commands/$agent1/99999999" "{\"action\":\"hung\",\"worker\":\"$worker1\",\"requested_at\":1,\"job_id\":\"x\"}"
cmd_refused() { grep -q "refused elastrain/commands/$agent1/99999999" "$WORK/$agent1.log"; }
wait_until 30 cmd_refused && pass "agent $agent1: $(grep -m1 -o "refused elastrain/commands/.*" "$WORK/$agent1.log")" \
  || fail "the forged command was not refused: $(tail -3 "$WORK/$agent1.log")"
kill -0 "$pid1" 2>/dev/null && pass "its worker (pid $pid1) still runs" || fail "worker $pid1 was killed"

# 3. A replay: a new generation (a worker killed through the API), then the old plan back.
api chaos kill --rank 1 >/dev/null 2>&1 || fail "chaos kill refused"
newer() { [ "$(api status --json | "$JQ" generation)" -gt "$gen0" ] 2>/dev/null; }
wait_until 60 newer || fail "no new generation after the kill"
wait_step "$run" "$(($(last_step "$run") + 5))" 120 || fail "no progress in the new generation"
etcd_put elastrain/job/plan "$plan0"
replayed() { grep -q "refused elastrain/job/plan: .*a replay" "$WORK/h1.log" && grep -q "refused elastrain/job/plan: .*a replay" "$WORK/h2.log"; }
wait_until 30 replayed && pass "both agents refuse the replayed plan: $(grep -m1 -o 'refused elastrain/job/plan.*' "$WORK/h1.log")" \
  || fail "the replayed plan: $(grep -h 'job/plan' "$WORK"/h[12].log | tail -2)"

# 3b. The workers read the plan too (the fence before each checkpoint, event and metric
# write): the current plan without its signature is refused there as well, then the
# head's own record put back (not older than any seen: accepted again).
current=$(etcd_get elastrain/job/plan)
stripped=$(printf '%s' "$current" | sed 's/,"signature":{[^}]*}//; s/"signature":{[^}]*},//')
grep -q '"signature"' <<<"$stripped" && fail "the signature was not stripped: ${stripped:0:200}"
etcd_put elastrain/job/plan "$stripped"
fenced() { grep -q "the job's plan is refused" "$run"/logs/*.log 2>/dev/null; }
wait_until 60 fenced && pass "a worker refuses the unsigned plan: $(grep -h -m1 -o "generation [0-9]* cannot be confirmed: the job's plan is refused.\{0,80\}" "$run"/logs/*.log | head -1)" \
  || fail "no worker refused the unsigned plan: $(grep -h -i 'plan\|fence' "$run"/logs/*.log | tail -2)"
etcd_put elastrain/job/plan "$current"

# 4. A forged spec in the middle of the job.
etcd_put elastrain/job/spec "$(evil_spec "$(api status --json | "$JQ" job_id)")"
mid() { [ "$(grep -c "refused elastrain/job/spec" "$WORK/h1.log")" -ge 2 ]; }
wait_until 30 mid && pass "a forged spec mid-job is refused too" || fail "mid-job spec: $(tail -2 "$WORK/h1.log")"
# The head's status does not show the forged spec as the job: it says it refuses it.
out=$(api status 2>&1 || true)
grep -q "elastrain/job/spec: .*not written by this head.*refused" <<<"$out" && ! grep -q "evil" <<<"$out" &&
  pass "status refuses the forged spec: $(cut -c1-160 <<<"$out")" || fail "status with a forged spec: ${out:0:300}"
# (So the run's own files tell how the job goes on.)
done_ok() { [ "$(ev "$run" job_state to | tail -1)" = SUCCEEDED ]; }
wait_until 300 done_ok && [ "$(last_step "$run")" -eq 400 ] && pass "the job SUCCEEDED, all 400 steps" \
  || fail "job: step $(last_step "$run"), $(grep job_state "$run/events.jsonl" | tail -1)"
[ ! -e "$WORK/pwned" ] && pass "the attacker's program never ran" || fail "pwned"
finish

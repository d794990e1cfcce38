# --store-wait (issue #17): the pieces of a cluster start in any order (Kubernetes pods, a
# batch script). A head started before its etcd keeps trying and comes up once etcd
# answers; an agent whose store never answers gives up after --store-wait with the
# reason; without --store-wait it fails at once, as before.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/etcd_lib.sh"
PORT=$(_random_port)
URL=etcd://127.0.0.1:$PORT
# A public key of no head: these agents fail on their store before any job.
PUB=$WORK/some_head.pub
openssl genpkey -algorithm ed25519 2>/dev/null | openssl pkey -pubout -out "$PUB"

# 1. No store, no wait: at once. With --store-wait 2: after ~2 s, saying so.
t0=$SECONDS
out=$("$BIN" agent --store "$URL" --slots 1 --head-public-key "$PUB" 2>&1) && fail "agent without a store: exit 0" ||
  { [ $((SECONDS - t0)) -le 2 ] && grep -q "cannot reach etcd" <<<"$out" && pass "no --store-wait: fails at once: $(cut -c1-120 <<<"$out")" ||
    fail "no --store-wait: $((SECONDS - t0)) s: $out"; }
start=$(now)
out=$("$BIN" agent --store "$URL" --slots 1 --store-wait 2 --head-public-key "$PUB" 2>&1) && fail "agent with --store-wait: exit 0" || true
took=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
awk -v t="$took" 'BEGIN { exit !(t >= 1.9) }' && grep -q "still, after --store-wait 2 s" <<<"$out" &&
  pass "--store-wait 2: gave up after $took s (still, after --store-wait 2 s)" ||
  fail "--store-wait 2: after $took s: $out"

# 2. The head first, etcd a few seconds later: the head comes up.
"$BIN" head --store "$URL" --port 0 --store-wait 60 >"$WORK/head.log" 2>&1 &
bg_track $!
sleep 2
grep -q "trying again every second" "$WORK/head.log" && pass "the head waits for its store: $(grep -o 'trying again.*' "$WORK/head.log")" ||
  fail "head log: $(cat "$WORK/head.log")"
"$ETCD_BIN" --data-dir "$WORK/etcd.data" --listen-client-urls "http://127.0.0.1:$PORT" \
  --advertise-client-urls "http://127.0.0.1:$PORT" --listen-peer-urls "http://127.0.0.1:$(_random_port)" >"$WORK/etcd.log" 2>&1 &
bg_track $!
wait_until 60 grep -q "API at" "$WORK/head.log" && pass "etcd started later: the head came up ($(grep -o 'API at [^,]*' "$WORK/head.log"))" ||
  fail "the head did not come up: $(tail -3 "$WORK/head.log")"
# A store that answers but refuses is not waited for: a wrong scheme fails at once.
t0=$SECONDS
out=$("$BIN" agent --store "etcd://127.0.0.1:$PORT/x" --slots 1 --store-wait 30 --head-public-key "$PUB" 2>&1) || true
[ $((SECONDS - t0)) -le 5 ] && pass "a bad store URL is not waited for: $(cut -c1-100 <<<"$out")" || fail "waited $((SECONDS - t0)) s: $out"
finish

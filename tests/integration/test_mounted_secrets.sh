# Secrets mounted as Kubernetes mounts a Secret volume (issue #17): a read-only tmpfs,
# files in a timestamped directory reached through `..data` and per-key symbolic links,
# root-owned, mode 0440, group = the pod's fsGroup; elastrain runs as a non-root user in
# that group (setpriv). The head must take its API token from there (and, the directory
# being read-only, not record its URL beside it), a client its token, an etcd client its
# key; a world-readable secret, one of a group the process is not in, and a symbolic link
# on a writable file system must still be refused. Needs root (mount); SKIP otherwise.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to mount a tmpfs"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is missing"; exit 77; }
USER_ID=10001 FS_GROUP=2000 OTHER_GROUP=2001
chmod 711 "$WORK"
SECRET=$WORK/secret
mkdir -p "$SECRET"
mount -t tmpfs -o size=1m,mode=0755 elastrain-test-secret "$SECRET" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'kill_tracked; umount "$SECRET" 2>/dev/null; rm -rf "$WORK"' EXIT

# A Secret volume's layout: ..2026_12_05_00_00_00.1/KEY, ..data -> that, KEY -> ..data/KEY.
ts=..2026_12_05_00_00_00.1
mkdir "$SECRET/$ts"
openssl rand -hex 32 >"$SECRET/$ts/token"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$SECRET/$ts/tls.key" 2>/dev/null
openssl rand -hex 32 >"$SECRET/$ts/open-token"
openssl genpkey -algorithm ed25519 -out "$SECRET/$ts/signing.key" 2>/dev/null
openssl pkey -in "$SECRET/$ts/signing.key" -pubout -out "$SECRET/$ts/signing.pub" 2>/dev/null
openssl rand -hex 32 >"$SECRET/$ts/other-group-token"
chown root:$FS_GROUP "$SECRET/$ts"/*
chmod 0440 "$SECRET/$ts/token" "$SECRET/$ts/tls.key" "$SECRET/$ts/signing.key" "$SECRET/$ts/signing.pub"
chmod 0444 "$SECRET/$ts/open-token"
chown $USER_ID:$OTHER_GROUP "$SECRET/$ts/other-group-token"  # its own, but others of that group read it
chmod 0440 "$SECRET/$ts/other-group-token"
ln -s "$ts" "$SECRET/..data"
for k in token tls.key open-token other-group-token signing.key signing.pub; do ln -s "..data/$k" "$SECRET/$k"; done
mount -o remount,ro "$SECRET"
touch "$SECRET/x" 2>/dev/null && fail "the secret mount is writable" || pass "a read-only Secret-like mount: $(ls "$SECRET" | xargs)"

as_user() { HOME=$WORK/home setpriv --reuid=$USER_ID --regid=$USER_ID --groups=$FS_GROUP "$@"; }
mkdir -p "$WORK/home" && chown $USER_ID "$WORK/home"

# 1. The head takes the mounted token and signing key, and records no URL (nor KEY.pub) beside them.
# setpriv itself, not a function around it: `$!` must be the process that becomes the head
# (setpriv execs it), so that the EXIT trap's kill reaches the head.
HOME=$WORK/home setpriv --reuid=$USER_ID --regid=$USER_ID --groups=$FS_GROUP \
  "$BIN" head --store memory:// --port 0 --token-file "$SECRET/token" --signing-key "$SECRET/signing.key" >"$WORK/head.log" 2>&1 &
bg_track $!
wait_until 30 grep -q "API at" "$WORK/head.log" && pass "head with a mounted token: $(grep -o 'token .*' "$WORK/head.log" | head -1)" ||
  fail "head: $(tail -3 "$WORK/head.log")"
URL=$(grep -o 'API at [^,]*' "$WORK/head.log" | cut -d' ' -f3)
[ ! -e "$SECRET/head_url" ] && pass "no URL file in the read-only mount" || fail "a URL file appeared"
grep -q "signing key $SECRET/signing.key" "$WORK/head.log" && pass "the head signs with the mounted key: $(grep -o 'signing key .*' "$WORK/head.log" | cut -c1-120)" ||
  fail "the mounted signing key: $(grep -i 'sign' "$WORK/head.log" | tail -2)"
# No job yet: the API answers (the token was taken) that nothing was submitted.
out=$(as_user "$BIN" status --head "$URL" --token-file "$SECRET/token" 2>&1 || true)
grep -q "no job has been submitted" <<<"$out" && pass "a client with the mounted token: the API answered: $out" ||
  fail "status with the mounted token: $out"
openssl rand -hex 32 >"$WORK/wrong-token" && chmod 600 "$WORK/wrong-token"
out=$("$BIN" status --head "$URL" --token-file "$WORK/wrong-token" 2>&1 || true)
grep -qi "401\|token" <<<"$out" && ! grep -q "no job has been submitted" <<<"$out" && pass "(a wrong token is refused: $(cut -c1-120 <<<"$out"))" ||
  fail "a wrong token: $out"

# 2. What must still be refused.
expect_refused() {  # NAME PATTERN -- COMMAND...
  local name=$1 pattern=$2 out rc=0
  shift 3
  out=$("$@" 2>&1) || rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE -e "$pattern" <<<"$out" && pass "$name: $(grep -E -m1 -e "$pattern" <<<"$out" | cut -c1-200)" ||
    fail "$name (exit $rc): $(tail -c 300 <<<"$out")"
}
expect_refused "a world-readable mounted token" "open to other users" -- \
  as_user "$BIN" status --head "$URL" --token-file "$SECRET/open-token"
expect_refused "a mounted token of another group" "group this process is not in" -- \
  as_user "$BIN" status --head "$URL" --token-file "$SECRET/other-group-token"
openssl rand -hex 32 >"$WORK/real-token" && chmod 600 "$WORK/real-token" && ln -s "$WORK/real-token" "$WORK/link-token"
expect_refused "a symbolic link on a writable file system" "symbolic link" -- \
  "$BIN" status --head "$URL" --token-file "$WORK/link-token"
# The etcd client key from the mount passes the file checks (then nothing answers).
out=$(as_user "$BIN" agent --store etcds://127.0.0.1:9 --store-ca "$SECRET/tls.key" --store-cert "$SECRET/tls.key" \
  --store-key "$SECRET/tls.key" --head-public-key "$SECRET/signing.pub" --slots 1 2>&1 || true)
! grep -q "readable by group or others\|mounted secret" <<<"$out" && pass "an etcd key from the mount passes the file checks: $(tail -1 <<<"$out" | cut -c1-160)" ||
  fail "etcd key refused: $out"
expect_refused "a world-readable mounted etcd key" "open to other users" -- \
  as_user "$BIN" agent --store etcds://127.0.0.1:9 --store-ca "$SECRET/tls.key" --store-cert "$SECRET/tls.key" \
  --store-key "$SECRET/open-token" --head-public-key "$SECRET/signing.pub" --slots 1
finish

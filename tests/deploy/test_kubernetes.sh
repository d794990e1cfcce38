# shellcheck shell=bash
# Issue 17, Kubernetes: deploy/kubernetes renders offline with kubectl kustomize, every
# object validates against the Kubernetes API schemas, and each security property holds
# in the rendered objects and is shown to be checked (validate/validate.js removes it
# from a copy and expects its check to fail). Also: the kustomizations use only what
# kustomize v2.0.3 (Debian's kubectl 1.20) understands, every kubectl given renders the
# same objects, and make-secrets.sh makes what the pods expect.
#   bash tests/deploy/test_kubernetes.sh [PATH/TO/elastrain]    (the binary is not used)
# ELASTRAIN_KUBECTLS: the kubectls to render with, space-separated (default: kubectl, and
# Debian's 1.20 fetched from the archive when kubectl is another vendor's).
# Exits 77 (skipped) without kubectl, node, npm or openssl, or when npm cannot reach
# its registry to install the validator's packages.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${ELASTRAIN_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
K8S=$SRC/deploy/kubernetes
VALIDATE=$SRC/tests/deploy/validate
read -r -a KUBECTLS <<<"${ELASTRAIN_KUBECTLS:-kubectl}"

skip() { echo "SKIP: $*"; exit 77; }
for tool in "${KUBECTLS[@]}" node npm openssl; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/install_deps.sh --test installs kubectl, node and npm)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/elastrain-k8s.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Debian's kubectl (kubernetes-client, 1.20, kustomize v2.0.3) is the one the issue names:
# when the kubectl installed here is another vendor's and ELASTRAIN_KUBECTLS is not set,
# Debian's is fetched from the archive (apt-get download, unpacked into $WORK, not
# installed) and renders too; without the archive the test goes on with what it has.
if [ -z "${ELASTRAIN_KUBECTLS:-}" ] &&
   ! dpkg -S "$(readlink -f "$(command -v kubectl)")" 2>/dev/null | grep -q '^kubernetes-client:'; then
  if (cd "$WORK" && timeout 120 apt-get download -q kubernetes-client && dpkg-deb -x kubernetes-client_*.deb debian-kubectl) \
    >"$WORK/apt.log" 2>&1 && [ -x "$WORK/debian-kubectl/usr/bin/kubectl" ]; then
    KUBECTLS+=("$WORK/debian-kubectl/usr/bin/kubectl")
    echo "note: rendering with Debian's kubectl too ($("$WORK/debian-kubectl/usr/bin/kubectl" version --client --short 2>/dev/null | head -1))"
  else
    echo "note: Debian's kubernetes-client could not be fetched ($(tail -1 "$WORK/apt.log")); rendering with ${KUBECTLS[*]} only"
  fi
fi

# The validator's packages, installed from package-lock.json; an install npm recorded
# (node_modules/.package-lock.json) newer than the lock file is reused.
if [ ! -f "$VALIDATE/node_modules/.package-lock.json" ] ||
   [ "$VALIDATE/package-lock.json" -nt "$VALIDATE/node_modules/.package-lock.json" ]; then
  if ! (cd "$VALIDATE" && npm ci --no-audit --no-fund) >"$WORK/npm.log" 2>&1; then
    if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network' "$WORK/npm.log"; then
      skip "npm cannot reach its registry to install tests/deploy/validate's packages: $(grep -m1 -E 'ENOTFOUND|EAI_AGAIN|ECONN|ETIMEDOUT|ENETUNREACH|network' "$WORK/npm.log")"
    fi
    cat "$WORK/npm.log"
    fail "npm ci in tests/deploy/validate"
    exit 1
  fi
fi

# 1. kustomize v2.0.3 compatibility, whatever kubectl renders here: no field it lacks,
# and resources name files (a directory goes under bases).
for k in "$K8S"/*/kustomization.yaml; do
  rel=${k#"$SRC"/}
  bad=$(grep -nE '^(patches|labels|replacements|components|buildMetadata|sortOptions):' "$k" || true)
  dirs=$(awk '/^[a-zA-Z]/{in_res=($1=="resources:")} in_res && /^- /{print $2}' "$k" |
         while read -r r; do [ -d "$(dirname "$k")/$r" ] && echo "$r"; done || true)
  if [ -z "$bad$dirs" ]; then pass "kustomize v2.0.3 fields only: $rel"
  else fail "kustomize v2.0.3 fields only: $rel: ${bad:+fields $bad }${dirs:+directories under resources: $dirs}"; fi
done

# 1b. The image the manifests run: Debian bookworm, install_deps.sh's packages (without
# --test), the user of the pods' runAsUser, elastrain as the entrypoint.
CF=$SRC/deploy/Containerfile
uids=$(grep -ho 'runAsUser: [0-9]*' "$K8S"/base/*.yaml | sort -u)
if grep -q '^FROM .*debian:bookworm' "$CF" && grep -q 'install_deps.sh' "$CF" && ! grep -v '^#' "$CF" | grep -q 'install_deps.sh.*--test' &&
   grep -q '^USER 10001' "$CF" && grep -q '^ENTRYPOINT \["/usr/bin/tini", "--", "elastrain"\]' "$CF" && [ "$uids" = "runAsUser: 10001" ]; then
  pass "deploy/Containerfile: bookworm, install_deps.sh, USER 10001 = the pods' runAsUser, ENTRYPOINT tini -- elastrain (PID 1 reaps orphans)"
else
  fail "deploy/Containerfile: expected FROM debian:bookworm, install_deps.sh without --test, USER 10001 matching the pods' runAsUser ($uids), ENTRYPOINT [\"/usr/bin/tini\", \"--\", \"elastrain\"]"
fi

# 2. Secrets as a user makes them.
if KUBECTL=${KUBECTLS[0]} bash "$K8S/make-secrets.sh" "$WORK/secrets" elastrain >"$WORK/make-secrets.log" 2>&1; then
  pass "make-secrets.sh"
  s=$WORK/secrets
  modes=$(stat -c '%a %n' "$s"/*.key "$s"/*.password "$s/token" | grep -v '^600 ' || true)
  [ -z "$modes" ] && pass "make-secrets.sh: keys, passwords and token are 0600" || fail "make-secrets.sh: not 0600: $modes"
  pw=$(cat "$s"/etcd-{root,head,agent}.password | sort -u | grep -cE '^[0-9a-f]{64}$' || true)
  [ "$pw" = 3 ] && pass "make-secrets.sh: three different etcd passwords (root, elastrain-head, elastrain-agent)" ||
    fail "make-secrets.sh: etcd passwords: $pw distinct of 64 hex digits"
  grep -qE '^[0-9a-f]{64}$' "$s/token" && [ "$(wc -c <"$s/token")" -eq 65 ] &&
    pass "make-secrets.sh: token is 64 hex digits and a newline" || fail "make-secrets.sh: token format"
  for c in etcd-server etcd-head etcd-agent head; do
    openssl verify -CAfile "$s/ca.crt" "$s/$c.crt" >/dev/null 2>&1 && pass "make-secrets.sh: $c.crt chains to ca.crt" ||
      fail "make-secrets.sh: $c.crt does not verify against ca.crt"
  done
  san=$(openssl x509 -in "$s/etcd-server.crt" -noout -ext subjectAltName 2>/dev/null)
  for n in DNS:elastrain-etcd DNS:\*.elastrain-etcd-peer.elastrain.svc; do
    [[ $san == *"$n"* ]] && pass "make-secrets.sh: etcd-server.crt names $n" || fail "make-secrets.sh: etcd-server.crt lacks $n"
  done
  san=$(openssl x509 -in "$s/head.crt" -noout -ext subjectAltName 2>/dev/null)
  for n in DNS:elastrain-head, DNS:elastrain-head.elastrain.svc, DNS:localhost; do
    [[ $san == *"$n"* ]] && pass "make-secrets.sh: head.crt names ${n%,}" || fail "make-secrets.sh: head.crt lacks ${n%,}"
  done
  for c in etcd-head etcd-agent; do
    subj=$(openssl x509 -in "$s/$c.crt" -noout -subject)
    [[ $subj != *CN* ]] && pass "make-secrets.sh: $c.crt has no Common Name (etcd's JSON gateway): $subj" ||
      fail "make-secrets.sh: $c.crt has a Common Name: $subj"
  done
  [ "$(openssl pkey -in "$s/head-signing.key" -pubout 2>/dev/null)" = "$(cat "$s/head-signing.pub")" ] &&
    openssl pkey -in "$s/head-signing.key" -noout -text 2>/dev/null | grep -q "ED25519" &&
    pass "make-secrets.sh: the head's Ed25519 signing key and its public half" || fail "make-secrets.sh: head-signing.key/.pub"
  # The agents' pods mount the public half only (issue 33: nothing in them can sign).
  grep -q "secretName: elastrain-head-public-key" "$K8S/base/agents.yaml" && ! grep -q "elastrain-head-signing" "$K8S/base/agents.yaml" &&
    grep -q "secretName: elastrain-head-signing" "$K8S/base/head.yaml" &&
    pass "the signing key is mounted in the head's pod only, its public half in the agents'" ||
    fail "deploy/kubernetes/base: the head's signing key Secrets are not where they belong"
  cmp -s "$s/etcd-head.key" "$s/etcd-agent.key" && fail "make-secrets.sh: the head and the agents share an etcd key" ||
    pass "make-secrets.sh: the head and the agents have their own etcd client keys"
else
  cat "$WORK/make-secrets.log"
  fail "make-secrets.sh"
fi

# 3. The schema validator refuses what it should (or its PASS lines mean nothing).
printf 'apiVersion: v1\nkind: Podd\nmetadata: {name: a}\n' >"$WORK/unknown.yaml"
printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\nspec: {replicas: "two", selector: {}, template: {}}\n' >"$WORK/invalid.yaml"
for f in unknown invalid; do
  if node "$VALIDATE/validate.js" "$WORK/$f.yaml" >"$WORK/$f.out" 2>&1; then fail "validate.js accepts an $f object"
  elif grep -q "^FAIL schema" "$WORK/$f.out"; then pass "validate.js refuses an $f object: $(grep -m1 '^FAIL schema' "$WORK/$f.out")"
  else fail "validate.js failed on an $f object without a schema error"; fi
done

# 4. Each overlay, rendered by each kubectl: the same objects, valid and secure.
for overlay in base gke; do
  flag=()
  [ "$overlay" = gke ] && flag=(--gke)
  first=""
  for i in "${!KUBECTLS[@]}"; do
    kc=${KUBECTLS[$i]}
    out=$WORK/$overlay.$i.yaml
    ver=$("$kc" version --client 2>/dev/null | grep -oE "v[0-9]+\.[0-9]+\.[0-9]+" | head -1 || true)
    if "$kc" kustomize "$K8S/$overlay" >"$out" 2>"$WORK/kustomize.err"; then
      pass "render deploy/kubernetes/$overlay with $kc ($ver)"
    else
      fail "render deploy/kubernetes/$overlay with $kc ($ver): $(cat "$WORK/kustomize.err")"
      continue
    fi
    if [ -z "$first" ]; then
      first=$out
      echo "--- validate.js ${flag[*]} deploy/kubernetes/$overlay + make-secrets.sh's secrets.yaml"
      if node "$VALIDATE/validate.js" "${flag[@]}" "$out" "$WORK/secrets/secrets.yaml"; then pass "validate deploy/kubernetes/$overlay"
      else fail "validate deploy/kubernetes/$overlay (the FAIL lines above)"; fi
    elif node "$VALIDATE/validate.js" --same "$first" "$out"; then
      pass "deploy/kubernetes/$overlay: ${KUBECTLS[0]} and $kc render the same objects"
    else
      fail "deploy/kubernetes/$overlay: ${KUBECTLS[0]} and $kc render different objects"
    fi
  done
done

# 5. etcd's container script (base/etcd.yaml) run against a real etcd with the Secrets of
# step 2: it creates the users and turns auth on; the agents' user cannot write the job's
# spec but can write its own keys; a second start (auth on) sets the passwords again from
# the Secret; no password in its output. Needs etcd and etcdctl (Debian's etcd-client,
# fetched from the archive like kubectl when missing); skipped without them.
ETCDCTL_DIR=""
command -v etcdctl >/dev/null || { (cd "$WORK" && timeout 120 apt-get download -q etcd-client && dpkg-deb -x etcd-client_*.deb etcdctl) \
  >"$WORK/apt-etcdctl.log" 2>&1 && ETCDCTL_DIR=$WORK/etcdctl/usr/bin; }
if command -v etcd >/dev/null && { command -v etcdctl >/dev/null || [ -x "$ETCDCTL_DIR/etcdctl" ]; } && [ -f "$WORK/secrets/ca.crt" ]; then
  s=$WORK/secrets e=$WORK/etcdpod
  mkdir -p "$e/tls" "$e/users"
  cp "$s/ca.crt" "$e/tls/ca.crt" && cp "$s/etcd-server.crt" "$e/tls/tls.crt" && cp "$s/etcd-server.key" "$e/tls/tls.key"
  cp "$s/etcd-root.password" "$e/users/root"
  cp "$s/etcd-head.password" "$e/users/elastrain-head" && cp "$s/etcd-agent.password" "$e/users/elastrain-agent"
  port=$((30000 + RANDOM % 20000))
  node -e "const Y=require('$VALIDATE/node_modules/yaml');
    const o=Y.parseAllDocuments(require('fs').readFileSync('$K8S/base/etcd.yaml','utf8')).map((d)=>d.toJS()).find((x)=>x.kind==='StatefulSet');
    process.stdout.write(o.spec.template.spec.containers[0].command[2]);" |
    sed -e "s|/etc/elastrain/etcd-tls|$e/tls|g; s|/etc/elastrain/etcd-users|$e/users|g; s|https://127.0.0.1:2379|https://127.0.0.1:$port|" >"$e/script.sh"
  etcd_pod() {  # runs the script with etcd for a few seconds; its output in $e/out.N
    PATH=${ETCDCTL_DIR:+$ETCDCTL_DIR:}$PATH timeout 20 sh -c "$(cat "$e/script.sh")" etcd-users --name e0 --data-dir "$e/data" \
      --listen-client-urls "https://127.0.0.1:$port" --advertise-client-urls "https://127.0.0.1:$port" \
      --listen-peer-urls "http://127.0.0.1:$((port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-cluster "e0=http://127.0.0.1:$((port + 1))" --cert-file "$e/tls/tls.crt" --key-file "$e/tls/tls.key" \
      --trusted-ca-file "$e/tls/ca.crt" --client-cert-auth --auth-token=simple >"$e/out.$1" 2>&1 &
    sleep "${2:-10}"
  }
  as() {  # WHO PATH JSON: an etcd JSON call as elastrain-WHO with WHO's certificate
    local c=(--max-time 5 -sS --cacert "$s/ca.crt" --cert "$s/etcd-$1.crt" --key "$s/etcd-$1.key") tok
    tok=$(printf '{"name":"elastrain-%s","password":"%s"}' "$1" "$(cat "$e/users/elastrain-$1")" |
      curl "${c[@]}" "https://127.0.0.1:$port/v3/auth/authenticate" --data-binary @- | grep -o '"token":"[^"]*"' | cut -d'"' -f4 || true)
    printf '%s' "$3" | curl "${c[@]}" -H "Authorization: $tok" "https://127.0.0.1:$port$2" --data-binary @- || true
  }
  etcd_pod 1 10
  spec=$(printf elastrain/job/spec | base64 -w0) mine=$(printf elastrain/agents/a | base64 -w0)
  grep -q "auth enabled" "$e/out.1" && [[ $(as agent /v3/kv/put "{\"key\":\"$spec\",\"value\":\"eA==\"}") == *"permission denied"* ]] &&
    [[ $(as agent /v3/kv/put "{\"key\":\"$mine\",\"value\":\"eA==\"}") == *revision* ]] &&
    [[ $(as head /v3/kv/put "{\"key\":\"$spec\",\"value\":\"eA==\"}") == *revision* ]] &&
    pass "etcd's pod script: users made, auth on; elastrain-agent cannot write elastrain/job/spec, can write elastrain/agents/; elastrain-head can" ||
    fail "etcd's pod script, first start: $(tail -3 "$e/out.1")"
  wait
  openssl rand -hex 32 >"$e/users/elastrain-agent"  # a rotated Secret
  etcd_pod 2 10
  grep -q "the password of elastrain-agent set from the Secret" "$e/out.2" && [[ $(as agent /v3/kv/range "{\"key\":\"$mine\"}") == *kvs* ]] &&
    pass "etcd's pod script, second start (auth on): the rotated password of elastrain-agent works" ||
    fail "etcd's pod script, second start: $(tail -3 "$e/out.2")"
  wait
  leaked=$(cat "$e"/users/* | grep -lFf - "$e"/out.* || true)
  [ -z "$leaked" ] && pass "etcd's pod script: no password in its output" || fail "a password in $leaked"
else
  echo "note: etcd or etcdctl missing: etcd's pod script not run ($(tail -1 "$WORK/apt-etcdctl.log" 2>/dev/null))"
fi

echo
if [ "$failures" -eq 0 ]; then
  echo "test_kubernetes: all passed (kubectl: ${KUBECTLS[*]})"
else
  echo "test_kubernetes: $failures FAILED"
  exit 1
fi

#!/usr/bin/env bash
# The Secrets elastrain's pods mount, made offline with openssl and kubectl:
#   deploy/kubernetes/make-secrets.sh OUT_DIR [NAMESPACE]     (NAMESPACE: elastrain)
# writes into OUT_DIR (created 0700; refused if it already holds a CA):
#   ca.crt ca.key              a CA for this deployment (keep ca.key offline)
#   etcd-server.crt .key       etcd's server and peer certificate: elastrain-etcd, its
#                              members *.elastrain-etcd-peer.NAMESPACE.svc, localhost
#   etcd-head.crt .key         the head's etcd client certificate } without a Common Name
#   etcd-agent.crt .key        the agents' (and their workers')   } (etcd's JSON gateway
#                              refuses one when auth is on: docs/etcd-tls.md)
#   etcd-root.password         etcd's users: root (only etcd's pod, to set up the others),
#   etcd-head.password         elastrain-head (readwrite on elastrain/) and
#   etcd-agent.password        elastrain-agent (read elastrain/, write only the agents'
#                              keys): 64 hex digits each (docs/deploy.md, "Credentials")
#   head.crt head.key          the head's HTTPS API: elastrain-head, its Service names,
#                              localhost and 127.0.0.1 (kubectl port-forward)
#   token                      the API's bearer token: 64 hex digits and a newline
#   head-signing.key .pub      the head's Ed25519 key: it signs every job spec, plan and
#                              command; the agents verify with the .pub (issue 33)
#   secrets.yaml               the eight Secrets; apply with  kubectl apply -f OUT_DIR/secrets.yaml
# Keys, passwords and the token are 0600. $KUBECTL (default kubectl) only formats the Secrets
# (--dry-run=client): no cluster is contacted. A production cluster may use its own PKI
# (cert-manager, ...) as long as the Secrets keep these names and keys.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT_DIR [NAMESPACE]" >&2
  exit 2
fi
out=$1
ns=${2:-elastrain}
kubectl=${KUBECTL:-kubectl}
days=${CERT_DAYS:-365}
for tool in openssl "$kubectl"; do
  command -v "$tool" >/dev/null || { echo "make-secrets: $tool not found (Debian: apt-get install openssl kubernetes-client)" >&2; exit 1; }
done
if [ -e "$out/ca.key" ]; then
  echo "make-secrets: $out/ca.key exists; refusing to issue a second CA over it (choose an empty OUT_DIR)" >&2
  exit 1
fi
umask 077
mkdir -p "$out"
cd "$out"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
  -subj "/CN=elastrain CA ($ns)" -keyout ca.key -out ca.crt 2>/dev/null

# issue NAME SUBJECT EXTENSIONS: NAME.key and NAME.crt signed by the CA.
issue() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
svc="$ns.svc"
# etcd's gateway dials etcd's own gRPC server with this certificate: clientAuth too.
issue etcd-server "/CN=elastrain-etcd" "subjectAltName=DNS:elastrain-etcd,DNS:elastrain-etcd.$svc,DNS:elastrain-etcd.$svc.cluster.local,DNS:*.elastrain-etcd-peer.$svc,DNS:*.elastrain-etcd-peer.$svc.cluster.local,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
issue etcd-head "/O=elastrain/OU=head" "extendedKeyUsage=clientAuth"
issue etcd-agent "/O=elastrain/OU=agent" "extendedKeyUsage=clientAuth"
issue head "/CN=elastrain-head" "subjectAltName=DNS:elastrain-head,DNS:elastrain-head.$svc,DNS:elastrain-head.$svc.cluster.local,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
rm -f ca.srl
openssl rand -hex 32 >token
for u in root head agent; do openssl rand -hex 32 >"etcd-$u.password"; done
openssl genpkey -algorithm ed25519 -out head-signing.key 2>/dev/null
openssl pkey -in head-signing.key -pubout -out head-signing.pub 2>/dev/null
chmod 600 ./*.key ./*.password token

# tls_secret NAME CERT: a kubernetes.io/tls Secret with ca.crt beside tls.crt and tls.key.
tls_secret() {
  "$kubectl" create secret generic "$1" --namespace "$ns" --type kubernetes.io/tls \
    --from-file=ca.crt=ca.crt --from-file=tls.crt="$2.crt" --from-file=tls.key="$2.key" \
    --dry-run=client -o yaml
}
# etcd_client_secret NAME WHO: WHO's etcd client certificate and its password, one Secret.
etcd_client_secret() {
  "$kubectl" create secret generic "$1" --namespace "$ns" --type kubernetes.io/tls \
    --from-file=ca.crt=ca.crt --from-file=tls.crt="etcd-$2.crt" --from-file=tls.key="etcd-$2.key" \
    --from-file=password="etcd-$2.password" --dry-run=client -o yaml
}
{
  "$kubectl" create secret generic elastrain-api-token --namespace "$ns" --from-file=token=token \
    --dry-run=client -o yaml
  echo "---"
  tls_secret elastrain-etcd-server-tls etcd-server
  echo "---"
  # Only etcd's pod mounts it: it creates the users and turns auth on (base/etcd.yaml).
  "$kubectl" create secret generic elastrain-etcd-users --namespace "$ns" --from-file=root=etcd-root.password \
    --from-file=elastrain-head=etcd-head.password --from-file=elastrain-agent=etcd-agent.password \
    --dry-run=client -o yaml
  echo "---"
  etcd_client_secret elastrain-etcd-head head
  echo "---"
  etcd_client_secret elastrain-etcd-agent agent
  echo "---"
  tls_secret elastrain-head-tls head
  echo "---"
  # The private half only in the head's pod; the agents' pods get the public half alone.
  "$kubectl" create secret generic elastrain-head-signing --namespace "$ns" --from-file=signing.key=head-signing.key \
    --dry-run=client -o yaml
  echo "---"
  "$kubectl" create secret generic elastrain-head-public-key --namespace "$ns" --from-file=head.pub=head-signing.pub \
    --dry-run=client -o yaml
} >secrets.yaml
echo "make-secrets: CA, etcd server/peer, etcd head and agent client and head certificates, etcd passwords, API token, the head's signing key and secrets.yaml (namespace $ns) in $(pwd)"

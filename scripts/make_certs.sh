#!/usr/bin/env bash
# A throwaway certificate authority and certificates for a test cluster (docs/security.md):
#   scripts/make_certs.sh OUT_DIR [NAME_OR_IP ...]
# writes, with the OpenSSL command line:
#   ca.crt ca.key            the CA that signs everything below (keep ca.key offline)
#   server.crt server.key    for the head's API and etcd: valid for localhost, 127.0.0.1
#                            and every NAME_OR_IP given (subjectAltName)
#   client.crt client.key    a client certificate, CN=elastrain (etcd's user of that name)
#   etcd-client.crt .key     a client certificate without a Common Name, for etcd with auth
#                            enabled: its JSON gateway refuses any client certificate that
#                            has one, so the user comes from --store-user (docs/etcd-tls.md)
#   other-ca.crt             a CA nobody trusts, for tests that must be refused
# Keys are created 0600 in a 0700 directory. A production cluster uses its own PKI.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [NAME_OR_IP ...]" >&2
  exit 2
fi
out=$1
shift
umask 077
mkdir -p "$out"
cd "$out"
days=30

san="DNS:localhost,IP:127.0.0.1"
for n in "$@"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+=",IP:$n"; else san+=",DNS:$n"; fi
done

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj "/CN=elastrain test CA" -keyout ca.key -out ca.crt 2>/dev/null

# $1: name; $2: subject CN, or a whole subject when it starts with "/"; $3: extensions
issue() {
  local subj="/CN=$2"
  [[ $2 == /* ]] && subj=$2
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subj" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days $days \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
issue server "elastrain server" "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth"
issue client elastrain "extendedKeyUsage=clientAuth"
issue etcd-client "/O=elastrain" "extendedKeyUsage=clientAuth"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj "/CN=untrusted CA" -keyout other-ca.key -out other-ca.crt 2>/dev/null
rm -f other-ca.key ca.srl
chmod 600 ./*.key
echo "make_certs: CA, server ($san), client (CN=elastrain) and etcd-client (no CN) certificates in $(pwd)"

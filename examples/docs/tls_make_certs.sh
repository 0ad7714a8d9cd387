#!/bin/sh
# A private CA, a certificate for the daemon's host, and one for a sandbox (mutual TLS).
# DAEMON_HOST is the name or IP address sandboxes use to reach the daemon.
set -eu
DAEMON_HOST="${DAEMON_HOST:-127.0.0.1}"
case "$DAEMON_HOST" in
  *[!0-9.]*) SAN="DNS:$DAEMON_HOST" ;;
  *) SAN="IP:$DAEMON_HOST" ;;
esac

# 1. The CA: its key stays with whoever issues certificates; ca.pem goes to every party.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key
openssl req -x509 -new -key ca.key -subj "/CN=toolbridge CA" -days 365 -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# 2. The daemon's certificate, for the address sandboxes dial (subjectAltName).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out daemon.key
openssl req -new -key daemon.key -subj "/CN=toolbridge daemon" -out daemon.csr
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$SAN" > daemon.ext
openssl x509 -req -in daemon.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -days 90 -extfile daemon.ext -out daemon.pem

# 3. A sandbox's certificate (only for mutual TLS: --tls-client-ca ca.pem on the daemon).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out sandbox.key
openssl req -new -key sandbox.key -subj "/CN=sandbox-7" -out sandbox.csr
printf 'extendedKeyUsage=clientAuth\n' > sandbox.ext
openssl x509 -req -in sandbox.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -days 30 -extfile sandbox.ext -out sandbox.pem

#!/usr/bin/env bash
# Makes throwaway certificates for the TLS tests with openssl (P-256 keys,
# valid for one day). Files are written as DIR/NAME.key and DIR/NAME.crt.
#
#   make_cert.sh ca     DIR NAME             # a self-signed CA
#   make_cert.sh server DIR NAME CA_NAME     # signed by DIR/CA_NAME: localhost, 127.0.0.1
#   make_cert.sh client DIR NAME CA_NAME     # signed by DIR/CA_NAME: client authentication
set -euo pipefail

kind=$1 dir=$2 name=$3
key="$dir/$name.key" crt="$dir/$name.crt"
new_key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$key")

if [[ $kind == ca ]]; then
  openssl req -x509 "${new_key[@]}" -out "$crt" -days 1 -subj "/CN=$name" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  exit 0
fi

ca=$4
case $kind in
  server) extensions="subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth" ;;
  client) extensions="extendedKeyUsage=clientAuth" ;;
  *) echo "unknown kind '$kind'" >&2; exit 2 ;;
esac
extfile="$dir/$name.ext"
printf '%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n' "$extensions" >"$extfile"
openssl req -new "${new_key[@]}" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" \
  -set_serial "0x$(openssl rand -hex 8)" -days 1 -extfile "$extfile" -out "$crt" 2>/dev/null
rm -f "$dir/$name.csr" "$extfile"

#!/usr/bin/env bash
# Makes what the shared-etcd variant's Secrets hold, with openssl, into DIR (default
# ./etcd-certs; it must not hold a CA yet):
#
#   ca.pem, ca.key          a CA for etcd and its clients (keep ca.key off the cluster)
#   server.pem, server.key  the members' certificate for clients (2379)
#   peer.pem, peer.key      the members' certificate for each other (2380)
#   client.pem, client.key  the gateways' client certificate (CN=csi-gateway)
#   root.pem, root.key      etcdctl's client certificate as etcd's root user (CN=root)
#   gateway-password        the password of etcd's user csi-gateway (no newline)
#   root-password           the password of etcd's user root (no newline)
#
# Member certificates name every member as the StatefulSet in etcd.yaml makes them
# (etcd-<n>.etcd.<namespace>.svc and the same under the cluster domain), the Service, and
# localhost; all of them are good for both TLS ends (etcd's members dial each other, and its
# gateway dials itself). Then it prints the `kubectl create secret` lines that load them.
#
#   NAMESPACE       default csi-gateway (the manifests' namespace)
#   CLUSTER_DOMAIN  default cluster.local
#   MEMBERS         default 3 (the StatefulSet's replicas)
#   DAYS            validity of the leaf certificates, default 825 (the CA: 3650)
set -euo pipefail

dir=${1:-etcd-certs}
ns=${NAMESPACE:-csi-gateway}
domain=${CLUSTER_DOMAIN:-cluster.local}
members=${MEMBERS:-3}
days=${DAYS:-825}
command -v openssl >/dev/null || { echo "make-certs: openssl is missing" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
[ ! -e ca.key ] || { echo "make-certs: $dir/ca.key exists; not overwriting a CA" >&2; exit 1; }
umask 077

# Each key P-256 ECDSA, which etcd (Go) and the gateway (rustls) both take.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }

key ca
openssl req -x509 -new -key ca.key -out ca.pem -days 3650 -subj "/CN=csi-gateway etcd CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# leaf NAME CN EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
leaf() {
  local name=$1 cn=$2 eku=$3 san=${4:-}
  key "$name"
  openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$cn"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    [ -z "$san" ] || echo "subjectAltName=$san"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out "$name.pem" -days "$days" -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

names="DNS:etcd.$ns.svc,DNS:etcd.$ns.svc.$domain,DNS:localhost,IP:127.0.0.1"
for ((i = 0; i < members; i++)); do
  names+=",DNS:etcd-$i.etcd.$ns.svc,DNS:etcd-$i.etcd.$ns.svc.$domain"
done
leaf server "etcd" serverAuth,clientAuth "$names"
leaf peer "etcd-peer" serverAuth,clientAuth "$names"
leaf client "csi-gateway" clientAuth
leaf root "root" clientAuth
rm -f ca.srl

# Passwords of letters and digits only: they end up in `user add NAME:PASSWORD`.
openssl rand -hex 24 | tr -d '\n' >gateway-password
openssl rand -hex 24 | tr -d '\n' >root-password
chmod 0644 ./*.pem

cat <<EOF
make-certs: written to $PWD. Load them into the cluster (the namespace first):

kubectl apply -f deploy/kubernetes/shared-etcd/00-namespace.yaml
kubectl -n $ns create secret generic etcd-tls --from-file=ca.pem --from-file=server.pem \\
    --from-file=server.key --from-file=peer.pem --from-file=peer.key
kubectl -n $ns create secret generic etcd-root --from-file=ca.pem --from-file=root.pem \\
    --from-file=root.key --from-file=password=root-password
kubectl -n $ns create secret generic csi-gateway-etcd --from-file=ca.pem --from-file=client.pem \\
    --from-file=client.key --from-file=password=gateway-password

(run from $PWD, the kubectl apply line from the repository's root)
EOF

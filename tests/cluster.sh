#!/usr/bin/env bash
# Shared state across hosts (.ci/run runs it after tests/compose.sh): a controller gateway and
# two node gateways, each in its own container, keep the draft plugin's VolumeHandle metadata
# under ONE prefix of a three-member etcd (TLS with client certificates, auth on, a user whose
# role is limited to that prefix). While `csi-gateway-load lifecycles` drives volume lifecycles
# through them (create and controller calls on the controller gateway, node calls on a node
# gateway), the faults below are injected in order, each phase marked for the tool's figures:
#   leader-killed      SIGKILL of the etcd leader (then started again: leader-restarted)
#   member-stopped     a follower stopped (then started again: member-restarted)
#   n1-cut-from-two    node gateway n1 cut off from two members: it works through the third
#   n1-cut-from-all    n1 cut off from all three: calls that need the store are UNAVAILABLE
#                      naming etcd within the store's bound, Probe and GetPluginInfo answer,
#                      /healthz says the store fails (n1-healed: reconnected)
#   minority           a follower cut off from its peers, n2 reaching only it: n2 answers no
#                      call OK (reads are linearizable, never served stale from a minority)
#   rolling-restart    every member restarted in turn
#   gateway-killed     SIGKILL of the controller gateway under calls, then started again
# Afterwards the tool checks that every call answered OK left the state it promised and that
# nothing was lost (it exits 1 otherwise), and this script checks the per-phase figures and that
# etcd holds no handle of a deleted volume.
#
# Topology, all on private Docker networks: members talk Raft on `peer`; member i's client port
# is on network m<i> only, and every gateway joins m1, m2 and m3, so `docker network
# disconnect` cuts one gateway from one member. The plugin's socket is a volume all gateways
# mount; each gateway's own socket is a host directory, so the tool runs on the host.
# Everything is torn down on exit. CLUSTER_PHASE_SECONDS (8) sets each phase's length.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST="cluster test"
# shellcheck source=tests/containers.sh
. tests/containers.sh
need_docker
[ -x /usr/bin/etcdctl ] || fail "/usr/bin/etcdctl is missing (Debian's etcd-client)"

export IMAGE_TAG=cluster-test
phase_seconds=${CLUSTER_PHASE_SECONDS:-8}
store_bound=3s # state.timeout of every gateway
P="csi-cluster-$$"
work=$(mktemp -d)
load_pid=

teardown() {
  status=$?
  [ -z "$load_pid" ] || kill "$load_pid" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    for c in $(docker ps -aq --filter "name=^$P-"); do
      echo "--- $(docker inspect -f '{{.Name}} {{.State.Status}}' "$c")" >&2
      docker logs --tail 15 "$c" 2>&1 | sed 's/^/  /' >&2 || true
    done
    [ ! -f "$work/lifecycles.out" ] || tail -40 "$work/lifecycles.out" >&2
  fi
  docker rm -f $(docker ps -aq --filter "name=^$P-") >/dev/null 2>&1 || true
  for n in peer m1 m2 m3; do docker network rm "$P-$n" >/dev/null 2>&1 || true; done
  docker volume rm "$P-plugin" >/dev/null 2>&1 || true
  for image in csi-gateway csi-gateway-prometheus csi-gateway-etcd; do
    docker rmi "$image:$IMAGE_TAG" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
  exit "$status"
}
on_exit teardown

started=$SECONDS
step "building the images and the load tool"
deploy/docker/build-images
cargo build --locked -q -p csi-gateway-load
load=target/debug/csi-gateway-load
gateway_bin=target/x86_64-unknown-linux-gnu/release/csi-gateway

step "certificates, networks, three etcd members"
"$gateway_bin" gen-certs "$work/certs" --server-name etcd1 --server-name etcd2 --server-name etcd3 \
  --client-name gateway.csi-gateway.local >/dev/null
printf 'gateway-password-7d1f\n' >"$work/certs/etcd-password"
chown -R 65532:65532 "$work/certs"
for n in peer m1 m2 m3; do docker network create "$P-$n" >/dev/null; done
docker volume create "$P-plugin" >/dev/null
cluster=etcd1=http://etcd1:2380,etcd2=http://etcd2:2380,etcd3=http://etcd3:2380
for i in 1 2 3; do
  # etcdctl (Debian's, linking the same glibc files as etcd) is mounted in to set up auth and
  # find the leader from inside the private networks.
  docker create --name "$P-etcd$i" --network "$P-peer" --network-alias "etcd$i" \
    -v "$work/certs:/certs:ro" -v /usr/bin/etcdctl:/bin/etcdctl:ro \
    "csi-gateway-etcd:$IMAGE_TAG" \
    --name "etcd$i" --data-dir /etcd-data --pre-vote \
    --listen-client-urls https://0.0.0.0:2379 --advertise-client-urls "https://etcd$i:2379" \
    --listen-peer-urls http://0.0.0.0:2380 --initial-advertise-peer-urls "http://etcd$i:2380" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "$P" \
    --cert-file /certs/server.pem --key-file /certs/server.key \
    --trusted-ca-file /certs/ca.pem --client-cert-auth >/dev/null
  docker network connect --alias "etcd$i" "$P-m$i" "$P-etcd$i"
done
for i in 1 2 3; do docker start "$P-etcd$i" >/dev/null; done

# etcdctl inside member $1, against that member (or, with --cluster, all of them).
ctl() {
  local i=$1
  shift
  docker exec "$P-etcd$i" /bin/etcdctl --endpoints "https://etcd$i:2379" --cacert /certs/ca.pem \
    --cert /certs/client.pem --key /certs/client.key --dial-timeout 2s --command-timeout 3s "$@"
}
root() { ctl "$@" --user root:root-password-21c8; }
member_healthy() { root "$1" endpoint health; }
# The member number of the current leader, asked of member $1 (any running one).
leader() {
  local i=${1:-1}
  # -w simple: endpoint, id, version, db size, is leader, …
  root "$i" endpoint status --cluster -w simple | awk -F', ' '$5 == "true" { print $1 }' |
    sed -n 's|https://etcd\([123]\):2379|\1|p'
}
within 60 "member 1 answers" ctl 1 endpoint health
ctl 1 user add root:root-password-21c8 >/dev/null
ctl 1 user grant-role root root >/dev/null
ctl 1 user add gateway:gateway-password-7d1f >/dev/null
ctl 1 role add gateway >/dev/null
ctl 1 role grant-permission gateway --prefix=true readwrite /csi-gateway/ >/dev/null
ctl 1 user grant-role gateway gateway >/dev/null
ctl 1 auth enable >/dev/null
for i in 1 2 3; do within 30 "member $i healthy" member_healthy "$i"; done

step "the plugin and three gateways (controller, n1, n2), one etcd prefix"
# Publish targets: one host directory at the same path in the plugin and every gateway, as
# kubelet's directory is on a node (a node gateway in front of a v0.x plugin reads and makes
# target paths itself).
mkdir -p "$work/targets"
chown 65532:65532 "$work/targets"
docker run -d --name "$P-plugin" --network none --no-healthcheck -v "$P-plugin:/plugin" \
  -v "$work/targets:/targets" \
  --entrypoint /csi-reference-backend "csi-gateway:$IMAGE_TAG" \
  --dialect v0.1-oneof --endpoint unix:///plugin/csi.sock --data-dir /data \
  --publish-mode symlink --node-id node-1 >/dev/null
gateways=(controller n1 n2)
for g in "${gateways[@]}"; do
  mkdir -p "$work/$g"
  chown 65532:65532 "$work/$g"
  cat >"$work/$g.toml" <<EOF
[listen]
endpoint = "unix:///csi/csi.sock"

[upstream]
endpoint = "unix:///plugin/csi.sock"

[state]
dir = "/state"
backend = "etcd"
etcd_endpoints = ["https://etcd1:2379", "https://etcd2:2379", "https://etcd3:2379"]
etcd_prefix = "/csi-gateway/"
etcd_username = "gateway"
etcd_password_file = "/certs/etcd-password"
timeout = "$store_bound"
node_id = "$g"

[state.etcd_tls]
cert = "/certs/client.pem"
key = "/certs/client.key"
ca = "/certs/ca.pem"

[metrics]
listen = "127.0.0.1:9808"
EOF
  docker create --name "$P-$g" --network "$P-m1" -v "$work/$g:/csi" -v "$P-plugin:/plugin" \
    -v "$work/targets:/targets" \
    -v "$work/certs:/certs:ro" -v "$work/$g.toml:/etc/csi-gateway/gateway.toml:ro" \
    "csi-gateway:$IMAGE_TAG" run --config /etc/csi-gateway/gateway.toml >/dev/null
  docker network connect "$P-m2" "$P-$g"
  docker network connect "$P-m3" "$P-$g"
  docker start "$P-$g" >/dev/null
done
healthz() { docker exec "$P-$1" /csi-gateway health --url http://127.0.0.1:9808/healthz; }
for g in "${gateways[@]}"; do within 60 "gateway $g healthy" healthz "$g"; done

step "lifecycles running; faults every ${phase_seconds}s"
"$load" lifecycles --controller "$work/controller/csi.sock" \
  --node "n1=$work/n1/csi.sock" --node "n2=$work/n2/csi.sock" --clients 4 --standing 4 \
  --target-dir /targets --stop-file "$work/stop" --phases "$work/phases" \
  --journal "$work/journal.tsv" >"$work/lifecycles.out" 2>&1 &
load_pid=$!
within 30 "the first lifecycles" grep -q '^t+' "$work/lifecycles.out"

mark() {
  echo "$(date +%s.%N) $1" >>"$work/phases"
  step "phase $1"
}
hold() { sleep "$phase_seconds"; }
rejoin() { within 60 "member $1 healthy again" member_healthy "$1"; }

hold # baseline
L=$(leader 1)
[ -n "$L" ] || fail "no leader found"
mark leader-killed
docker kill -s KILL "$P-etcd$L" >/dev/null
hold
mark leader-restarted
docker start "$P-etcd$L" >/dev/null
rejoin "$L"
hold

L=$(leader "$L")
F=$((L % 3 + 1)) # a follower
mark member-stopped
docker stop -t 5 "$P-etcd$F" >/dev/null
hold
mark member-restarted
docker start "$P-etcd$F" >/dev/null
rejoin "$F"
hold

mark n1-cut-from-two
docker network disconnect "$P-m1" "$P-n1"
docker network disconnect "$P-m2" "$P-n1"
hold
mark n1-cut-from-all
docker network disconnect "$P-m3" "$P-n1"
sleep 1
probe=$("$load" store-probe --socket "$work/n1/csi.sock" --target /targets/probe --bound "$store_bound") ||
  fail "n1 cut off from etcd: $probe"
echo "$probe"
health=$(healthz n1 2>&1) && fail "n1's /healthz passes while it reaches no etcd member: $health"
grep -q etcd <<<"$health" || fail "n1's /healthz does not name etcd: $health"
echo "n1 /healthz: $health"
hold
mark n1-healed
for i in 1 2 3; do docker network connect "$P-m$i" "$P-n1"; done
within 30 "n1 healthy after healing" healthz n1
hold

L=$(leader 1)
M=$((L % 3 + 1)) # a follower, cut off from its peers; n2 reaches only it
mark minority
docker network disconnect "$P-peer" "$P-etcd$M"
for i in 1 2 3; do [ "$i" = "$M" ] || docker network disconnect "$P-m$i" "$P-n2"; done
minority_began=$(date +%s.%N)
hold
minority_ended=$(date +%s.%N)
mark minority-healed
docker network connect --alias "etcd$M" "$P-peer" "$P-etcd$M"
for i in 1 2 3; do [ "$i" = "$M" ] || docker network connect "$P-m$i" "$P-n2"; done
rejoin "$M"
hold

mark rolling-restart
for i in 1 2 3; do
  docker restart -t 5 "$P-etcd$i" >/dev/null
  rejoin "$i"
  sleep 2
done
mark rolled
hold

mark gateway-killed
docker kill -s KILL "$P-controller" >/dev/null
sleep 1
docker start "$P-controller" >/dev/null
hold
mark after
hold

step "stopping the lifecycles; the tool checks what was answered OK"
touch "$work/stop"
set +e
wait "$load_pid"
load_status=$?
set -e
load_pid=
sed -n '/^phase /,$p' "$work/lifecycles.out"
[ "$load_status" -eq 0 ] || fail "the lifecycles tool found violations (exit $load_status)"

# A phase's column from the tool's table: figure PHASE COLUMN (1-based, the name is 1).
figure() { awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$work/lifecycles.out"; }
for p in baseline leader-killed member-stopped n1-cut-from-two minority rolling-restart gateway-killed after; do
  [ "$(figure "$p" 8)" = 0 ] || fail "phase $p lost calls"
done
# The stream is back at the end: no call failed, no stall as long as the store's bound, and
# calls/s not below a quarter of the baseline's (a loose floor: other work on the machine moves
# calls/s by half between phases without faults).
[ "$(figure after 6)" = 0 ] || fail "calls still failing after the faults: $(figure after 6)"
awk -v s="$(figure after 9)" 'BEGIN { exit !(s + 0 < 3) }' || fail "a stall of $(figure after 9) after the faults"
awk -v a="$(figure after 3)" -v b="$(figure baseline 3)" 'BEGIN { exit !(a >= b / 4 && b > 0) }' ||
  fail "calls/s after the faults ($(figure after 3)) below a quarter of the baseline's ($(figure baseline 3))"
# Calls answered OK by a node gateway in a window of the journal.
ok_on() {
  awk -F'\t' -v g="$1" -v from="$2" -v to="$3" \
    'NR > 1 && $3 == g && $6 == "Ok" && $1 + $2 >= from && $1 + $2 < to { n++ } END { print n + 0 }' "$work/journal.tsv"
}
phase_start() { awk -v p="$1" '$2 == p { print $1 }' "$work/phases"; }
n1_two=$(ok_on n1 "$(phase_start n1-cut-from-two)" "$(phase_start n1-cut-from-all)")
[ "$n1_two" -gt 0 ] || fail "n1, cut off from two members, answered no call OK through the third"
# Past the first 2 s (election timeout and calls already in flight), a node gateway that
# reaches only a minority member must answer nothing OK: a read served there could be stale.
n2_minority=$(ok_on n2 "$(awk -v t="$minority_began" 'BEGIN { printf "%.3f", t + 2 }')" "$minority_ended")
[ "$n2_minority" = 0 ] || fail "n2 answered $n2_minority calls OK through a minority member"
left=$(root 1 get --prefix --keys-only /csi-gateway/handle/ | grep -c . || true)
[ "$left" = 0 ] || fail "etcd holds $left handle(s) of deleted volumes"
step "n1 through one member: $n1_two calls OK; n2 through a minority member: $n2_minority OK"
renewed=0
for g in "${gateways[@]}"; do
  renewed=$((renewed + $(docker logs "$P-$g" 2>&1 | grep -c 'auth token.*renewed' || true)))
done
step "etcd auth tokens renewed by the gateways: $renewed"
step "passed in $((SECONDS - started))s"

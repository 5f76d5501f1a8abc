#!/usr/bin/env bash
# docker-compose.yml end to end on this machine's Docker engine (.ci/run runs it after
# `cargo test --workspace --locked`): prepares a kubelet directory as docs/deployment.md says (a shared
# mount), builds the images (deploy/docker/build-images), brings the project up and asserts that
#   - every gateway passes its image's HEALTHCHECK (`csi-gateway health`),
#   - a v1 call on the bridged node's socket crosses the mTLS bridge to the draft (v0.1-oneof)
#     plugin of the appliance,
#   - from the CO container, docs/deployment.md's `check --conformance` lines pass every row on both
#     nodes: on the local node with controller calls through the controller gateway, node
#     calls through the node gateway, and the driver's mounts checked from the CO's mount
#     namespace (a mount at the target, a file written through it kept in the volume, no
#     mount and no target after unpublish); afterwards no mount is left in kubelet's directory,
#   - Prometheus, through its HTTP API, has scraped csi_sidecar_operations_seconds from every
#     gateway and loaded deploy/prometheus/alerts.yml,
#   - with the appliance container killed the bridged node's call gets UNAVAILABLE (and the
#     alert on the lost upstream goes pending), and the bridge recovers when the appliance is back.
# The project is always torn down, volumes and test images included, and the kubelet
# directory unmounted and removed. A missing docker, docker-compose or daemon fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST="compose test"
# shellcheck source=tests/containers.sh
. tests/containers.sh
need_docker
command -v docker-compose >/dev/null || fail "docker-compose is not installed"
command -v curl >/dev/null || fail "curl is not installed"
command -v jq >/dev/null || fail "jq is not installed"
command -v findmnt >/dev/null || fail "findmnt (util-linux) is not installed"

export IMAGE_TAG=compose-test
export COMPOSE_PROJECT_NAME="csi-gateway-test-$$"
PROMETHEUS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PROMETHEUS_PORT
# kubelet's directory of this run, in place of docs/deployment.md's /var/lib/csi-gateway-compose/kubelet.
KUBELET_DIR=$(mktemp -d /tmp/csi-gateway-compose-kubelet.XXXXXX)
export KUBELET_DIR

teardown() {
  status=$?
  if [ "$status" -ne 0 ]; then
    docker-compose ps >&2 || true
    docker-compose logs --no-color --tail 40 >&2 || true
  fi
  docker-compose down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 || true
  for image in csi-gateway csi-gateway-prometheus csi-gateway-etcd; do
    docker rmi "$image:$IMAGE_TAG" >/dev/null 2>&1 || true
  done
  # The self-bind and anything a failed run left mounted under it; never removed through a
  # mount (--one-file-system).
  umount -R "$KUBELET_DIR" 2>/dev/null || true
  rm -rf --one-file-system "$KUBELET_DIR"
  exit "$status"
}
on_exit teardown

# Mount points at or under the kubelet directory, on the host.
host_mounts() { findmnt -rn -o TARGET | awk -v d="$KUBELET_DIR" '$0 == d || index($0, d "/") == 1'; }

started=$SECONDS
step "kubelet's directory a shared mount, by docs/deployment.md's line (twice: it is idempotent)"
prepare=$(grep -m1 '^mkdir -p "$KUBELET_DIR"' docs/deployment.md | sed 's/ *# .*//')
[ -n "$prepare" ] || fail "docs/deployment.md's line preparing \$KUBELET_DIR is gone"
for _ in 1 2; do
  bash -c "$prepare" || fail "docs/deployment.md's line failed: $prepare"
done
[ "$(findmnt -n -o PROPAGATION --mountpoint "$KUBELET_DIR")" = shared ] ||
  fail "$KUBELET_DIR is not a shared mount: $(findmnt -n -o PROPAGATION --mountpoint "$KUBELET_DIR")"
[ "$(host_mounts | wc -l)" -eq 1 ] || fail "the line is not idempotent: $(host_mounts)"

step "building the images"
deploy/docker/build-images
step "images built in $((SECONDS - started))s"

step "bringing the project up"
docker-compose up -d

health_status() {
  docker inspect -f '{{.State.Health.Status}}' "$(docker-compose ps -q "$1")"
}
healthy() { [ "$(health_status "$1")" = healthy ]; }
for gateway in node controller bridged-node appliance; do
  within 120 "the $gateway gateway's HEALTHCHECK passes" healthy "$gateway"
done

# The CSI call a client of the bridged node's socket makes (as kubelet would), in CSI v1.
check_bridged() {
  docker-compose exec -T bridged-node /csi-gateway check --timeout 5s \
    --endpoint unix:///var/lib/kubelet/plugins/bridged.csi-gateway.dev/csi.sock
}

step "a v1 call across the bridge"
out=$(check_bridged) || fail "check on the bridged node's socket failed: $out"
echo "$out"
grep -q '^dialect: *v1' <<<"$out" || fail "the bridged node's socket did not answer as CSI v1"
grep -q 'reference.csi-gateway.dev' <<<"$out" || fail "the plugin's name did not come across the bridge"
plugin=$(docker-compose exec -T appliance /csi-gateway check --endpoint unix:///run/csi-driver/csi.sock --timeout 5s) ||
  fail "the appliance plugin's own socket does not answer: $plugin"
grep -q '^dialect: *v0.1-oneof' <<<"$plugin" || fail "the appliance plugin is not the draft dialect: $plugin"
# Captured first: `grep -q` leaving a pipe early would fail the pipeline (pipefail).
appliance_log=$(docker-compose logs --no-color appliance)
grep -q 'bridge peer connected.*identity=node.csi-gateway.local' <<<"$appliance_log" ||
  fail "the appliance logged no mTLS peer with the node's identity"

step "docs/deployment.md's exec line, as written, without a terminal"
# The line docs/deployment.md gives operators (its `docker-compose exec -T`), run with no terminal at
# all: a new session (setsid, so no controlling terminal) and stdin from /dev/null, as CI and
# scripts run it. Without -T, docker-compose would fail here ("the input device is not a TTY").
readme_exec=$(grep -m1 '^docker-compose exec ' docs/deployment.md | sed 's/ *#.*//')
grep -q -- ' exec -T ' <<<"$readme_exec" || fail "docs/deployment.md's exec line lacks -T: $readme_exec"
out=$(setsid bash -c "$readme_exec" </dev/null 2>&1) || fail "docs/deployment.md's exec line failed without a terminal: $out"
grep -q '^dialect: *v1' <<<"$out" || fail "docs/deployment.md's exec line did not answer as CSI v1: $out"

step "docs/deployment.md's conformance lines, from the CO container"
# Each line as written; every row must pass. The local node's line checks the driver's mounts
# from the CO's mount namespace (--check-mounts): the rows below must be among the passed.
mapfile -t conformance_lines < <(grep '^docker-compose run .* check --conformance' docs/deployment.md | sed 's/ *# .*//')
[ "${#conformance_lines[@]}" -eq 2 ] || fail "docs/deployment.md's two conformance lines are gone: ${conformance_lines[*]}"
for line in "${conformance_lines[@]}"; do
  echo "compose test: \$ $line"
  status=0
  out=$(setsid bash -c "$line" </dev/null 2>&1) || status=$?
  echo "$out"
  [ "$status" -eq 0 ] || fail "the conformance line exited $status"
  ! grep -q '^FAIL' <<<"$out" || fail "a conformance row failed"
  grep -q ' 0 failed' <<<"$out" || fail "no conformance totals"
  grep -q '^PASS  DeleteVolume ' <<<"$out" || fail "the lifecycle did not reach DeleteVolume"
  if grep -q -- '--check-mounts' <<<"$line"; then
    for row in "GetPluginInfo on the controller: the same plugin" "NodeStageVolume " "NodeUnstageVolume " \
      "NodePublishVolume: the target is a mount here" "a file written through the target" \
      "NodeUnpublishVolume: the mount is gone" "published again: the file is in the volume"; do
      grep -q "^PASS  $row" <<<"$out" || fail "not passed: $row"
    done
  fi
done
# Seen from the host too: nothing the driver mounted is left, and no pod directory.
[ "$(host_mounts | wc -l)" -eq 1 ] || fail "mounts left in kubelet's directory: $(host_mounts)"
left=$(find "$KUBELET_DIR/pods" -mindepth 1)
[ -z "$left" ] || fail "left in kubelet's pods directory: $left"
driver_log=$(docker-compose logs --no-color driver)
grep -q 'NodePublishVolume code=Ok' <<<"$driver_log" || fail "the local driver published nothing"

step "the image's binaries carry no symbol table"
for bin in csi-gateway csi-reference-backend; do
  ! readelf -S "target/docker/gateway/files/$bin" | grep -q '\.symtab' || fail "$bin in the image is not stripped"
done
docker image inspect -f "csi-gateway:$IMAGE_TAG is {{.Size}} bytes" "csi-gateway:$IMAGE_TAG"

step "Prometheus scraped every gateway"
query() {
  curl -fsS --max-time 5 "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$1"
}
scraped_all() {
  query 'count by (role) (csi_sidecar_operations_seconds_count{job="csi-gateway"})' |
    jq -e '[.data.result[].metric.role] | sort == ["appliance", "bridged-node", "controller", "node"]'
}
within 90 "csi_sidecar_operations_seconds from every gateway in Prometheus" scraped_all
query 'sum by (role, method_name) (csi_sidecar_operations_seconds_count)' | jq -c '.data.result[] | [.metric.role, .metric.method_name, .value[1]]'
rules_loaded() {
  curl -fsS --max-time 5 "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/rules" |
    jq -e '[.data.groups[].rules[] | select(.health == "ok") | .name] | index("CSIGatewayUpstreamDisconnected") != null'
}
within 30 "the alerting rules loaded and evaluated" rules_loaded
# Every query of the Grafana dashboard runs on this Prometheus (Grafana's variables as "All").
while IFS= read -r expr; do
  expr=${expr//\$__rate_interval/1m}
  expr=${expr//\$job/.*}
  expr=${expr//\$instance/.*}
  query "$expr" | jq -e '.status == "success"' >/dev/null || fail "dashboard query failed: $expr"
done < <(jq -r '.panels[].targets[]?.expr' deploy/grafana/csi-gateway.json)
query 'sum(csi_gateway_upstream_connected{job=~".*", instance=~".*"})' | jq -e '.data.result[0].value[1] == "4"' >/dev/null ||
  fail "the dashboard's upstream panel does not show every gateway connected"

step "the appliance killed: UNAVAILABLE"
docker-compose kill appliance >/dev/null
unavailable() {
  local out
  if out=$(check_bridged 2>&1); then return 1; fi
  grep -q 'Unavailable' <<<"$out"
}
within 60 "check on the bridged node's socket gets UNAVAILABLE" unavailable
check_bridged 2>&1 | tail -1 || true
upstream_lost_alert() {
  curl -fsS --max-time 5 "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/alerts" |
    jq -e '[.data.alerts[] | select(.labels.alertname == "CSIGatewayUpstreamDisconnected" and .labels.role == "bridged-node")] | length == 1'
}
within 60 "the CSIGatewayUpstreamDisconnected alert for the bridged node" upstream_lost_alert

step "the appliance back: the bridge recovers"
docker-compose start appliance >/dev/null
within 90 "check on the bridged node's socket succeeds again" check_bridged
out=$(check_bridged)
grep -q '^dialect: *v1' <<<"$out" || fail "after recovery the bridged node's socket did not answer as CSI v1"

step "passed in $((SECONDS - started))s"

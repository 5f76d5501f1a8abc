#!/usr/bin/env bash
# docker-compose.yml end to end on this machine's Docker engine (.ci/run runs it after
# `cargo test --workspace --locked`): builds the images (deploy/docker/build-images), brings the project up
# and asserts that
#   - both gateways pass their image's HEALTHCHECK (`csi-gateway health`),
#   - a v1 call on the node's socket crosses the mTLS bridge to the draft (v0.1-oneof) plugin,
#   - Prometheus, through its HTTP API, has scraped csi_sidecar_operations_seconds from both
#     gateways and loaded deploy/prometheus/alerts.yml,
#   - with the appliance container killed the call gets UNAVAILABLE (and the alert on the lost
#     upstream goes pending), and the bridge recovers when the appliance is back.
# The project is always torn down, volumes and test images included. A missing docker,
# docker-compose or daemon fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "compose test: FAIL: $*" >&2
  exit 1
}
step() { echo "compose test: $*"; }

command -v docker >/dev/null || fail "docker is not installed"
command -v docker-compose >/dev/null || fail "docker-compose is not installed"
docker info >/dev/null 2>&1 || fail "the Docker daemon does not answer (docker info)"
command -v curl >/dev/null || fail "curl is not installed"
command -v jq >/dev/null || fail "jq is not installed"

export IMAGE_TAG=compose-test
export COMPOSE_PROJECT_NAME="csi-gateway-test-$$"
PROMETHEUS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PROMETHEUS_PORT

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
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Retries `$@` every second until it succeeds, or fails the test after $1 seconds.
within() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what: not within ${limit}s"
    sleep 1
  done
}

started=$SECONDS
step "building the images"
deploy/docker/build-images
step "images built in $((SECONDS - started))s"

step "bringing the project up"
docker-compose up -d

health_status() {
  docker inspect -f '{{.State.Health.Status}}' "$(docker-compose ps -q "$1")"
}
healthy() { [ "$(health_status "$1")" = healthy ]; }
within 120 "the node gateway's HEALTHCHECK passes" healthy node
within 60 "the appliance gateway's HEALTHCHECK passes" healthy appliance

# The CSI call a client of the node's socket makes (as kubelet would), in CSI v1.
check_node() {
  docker-compose exec -T node /csi-gateway check --endpoint unix:///csi/csi.sock --timeout 5s
}

step "a v1 call across the bridge"
out=$(check_node) || fail "check on the node's socket failed: $out"
echo "$out"
grep -q '^dialect: *v1' <<<"$out" || fail "the node's socket did not answer as CSI v1"
grep -q 'reference.csi-gateway.dev' <<<"$out" || fail "the plugin's name did not come across the bridge"
plugin=$(docker-compose exec -T appliance /csi-gateway check --endpoint unix:///plugin/csi.sock --timeout 5s) ||
  fail "the plugin's own socket does not answer: $plugin"
grep -q '^dialect: *v0.1-oneof' <<<"$plugin" || fail "the plugin is not the draft dialect: $plugin"
# Captured first: `grep -q` leaving a pipe early would fail the pipeline (pipefail).
appliance_log=$(docker-compose logs --no-color appliance)
grep -q 'bridge peer connected.*identity=node.csi-gateway.local' <<<"$appliance_log" ||
  fail "the appliance logged no mTLS peer with the node's identity"

step "the README's exec line, as written, without a terminal"
# The line the README gives operators (its `docker-compose exec -T`), run with no terminal at
# all: a new session (setsid, so no controlling terminal) and stdin from /dev/null, as CI and
# scripts run it. Without -T, docker-compose would fail here ("the input device is not a TTY").
readme_exec=$(grep -m1 '^docker-compose exec ' README.md | sed 's/ *#.*//')
grep -q -- ' exec -T ' <<<"$readme_exec" || fail "the README's exec line lacks -T: $readme_exec"
out=$(setsid bash -c "$readme_exec" </dev/null 2>&1) || fail "the README's exec line failed without a terminal: $out"
grep -q '^dialect: *v1' <<<"$out" || fail "the README's exec line did not answer as CSI v1: $out"

step "the image's binaries carry no symbol table"
for bin in csi-gateway csi-reference-backend; do
  ! readelf -S "target/docker/gateway/files/$bin" | grep -q '\.symtab' || fail "$bin in the image is not stripped"
done
docker image inspect -f "csi-gateway:$IMAGE_TAG is {{.Size}} bytes" "csi-gateway:$IMAGE_TAG"

step "Prometheus scraped both gateways"
query() {
  curl -fsS --max-time 5 "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$1"
}
scraped_both() {
  query 'count by (role) (csi_sidecar_operations_seconds_count{job="csi-gateway"})' |
    jq -e '[.data.result[].metric.role] | sort == ["appliance", "node"]'
}
within 90 "csi_sidecar_operations_seconds from both gateways in Prometheus" scraped_both
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
query 'sum(csi_gateway_upstream_connected{job=~".*", instance=~".*"})' | jq -e '.data.result[0].value[1] == "2"' >/dev/null ||
  fail "the dashboard's upstream panel does not show both gateways connected"

step "the appliance killed: UNAVAILABLE"
docker-compose kill appliance >/dev/null
unavailable() {
  local out
  if out=$(check_node 2>&1); then return 1; fi
  grep -q 'Unavailable' <<<"$out"
}
within 60 "check on the node's socket gets UNAVAILABLE" unavailable
check_node 2>&1 | tail -1 || true
upstream_lost_alert() {
  curl -fsS --max-time 5 "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/alerts" |
    jq -e '[.data.alerts[] | select(.labels.alertname == "CSIGatewayUpstreamDisconnected" and .labels.role == "node")] | length == 1'
}
within 60 "the CSIGatewayUpstreamDisconnected alert for the node" upstream_lost_alert

step "the appliance back: the bridge recovers"
docker-compose start appliance >/dev/null
within 90 "check on the node's socket succeeds again" check_node
out=$(check_node)
grep -q '^dialect: *v1' <<<"$out" || fail "after recovery the node's socket did not answer as CSI v1"

step "passed in $((SECONDS - started))s"

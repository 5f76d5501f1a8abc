# Sourced by the multi-container tests (tests/compose.sh, tests/cluster.sh): how they say what
# they do and fail, and how they wait. Each sets TEST (e.g. "compose test") first.

fail() {
  echo "$TEST: FAIL: $*" >&2
  exit 1
}
step() { echo "$TEST: $*"; }

# Fails unless docker and its daemon are there (a missing engine fails the test, never skips it).
need_docker() {
  command -v docker >/dev/null || fail "docker is not installed"
  docker info >/dev/null 2>&1 || fail "the Docker daemon does not answer (docker info)"
}

# Installs the traps that run `teardown` on every exit, an interrupt or a termination included.
on_exit() {
  trap "$1" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

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

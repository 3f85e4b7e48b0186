#!/bin/sh
# tests/compose/check_compose.sh SOURCE_ROOT - what can be checked of compose.yaml without a
# Docker engine: the file is valid for docker-compose, and it holds the contract's services.
set -eu
root=$1
# Nothing to check without it: 77 is SKIP for meson, not a failure.
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose is not installed (scripts/stack installs it)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
docker-compose -f "$root/compose.yaml" config >"$out" # fails on an invalid file
fail=0
need() { grep -Eq "$1" "$out" || { echo "compose.yaml: missing $2"; fail=1; }; }
need 'image: rabbitmq:4-management' 'RabbitMQ 4 with management'
need 'image: postgres:17' 'PostgreSQL 17'
for svc in migrate api relay worker postgres rabbitmq; do
    need "^  $svc:" "the $svc service"
done
[ "$(grep -c 'healthcheck:' "$out")" -ge 5 ] || { echo "compose.yaml: every long-running service needs a health check"; fail=1; }
grep -q 'service_completed_successfully' "$out" || { echo "compose.yaml: the programs must wait for the migration"; fail=1; }
grep -Eq '^USER [a-z]' "$root/Dockerfile" && ! grep -Eq '^USER root' "$root/Dockerfile" ||
    { echo "Dockerfile: the programs must run as a non-root user"; fail=1; }
[ $fail -eq 0 ] && echo "compose.yaml and Dockerfile: ok"
exit $fail

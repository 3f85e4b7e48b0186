#!/bin/sh
# tests/compose/check_compose_skip.sh SOURCE_ROOT - without docker-compose, check_compose.sh
# reports SKIP (exit 77) rather than a failure: a machine without it has nothing to check.
set -u
rc=0
PATH=/nonexistent /bin/sh "$(dirname "$0")/check_compose.sh" "$1" || rc=$?
if [ "$rc" -ne 77 ]; then
    echo "check_compose.sh without docker-compose exited $rc, want 77 (skip)"
    exit 1
fi
echo "check_compose.sh without docker-compose: skip (77), as it should"

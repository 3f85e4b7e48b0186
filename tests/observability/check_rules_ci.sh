#!/bin/sh
# tests/observability/check_rules_ci.sh SOURCE_ROOT - without promtool, check_rules.sh is a SKIP
# (77) on a developer's machine and a FAILURE (1) in CI, so CI cannot pass without the check.
set -u
rc=0
env -u CI PATH=/nonexistent /bin/sh "$(dirname "$0")/check_rules.sh" "$1" >/dev/null || rc=$?
[ "$rc" -eq 77 ] || { echo "check_rules.sh without promtool, CI unset: exited $rc, want 77"; exit 1; }
rc=0
CI=true PATH=/nonexistent /bin/sh "$(dirname "$0")/check_rules.sh" "$1" >/dev/null || rc=$?
[ "$rc" -eq 1 ] || { echo "check_rules.sh without promtool, CI=true: exited $rc, want 1"; exit 1; }
echo "check_rules.sh without promtool: skip (77) locally, failure (1) with CI=true"

#!/bin/sh
# tests/observability/check_rules.sh SOURCE_ROOT - the alert rules and the dashboard's queries are
# valid PromQL (promtool check rules), and the alerts fire when they should and only then
# (promtool test rules on paygw-alerts.test.yml). promtool comes with Debian's prometheus package,
# which scripts/stack installs: without it this is a SKIP on a developer's machine, but a FAILURE
# in CI (CI=true), where the check must not silently stop running.
set -eu
root=$1
if ! command -v promtool >/dev/null; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: promtool is not installed (CI=true; scripts/stack installs the prometheus package)"
        exit 1
    fi
    echo "SKIP: promtool is not installed (scripts/stack installs the prometheus package)"
    exit 77
fi
command -v jq >/dev/null || { echo "FAIL: jq is not installed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
promtool check rules "$root/docs/observability/paygw-alerts.yml" || fail=1
promtool test rules "$root/tests/observability/paygw-alerts.test.yml" || fail=1

# Each query of the dashboard as a recording rule, Grafana's interval variables made concrete,
# so promtool parses it like any rule.
dash="$root/docs/observability/paygw-dashboard.json"
{
    echo 'groups:'
    echo '  - name: paygw-dashboard'
    echo '    rules:'
    jq -r '[.. | objects | select(has("expr")) | .expr] | to_entries[] |
           "      - record: dashboard:query_\(.key)\n        expr: \(.value | gsub("\\$__rate_interval|\\$__interval|\\$__range"; "5m") | tojson)"' \
        "$dash"
} >"$tmp/dashboard-rules.yml" || { echo "FAIL: $dash is not valid JSON"; exit 1; }
n=$(grep -c 'record:' "$tmp/dashboard-rules.yml" || true)
[ "$n" -gt 0 ] || { echo "FAIL: no query found in $dash"; fail=1; }
promtool check rules "$tmp/dashboard-rules.yml" || { echo "FAIL: a query of $dash does not parse"; fail=1; }
[ $fail -eq 0 ] && echo "alert rules, their tests and the dashboard's $n queries: ok"
exit $fail

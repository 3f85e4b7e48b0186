#!/bin/bash
# tests/scripts/check_stack_run.sh SOURCE_ROOT - a relative STACK_RUN is a folder under the current
# one, made absolute by scripts/lib.sh; and the walk that lets the postgres user reach the stack's
# folder ends for a relative folder too (it looped for ever on ".": dirname . is .).
set -u
root=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

# shellcheck disable=SC2016 # $1 expands in the inner bash
got=$(STACK_RUN=.run-rel bash -c 'source "$1/scripts/lib.sh" && printf %s "$RUN"' _ "$root")
if [[ $got != "$tmp/.run-rel" ]]; then
    echo "STACK_RUN=.run-rel gave RUN=$got, want $tmp/.run-rel"
    fail=1
fi

if ((EUID == 0)) && id postgres >/dev/null 2>&1; then
    mkdir -p .run-rel
    # shellcheck disable=SC2016 # $1 expands in the inner bash
    if ! timeout 20 bash -c 'source "$1/scripts/lib.sh" && let_postgres_reach .run-rel' _ "$root" >/dev/null; then
        echo "let_postgres_reach .run-rel did not end within 20 s (or failed)"
        fail=1
    fi
else
    echo "not root with a postgres user: the walk is not exercised"
fi
((fail == 0)) && echo "a relative STACK_RUN: absolute, and its walk ends"
exit "$fail"

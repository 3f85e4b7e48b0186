#!/bin/sh
# tests/admin/openapi_lint.sh SPEC DIR - lint the OpenAPI document with Redocly CLI from npm.
#
# Installs a pinned @redocly/cli once into DIR (under the build tree) from the npm registry npm
# is configured with, and reuses it afterwards (offline too). 2.x needs Node.js 20.19+ or 22.12+;
# older Node.js (Debian 12 ships 18) gets 1.34.5 (Node.js 18.17+). Telemetry is off.
# Exit status: 0 the document is valid; 1 it is not (the report is printed); 77 no validator
# could be had (no node/npm, Node.js too old, or the registry is unreachable), said on stdout.
set -u
spec=$1
dir=$2

skip() {
    echo "SKIP (OpenAPI lint): $*"
    exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed (Debian: nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (Debian: npm)"
version=$(node -p 'process.versions.node' 2>/dev/null) || skip "node does not run"
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
case $major$minor in *[!0-9]*) skip "cannot read the Node.js version \"$version\"" ;; esac
if [ "$major" -ge 23 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 12 ]; } ||
    { [ "$major" -eq 20 ] && [ "$minor" -ge 19 ]; }; then
    cli=2.77.0
elif [ "$major" -ge 18 ]; then
    cli=1.34.5
else
    skip "Node.js $version is too old for @redocly/cli (18 or later)"
fi

prefix="$dir/redocly-cli-$cli"
bin="$prefix/node_modules/.bin/redocly"
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
export NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false npm_config_fund=false \
    npm_config_audit=false
if [ ! -x "$bin" ]; then
    # --prefix moves npm's global config along with it: keep the machine's (CA, registry)
    npm_config_globalconfig=$(npm config get globalconfig 2>/dev/null) && export npm_config_globalconfig
    mkdir -p "$prefix" || skip "cannot create $prefix"
    echo "installing @redocly/cli@$cli (Node.js $version) into $prefix"
    # bounded: a registry that does not answer is a SKIP, not a hung test
    if ! timeout 180 npm install --prefix "$prefix" --cache "$dir/npm-cache" --no-save \
        --fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=5000 \
        --fetch-timeout=60000 --loglevel=error "@redocly/cli@$cli" >"$dir/install.log" 2>&1 ||
        [ ! -x "$bin" ]; then
        tail -n 20 "$dir/install.log"
        rm -rf "$prefix"
        skip "npm could not install @redocly/cli@$cli (is the npm registry reachable?)"
    fi
fi
echo "$("$bin" --version 2>/dev/null | tail -n 1) lint --format=stylish $spec"
timeout 120 "$bin" lint --format=stylish "$spec"
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL (OpenAPI lint): redocly lint exited with status $rc"
    exit 1
fi
echo "OK (OpenAPI lint): valid OpenAPI"
exit 0

#!/bin/sh
# tests/fuzz/run.sh TARGET SEEDS SECONDS - a bounded libFuzzer run: new inputs go to a
# temporary directory, the seed corpus in the repository is only read.
set -eu
target=$1 seeds=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$target" -max_total_time="$seconds" -print_final_stats=1 -max_len=4096 -timeout=5 \
    -rss_limit_mb=1024 "$work" "$seeds" 2>"$work.log" || { tail -n 60 "$work.log"; rm -f "$work.log"; exit 1; }
grep -E 'stat::number_of_executed_units|Done' "$work.log" | tail -n 2
rm -f "$work.log"

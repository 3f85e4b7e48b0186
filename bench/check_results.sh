#!/usr/bin/env bash
# bench/check_results.sh RESULT_JSON [soak]: the keys a results JSON of scripts/bench must hold (the CI
# smoke run checks its own). Required keys must be there and not null; nullable ones must be there and
# may be null (docs/performance.md, "The JSON", says when).
set -euo pipefail
file=${1:?usage: bench/check_results.sh RESULT_JSON [soak]}
required=(history.payments
    accept.rate_per_s accept.p999_ms relay.rows_per_s worker.events_per_s
    e2e.sustained_rate_per_s e2e.ratio_to_slowest_baseline e2e.p50_ms e2e.p99_ms e2e.p999_ms
    e2e.ratio_to_slowest_stage defaults.e2e_ratio_to_tuned)
nullable=(e2e.cpu_us_per_settled e2e.cpu_us_per_settled_machine
    e2e.cpu_us_per_settled_by_process.{api,relay,worker,postgres,rabbitmq,loadgen,other})
if [[ ${2:-} == soak ]]; then
    required+=(soak.minutes soak.rate_per_s soak.per_minute soak.drift soak.drifting soak.slopes)
    nullable+=(soak.slopes.{p50_ms,p99_ms,p999_ms,rss_mb_api,rss_mb_relay,rss_mb_worker,backlog,checkpoints,autovacuums})
fi
bad=0
for k in "${required[@]}"; do
    jq -e --arg k "$k" 'getpath($k | split(".")) != null' "$file" >/dev/null ||
        { echo "bench/check_results.sh: $file: $k is missing or null" >&2; bad=1; }
done
for k in "${nullable[@]}"; do
    jq -e --arg k "$k" '($k | split(".")) as $p | getpath($p[:-1]) | type == "object" and has($p[-1])' "$file" >/dev/null ||
        { echo "bench/check_results.sh: $file: $k is missing" >&2; bad=1; }
done
exit "$bad"

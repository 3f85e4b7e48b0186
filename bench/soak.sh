# bench/soak.sh — sourced by scripts/bench: `--soak MINUTES`, half the sustained rate held for that long,
# reported minute by minute, and a verdict on whether anything drifts upward. See docs/performance.md.
# shellcheck shell=bash disable=SC2034  # (SOAK_TABLE, SOAK_DRIFT, SOAK_DRIFTING are read by scripts/bench)
# Uses scripts/bench's helpers (fact, calc, fmt, pq, q, metric, prog_pid, search_rate, all_settled, ...).

SOAK_MINUTE_S=${BENCH_SOAK_MINUTE_S:-60} # a "minute" (tests shorten it; a real soak never does)
SOAK_SAMPLE_S=5                          # dead tuples and the backlog are sampled this often
SOAK_WARMUP=2
SOAK_TABLES="'payments', 'outbox', 'inbox', 'ledger_entries', 'idempotency_keys'"
SOAK_TABLE='' SOAK_DRIFT=false SOAK_DRIFTING=''

vmrss_mb() { # PID: resident set now, in MB
    awk '/^VmRSS:/ { printf "%.1f\n", $2 / 1024; found = 1 } END { if (!found) print "" }' "/proc/$1/status" 2>/dev/null || true
}

# soak_counts: "checkpoints autovacuums autoanalyzes" since the statistics were reset (hot tables).
# PostgreSQL 17 moved the checkpoint counters to pg_stat_checkpointer (SOAK_CKPT_SQL picks the one).
SOAK_CKPT_SQL='SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter'
soak_counts() {
    pq "SELECT ($SOAK_CKPT_SQL) || ' ' ||
               coalesce(sum(autovacuum_count), 0) || ' ' || coalesce(sum(autoanalyze_count), 0)
          FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname IN ($SOAK_TABLES);" && printf '%s\n' "$PQ_R"
}
# soak_dead: "table=n_dead_tup ..." of the hot tables
soak_dead() {
    pq "SELECT string_agg(relname || '=' || n_dead_tup, ' ' ORDER BY relname)
          FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname IN ($SOAK_TABLES);" && printf '%s\n' "$PQ_R"
}

# soak_rate: "RATE SOURCE": --soak-rate, else half of this run's sustained rate, else half of the latest
# results JSON's, else half of one e2e search
soak_rate() {
    local f v files=()
    if [[ -n $SOAK_RATE ]]; then echo "$SOAK_RATE --soak-rate"; return 0; fi
    if [[ -n ${E2E_RATE:-} ]]; then echo "$((E2E_RATE / 2)) this-run"; return 0; fi
    mapfile -t files < <(find "$REPO/bench/results" -maxdepth 1 -name '20*Z.json' 2>/dev/null | sort -r)
    for f in "${files[@]}"; do
        v=$(jq -r '.e2e.sustained_rate_per_s // empty' "$f" 2>/dev/null || true)
        if [[ $v =~ ^[0-9]+$ ]] && ((v >= 2)); then echo "$((v / 2)) ${f##*/}"; return 0; fi
    done
    progress "soak: no sustained rate on record; one e2e search first" >&2
    v=$(search_rate 1 1000 1.4)
    drain_backlog >&2
    if ! [[ $v =~ ^[0-9]+$ ]] || ((v < 2)); then
        warn "soak: the search found no flat rate; soaking at 10/s"
        v=20
    fi
    echo "$((v / 2)) search"
}

soak() {
    local minutes=$1 rate src pfx="$ID-soak" out="$WORK/soak.json" log="$WORK/soak.tsv" mins="$WORK/soak-minutes.tsv"
    local lat="$WORK/soak-latency.tsv" pid t0 t_end m now b bmax dead dmax c0 c1 ck av an ok triggers json s0 s1 cpu
    [[ $SOAK_MINUTE_S =~ ^[1-9][0-9]*$ ]] || die "BENCH_SOAK_MINUTE_S must be a positive integer (got '$SOAK_MINUTE_S')"
    if (($(q -c "SHOW server_version_num") >= 170000)); then
        SOAK_CKPT_SQL='SELECT num_timed + num_requested FROM pg_stat_checkpointer'
    fi
    read -r rate src <<<"$(soak_rate)"
    ((rate >= 1)) || rate=1
    progress "soak: $rate/s (from $src) for $minutes x ${SOAK_MINUTE_S}s; sampling every ${SOAK_SAMPLE_S}s"
    drain_backlog
    : >"$mins"
    c0=$(soak_counts || echo "0 0 0")
    s0=$(snap)
    timeout $((minutes * SOAK_MINUTE_S + SOAK_WARMUP + 120)) "$BIN/loadgen" -u "$API_URL" -c "$CONC" -r "$rate" \
        -w "$SOAK_WARMUP" -d $((minutes * SOAK_MINUTE_S)) -p "$pfx" -l "$log" >"$out" 2>>"$WORK/loadgen.err" &
    pid=$!
    BG_PIDS+=("$pid")
    sleep "$SOAK_WARMUP"
    t0=$EPOCHREALTIME
    for ((m = 1; m <= minutes; m++)); do
        t_end=$(calc "$t0 + $m * $SOAK_MINUTE_S")
        bmax=0 dmax=''
        while :; do
            b=$(metric "$RELAY_METRICS_URL" paygw_outbox_backlog)
            b=${b%.*}
            if [[ $b =~ ^[0-9]+$ ]] && ((b > bmax)); then bmax=$b; fi
            dead=$(soak_dead || true)
            dmax=$(awk -v a="$dmax" -v b="$dead" 'BEGIN { n = split(a, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); v[kv[1]] = kv[2] + 0 }
                n = split(b, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); if (!(kv[1] in v) || kv[2] + 0 > v[kv[1]]) v[kv[1]] = kv[2] + 0 }
                s = ""; for (k in v) s = s (s == "" ? "" : " ") k "=" v[k]; print s }')
            now=$EPOCHREALTIME
            awk -v n="$now" -v e="$t_end" 'BEGIN { exit !(n >= e - 0.05) }' && break
            sleep "$(awk -v n="$now" -v e="$t_end" -v s="$SOAK_SAMPLE_S" 'BEGIN { d = e - n; if (d > s) d = s; if (d < 0.05) d = 0.05; printf "%.2f\n", d }')"
        done
        c1=$(soak_counts || echo "$c0")
        read -r ck av an <<<"$(awk -v a="$c0" -v b="$c1" 'BEGIN { split(a, x); split(b, y); print y[1] - x[1], y[2] - x[2], y[3] - x[3] }')"
        c0=$c1
        # the machine in that minute: busy fraction, and cores used outside the stack (other people's
        # load, the load generator, this script), so that a drift caused by someone else shows
        s1=$(snap)
        cpu=$(awk -v a="$s0" -v b="$s1" -v t="$TICK" 'BEGIN { split(a, x); split(b, y); w = y[1] - x[1]
            busy = y[2] - x[2]; all = y[3] - x[3]; ours = 0; for (i = 4; i <= 8; i++) ours += y[i] - x[i]
            o = (busy - ours) / t / (w > 0 ? w : 1); if (o < 0) o = 0
            printf "%.2f\t%.2f\n", (all > 0 ? busy / all : 0), o }')
        s0=$s1
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$(vmrss_mb "$(prog_pid api)")" \
            "$(vmrss_mb "$(prog_pid relay)")" "$(vmrss_mb "$(prog_pid worker)")" "$b" "$bmax" "$ck" "$av" "$an" \
            "$dmax" "$dead" "$cpu" >>"$mins"
        progress "  soak minute $m/$minutes: RSS api/relay/worker $(cut -f2-4 <<<"$(tail -n1 "$mins")" | tr '\t' '/') MB; backlog max $bmax; dead max: $dmax; checkpoints $ck, autovacuums $av"
    done
    wait "$pid" || die "loadgen failed during the soak"
    ok=$(jget "$out" .ok)
    wait_until 60 all_settled "$pfx-" "${ok:-0}" || warn "soak: not all settled within 60 s of the end"

    # POST-to-settled per minute: each request's due time (the load generator's log) to settled_at of its
    # payment, the latency stage's join, grouped by the minute the request was due in
    q -F $'\t' <<<"$(latency_sql "$log" "$SOAK_MINUTE_S" "$minutes")" >"$lat"
    # where autovacuum starts on each hot table (threshold + scale factor x rows, reloptions first)
    triggers=$(q -c "SELECT coalesce(json_object_agg(c.relname, round(
            coalesce((SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_vacuum_threshold'),
                     current_setting('autovacuum_vacuum_threshold'))::numeric
          + coalesce((SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_vacuum_scale_factor'),
                     current_setting('autovacuum_vacuum_scale_factor'))::numeric * greatest(c.reltuples, 0)::numeric)), '{}')
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relname IN ($SOAK_TABLES)")
    json=$(soak_json "$minutes" "$rate" "$src" "$mins" "$lat" "$triggers" "$out")
    fact soak "$json"
    SOAK_DRIFT=$(jq -r .drift <<<"$json")
    SOAK_DRIFTING=$(jq -r '.drifting | join(", ")' <<<"$json")
    SOAK_TABLE=$(soak_table "$json")
}

# soak_json MINUTES RATE SOURCE MINUTES_TSV LATENCY_TSV TRIGGERS LOADGEN_JSON: the soak.* object, with
# the least-squares slope of each series and the verdict (the rules are in docs/performance.md)
soak_json() {
    jq -n -c --argjson minutes "$1" --argjson rate "$2" --arg src "$3" --rawfile mins "$4" --rawfile lat "$5" \
        --argjson trig "$6" --slurpfile lg "$7" --argjson minute_s "$SOAK_MINUTE_S" '
        def num: if . == null or . == "" then null else tonumber end;
        def kv: if . == "" or . == null then {} else [split(" ")[] | split("=") | {(.[0]): (.[1] | tonumber)}] | add end;
        def median: map(select(. != null)) | sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        def r3: if type == "number" then (. * 1000 | round) / 1000 else . end;
        # [[x, y]...] -> least-squares slope (null under two points)
        def slope: map(select(.[1] != null)) | if length < 2 then null else
            (map(.[0]) | add / length) as $mx | (map(.[1]) | add / length) as $my
            | (map((.[0] - $mx) * (.[1] - $my)) | add) / (map((.[0] - $mx) * (.[0] - $mx)) | add) end;
        ($lat | split("\n") | map(select(length > 0) | split("\t"))
         | map({key: .[0], value: {posted: (.[1] | num), settled: (.[2] | num), p50_ms: (.[3] | num), p99_ms: (.[4] | num),
                                   p999_ms: (.[5] | num), accept_to_settle_p99_ms: (.[7] | num)}}) | from_entries) as $L
        | ($mins | split("\n") | map(select(length > 0) | split("\t")) | map(
            {minute: (.[0] | tonumber)} + ($L[.[0]] // {posted: 0, settled: 0, p50_ms: null, p99_ms: null, p999_ms: null, accept_to_settle_p99_ms: null})
            + {rss_mb: {api: (.[1] | num), relay: (.[2] | num), worker: (.[3] | num)},
               backlog: (.[4] | num), backlog_max: (.[5] | num), checkpoints: (.[6] | num), autovacuums: (.[7] | num),
               autoanalyzes: (.[8] | num), dead_tup_max: (.[9] | kv), dead_tup: (.[10] | kv),
               machine_busy: (.[11] | num), other_cores: (.[12] | num)})) as $pm
        # series: name, values, absolute floor, fraction of the median
        | ([["p50_ms", [$pm[] | .p50_ms], 3, 0.2], ["p99_ms", [$pm[] | .p99_ms], 10, 0.2], ["p999_ms", [$pm[] | .p999_ms], 20, 0.2],
            ["rss_mb_api", [$pm[] | .rss_mb.api], 1, 0.05], ["rss_mb_relay", [$pm[] | .rss_mb.relay], 1, 0.05],
            ["rss_mb_worker", [$pm[] | .rss_mb.worker], 1, 0.05],
            ["backlog", [$pm[] | .backlog_max], ([300, $rate] | max), 0.2],
            ["checkpoints", [$pm[] | .checkpoints], 1, 0.5], ["autovacuums", [$pm[] | .autovacuums], 5, 0.5]]
           + [$trig | keys[] as $t | ["dead_tup_" + $t, [$pm[] | .dead_tup_max[$t]], 10000, 0.2, $t]]) as $series
        | [$series[] | . as [$name, $ys, $floor, $frac, $table]
            | ([range(0; $ys | length) as $i | [$i + 1, $ys[$i]]] | slope) as $s
            | ($ys | median) as $med
            | (([$floor, $frac * (($med // 0) | fabs)] | max)) as $tol
            | (if $s == null then null else $s * (($ys | length) - 1) end) as $rise
            | {name: $name, slope: ($s | r3), rise: ($rise | r3), tolerance: ($tol | r3), median: ($med | r3),
               drift: (if $rise == null or $rise <= $tol then false
                       elif $table == null then true
                       else (($ys | last) // 0) > 1.5 * $trig[$table] end)}] as $v
        | {minutes: $minutes, minute_s: $minute_s, rate_per_s: $rate, rate_source: $src,
           posted: ($lg[0].ok // null), errors: (($lg[0].counted // 0) - ($lg[0].ok // 0) + ($lg[0].errors // 0)),
           per_minute: $pm,
           slopes: ($v | map({(.name): .slope}) | add), rise: ($v | map({(.name): .rise}) | add),
           tolerance: ($v | map({(.name): .tolerance}) | add), autovacuum_trigger: $trig,
           drifting: [$v[] | select(.drift) | .name]}
        | .drift = (.drifting | length > 0)'
}

# soak_table JSON: the per-minute table, the slopes and the verdict
soak_table() {
    local j=$1
    jq -r '"soak: \(.rate_per_s)/s (from \(.rate_source)) for \(.minutes) x \(.minute_s) s; \(.posted) payments accepted, \(.errors) not 202"' <<<"$j"
    printf '%4s %7s %7s %7s %8s %8s %6s %6s %7s %8s %9s %8s %8s %8s %8s %5s %5s %5s %6s\n' min posted settled p50_ms p99_ms \
        p999_ms api_mb rly_mb wrk_mb backlog d:paymts d:outbox d:inbox d:ledger d:idemp ckpt avac busy other
    jq -r '.per_minute[] | [.minute, .posted, .settled, .p50_ms, .p99_ms, .p999_ms, .rss_mb.api, .rss_mb.relay, .rss_mb.worker,
        .backlog_max, .dead_tup_max.payments, .dead_tup_max.outbox, .dead_tup_max.inbox, .dead_tup_max.ledger_entries,
        .dead_tup_max.idempotency_keys, .checkpoints, .autovacuums, .machine_busy, .other_cores] | map(if . == null then "-" else tostring end) | @tsv' <<<"$j" |
        awk -F'\t' '{ printf "%4s %7s %7s %7s %8s %8s %6s %6s %7s %8s %9s %8s %8s %8s %8s %5s %5s %5s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19 }'
    printf '(dead tuples and backlog: the maximum of samples every %s s; busy: the machine, 0-1; other: cores used outside the stack)\n' "$SOAK_SAMPLE_S"
    printf '%-26s %12s %12s %12s  %s\n' "series" "slope/min" "rise" "tolerance" "verdict"
    jq -r '. as $j | .slopes | keys_unsorted[] as $k
        | [$k, ($j.slopes[$k] // "-"), ($j.rise[$k] // "-"), $j.tolerance[$k], (if ($j.drifting | index($k)) then "DRIFT" else "ok" end)] | @tsv' <<<"$j" |
        awk -F'\t' '{ printf "%-26s %12s %12s %12s  %s\n", $1, $2, $3, $4, $5 }'
    jq -r 'if .drift then "soak: DRIFT upward in \(.drifting | join(", "))" else "soak: no drift" end' <<<"$j"
}

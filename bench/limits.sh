# bench/limits.sh — sourced by scripts/bench: what limits each stage (the fsync probe, one verdict per kind
# of phase from its CPU and WAL sums, and the slowest stage against the sustained rate).
# shellcheck shell=bash
# Uses scripts/bench's helpers and state (q, fact, ACC, SAMPLES, TICK, QUICK, E2E_RATE, ...).

FSYNC_OPS=''
fsync_probe() { # the disk's flushes per second under PostgreSQL's wal_sync_method (full runs only)
    local method out
    method=$(q -c "SHOW wal_sync_method")
    fact db.wal_sync_method "\"$method\""
    fact db.synchronous_commit "\"$(q -c "SHOW synchronous_commit")\""
    ((QUICK)) && return 0
    out=$(timeout 120 "$PG_BINDIR/pg_test_fsync" -s 1 -f "$WORK/fsync.probe" 2>/dev/null || true)
    rm -f "$WORK/fsync.probe"
    FSYNC_OPS=$(awk -v m="$method" '/Compare file sync methods using one 8kB write/ { on = 1 }
        on && $1 == m { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' <<<"$out")
    [[ -n $FSYNC_OPS ]] && fact db.fsync_per_s "$FSYNC_OPS"
    return 0
}

# limit KIND LABEL: one line naming what limited that kind of phase, from its sums
limit() {
    local kind=$1 label=$2
    [[ -n ${ACC[$kind]:-} ]] || return 0
    awk -v acc="${ACC[$kind]}" -v t="$TICK" -v ncpu="$(nproc)" -v fs="${FSYNC_OPS:-0}" -v label="$label" '
        BEGIN {
            split(acc, A); wall = A[1]; if (wall <= 0) exit
            busy = A[2] / (A[3] > 0 ? A[3] : 1)
            names[4] = "api"; names[5] = "relay"; names[6] = "worker"; names[7] = "postgres"
            names[8] = "broker"; names[9] = "bench tools"
            ours = 0; top = 0
            for (i = 4; i <= 9; i++) { c[i] = A[i] / t / wall; ours += A[i] / t; if (c[i] > c[top] || top == 0) top = i }
            other = (A[2] / t - ours) / wall; if (other < 0) other = 0
            syncs = A[10] / wall; commits = A[11] / wall
            line = sprintf("CPU %d%% of %d cores busy (", busy * 100, ncpu)
            sep = ""
            for (i = 4; i <= 9; i++) if (c[i] >= 0.05) { line = line sep sprintf("%s %.2f", names[i], c[i]); sep = ", " }
            line = line sep sprintf("other %.2f) cores; WAL flushes %.0f/s", other, syncs)
            if (syncs >= 1) line = line sprintf(", %.1f commits per flush", commits / syncs)
            if (fs > 0) line = line sprintf(" (disk: ~%.0f flushes/s)", fs)
            if (busy >= 0.90 && other >= ours / wall) verdict = sprintf("CPU: the machine is saturated, mostly by other load (%.2f cores not ours: noisy); largest of ours: %s (%.2f cores)", other, names[top], c[top])
            else if (busy >= 0.90) verdict = sprintf("CPU-bound: the machine is saturated; largest: %s (%.2f cores)%s", names[top], c[top], other > 0.3 ? sprintf(", other load %.2f cores", other) : "")
            else if (c[5] >= 0.85 || c[6] >= 0.85) verdict = sprintf("%s CPU-bound on one core", c[5] > c[6] ? "relay" : "worker")
            else if (fs > 0 && syncs >= 0.6 * fs) verdict = "PostgreSQL fsync-bound (WAL flushes near the disk limit)"
            else if (c[8] >= 0.75 && (label ~ /relay|publish|e2e/)) verdict = sprintf("broker-bound: beam.smp %.2f cores, nothing else saturated (one classic queue is one Erlang process)", c[8])
            else if (c[7] >= 0.85) verdict = sprintf("PostgreSQL CPU (%.2f cores)", c[7])
            else verdict = sprintf("latency-bound: round trips and waits, nothing saturated (largest: %s %.2f cores)", names[top], c[top])
            printf "  %-18s %s\n  %-18s   %s\n", label, verdict, "", line
        }'
}

# stage_medians: "slowest its_rate accept relay worker", the medians of the three stages on their own
# (accept rate, relay rows/s, worker events/s); nothing when none ran
stage_medians() {
    awk -F'\t' '
        function med(k,   n, i, j, t, a) { n = 0; for (i = 1; i <= N; i++) if (K[i] == k) a[++n] = V[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
        { K[++N] = $1; V[N] = $3 + 0 }
        END { s["accept"] = med("accept.rate_per_s"); s["relay"] = med("relay.rows_per_s"); s["worker"] = med("worker.events_per_s")
              best = ""; for (k in s) if (s[k] > 0 && (best == "" || s[k] < s[best])) best = k
              if (best != "") printf "%s %.1f %.1f %.1f %.1f\n", best, s[best], s["accept"], s["relay"], s["worker"] }' "$SAMPLES"
}

# stage_line: which stage is the slowest on its own, and the sustained rate against it
stage_line() {
    local best per_s acc rel wrk
    read -r best per_s acc rel wrk <<<"$(stage_medians)"
    [[ -n $best && -n ${E2E_RATE:-} ]] || return 0
    awk -v best="$best" -v b="$per_s" -v a="$acc" -v r="$rel" -v w="$wrk" -v e2e="${E2E_RATE:-0}" 'BEGIN {
        printf "  %-18s slowest stage on its own: %s (%.0f/s; accept %.0f, relay %.0f, worker %.0f); sustained e2e %.0f/s = %.2f of it\n", \
            "e2e", best, b, a, r, w, e2e, e2e / b }'
}

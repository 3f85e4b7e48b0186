# bench/e2e_more.sh — sourced by scripts/bench: what the end-to-end part measures beyond the sustained
# rate: CPU per settled payment for the whole machine and split by process, the sustained rate against
# the slowest stage run on its own, and one confirm window with the worker on its defaults.
# shellcheck shell=bash
# Uses scripts/bench's helpers (fact, calc, fmt, probe, drain_backlog, start_prog, stop_prog, ...).

# The tuning variables a user does not have to set: the defaults run starts the worker without them.
TUNING_VARS=(WORKER_PREFETCH COMMIT_THREADS)

# window_mark FILE: what the CPU split of a window needs at one end of it: the snap (scripts/bench),
# PostgreSQL's counters and the worker's settled counter, in that order in FILE; the counter is read
# first, right before the snap, so that on a loaded machine the two still cover the same interval.
window_mark() {
    local settled
    settled=$(metric "$WORKER_METRICS_URL" paygw_worker_settled_total)
    { snap; pgstat; printf '%s\n' "$settled"; } >"$1"
}

# e2e_cpu_split BEGIN END LOADGEN_JSON: facts for CPU microseconds per settled payment in the window
# between two window_mark files: the whole machine (/proc/stat busy jiffies), our three programs, and by
# process. The load generator ends with the window (its ticks cannot be read at the end mark): its
# share is its own CPU (getrusage, whole run) per request it sent.
e2e_cpu_split() {
    local b=$1 e=$2 settled lg_us
    settled=$(($(sed -n 3p "$e" | tr -dc 0-9) + 0 - $(sed -n 3p "$b" | tr -dc 0-9) - 0))
    if ((settled <= 0)); then
        warn "e2e: nothing settled in the confirm window; no CPU per payment"
        printf '%s\tnull\n' e2e.cpu_us_per_settled e2e.cpu_us_per_settled_machine \
            e2e.cpu_us_per_settled_by_process.{api,relay,worker,postgres,rabbitmq,loadgen,other} >>"$FACTS"
        return 0
    fi
    lg_us=$(jq -r 'if (.sent // 0) > 0 then .cpu_s * 1000000 / .sent else 0 end' "$3" 2>/dev/null || echo 0)
    # snap: wall busy all api relay worker postgres broker tools
    awk -v s0="$(head -n1 "$b")" -v s1="$(head -n1 "$e")" -v lg_us="${lg_us:-0}" \
        -v n="$settled" -v t="$TICK" '
        BEGIN { split(s0, X); split(s1, Y); for (i = 1; i <= 9; i++) D[i] = Y[i] - X[i]
                us = 1000000 / t / n
                printf "e2e.cpu_us_per_settled_machine\t%.1f\n", D[2] * us
                split("api relay worker postgres rabbitmq", nm, " ")
                for (i = 1; i <= 5; i++) { printf "e2e.cpu_us_per_settled_by_process.%s\t%.1f\n", nm[i], D[i + 3] * us; known += D[i + 3] }
                printf "e2e.cpu_us_per_settled_by_process.loadgen\t%.1f\n", lg_us
                other = D[2] * us - known * us - lg_us; if (other < 0) other = 0
                printf "e2e.cpu_us_per_settled_by_process.other\t%.1f\n", other
                printf "e2e.machine_busy_in_window\t%.3f\n", (D[3] > 0 ? D[2] / D[3] : 0) }' >>"$FACTS"
}

# stage_ratio: e2e sustained over the slowest of the three stages on their own in this run (medians of
# accept rate, relay rows/s, worker events/s; bench/limits.sh's stage_line prints them)
stage_ratio() {
    local name per_s
    read -r name per_s _ <<<"$(stage_medians)"
    [[ -n $name && -n ${E2E_RATE:-} ]] || return 0
    fact e2e.slowest_stage "\"$name\""
    fact e2e.slowest_stage_per_s "$per_s"
    fact e2e.ratio_to_slowest_stage "$(calc "$E2E_RATE / $per_s")"
}

# defaults_confirm RATE: one confirm window at RATE (the tuned sustained rate) with the worker started
# without the tuning variables; the ratio of what that configuration drains to RATE (1 when flat: it
# sustains the tuned figure; more is not tried). The tuned worker is started again afterwards.
defaults_confirm() {
    local r=$1 res flat achieved growth drained ratio
    drain_backlog
    stop_prog worker
    DEFAULTS_RUN=1 start_prog worker
    res=$(probe "$r" "$PROBE_WARMUP" "$E2E_WINDOW" "e2e-defaults")
    read -r flat achieved growth _ <<<"$res"
    drained=$(calc "$achieved - $growth / $E2E_WINDOW")
    if ((flat)); then ratio=1; else ratio=$(awk -v d="$drained" -v r="$r" 'BEGIN { x = d / r; if (x > 1) x = 1; if (x < 0) x = 0; printf "%.3f\n", x }'); fi
    progress "  defaults: $r/s for ${E2E_WINDOW}s, worker without ${TUNING_VARS[*]} -> $( ((flat)) && echo flat || echo growing) (achieved/s growth tolerance max: ${res#* }); ratio to tuned $(fmt "$ratio" 2)"
    fact defaults.e2e_ratio_to_tuned "$ratio"
    fact defaults.e2e_flat "$( ((flat)) && echo true || echo false)"
    fact defaults.e2e_drained_per_s "$drained"
    fact defaults.e2e_rate_per_s "$r"
    fact defaults.unset "$(printf '%s\n' "${TUNING_VARS[@]}" | jq -R . | jq -s -c .)"
    drain_backlog
    stop_prog worker
    start_prog worker
}

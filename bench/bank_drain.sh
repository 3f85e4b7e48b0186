# bench/bank_drain.sh - sourced by scripts/bench (--bank http): the worker's drain through
# payments-banksim, against the in-process drain of the same repetition. Uses scripts/bench's helpers.
# shellcheck shell=bash

# drain_through_bank REP IN_PROCESS_RATE: the relay fills payments.settlement again, then a worker
# settles it through payments-banksim (BANK=http); its rate against the in-process drain's. The
# bank gets an empty store of its own, so its CPU is this drain's, not the reading back of
# whatever the stack's bank executed before (and the stack's store is left as it was).
drain_through_bank() {
    local rep=$1 inproc=$2 pfx="$ID-h$1-" depth t0 t1 rate cpu store="$WORK/bank-$1.jsonl"
    prefill_outbox "$pfx" "$COUNT"
    start_prog relay
    wait_until $((COUNT / 200 + 60)) no_pending || warn "bank http: rows still pending after the deadline"
    stop_prog relay
    rm -f "$store"
    # the simulator at LOG_LEVEL=warn: its line per transfer is the bank's bookkeeping, not the
    # gateway's, and a write(2) each on this 2-core machine (its CPU is reported all the same)
    start_retry bank BANK=http BANKSIM_STORE="$store" LOG_LEVEL=warn || die "scripts/stack start bank failed (see $WORK/stack.log)"
    depth=$(queue_depth)
    quiesce
    t0=$EPOCHREALTIME
    start_retry worker BANK=http OUTBOX_MAX_BACKLOG="$BACKLOG_OFF" || die "scripts/stack start worker failed"
    WAIT_STEP=1 wait_until $((COUNT / 100 + 60)) settled_at_least "$depth" || warn "bank http: not all settled before the deadline"
    t1=$(drained_at "$pfx")
    rate=$(calc "$depth / ($t1 - $t0)")
    cpu=$(calc "$(cpu_ticks "$(prog_pid bank)") / $TICK")
    sample cpu_s.worker_bank_drain "$rep" "$(calc "$(cpu_ticks "$(prog_pid worker)") / $TICK")"
    sample worker.bank_http_events_per_s "$rep" "$rate"
    sample worker.bank_http_ratio_to_in_process "$rep" "$(calc "$rate / $inproc")"
    sample cpu_s.banksim_drain "$rep" "$cpu"
    stop_prog worker
    stack_do stop bank BANK=http
    rm -f "$store"
    progress "  rep $rep: worker through the HTTP bank $(fmt "$rate" 0) events/s ($(fmt "$(calc "$rate / $inproc")" 2)x in-process); payments-banksim $(fmt "$cpu" 2) CPU s"
}

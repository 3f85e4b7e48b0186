# scripts/stack_db.sh - sourced by scripts/stack: PostgreSQL as DB_NODES=3 servers under Patroni
# with a private etcd, all on loopback (docs/operations.md, "A PostgreSQL cluster").
#
# Node K (1..DB_NODES) listens on PGPORT+K-1, its Patroni REST API on PATRONI_PORT+K-1, keeps its
# data in .run/pg-K and is named db-K; etcd listens on ETCD_PORT (clients) and ETCD_PORT+1 (peers).
# Pid files: .run/db-K.pid (Patroni), .run/etcd.pid; logs .run/log/db-K.log (Patroni and the
# server's own log lines), .run/log/etcd.log. The single-node database (DB_NODES=1) is scripts/stack's.

PATRONI_SCOPE=paygw

dbn_vars() { # K: the D_* variables of node K
    D_K=$1
    D_PORT=$((PGPORT + $1 - 1))
    D_REST=$((PATRONI_PORT + $1 - 1))
    D_DATA="$RUN/pg-$1"
    D_SOCK="$RUN/pgsock-$1"
    ((${#D_SOCK} < 90)) || D_SOCK="/tmp/paygw-pgsock-$D_PORT"
    D_CONF="$RUN/patroni-$1.yml"
    D_PIDFILE="$RUN/db-$1.pid"
    D_LOG="$LOGDIR/db-$1.log"
}

db_hosts() { # host:port,host:port,... in node order
    local k hosts=()
    for ((k = 1; k <= DB_NODES; k++)); do hosts+=("127.0.0.1:$((PGPORT + k - 1))"); done
    (
        IFS=,
        printf '%s\n' "${hosts[*]}"
    )
}

# db_url USER DBNAME: the URL every client uses; with a cluster, libpq tries the nodes in order and
# keeps the one that takes writes (contract section 11).
db_url() {
    if ((DB_NODES == 1)); then
        printf 'postgresql://%s@127.0.0.1:%s/%s\n' "$1" "$PGPORT" "$2"
    else
        printf 'postgresql://%s@%s/%s?target_session_attrs=read-write&connect_timeout=2\n' "$1" "$(db_hosts)" "$2"
    fi
}

etcd_pid() {
    local pid
    pid=$(read_pid "$RUN/etcd.pid")
    pid_is "$pid" "--data-dir $RUN/etcd" && printf '%s\n' "$pid"
}

dbn_pid() { # K: node K's Patroni, if it runs
    local pid
    dbn_vars "$1"
    pid=$(read_pid "$D_PIDFILE")
    pid_is "$pid" "$D_CONF" && printf '%s\n' "$pid"
}

dbn_postmaster() { # K: node K's postmaster, if it runs
    local pid
    dbn_vars "$1"
    pid=$(read_pid "$D_DATA/postmaster.pid" 2>/dev/null)
    pid_is "$pid" "$D_DATA" && printf '%s\n' "$pid"
}

start_etcd() {
    local pid deadline
    if pid=$(etcd_pid); then return 0; fi
    command -v etcd >/dev/null || die "etcd not found (apt-get install etcd-server)"
    ! tcp_open 127.0.0.1 "$ETCD_PORT" || die "port $ETCD_PORT is in use by something else (set ETCD_PORT)"
    mkdir -p "$RUN/etcd" "$LOGDIR"
    chmod 700 "$RUN/etcd"
    say "starting etcd on 127.0.0.1:$ETCD_PORT"
    (
        exec setsid etcd --name paygw --data-dir "$RUN/etcd" \
            --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
            --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
            --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
            --initial-cluster "paygw=http://127.0.0.1:$((ETCD_PORT + 1))" \
            --listen-metrics-urls '' </dev/null 9>&-
    ) >>"$LOGDIR/etcd.log" 2>&1 &
    printf '%s\n' "$!" >"$RUN/etcd.pid"
    deadline=$((SECONDS + 30))
    until http_ok "http://127.0.0.1:$ETCD_PORT/health"; do
        # the pid, not its command line: until the subshell has exec'd, it still reads as ours
        pid_alive "$(read_pid "$RUN/etcd.pid")" || { tail -n 20 "$LOGDIR/etcd.log" >&2; die "etcd exited while starting (log: $LOGDIR/etcd.log)"; }
        ((SECONDS < deadline)) || die "etcd not healthy within 30 s (log: $LOGDIR/etcd.log)"
        sleep 0.2
    done
}

stop_etcd() {
    local pid
    pid=$(etcd_pid) || { rm -f "$RUN/etcd.pid"; return 0; }
    say "stopping etcd (pid $pid)"
    stop_pid etcd "$pid" 10
    rm -f "$RUN/etcd.pid"
}

# Written at every start, so changed ports or a moved checkout take effect. Timings: contract section
# 11 (a new leader about 10 s after a node loss); docs/operations.md says what each promises.
write_patroni_conf() {
    local k=$1 bin
    bin=$(pg_bindir)
    dbn_vars "$k"
    cat >"$D_CONF" <<EOF
# written by scripts/stack
scope: $PATRONI_SCOPE
name: db-$k
log:
  level: INFO
  format: '%(asctime)s db-$k %(levelname)s: %(message)s'
restapi:
  listen: 127.0.0.1:$D_REST
  connect_address: 127.0.0.1:$D_REST
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: ${DB_SYNCHRONOUS_MODE:-true}
    synchronous_mode_strict: ${DB_SYNCHRONOUS_MODE:-true}
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: 'on'
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C
    - data-checksums
postgresql:
  listen: 127.0.0.1:$D_PORT
  connect_address: 127.0.0.1:$D_PORT
  data_dir: $D_DATA
  bin_dir: $bin
  pgpass: $RUN/patroni/db-$k.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
    rewind:
      username: postgres
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication replicator 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: '$D_SOCK'
    shared_buffers: ${PG_CLUSTER_SHARED_BUFFERS:-256MB}
    max_wal_size: ${PG_CLUSTER_MAX_WAL_SIZE:-2GB}
    min_wal_size: 512MB
    checkpoint_timeout: 15min
    checkpoint_completion_target: 0.9
    wal_compression: lz4
    backend_flush_after: 256kB
    log_checkpoints: 'on'
    log_autovacuum_min_duration: 1s
    log_min_duration_statement: 500ms
    log_parameter_max_length: 0
    log_lock_waits: 'on'
    logging_collector: 'off'
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
EOF
    ((EUID != 0)) || chown postgres: "$D_CONF"
}

# The state of node K from its Patroni: "master running", "replica running", ...; a standby whose
# WAL receiver streams from the primary reads "replica streaming" (Patroni 3.0.2 does not say).
dbn_state() {
    local st
    dbn_vars "$1"
    st=$(curl -fsS --max-time 2 "http://127.0.0.1:$D_REST/patroni" 2>/dev/null |
        jq -r '"\(.role) \(.state)"' 2>/dev/null) || true
    if [[ $st == "replica running" &&
        $(psql -X -qtA -d "postgresql://postgres@127.0.0.1:$D_PORT/postgres?connect_timeout=2" \
            -c "SELECT status FROM pg_stat_wal_receiver" 2>/dev/null) == streaming ]]; then
        st="replica streaming"
    fi
    printf '%s\n' "$st"
}

launch_dbn() {
    local k=$1 run_as=()
    dbn_vars "$k"
    ! tcp_open 127.0.0.1 "$D_PORT" || die "port $D_PORT is in use by something else (set PGPORT)"
    ! tcp_open 127.0.0.1 "$D_REST" || die "port $D_REST is in use by something else (set PATRONI_PORT)"
    # Patroni (as postgres) writes its pgpass and temporary files under .run/patroni, its HOME
    mkdir -p "$D_SOCK" "$LOGDIR" "$D_DATA" "$RUN/patroni"
    chmod 700 "$D_DATA"
    chmod 755 "$RUN" "$LOGDIR"
    touch "$D_LOG"
    if ((EUID == 0)); then
        chown postgres: "$D_SOCK" "$D_LOG" "$D_DATA" "$RUN/patroni"
        # setpriv execs (runuser would stay as the parent): the pid we record is Patroni's own
        run_as=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env --)
    fi
    write_patroni_conf "$k"
    if [[ -f $D_DATA/postmaster.pid ]] && ! dbn_postmaster "$k" >/dev/null; then
        rm -f "$D_DATA/postmaster.pid" # a crashed node's lock file names a dead postmaster
    fi
    say "starting db-$k (PostgreSQL 127.0.0.1:$D_PORT, Patroni 127.0.0.1:$D_REST)"
    (
        cd /
        printf '=== %s start db-%s\n' "$(date -u +%FT%TZ)" "$k"
        exec setsid "${run_as[@]}" env PATH=/usr/bin:/bin HOME="$RUN/patroni" patroni "$D_CONF" </dev/null 9>&-
    ) >>"$D_LOG" 2>&1 &
    printf '%s\n' "$!" >"$D_PIDFILE"
}

# await_dbn K SECONDS: until node K is the primary or a standby that streams.
await_dbn() {
    local k=$1 deadline=$((SECONDS + $2)) st
    while :; do
        st=$(dbn_state "$k")
        case $st in
        "master running" | "primary running" | "replica streaming") return 0 ;;
        esac
        # as for etcd: alive is enough while the subshell may not have exec'd Patroni yet
        pid_alive "$(read_pid "$D_PIDFILE")" || { tail -n 20 "$D_LOG" >&2; die "db-$k exited while starting (log: $D_LOG)"; }
        ((SECONDS < deadline)) || { tail -n 20 "$D_LOG" >&2; die "db-$k not primary or streaming within $2 s (state: ${st:-none}; log: $D_LOG)"; }
        sleep 0.3
    done
}

# await_sync SECONDS: until the primary has a synchronous standby (strict mode commits nothing before).
await_sync() {
    local deadline=$((SECONDS + $1)) p
    [[ ${DB_SYNCHRONOUS_MODE:-true} == true ]] || return 0
    while :; do
        if p=$(db_primary); then
            dbn_vars "$p"
            [[ -n $(psql -X -qtA -d "postgresql://postgres@127.0.0.1:$D_PORT/postgres?connect_timeout=2" \
                -c "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'" 2>/dev/null) ]] && return 0
        fi
        ((SECONDS < deadline)) || die "no synchronous standby within $1 s (logs: $LOGDIR/db-K.log)"
        sleep 0.3
    done
}

start_dbns() { # K...: start these nodes (those not running) and wait for each
    local k started=()
    start_etcd
    for k in "$@"; do
        if dbn_pid "$k" >/dev/null; then continue; fi
        launch_dbn "$k"
        started+=("$k")
        # the first node of a new cluster bootstraps it; the others copy it once it runs
        [[ -s $RUN/pg-$k/PG_VERSION ]] || await_dbn "$k" 90
    done
    for k in "${started[@]}"; do await_dbn "$k" 90; done
}

stop_dbn() {
    local k=$1 pid
    dbn_vars "$k"
    pid=$(dbn_pid "$k") || { rm -f "$D_PIDFILE"; return 0; }
    # SIGTERM: Patroni stops PostgreSQL (fast) and gives up the leader key if it holds it
    say "stopping db-$k (pid $pid)"
    stop_pid "db-$k" "$pid" 40
    rm -f "$D_PIDFILE"
}

# kill_dbn K: the loss of node K: Patroni, the postmaster and its backends in one kill (a live
# Patroni restarts a killed postmaster in place; a postmaster left without its Patroni keeps
# taking writes). The backends are listed first: a scan of /proc takes a while on a busy host.
kill_dbn() {
    local k=$1 pid pm p kids=()
    dbn_vars "$k"
    pid=$(dbn_pid "$k") || pid=""
    pm=$(dbn_postmaster "$k") || pm=""
    [[ -n $pid$pm ]] || { say "db-$k is not running"; return 0; }
    [[ -z $pm ]] || mapfile -t kids < <(children_of "$pm")
    say "SIGKILL db-$k (patroni ${pid:-none}, postmaster ${pm:-none})"
    # shellcheck disable=SC2086
    kill -KILL $pid $pm "${kids[@]}" 2>/dev/null || true
    for p in $pid $pm; do wait_gone "$p" 5 || warn "pid $p survived SIGKILL"; done
    rm -f "$D_PIDFILE"
}

all_dbns() { seq 1 "$DB_NODES"; }

db_any_pid() { # the first running node's Patroni: "the database runs"
    local k
    for k in $(all_dbns); do dbn_pid "$k" && return 0; done
    return 1
}

start_db_cluster() {
    local t0=$SECONDS
    # shellcheck disable=SC2046
    start_dbns $(all_dbns)
    await_sync 60
    say "db cluster ready in $((SECONDS - t0)) s (primary db-$(db_primary))"
}

stop_db_cluster() {
    local k p
    p=$(db_primary) || p=""
    # the standbys first, then the primary: no failover on the way down
    for k in $(all_dbns); do [[ $k == "$p" ]] || stop_dbn "$k"; done
    [[ -z $p ]] || stop_dbn "$p"
    stop_etcd
}

kill_db_cluster() {
    local k
    for k in $(all_dbns); do kill_dbn "$k"; done
}

db_node_of() { # db-K -> K, when K is a node of this cluster
    local k=${1#db-}
    [[ $1 == db-* && $k =~ ^[1-9]$ ]] && ((k <= DB_NODES)) && printf '%s\n' "$k"
}

# db_primary: K of the node whose Patroni is leader and whose server takes writes.
db_primary() {
    local k st
    for k in $(all_dbns); do
        st=$(dbn_state "$k")
        [[ $st == "master running" || $st == "primary running" ]] || continue
        dbn_vars "$k"
        [[ $(psql -X -qtA -d "postgresql://postgres@127.0.0.1:$D_PORT/postgres?connect_timeout=2" \
            -c "SELECT pg_is_in_recovery()" 2>/dev/null) == f ]] || continue
        printf '%s\n' "$k"
        return 0
    done
    return 1
}

cmd_primary() {
    if ((DB_NODES == 1)); then
        db_pid >/dev/null && printf '1\n'
        return
    fi
    db_primary
}

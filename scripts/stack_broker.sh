# scripts/stack_broker.sh - sourced by scripts/stack: RabbitMQ as one node or a cluster of
# BROKER_NODES nodes on loopback (docs/operations.md, "A RabbitMQ cluster").
#
# Node K (1..BROKER_NODES) listens for AMQP on AMQP_PORT+K-1, for Erlang distribution on
# RABBITMQ_DIST_PORT+20*(K-1) (its CLI tools take the next 10 ports), is named
# paygw-<amqp port>@localhost and keeps its data in .run/rabbitmq (K=1) or .run/rabbitmq-K.
# Every node shares node 1's HOME, so they share one Erlang cookie.

# node_vars K: the N_* variables of node K.
node_vars() {
    local k=$1
    N_K=$k
    N_AMQP=$((AMQP_PORT + k - 1))
    N_DIST=$((RABBITMQ_DIST_PORT + 20 * (k - 1)))
    N_NODE="paygw-$N_AMQP@localhost"
    if ((k == 1)); then
        N_DIR="$RUN/rabbitmq" N_PIDFILE="$RUN/broker.pid" N_LOG="$LOGDIR/broker.log" N_NAME=broker
    else
        N_DIR="$RUN/rabbitmq-$k" N_PIDFILE="$RUN/broker-$k.pid" N_LOG="$LOGDIR/broker-$k.log" N_NAME="broker-$k"
    fi
}

broker_urls() { # the AMQP_URL list, in node order
    local k urls=()
    for ((k = 1; k <= BROKER_NODES; k++)); do
        urls+=("amqp://guest:guest@127.0.0.1:$((AMQP_PORT + k - 1))/%2f")
    done
    (
        IFS=,
        printf '%s\n' "${urls[*]}"
    )
}

# Everything RabbitMQ and its CLI tools need to find node K and nothing of the system's node.
rabbit_env() {
    node_vars "${1:-1}"
    export HOME="$RUN/rabbitmq/home" # the one Erlang cookie of the cluster lives here
    export RABBITMQ_NODENAME="$N_NODE"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$N_AMQP"
    export RABBITMQ_DIST_PORT="$N_DIST"
    export RABBITMQ_CTL_DIST_PORT_MIN=$((N_DIST + 1))
    export RABBITMQ_CTL_DIST_PORT_MAX=$((N_DIST + 10))
    export ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT
    export RABBITMQ_MNESIA_BASE="$N_DIR/mnesia"
    export RABBITMQ_LOG_BASE="$N_DIR/log"
    export RABBITMQ_LOGS=- # to stdout, which goes to .run/log/broker[-K].log
    export RABBITMQ_PID_FILE="$N_DIR/beam.pid"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$N_DIR/enabled_plugins"
    export RABBITMQ_CONFIG_FILE="$N_DIR/rabbitmq.conf"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$N_DIR/advanced.config"
    export RABBITMQ_CONF_ENV_FILE="$N_DIR/rabbitmq-env.conf"
    # Erlang distribution on loopback too, and never spawn an epmd we would not own.
    # -paygw_node is inert; it only marks the VM's command line as ours for pid checks.
    # +sbwt none: idle Erlang schedulers sleep instead of spinning; on a small host the spinning
    # takes the CPU PostgreSQL and the API need and shows up as their tail latency.
    # One scheduler per node (BROKER_SCHEDULERS, +S N:N): the work here is one queue process and
    # the channels that feed it, and a second scheduler mostly hands it between two threads and
    # wakes them (decision 42); three VMs of a cluster on one small host share 2 cores anyway.
    local sched="+S $BROKER_SCHEDULERS:$BROKER_SCHEDULERS"
    ((BROKER_NODES == 1)) || sched+=" +SDio 1"
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false +sbwt none +sbwtdcpu none +sbwtdio none $sched -paygw_node $N_NODE"
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false" # never spawn a stray epmd
}

epmd_pid() {
    local pid
    pid=$(read_pid "$RUN/epmd.pid")
    pid_is "$pid" "-port $ERL_EPMD_PORT" && printf '%s\n' "$pid"
}

node_pid() { # K: node K's Erlang VM, if it runs
    local pid
    node_vars "$1"
    pid=$(read_pid "$N_PIDFILE")
    pid_is "$pid" "-paygw_node $N_NODE" && printf '%s\n' "$pid"
}

broker_pid() { # the first running node's pid: "the broker runs"
    local k
    for ((k = 1; k <= BROKER_NODES; k++)); do node_pid "$k" && return 0; done
    return 1
}

# Our own epmd on a private port, run in the foreground so its pid is known and `down` can stop it.
start_epmd() {
    local pid deadline
    epmd_pid >/dev/null && return 0
    if tcp_open 127.0.0.1 "$ERL_EPMD_PORT"; then
        # an epmd we did not record (e.g. spawned by an Erlang CLI tool) serves as well; we
        # leave it alone when stopping, since its pid is not ours to signal
        epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1 && return 0
        die "port $ERL_EPMD_PORT (epmd) is in use by something else (set ERL_EPMD_PORT)"
    fi
    mkdir -p "$LOGDIR"
    setsid epmd -port "$ERL_EPMD_PORT" -address 127.0.0.1 >>"$LOGDIR/epmd.log" 2>&1 </dev/null 9>&- &
    pid=$!
    printf '%s\n' "$pid" >"$RUN/epmd.pid"
    deadline=$((SECONDS + 10))
    until tcp_open 127.0.0.1 "$ERL_EPMD_PORT"; do
        pid_alive "$pid" || { tail -n 5 "$LOGDIR/epmd.log" >&2; die "epmd exited (log: $LOGDIR/epmd.log)"; }
        ((SECONDS < deadline)) || die "epmd did not listen on $ERL_EPMD_PORT within 10 s"
        sleep 0.1
    done
}

# launch_node K: start node K's VM in the background; 1 if it already runs.
launch_node() {
    local pid wrapper
    node_vars "$1" # node_pid below runs in a subshell: its N_* do not reach us
    if pid=$(node_pid "$1"); then
        say "$N_NAME already running (pid $pid, port $N_AMQP)"
        return 1
    fi
    [[ -x $RABBIT_BIN/rabbitmq-server ]] || die "$RABBIT_BIN/rabbitmq-server not found (apt-get install rabbitmq-server)"
    ! tcp_open 127.0.0.1 "$N_AMQP" || die "port $N_AMQP is in use by something else (set AMQP_PORT)"
    ! tcp_open 127.0.0.1 "$N_DIST" || die "port $N_DIST is in use (set RABBITMQ_DIST_PORT)"
    mkdir -p "$N_DIR"/{mnesia,log} "$RUN/rabbitmq/home" "$LOGDIR"
    chmod 700 "$RUN/rabbitmq/home"
    echo '[].' >"$N_DIR/enabled_plugins" # no plugins: nothing listens besides AMQP
    echo '# written by scripts/stack; listener and node settings come from the environment' >"$N_DIR/rabbitmq.conf"
    : >"$N_DIR/rabbitmq-env.conf" # shadows /etc/rabbitmq/rabbitmq-env.conf
    rm -f "$N_DIR/beam.pid"
    start_epmd
    say "starting $N_NAME ($N_NODE) on 127.0.0.1:$N_AMQP"
    # setsid: a Ctrl-C or hang-up of the calling terminal must not reach the server.
    (rabbit_env "$1" && exec setsid "$RABBIT_BIN/rabbitmq-server" >>"$N_LOG" 2>&1 </dev/null 9>&-) &
    wrapper=$! # a small sh that forwards SIGTERM; the Erlang VM writes its own pid to beam.pid
    printf '%s\n' "$wrapper" >"$N_DIR/wrapper.pid"
}

# await_node K: until node K accepts AMQP (a node of a cluster first syncs with its peers).
await_node() {
    local wrapper deadline=$((SECONDS + 150))
    node_vars "$1"
    wrapper=$(read_pid "$N_DIR/wrapper.pid")
    until [[ -s $N_DIR/beam.pid ]] && tcp_open 127.0.0.1 "$N_AMQP"; do
        if ! pid_alive "$wrapper"; then
            tail -n 30 "$N_LOG" >&2
            die "RabbitMQ $N_NAME exited during start-up (log: $N_LOG)"
        fi
        ((SECONDS < deadline)) || { tail -n 30 "$N_LOG" >&2; die "RabbitMQ $N_NAME not ready within 150 s"; }
        sleep 0.2
    done
    read_pid "$N_DIR/beam.pid" >"$N_PIDFILE"
    node_pid "$1" >/dev/null || die "RabbitMQ pid file $N_DIR/beam.pid does not name our node"
}

node_ctl() { # K ARGS...: rabbitmqctl against node K
    local k=$1
    shift
    (rabbit_env "$k" && "$RABBIT_BIN/rabbitmqctl" -n "$N_NODE" "$@")
}

# join_node K: a new node K joins node 1's cluster (once: a member rejoins by itself on restart).
join_node() {
    node_vars "$1"
    [[ $1 -gt 1 && ! -e $N_DIR/joined ]] || return 0
    local first
    first="paygw-$AMQP_PORT@localhost"
    say "$N_NAME joins the cluster of $first"
    node_ctl "$1" -q stop_app >/dev/null &&
        node_ctl "$1" -q join_cluster "$first" >/dev/null &&
        node_ctl "$1" -q start_app >/dev/null || die "$N_NAME could not join $first (log: $N_LOG)"
    touch "$N_DIR/joined"
}

# await_members K: until node K sees every node that runs here as a running member of its cluster.
await_members() {
    local k want=0 seen deadline=$((SECONDS + 60))
    ((BROKER_NODES > 1)) || return 0
    for ((k = 1; k <= BROKER_NODES; k++)); do node_pid "$k" >/dev/null && want=$((want + 1)); done
    until seen=$(node_ctl "$1" -q eval 'length(rabbit_nodes:all_running()).' 2>/dev/null) && ((seen >= want)); do
        ((SECONDS < deadline)) || die "broker-$1 sees ${seen:-no} running members of the cluster, not $want"
        sleep 0.5
    done
}

# start_nodes K...: launch them together (members of a cluster that stopped wait for each
# other while they boot), wait for each, join new ones, and wait until each sees the others.
start_nodes() {
    local k t0=$SECONDS launched=()
    for k in "$@"; do launch_node "$k" && launched+=("$k"); done
    for k in "${launched[@]}"; do await_node "$k"; done
    for k in "${launched[@]}"; do join_node "$k"; done
    for k in "${launched[@]}"; do await_members "$k"; done
    ((${#launched[@]} == 0)) || say "broker nodes ${launched[*]} ready in $((SECONDS - t0)) s"
}

stop_node() {
    local pid wrapper
    node_vars "$1"
    wrapper=$(read_pid "$N_DIR/wrapper.pid" 2>/dev/null)
    if pid=$(node_pid "$1"); then
        say "stopping $N_NAME (pid $pid)"
        stop_pid "$N_NAME" "$pid" 30 # RabbitMQ shuts down cleanly on SIGTERM
    fi
    pid_is "$wrapper" rabbitmq-server && { wait_gone "$wrapper" 5 || stop_pid "$N_NAME-wrapper" "$wrapper" 1; }
    rm -f "$N_PIDFILE"
}

kill_node() {
    local pid
    node_vars "$1"
    pid=$(node_pid "$1") || { say "$N_NAME is not running"; return 0; }
    say "SIGKILL $N_NAME (pid $pid)"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || warn "$N_NAME (pid $pid) survived SIGKILL"
    rm -f "$N_PIDFILE"
}

all_nodes() { seq 1 "$BROKER_NODES"; }

start_broker() {
    # shellcheck disable=SC2046
    start_nodes $(all_nodes)
}

stop_broker() { # node 1 last: it is the one a later `start` waits for least
    local k
    for ((k = BROKER_NODES; k >= 1; k--)); do stop_node "$k"; done
}

kill_broker() {
    local k
    for ((k = 1; k <= BROKER_NODES; k++)); do kill_node "$k"; done
}

stop_epmd() {
    local pid
    broker_pid >/dev/null && return 0 # a node still needs it
    pid=$(epmd_pid) && stop_pid epmd "$pid" 5
    rm -f "$RUN/epmd.pid"
}

# broker_node_of NAME: K for "broker-K" (1..BROKER_NODES), else nothing
broker_node_of() {
    [[ $1 =~ ^broker-([0-9]+)$ ]] || return 1
    local k=${BASH_REMATCH[1]}
    ((k >= 1 && k <= BROKER_NODES)) || die "$1: this stack has broker-1..broker-$BROKER_NODES"
    printf '%s\n' "$k"
}

first_running_node() {
    local k
    for ((k = 1; k <= BROKER_NODES; k++)); do node_pid "$k" >/dev/null && { printf '%s\n' "$k"; return 0; }; done
    die "no broker node is running"
}

# cmd_leader QUEUE [VHOST]: K of the node that holds QUEUE's leader (quorum) or the queue (classic).
cmd_leader() {
    local q=${1:-} vhost=${2:-/} k node
    [[ -n $q ]] || die "usage: scripts/stack leader QUEUE [VHOST]"
    k=$(first_running_node)
    # tab-separated: name, leader (quorum; empty for classic), pid <node.N.N.N> (classic)
    node=$(node_ctl "$k" -q --no-table-headers list_queues -p "$vhost" name leader pid 2>/dev/null |
        awk -F'\t' -v q="$q" '$1 == q { n = $2; if (n == "") { n = $3; sub(/^</, "", n); sub(/\..*$/, "", n) } print n; exit }') ||
        die "cannot list the queues"
    [[ -n $node ]] || die "no queue $q"
    [[ $node =~ ^paygw-([0-9]+)@ ]] || die "queue $q is on an unknown node $node"
    printf '%s\n' $((BASH_REMATCH[1] - AMQP_PORT + 1))
}

cmd_vhost() {
    local name=${1:-} action=${2:-} k
    [[ -n $name ]] || die "usage: scripts/stack vhost NAME [--delete]"
    k=$(first_running_node)
    if [[ $action == --delete ]]; then
        node_ctl "$k" -q delete_vhost "$name" >/dev/null 2>&1 || true
        return 0
    fi
    node_ctl "$k" -q add_vhost "$name" >/dev/null 2>&1 || true # exists is fine
    node_ctl "$k" -q set_permissions -p "$name" guest '.*' '.*' '.*' >/dev/null ||
        die "cannot grant guest on vhost $name"
    broker_urls | sed "s|/%2f|/$(jq -rn --arg v "$name" '$v|@uri')|g"
}

# rabbitmqctl for our first running node, with our cookie and ports (the system's node is never addressed).
cmd_ctl() {
    local k
    (($#)) || die "usage: scripts/stack ctl RABBITMQCTL_ARGS..."
    k=$(first_running_node)
    rabbit_env "$k"
    exec "$RABBIT_BIN/rabbitmqctl" -n "$N_NODE" "$@"
}

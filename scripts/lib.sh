# scripts/lib.sh — small bash helpers shared by scripts/stack, scripts/migrate and scripts/test.
# shellcheck shell=bash disable=SC2034  # (the variables are used by the sourcing scripts)
# Sourced, never run. Everything here works with bash and /proc only (no procps on a bare Debian image).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
SCRIPTS="$REPO/scripts"
# a second stack (the cluster suite, the bench's cluster) sets its own; a relative STACK_RUN is
# taken from the current folder, and made absolute here
RUN=$(realpath -m -- "${STACK_RUN:-$REPO/.run}")
LOGDIR="$RUN/log"

say() { printf '%s: %s\n' "${0##*/}" "$*"; }
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "${0##*/}" "$*" >&2
    exit 1
}

# A pid is alive when it exists and is not a zombie: a zombie still answers kill -0,
# and ours can linger as zombies when PID 1 of a container does not reap.
pid_alive() {
    local pid=${1:-} stat
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }                   # the state follows the last ')' (comm may contain spaces)
    [[ ${stat:0:1} != [ZX] ]]
}

# pid_is PID NEEDLE: alive and its command line contains NEEDLE, so a recycled pid
# (after a reboot or a long time) is never mistaken for ours.
pid_is() {
    local pid=$1 needle=$2 cmd
    pid_alive "$pid" || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmd == *"$needle"* ]]
}

# let_postgres_reach DIR: as root, o+x on each folder above DIR that the postgres user cannot
# traverse (a checkout under /root or /work belongs to root). DIR may be relative.
let_postgres_reach() {
    local d
    d=$(realpath -m -- "$1")
    while [[ $d != / ]]; do
        d=$(dirname "$d")
        if ! runuser -u postgres -- test -x "$d"; then
            say "note: chmod o+x $d so the postgres user can reach $1"
            chmod o+x "$d"
        fi
    done
}

read_pid() { [[ -s $1 ]] && head -n1 "$1" 2>/dev/null | tr -dc '0-9'; return 0; }

# The direct children of PID, from /proc (field 4 of stat is the parent pid).
children_of() {
    local parent=$1 f stat rest ppid
    for f in /proc/[0-9]*/stat; do
        stat=$(cat "$f" 2>/dev/null) || continue
        rest=${stat##*) }
        read -r _ ppid _ <<<"$rest"
        [[ $ppid == "$parent" ]] && { f=${f#/proc/}; printf '%s\n' "${f%/stat}"; }
    done
    return 0
}

# wait_gone PID SECONDS: 0 once the pid is gone, 1 if it is still there at the deadline.
wait_gone() {
    local pid=$1 deadline=$((SECONDS + $2))
    while pid_alive "$pid"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# stop_pid NAME PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL.
stop_pid() {
    local name=$1 pid=$2 grace=$3
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$grace"; then
        warn "$name (pid $pid) still running ${grace}s after SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" 5 || warn "$name (pid $pid) survived SIGKILL"
    fi
}

tcp_open() { timeout 2 bash -c ": </dev/tcp/$1/$2" 2>/dev/null; }

http_ok() { curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null; }

# 48 hex characters from the kernel's CSPRNG.
gen_token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1024 && $1 <= 65535)); }

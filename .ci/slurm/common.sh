# Shared by up.sh / down.sh (sourced, not executed).
# Every daemon runs in the foreground under start-stop-daemon, which records
# its pid in $RUN_DIR/<name>.pid; down.sh stops them by those files only.

CLUSTER=hypergrid
RUN_DIR=/run/hypergrid-slurm
LOG_DIR=/var/log/hypergrid-slurm
STATE_DIR=/var/lib/hypergrid-slurm
# start order; down.sh stops them in reverse
DAEMONS=(munged mariadb slurmdbd slurmctld slurmd)

# process name (/proc/<pid>/comm) each pid file must point at: guards against
# pid reuse. (Not /proc/<pid>/exe: Debian's /usr/sbin/slurmd is a symlink to
# slurmd-wlm, and so on.)
daemon_comm() {
    case "$1" in
        mariadb) echo mariadbd ;;
        *) echo "$1" ;;
    esac
}

daemon_pid() {
    local f="$RUN_DIR/$1.pid"
    [ -s "$f" ] && tr -dc '0-9' < "$f"
}

daemon_alive() {
    local pid
    pid="$(daemon_pid "$1")" || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(daemon_comm "$1")" ]
}

daemon_status() {
    if daemon_alive "$1"; then
        echo "running (pid $(daemon_pid "$1"))"
    elif [ -e "$RUN_DIR/$1.pid" ]; then
        echo "stale pid file ($(daemon_pid "$1" || true))"
    else
        echo "not running"
    fi
}

# start_daemon <name> <user> <stdout-file> <executable> [args...]
start_daemon() {
    local name="$1" user="$2" out="$3"; shift 3
    if daemon_alive "$name"; then
        echo "[slurm] $name already running (pid $(daemon_pid "$name"))"
        return 0
    fi
    rm -f "$RUN_DIR/$name.pid"
    start-stop-daemon --start --background --make-pidfile \
        --pidfile "$RUN_DIR/$name.pid" --chuid "$user" --output "$out" \
        --exec "$1" -- "${@:2}"
    # start-stop-daemon returns once it has forked; the child shows up under
    # its own name only after exec, which can take seconds on a busy machine
    # (slurmd loads its plugins first): wait up to 30 s.
    local i
    for ((i = 0; i < 300; i++)); do
        daemon_alive "$name" && break
        sleep 0.1
    done
    if ! daemon_alive "$name"; then
        echo "[slurm] $name did not start (pid file: $(daemon_pid "$name" || echo none)); see $out" >&2
        return 1
    fi
    echo "[slurm] started $name (pid $(daemon_pid "$name"))"
}

# stop_daemon <name>: TERM, wait up to 30 s, then KILL (5 s). Tolerates a
# daemon that is already gone or a missing/stale pid file. (Plain kill, not
# start-stop-daemon --stop: slurmdbd/slurmctld rewrite their pid file after
# dropping to the slurm user, which start-stop-daemon refuses to trust.)
stop_daemon() {
    local name="$1" pid i
    if ! daemon_alive "$name"; then
        [ -e "$RUN_DIR/$name.pid" ] && echo "[slurm] $name not running (removing stale pid file)"
        rm -f "$RUN_DIR/$name.pid"
        return 0
    fi
    pid="$(daemon_pid "$name")"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "[slurm] $name (pid $pid) ignored SIGTERM for 30 s: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
    fi
    if kill -0 "$pid" 2>/dev/null; then
        echo "[slurm] WARNING: $name (pid $pid) still alive after TERM+KILL" >&2
        return 1
    fi
    rm -f "$RUN_DIR/$name.pid"
    echo "[slurm] stopped $name (pid $pid)"
}

#!/usr/bin/env bash
# Bring up a single-node SLURM cluster (munge, mariadb, slurmdbd, slurmctld,
# slurmd) without systemd, for the tests in tests/slurm (pytest -m slurm).
#
# Idempotent: packages are installed only when missing, configs are rewritten
# every time, daemons that are already running (live pid file) are left alone
# unless a slurm config changed, in which case the slurm daemons are restarted.
# Stop everything with .ci/slurm/down.sh.
#
# Environment knobs (all optional):
#   HYPERGRID_SLURM_MAX_ARRAY_SIZE  MaxArraySize (default 1001, slurm's default)
#   HYPERGRID_SLURM_GPUS            number of fake GPUs (default 2, max 5)
#   HYPERGRID_SLURM_WAIT_S          bounded wait per daemon (default 60)
#   HYPERGRID_SLURM_SKIP_INSTALL=1  never call apt-get
set -euo pipefail

t_start=$(date +%s)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"

MAX_ARRAY_SIZE="${HYPERGRID_SLURM_MAX_ARRAY_SIZE:-1001}"
NGPUS="${HYPERGRID_SLURM_GPUS:-2}"
WAIT_S="${HYPERGRID_SLURM_WAIT_S:-60}"
DB_PASS="hypergrid-ci"   # local-only CI database, socket access only

log() { echo "[slurm-up] $*"; }

dump_logs() {
    echo "================ daemon logs (last 40 lines each) ================" >&2
    for f in "$LOG_DIR"/*.log "$LOG_DIR"/munged.out "$LOG_DIR"/mariadb.out /var/log/munge/munged.log; do
        [ -f "$f" ] || continue
        echo "---------------- $f" >&2
        tail -n 40 "$f" >&2 || true
    done
    echo "---------------- pid files" >&2
    for d in "${DAEMONS[@]}"; do
        printf '%-10s %s\n' "$d" "$(daemon_status "$d")" >&2
    done
}

die() {
    echo "[slurm-up] ERROR: $*" >&2
    dump_logs
    exit 1
}

# wait_for <daemon> <description> <command...>: run command until it succeeds,
# bounded; fail at once if <daemon> (the one just started) has exited, e.g.
# because something else already holds its port.
wait_for() {
    local daemon="$1" what="$2"; shift 2
    local deadline=$(( $(date +%s) + WAIT_S ))
    until "$@" >/dev/null 2>&1; do
        daemon_alive "$daemon" || die "$daemon exited while waiting for $what (see $LOG_DIR/$daemon.out)"
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "[slurm-up] last attempt of: $*" >&2
            "$@" >&2 || true
            die "timed out after ${WAIT_S}s waiting for $what"
        fi
        sleep 0.5
    done
    daemon_alive "$daemon" || die "$daemon exited (see $LOG_DIR/$daemon.out); is another instance running?"
    log "$what: ok ($(( $(date +%s) - t_start ))s)"
}

# ---------------------------------------------------------------- packages
PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "${HYPERGRID_SLURM_SKIP_INSTALL:-0}" = 1 ] && die "missing packages: ${missing[*]}"
    log "installing: ${missing[*]}"
    t0=$(date +%s)
    export DEBIAN_FRONTEND=noninteractive
    # Keep maintainer scripts from starting services (no systemd / init here).
    policy_created=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        policy_created=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
    if [ "$policy_created" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    log "packages installed in $(( $(date +%s) - t0 ))s"
else
    log "packages already installed"
fi

# ---------------------------------------------------------------- directories
mkdir -p "$RUN_DIR" "$LOG_DIR" "$STATE_DIR/ctld" "$STATE_DIR/d" "$STATE_DIR/dbd" \
         /etc/slurm /run/munge /var/log/munge /var/lib/munge /run/mysqld
chmod 755 "$RUN_DIR" "$LOG_DIR"
chown slurm:slurm "$STATE_DIR/ctld" "$STATE_DIR/dbd"
chown -R munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
chown mysql:mysql /run/mysqld
# log files the non-root daemons write to
for f in slurmctld.log slurmdbd.log; do
    touch "$LOG_DIR/$f"; chown slurm:slurm "$LOG_DIR/$f"
done
touch "$LOG_DIR/mariadb.log" && chown mysql:mysql "$LOG_DIR/mariadb.log"

# ---------------------------------------------------------------- configs
NODE="$(hostname -s)"
# Hardware as slurmd sees it; use all CPUs, 90% of memory.
read -r CPUS SOCKETS CORES THREADS REALMEM < <(
    slurmd -C | awk '/^NodeName=/{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["CPUs"], v["SocketsPerBoard"], v["CoresPerSocket"], v["ThreadsPerCore"], v["RealMemory"] }')
[ -n "${REALMEM:-}" ] || die "could not parse 'slurmd -C' output: $(slurmd -C 2>&1)"
MEM=$(( REALMEM * 9 / 10 ))
# A job asks for DefMemPerCPU per CPU unless it says otherwise: small enough
# that every CPU can hold a job at once.
DEF_MEM_PER_CPU=$(( MEM / CPUS < 1024 ? MEM / CPUS : 1024 ))

GPU_FILES=(/dev/null /dev/zero /dev/full /dev/random /dev/urandom)
[ "$NGPUS" -ge 1 ] && [ "$NGPUS" -le "${#GPU_FILES[@]}" ] || die "HYPERGRID_SLURM_GPUS must be 1..${#GPU_FILES[@]}"

# install_conf <path> <mode> <owner>: move $tmp into place if different.
install_conf() {
    local dst="$1" mode="$2" owner="$3"
    if ! cmp -s "$tmp" "$dst"; then
        install -m "$mode" -o "${owner%:*}" -g "${owner#*:}" "$tmp" "$dst"
        log "wrote $dst"
    fi
    rm -f "$tmp"
}

tmp=$(mktemp)
cat > "$tmp" <<EOF
# Written by .ci/slurm/up.sh (hypergrid CI single-node cluster). Do not edit.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/d
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true

# No cgroups (container / gVisor friendly): plain /proc process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none

SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$DEF_MEM_PER_CPU
GresTypes=gpu
MaxArraySize=$MAX_ARRAY_SIZE
MaxJobCount=10000
ReturnToService=2
SlurmdParameters=config_overrides

# Requeue (submitit checkpoint/requeue on timeout and preemption).
JobRequeue=1
# A requeued job only becomes eligible cred_expire+1 s after the requeue
# (default 120 s): shortened so a timeout->checkpoint->requeue cycle of a
# 1-minute job finishes in about a minute (a job step's credential lives as
# long: 10 s is ample for a node that launches its steps at once).
AuthInfo=cred_expire=10
# Finished jobs stay visible to squeue/scontrol for MinJobAge seconds; sacct
# (slurmdbd) keeps them forever, which is what submitit polls.
MinJobAge=120
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=120
MessageTimeout=10
UnkillableStepTimeout=60

# Accounting through slurmdbd: sacct must know the final state of every job.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none

NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS SocketsPerBoard=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM Gres=gpu:$NGPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
install_conf /etc/slurm/slurm.conf 0644 root:root

tmp=$(mktemp)
{
    echo "# Written by .ci/slurm/up.sh: fake GPUs backed by existing character devices."
    echo "AutoDetect=off"
    for ((i = 0; i < NGPUS; i++)); do
        echo "NodeName=$NODE Name=gpu File=${GPU_FILES[$i]}"
    done
} > "$tmp"
install_conf /etc/slurm/gres.conf 0644 root:root

tmp=$(mktemp)
cat > "$tmp" <<EOF
# Written by .ci/slurm/up.sh. Nothing is constrained (proctrack/linuxproc,
# task/none); present so that no plugin goes looking for a default.
CgroupAutomount=no
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=no
EOF
install_conf /etc/slurm/cgroup.conf 0644 root:root

tmp=$(mktemp)
cat > "$tmp" <<EOF
# Written by .ci/slurm/up.sh.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
PidFile=$RUN_DIR/slurmdbd.pid
LogFile=$LOG_DIR/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DB_PASS
EOF
install_conf /etc/slurm/slurmdbd.conf 0600 slurm:slurm

# ---------------------------------------------------------------- munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating munge key"
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
start_daemon munged munge "$LOG_DIR/munged.out" \
    /usr/sbin/munged -F || die "could not start munged"
munge_ok() { munge -n | unmunge; }
wait_for munged "munged" munge_ok

# ---------------------------------------------------------------- mariadb
if [ ! -d /var/lib/mysql/mysql ]; then
    log "initialising mariadb data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
start_daemon mariadb mysql "$LOG_DIR/mariadb.out" \
    /usr/sbin/mariadbd --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --skip-networking --log-error="$LOG_DIR/mariadb.log" \
    --innodb-lock-wait-timeout=900 --innodb-buffer-pool-size=128M || die "could not start mariadb"
wait_for mariadb "mariadb" mysqladmin --socket=/run/mysqld/mysqld.sock ping
mysql --socket=/run/mysqld/mysqld.sock -uroot <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF

# ---------------------------------------------------------------- slurm daemons
# slurmdbd / slurmctld start as root and drop to SlurmUser=slurm themselves.
# Running slurm daemons started from other configs (recorded in the stamp at
# the end of a successful up.sh) are restarted.
CONF_SHA="$(cat /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/cgroup.conf /etc/slurm/slurmdbd.conf | sha256sum | cut -d' ' -f1)"
STAMP="$RUN_DIR/slurm-config.sha256"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$CONF_SHA" ]; then
    for d in slurmd slurmctld slurmdbd; do
        if daemon_alive "$d"; then
            log "config changed since $d started: restarting it"
            stop_daemon "$d" || die "could not stop $d"
        fi
    done
fi
rm -f "$STAMP"

start_daemon slurmdbd root "$LOG_DIR/slurmdbd.out" /usr/sbin/slurmdbd -D || die "could not start slurmdbd"
# sacctmgr talks to slurmdbd (AccountingStorageHost) directly.
wait_for slurmdbd "slurmdbd" sacctmgr -n list cluster
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
    log "registered cluster $CLUSTER in slurmdbd"
fi

start_daemon slurmctld root "$LOG_DIR/slurmctld.out" /usr/sbin/slurmctld -D || die "could not start slurmctld"
wait_for slurmctld "slurmctld" scontrol ping
start_daemon slurmd root "$LOG_DIR/slurmd.out" /usr/sbin/slurmd -D || die "could not start slurmd"

node_idle() {
    local st
    st="$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null)"
    case "$st" in
        idle|mixed|allocated) return 0 ;;
        drained*|draining|down*|*drain*)
            # leftover from an earlier run (e.g. a killed slurmd): resume it
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
            return 1 ;;
        *) return 1 ;;
    esac
}
wait_for slurmd "node $NODE idle in partition debug" node_idle
sacct_ok() { sacct -n -X -a -S now-1days -o jobid >/dev/null; }
wait_for slurmdbd "sacct" sacct_ok
cluster_registered() { sacctmgr -n -P list cluster format=cluster,controlport | grep -q "^$CLUSTER|6817$"; }
wait_for slurmctld "slurmctld registered with slurmdbd" cluster_registered

echo "$CONF_SHA" > "$STAMP"

# ---------------------------------------------------------------- summary
log "cluster '$CLUSTER' up in $(( $(date +%s) - t_start ))s"
echo "  node        : $(sinfo -h -N -n "$NODE" -o '%N %T cpus=%c mem=%mMB gres=%G partition=%P')"
echo "  MaxArraySize: $(scontrol show config | awk -F'= ' '/^MaxArraySize/{print $2}')"
echo "  DefMemPerCPU: $(scontrol show config | awk -F'= ' '/^DefMemPerCPU/{print $2}')"
echo "  MinJobAge   : $(scontrol show config | awk -F'= ' '/^MinJobAge/{print $2}')"
echo "  JobRequeue  : $(scontrol show config | awk -F'= ' '/^JobRequeue/{print $2}')"
echo "  accounting  : $(scontrol show config | awk -F'= ' '/^AccountingStorageType/{print $2}')"
echo "  pid files   : $RUN_DIR/{$(IFS=,; echo "${DAEMONS[*]}")}.pid"
echo "  logs        : $LOG_DIR/"

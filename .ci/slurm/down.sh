#!/usr/bin/env bash
# Stop the single-node cluster started by .ci/slurm/up.sh: every daemon by its
# pid file under /run/hypergrid-slurm, in reverse start order. Tolerates
# daemons that are already stopped and stale pid files.
#
# Jobs still queued/running are cancelled first (this is a throwaway CI
# cluster) so no job step outlives slurmd; pass --keep-jobs to skip that.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"

keep_jobs=0
[ "${1:-}" = "--keep-jobs" ] && keep_jobs=1

if [ "$keep_jobs" = 0 ] && daemon_alive slurmctld && command -v squeue >/dev/null; then
    jobs="$(timeout 10 squeue -h -o '%A' -t PENDING,RUNNING,SUSPENDED,REQUEUED,CONFIGURING 2>/dev/null || true)"
    if [ -n "$jobs" ]; then
        echo "[slurm-down] cancelling $(echo "$jobs" | wc -l) job(s)"
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs 2>/dev/null || true
        # give slurmd up to 20 s to reap the job steps
        for _ in $(seq 40); do
            [ -z "$(timeout 5 squeue -h -o '%A' 2>/dev/null | head -1)" ] && break
            [ -z "$(timeout 5 squeue -h -o '%A' -t RUNNING,COMPLETING 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
fi

rc=0
for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    stop_daemon "${DAEMONS[$i]}" || rc=1
done
rm -f "$RUN_DIR/slurm-config.sha256"
[ "$rc" = 0 ] && echo "[slurm-down] all daemons stopped"
exit "$rc"

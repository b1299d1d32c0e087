# Sourced by .ci/run: `phase NAME COMMAND...` runs one phase of CI, prints its wall time when it ends, and adds it
# to the table that `phase_summary` prints (from the EXIT trap, so a failed run still says where its time went).
# Beside each wall time, how busy the machine's cores were (from /proc/stat, the whole machine: CI runs alone on
# it): a phase well under 100 % leaves cores idle that work of another phase could use.
PHASES_STARTED=$(date +%s)
PHASE_ROWS=()

cpu_ticks() {  # "busy total": the machine's CPU ticks since boot (the first line of /proc/stat; idle and iowait idle)
    local _cpu user nice system idle iowait rest
    read -r _cpu user nice system idle iowait rest </proc/stat 2>/dev/null || { echo "0 0"; return; }
    local irq softirq steal
    read -r irq softirq steal _ <<<"$rest"
    local busy=$(( user + nice + system + ${irq:-0} + ${softirq:-0} + ${steal:-0} ))
    echo "$busy $(( busy + idle + iowait ))"
}

PHASES_TICKS=$(cpu_ticks)

busy_share() {  # busy_share "BUSY0 TOTAL0": the percentage of CPU time busy since that reading
    local b0 t0 b1 t1
    read -r b0 t0 <<<"$1"
    read -r b1 t1 <<<"$(cpu_ticks)"
    if [ $(( t1 - t0 )) -gt 0 ]; then echo "$(( 100 * (b1 - b0) / (t1 - t0) ))%"; else echo "-"; fi
}

phase() {
    local name="$1" t0 rc=0 ticks
    shift
    t0=$(date +%s)
    ticks=$(cpu_ticks)
    echo "::: phase $name started at $(date -u +%H:%M:%S)"
    # A subshell with errexit of its own: a phase that is a shell function stops at its first failing command (errexit
    # would be off inside a function called as `f || ...`).
    set +e
    (set -e; "$@")
    rc=$?
    set -e
    local took=$(( $(date +%s) - t0 ))
    local busy
    busy=$(busy_share "$ticks")
    PHASE_ROWS+=("$(printf '%-22s %5d s  cpu %4s  %s' "$name" "$took" "$busy" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
    echo "::: phase $name took ${took} s, cores busy $busy (exit $rc)"
    return "$rc"
}

phase_summary() {
    echo "::: CI phases (wall time)"
    local row
    for row in "${PHASE_ROWS[@]}"; do echo ":::   $row"; done
    echo ":::   $(printf '%-22s %5d s  cpu %4s' total $(( $(date +%s) - PHASES_STARTED )) "$(busy_share "$PHASES_TICKS")")"
}

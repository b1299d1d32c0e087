# Sourced by .ci/run: `phase NAME COMMAND...` runs one phase of CI, prints its wall time when it ends, and adds it
# to the table that `phase_summary` prints (from the EXIT trap, so a failed run still says where its time went).
PHASES_STARTED=$(date +%s)
PHASE_ROWS=()

phase() {
    local name="$1" t0 rc=0
    shift
    t0=$(date +%s)
    echo "::: phase $name started at $(date -u +%H:%M:%S)"
    # A subshell with errexit of its own: a phase that is a shell function stops at its first failing command (errexit
    # would be off inside a function called as `f || ...`).
    set +e
    (set -e; "$@")
    rc=$?
    set -e
    local took=$(( $(date +%s) - t0 ))
    PHASE_ROWS+=("$(printf '%-22s %5d s  %s' "$name" "$took" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
    echo "::: phase $name took ${took} s (exit $rc)"
    return "$rc"
}

phase_summary() {
    echo "::: CI phases (wall time)"
    local row
    for row in "${PHASE_ROWS[@]}"; do echo ":::   $row"; done
    echo ":::   $(printf '%-22s %5d s' total $(( $(date +%s) - PHASES_STARTED )))"
}

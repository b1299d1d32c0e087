#!/usr/bin/env bash
# Stop the Prometheus that .ci/prometheus/up.sh started (by its pid file); tolerates one already stopped.
set -euo pipefail
PID_FILE=/run/hypergrid-prometheus/prometheus.pid
if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
    pid="$(cat "$PID_FILE")"
    kill "$pid"
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    echo "[prometheus-down] stopped (pid $pid)"
fi
rm -f "$PID_FILE"

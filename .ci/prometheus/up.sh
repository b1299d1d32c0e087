#!/usr/bin/env bash
# Start Debian's Prometheus for the tests in tests/trackers (pytest -m prometheus): it listens on
# 127.0.0.1:9090 and scrapes `assess status --serve` at 127.0.0.1:9464 every second. Stop it with down.sh.
#
# Idempotent: the package is installed when missing; a running server (live pid file) is left alone.
# Environment knobs (optional; the tests read the same two):
#   HYPERGRID_PROMETHEUS_URL          where Prometheus listens (default http://127.0.0.1:9090)
#   HYPERGRID_PROMETHEUS_TARGET_PORT  the scraped exporter's port (default 9464)
set -euo pipefail

URL="${HYPERGRID_PROMETHEUS_URL:-http://127.0.0.1:9090}"
LISTEN="${URL#http://}"
TARGET_PORT="${HYPERGRID_PROMETHEUS_TARGET_PORT:-9464}"
RUN_DIR=/run/hypergrid-prometheus
PID_FILE="$RUN_DIR/prometheus.pid"
log() { echo "[prometheus-up] $*"; }

if ! command -v prometheus >/dev/null; then
    log "installing Debian's prometheus"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
mkdir -p "$RUN_DIR/data"
if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
    log "already running (pid $(cat "$PID_FILE"))"
    exit 0
fi
cat > "$RUN_DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: hypergrid
    static_configs:
      - targets: ["127.0.0.1:$TARGET_PORT"]
YAML
rm -rf "$RUN_DIR/data" && mkdir -p "$RUN_DIR/data"
prometheus --config.file="$RUN_DIR/prometheus.yml" --storage.tsdb.path="$RUN_DIR/data" \
    --web.listen-address="$LISTEN" >"$RUN_DIR/prometheus.log" 2>&1 &
echo $! >"$PID_FILE"
for _ in $(seq 120); do
    if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$URL/-/ready" 2>/dev/null; then
        log "ready at $URL (pid $(cat "$PID_FILE")), scraping 127.0.0.1:$TARGET_PORT every 1 s"
        exit 0
    fi
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || break
    sleep 0.5
done
log "Prometheus did not become ready; its log:" >&2
tail -n 40 "$RUN_DIR/prometheus.log" >&2 || true
exit 1

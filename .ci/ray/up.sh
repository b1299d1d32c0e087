#!/usr/bin/env bash
# Start a local Ray head for the tests of hydra/launcher=ray (pytest -m ray): its GCS on 127.0.0.1:6379 (the tests'
# hydra.launcher.address=auto finds it), 2 declared GPUs (placement only: no real GPU is needed; a task renders on
# the CPU with the GPU ids Ray gave it recorded in run.json), 2 CPUs, and its job server (the dashboard) on
# 127.0.0.1:8265, which hydra.launcher.wait=false submits to. Stop it with down.sh.
#
# Idempotent: a running head is left alone. Needs the project's venv (ray comes with the `test` extra).
set -euo pipefail
cd "$(dirname "$0")/../.."
RAY=.venv/bin/ray
log() { echo "[ray-up] $*"; }

if "$RAY" status --address 127.0.0.1:6379 >/dev/null 2>&1; then
    log "already running at 127.0.0.1:6379"
    exit 0
fi
# a small object store: the tasks return a few JobReturns, and /dev/shm is shared with the tests
"$RAY" start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus=2 --num-cpus=2 \
    --object-store-memory=200000000 --dashboard-host=127.0.0.1 --dashboard-port=8265 --disable-usage-stats >/dev/null
for _ in $(seq 120); do
    if "$RAY" status --address 127.0.0.1:6379 2>/dev/null | grep -q "GPU"; then
        log "ready at 127.0.0.1:6379 (2 GPUs declared, 2 CPUs), job server at http://127.0.0.1:8265"
        exit 0
    fi
    sleep 1
done
log "the Ray head did not become ready; its log:" >&2
tail -n 40 /tmp/ray/session_latest/logs/gcs_server.out >&2 || true
exit 1

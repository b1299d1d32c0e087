#!/usr/bin/env bash
# Stop the local Ray head that up.sh started (and any worker it left).
cd "$(dirname "$0")/../.."
.venv/bin/ray stop --force >/dev/null 2>&1 || true

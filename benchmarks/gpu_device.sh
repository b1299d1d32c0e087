#!/usr/bin/env bash
# The device run on the lent GPU machine, as one command (docs/gpu.md, "On the lent machine"): the wheels that
# benchmarks/gpu_wheels.sh put in .whl/ (carried) installed beside the image's torch, then benchmarks/gpu.py, then
# what comes back: the results, the summary and the logs (the device tool returns at most 8 files from $OUT).
#
#   run(command="bash benchmarks/gpu_device.sh", carry=[".whl"], timeout_s=600)
#   PATH=/path/to/a/venv/bin:$PATH GPU_ARGS="--device cpu --scale tiny" bash benchmarks/gpu_device.sh   # its rehearsal
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
RUN=/tmp/gpu-run
DEADLINE=${GPU_DEADLINE_S:-480}  # of the command's 600 s: the install and the copies come before and after
mkdir -p "$OUT" && rm -rf "$RUN"  # a warm machine keeps the last run: this one starts clean
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "the carried wheels did not install: run benchmarks/gpu_wheels.sh here and carry .whl"; exit 2; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HYPERGRID_CACHE=/tmp/hypergrid-cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 benchmarks/gpu.py --out "$RUN" --deadline "$DEADLINE" ${GPU_ARGS:-} 2>&1 | tee "$OUT/console.txt"
rc=${PIPESTATUS[0]}
cp "$RUN/results.jsonl" "$RUN/summary.md" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$RUN" --exclude=outputs --exclude=sweeps . 2>/dev/null
exit "$rc"

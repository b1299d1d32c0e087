#!/usr/bin/env bash
# The wheels the lent GPU machine lacks, for `benchmarks/gpu.py` there (docs/gpu.md, "On the lent machine").
#
# Its image holds Python 3.12 with torch 2.11 (cu130), transformers, accelerate, numpy, scipy, pillow, matplotlib,
# jinja2, rich, tqdm, psutil and torchmetrics (/work/.library/device/KINDS.md), and nothing can be fetched there:
# what hypergrid needs beyond that travels as wheels in .whl/ (ignored by git; about 11 MB of the 64 MiB the device
# tool carries with the working tree), at the versions this project's venv tests with. torchao 0.18 is the release
# whose kernels load on torch >= 2.11.
#
#   bash benchmarks/gpu_wheels.sh      # here, with pip and the package registry: fills .whl/
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-python3 -m pip}
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir .whl
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d .whl \
    diffusers==0.42.1 importlib-metadata==9.1.0 hydra-core==1.3.8 omegaconf==2.3.1 hydra-submitit-launcher==1.2.0 \
    submitit==1.5.4 sqlite-utils==4.2.1 sqlite-fts4==1.0.3 click-default-group==1.2.4 click==8.5.1 torchao==0.18.0
# antlr4's runtime (omegaconf's grammar) is published as a source archive only: built here, pure Python
$PIP wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
ls -l .whl
du -sh .whl

#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the test suite four times on lavapipe, spirv-val checking every SPIR-V module
# (VULKAN_VALIDATE_SPIRV=1): as is; with the discrete-GPU staging path forced (VULKAN_FORCE_STAGING=1) and buffers over 4 KiB
# passed by device address (VULKAN_MAX_STORAGE_RANGE=4096), under validation with 3 commands per submission (VULKAN_BATCH=3:
# batch boundaries fall inside launches, staged copies and graphs); with the GLSL renderer under the Khronos validation layer
# with synchronisation validation at the default batch size (DEV=VULKAN:GLSL VULKAN_VALIDATION=1); and as the poorest
# conformant Vulkan 1.1 device under the validation layer (VULKAN_PROFILE=min VULKAN_VALIDATION=1: instance and device created
# for Vulkan 1.1, kernels in SPIR-V 1.3, no optional feature, the minimum limits; tests that need a missing feature skip naming
# it). Passes 2 and 4 also run with VULKAN_GUARD=1: a store outside its buffer fails the test. Any validation message fails the
# test. Then once more on each real driver scripts/drivers.sh fetched (SwiftShader; Mesa 25 lavapipe where the system's is older),
# under the validation layer, two test processes at a time. Extra arguments go to pytest. scripts/profiles.py runs every profile.
# Before the passes, ruff and mypy check the code (pyproject.toml's settings, tinygrad's own); either failing fails the script.
# Pass 2 sets VULKAN_REACH=0: buffers past the lowered range go by address even where lavapipe 22.3's measured cost sends them
# through windows and pieces (flag `reach`), so the address path is exercised; passes 1 and 3 take the measured choice.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] ruff, mypy"
.venv/bin/ruff check tinygrad_vk tests scripts
.venv/bin/mypy
DRIVERS=$(bash scripts/drivers.sh)
export VULKAN_VALIDATE_SPIRV=1
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@")
echo "[test] 1/4 default";                                                "${PYTEST[@]}"
echo "[test] 2/4 VULKAN_FORCE_STAGING=1 VULKAN_MAX_STORAGE_RANGE=4096 VULKAN_REACH=0 VULKAN_VALIDATION=1 VULKAN_BATCH=3 VULKAN_GUARD=1"
VULKAN_REACH=0 VULKAN_GUARD=1 VULKAN_FORCE_STAGING=1 VULKAN_MAX_STORAGE_RANGE=4096 VULKAN_VALIDATION=1 VULKAN_BATCH=3 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 3/4 DEV=VULKAN:GLSL VULKAN_VALIDATION=1";                    DEV=VULKAN:GLSL VULKAN_VALIDATION=1 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 4/4 VULKAN_PROFILE=min VULKAN_VALIDATION=1 VULKAN_GUARD=1"; VULKAN_PROFILE=min VULKAN_VALIDATION=1 VULKAN_GUARD=1 LP_NUM_THREADS=0 "${PYTEST[@]}"
for env in $DRIVERS; do
  echo "[test] $(basename "$env" .env): $(cat "$env") VULKAN_VALIDATION=1"
  env $(cat "$env") VULKAN_VALIDATION=1 "${PYTEST[@]}" -n 2
done

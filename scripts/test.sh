#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the test suite three times on lavapipe: as is; with the discrete-GPU staging path forced
# (VULKAN_FORCE_STAGING=1) and buffers over 4 KiB passed by device address (VULKAN_MAX_STORAGE_RANGE=4096), under validation
# with 3 commands per submission (VULKAN_BATCH=3: batch boundaries fall inside launches, staged copies and graphs); and under
# the Khronos validation layer with synchronisation validation at the default batch size (VULKAN_VALIDATION=1). Any validation
# message fails the test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@")
echo "[test] 1/3 default";                                                "${PYTEST[@]}"
echo "[test] 2/3 VULKAN_FORCE_STAGING=1 VULKAN_MAX_STORAGE_RANGE=4096 VULKAN_VALIDATION=1 VULKAN_BATCH=3"
VULKAN_FORCE_STAGING=1 VULKAN_MAX_STORAGE_RANGE=4096 VULKAN_VALIDATION=1 VULKAN_BATCH=3 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 3/3 VULKAN_VALIDATION=1";                                    VULKAN_VALIDATION=1 LP_NUM_THREADS=0 "${PYTEST[@]}"

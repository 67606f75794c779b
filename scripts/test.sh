#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the test suite four times on lavapipe: as is, with the discrete-GPU staging path
# forced (VULKAN_FORCE_STAGING=1), under the Khronos validation layer with synchronisation validation (VULKAN_VALIDATION=1),
# where any validation message fails the test, and as the poorest conformant Vulkan 1.2 device (VULKAN_PROFILE=min: no
# optional feature, the minimum limits; tests that need a missing feature skip naming it). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@")
echo "[test] 1/4 default";                     "${PYTEST[@]}"
echo "[test] 2/4 VULKAN_FORCE_STAGING=1";      VULKAN_FORCE_STAGING=1 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 3/4 VULKAN_VALIDATION=1";         VULKAN_VALIDATION=1 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 4/4 VULKAN_PROFILE=min";          VULKAN_PROFILE=min LP_NUM_THREADS=0 "${PYTEST[@]}"

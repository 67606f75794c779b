#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the test suite three times on lavapipe: as is (the default SPIR-V renderer), with the GLSL
# renderer and the discrete-GPU staging path forced (DEV=VULKAN:GLSL VULKAN_FORCE_STAGING=1), and under the Khronos validation
# layer with synchronisation validation (VULKAN_VALIDATION=1), where any validation message fails the test. spirv-val checks
# every SPIR-V module in all three (VULKAN_VALIDATE_SPIRV=1). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export VULKAN_VALIDATE_SPIRV=1
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@")
echo "[test] 1/3 default (SPIR-V renderer)";                 "${PYTEST[@]}"
echo "[test] 2/3 DEV=VULKAN:GLSL VULKAN_FORCE_STAGING=1";    DEV=VULKAN:GLSL VULKAN_FORCE_STAGING=1 LP_NUM_THREADS=0 "${PYTEST[@]}"
echo "[test] 3/3 VULKAN_VALIDATION=1";                       VULKAN_VALIDATION=1 LP_NUM_THREADS=0 "${PYTEST[@]}"

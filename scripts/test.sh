#!/usr/bin/env bash
# Set up (scripts/setup.sh), check the code with ruff and mypy (pyproject.toml's settings, tinygrad's own; either failing fails the
# script), then run the test suite once per pass below, two test processes at a time, spirv-val checking every SPIR-V module
# (VULKAN_VALIDATE_SPIRV=1). Four passes on the system's lavapipe:
#   default     as is
#   staging     the discrete-GPU staging path forced (VULKAN_FORCE_STAGING=1) and buffers over 4 KiB passed by device address
#               (VULKAN_MAX_STORAGE_RANGE=4096; VULKAN_REACH=0 so they go by address even where lavapipe 22.3's measured cost sends
#               them through windows and pieces, flag `reach`), 3 commands per submission (VULKAN_BATCH=3: batch boundaries fall
#               inside launches, staged copies and graphs)
#   glsl        the GLSL renderer (DEV=VULKAN:GLSL)
#   min         the poorest conformant Vulkan 1.1 device (VULKAN_PROFILE=min: instance and device created for Vulkan 1.1, kernels in
#               SPIR-V 1.3, no optional feature, the minimum limits; tests that need a missing feature skip naming it)
# then one on each real driver scripts/drivers.sh prints (SwiftShader; Mesa 25 lavapipe where the system's is older; Debian sid's
# Mesa 26.2 lavapipe, run in a sid root filesystem). Every pass but the default one runs under the Khronos validation layer with
# synchronisation validation (VULKAN_VALIDATION=1: any message fails the test); staging and min also with VULKAN_GUARD=1 (a store
# outside its buffer fails the test). All passes run, then a table says each one's driver, settings, counts and minutes; any
# failure fails the script. Extra arguments go to pytest. `scripts/test.sh --list` prints the passes, one per line, and runs none.
# scripts/profiles.py runs every profile.
set -euo pipefail
cd "$(dirname "$0")/.."
LIST=0; if [ "${1:-}" = --list ]; then LIST=1; shift; fi
if [ $LIST = 0 ]; then
  bash scripts/setup.sh
  echo "[test] ruff, mypy"
  .venv/bin/ruff check tinygrad_vk tests scripts
  .venv/bin/mypy
fi
# one .env file a line (its words select the driver); anything else would silently run a pass on the system's driver instead
mapfile -t DRIVERS < <(bash scripts/drivers.sh; echo "status $?")
[ "${DRIVERS[-1]}" = "status 0" ] || { echo "[test] scripts/drivers.sh failed (${DRIVERS[-1]})" >&2; exit 1; }
unset 'DRIVERS[-1]'
for f in "${DRIVERS[@]}"; do
  [[ $f == /*.env && -f $f ]] || { echo "[test] scripts/drivers.sh printed '$f', which is not an existing .env file: refusing to run a pass without its driver" >&2; exit 1; }
done

# name, the .env whose words select the pass's driver (- for the system's lavapipe), then its settings
PASSES=("default -"
        "staging - VULKAN_FORCE_STAGING=1 VULKAN_MAX_STORAGE_RANGE=4096 VULKAN_REACH=0 VULKAN_BATCH=3 VULKAN_VALIDATION=1 VULKAN_GUARD=1 LP_NUM_THREADS=0"
        "glsl - DEV=VULKAN:GLSL VULKAN_VALIDATION=1 LP_NUM_THREADS=0" "min - VULKAN_PROFILE=min VULKAN_VALIDATION=1 VULKAN_GUARD=1 LP_NUM_THREADS=0")
for f in "${DRIVERS[@]}"; do PASSES+=("$(basename "$f" .env) $f VULKAN_VALIDATION=1"); done
words() {   # the words before the test command: the .env's, then the settings
  local name env settings pre=()
  read -r name env settings <<< "$1"
  [ "$env" = - ] || read -ra pre < "$env"
  local w=("${pre[@]}" $settings)
  echo "${w[*]}"
}
if [ $LIST = 1 ]; then for p in "${PASSES[@]}"; do echo "${p%% *} $(words "$p")"; done; exit 0; fi

export VULKAN_VALIDATE_SPIRV=1
# lavapipe: one thread of its own per test process, where a pass does not run shaders inline (LP_NUM_THREADS=0): two processes
# then fill both cores, where its default of a thread per core oversubscribes them
export LP_NUM_THREADS=${LP_NUM_THREADS:-1}
PY=.venv/bin/python
ROWS=() FAILED=0
for p in "${PASSES[@]}"; do
  read -r name env settings <<< "$p"
  read -ra pre <<< "$(words "$p")"
  driver=$(env "${pre[@]}" $PY -c 'from tinygrad_vk.instance import instance; print(instance().devices[0].driver)' 2>&1 | tail -1)
  echo "[test] $name ($driver): ${pre[*]}"
  start=$SECONDS log=$(mktemp)
  rc=0; env "${pre[@]}" $PY -m pytest -q -p no:cacheprovider -n 2 --dist worksteal tests "$@" 2>&1 | tee "$log" || rc=$?
  counts=$(tail -n 3 "$log" | grep -oE '[0-9]+ (passed|failed|skipped|errors?)' | paste -sd, - | sed 's/,/, /g')
  rm -f "$log"
  [ $rc = 0 ] || FAILED=1
  ROWS+=("$(printf '%-13s %-44.44s %-30s %5.1f  %s' "$name" "$driver" "${counts:-no result}$([ $rc = 0 ] || echo ' FAILED')" \
            "$(((SECONDS - start) * 10 / 60))e-1" "$settings")")
done
printf '\n[test] %-13s %-44s %-30s %5s  %s\n' pass driver result min settings
printf '[test] %s\n' "${ROWS[@]}"
exit $FAILED

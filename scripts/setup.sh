#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for tinygrad_vk: the Vulkan loader, lavapipe, glslang, spirv-tools, the validation
# layer and clang (tinygrad computes unplaced tensors such as Tensor.arange on its CPU device), then a local .venv with
# tinygrad_vk installed editable (TINYGRAD_VK_VENV elsewhere: scripts/sid.sh's /opt/venv). Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libvulkan1 mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers clang)
python3 -m venv --help >/dev/null 2>&1 || PKGS+=(python3-venv python3-pip)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[setup] apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
VENV="${TINYGRAD_VK_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]"
# tinygrad's own test/test_tiny.py from the 0.14.0 sdist, for tests/test_upstream_tiny.py: fetched here (outside the checkout, never
# committed) so that the test run needs no network
TINY="${XDG_CACHE_HOME:-$HOME/.cache}/tinygrad_vk/tinygrad-0.14.0"
if [ ! -f "$TINY/test_tiny.py" ]; then
  mkdir -p "$TINY"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check tinygrad==0.14.0 --no-deps --no-binary :all: -d "$TINY"
  tar -xzf "$TINY/tinygrad-0.14.0.tar.gz" -C "$TINY" --strip-components=2 tinygrad-0.14.0/test/test_tiny.py
fi
echo "[setup] ready: $("$VENV/bin/python" -c 'import tinygrad, tinygrad_vk; print("tinygrad", tinygrad.__version__ if hasattr(tinygrad, "__version__") else "0.14.0")')"

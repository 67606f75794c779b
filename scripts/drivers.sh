#!/usr/bin/env bash
# The real Vulkan drivers tinygrad_vk is tested on besides the system's lavapipe, from Debian's own packages, unpacked into a cache
# outside the checkout (${XDG_CACHE_HOME:-~/.cache}/tinygrad_vk/drivers); the system's driver is never replaced. For each driver it
# writes <name>.env there: the words that select it before a command (VK_ICD_FILENAMES and LD_LIBRARY_PATH, or a runner), to run
# anything on it:
#   env $(cat ~/.cache/tinygrad_vk/drivers/swiftshader.env) python -m tinygrad_vk info
#   * swiftshader: Google's SwiftShader, the ICD Debian's chromium-common ships (/usr/lib/chromium/libvk_swiftshader.so)
#   * lavapipe25: Mesa 25 lavapipe, bookworm-backports' mesa-vulkan-drivers with its libdrm (Debian 12 only: on 13 it is the system's)
#   * lavapipe-sid: Debian sid's lavapipe (Mesa 26.2), which needs sid's C library: it runs in a sid root filesystem (scripts/sid.sh),
#     and its .env is one word, the command that runs what follows it there (root only; otherwise skipped, saying why)
# Prints the .env files it wrote, one per line, and nothing else on stdout: progress goes to stderr (scripts/test.sh runs a pass per
# line). Idempotent: a second run downloads nothing. Debian 12 (bookworm) and 13 (trixie) only.
set -euo pipefail
exec 3>&1 1>&2   # stdout is the list: only the .env lines go to it (fd 3), whatever the tools below print
. /etc/os-release
SRC="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tinygrad_vk/drivers"
case "${VERSION_CODENAME:-}" in
  bookworm) LVP25=(mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports libdrm-amdgpu1/bookworm-backports) ;;
  trixie) LVP25=() ;;   # Mesa 25 is the system's driver
  *) echo "[drivers] Debian 12 or 13 only (this is ${PRETTY_NAME:-unknown}): no extra drivers"; exit 0 ;;
esac
ROOT="$CACHE/$VERSION_CODENAME"
mkdir -p "$ROOT"
if [ ! -f "$ROOT/.unpacked" ]; then
  # a private apt state: Debian's archive for this release, read by apt-get download only (no install, no system sources touched)
  APT="$ROOT/apt"
  mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$ROOT/debs"
  KEY="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]"
  printf '%s\n' "deb $KEY http://deb.debian.org/debian $VERSION_CODENAME main" "deb $KEY http://deb.debian.org/debian $VERSION_CODENAME-updates main" \
    "deb $KEY http://deb.debian.org/debian $VERSION_CODENAME-backports main" "deb $KEY http://deb.debian.org/debian-security $VERSION_CODENAME-security main" \
    > "$APT/sources.list"
  O=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$APT/lists"
     -o "Dir::Cache=$APT/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  echo "[drivers] fetching chromium-common (SwiftShader) ${LVP25[*]:+and ${LVP25[*]} }into $ROOT"
  apt-get "${O[@]}" update -qq
  (cd "$ROOT/debs" && apt-get "${O[@]}" download -qq chromium-common "${LVP25[@]}")
  for d in "$ROOT"/debs/*.deb; do dpkg-deb -x "$d" "$ROOT/root"; done
  rm -rf "$ROOT/debs" "$APT"
  touch "$ROOT/.unpacked"
fi
echo "VK_ICD_FILENAMES=$ROOT/root/usr/lib/chromium/vk_swiftshader_icd.json" > "$CACHE/swiftshader.env"
echo "$CACHE/swiftshader.env" >&3
if [ ${#LVP25[@]} -gt 0 ]; then
  LIB="$(dirname "$(find "$ROOT/root/usr/lib" -name libvulkan_lvp.so | head -1)")"
  # the package's ICD names its library without a path: the unpacked one is named in full, or the loader would find the system's
  sed "s#\"libvulkan_lvp.so\"#\"$LIB/libvulkan_lvp.so\"#" "$ROOT/root/usr/share/vulkan/icd.d/lvp_icd.json" > "$ROOT/lvp_icd.json"
  echo "VK_ICD_FILENAMES=$ROOT/lvp_icd.json LD_LIBRARY_PATH=$LIB" > "$CACHE/lavapipe25.env"
  echo "$CACHE/lavapipe25.env" >&3
fi
# status 3: skipped where it cannot be built (the line why is on stderr); any other failure fails this script
rc=0; bash "$SRC/scripts/sid.sh" build || rc=$?
case $rc in
  0) echo "$SRC/scripts/sid.sh run" > "$CACHE/lavapipe-sid.env"; echo "$CACHE/lavapipe-sid.env" >&3 ;;
  3) ;;
  *) exit "$rc" ;;
esac

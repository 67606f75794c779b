#!/usr/bin/env bash
# Debian sid's lavapipe (Mesa 26.2: VK_KHR_cooperative_matrix) needs glibc 2.38+ and libLLVM 22, so it cannot be unpacked next to
# bookworm's libraries like Mesa 25: it runs inside a Debian sid root filesystem built from Debian's packages
# (../shared/design/drivers.md), cached at ${XDG_CACHE_HOME:-~/.cache}/tinygrad_vk/drivers/sid like the other drivers.
#   scripts/sid.sh build     build it once (debootstrap --variant=minbase sid, then sid's apt), then run scripts/setup.sh inside
#                            with the venv at /opt/venv (a second run installs nothing). Root on Debian only: elsewhere one line
#                            on stderr says why, nothing is built, and the exit status is 3.
#   scripts/sid.sh run CMD   run CMD (leading VAR=value words set variables) inside it, in a mount namespace of its own (its binds
#                            vanish with it), from the working directory: this checkout is bound at /src (where the venv's
#                            editable install points) and at its own path, with the venv over its .venv, so `.venv/bin/python` and
#                            `python` are sid's.
# scripts/drivers.sh calls build and writes lavapipe-sid.env, whose one word is this script's `run`.
set -euo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/tinygrad_vk/drivers/sid"
MIRROR=http://deb.debian.org/debian
# python3-venv: sid's python3 has no ensurepip without it; the rest scripts/setup.sh installs itself
PKGS=(python3 python3-venv ca-certificates)

bind() { mkdir -p "$ROOT$2" && mount --bind "$1" "$ROOT$2"; }
# the root's /proc, /sys and /dev, and the checkout, bound in this process's own mount namespace: nothing to unmount afterwards
enter() {
  mount --rbind /proc "$ROOT/proc"; mount --rbind /sys "$ROOT/sys"; mount --rbind /dev "$ROOT/dev"
  bind "$SRC" /src; bind "$SRC" "$SRC"
  case "$PWD" in / | "$SRC" | "$SRC"/*) ;; *) bind "$PWD" "$PWD" ;; esac
  if [ -d "$ROOT/opt/venv" ] && [ -d "$SRC/.venv" ]; then mount --bind "$ROOT/opt/venv" "$ROOT$SRC/.venv"; fi
  local vars=()
  while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do vars+=("$1"); shift; done
  # nothing of the host's libraries, drivers or venv inside; sid's own home and cache
  exec chroot "$ROOT" /usr/bin/env -u LD_LIBRARY_PATH -u VK_ICD_FILENAMES -u VK_DRIVER_FILES -u VK_LAYER_PATH -u VIRTUAL_ENV \
    -u PYTHONHOME -u PYTHONPATH HOME=/root XDG_CACHE_HOME=/root/.cache PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    "${vars[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "${PWD}" "$@"
}

why_not() {
  . /etc/os-release
  [ "$(id -u)" = 0 ] || { echo "not root (debootstrap, chroot and mount namespaces need it)"; return; }
  [ "${ID:-}" = debian ] || { echo "not Debian (this is ${PRETTY_NAME:-unknown})"; return; }
  unshare --mount --propagation private true >/dev/null 2>&1 || echo "no mount namespace here (unshare --mount failed)"
}

build() {
  if [ -n "$(why_not)" ]; then echo "[drivers] lavapipe-sid (Debian sid's Mesa) skipped: $(why_not)" >&2; exit 3; fi
  if [ ! -f "$ROOT/.built" ]; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    echo "[drivers] building a Debian sid root filesystem for its Mesa (about 1.5 GB) in $ROOT" >&2
    rm -rf "$ROOT"
    debootstrap --variant=minbase sid "$ROOT" "$MIRROR" >&2
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    # sid's Release file may be past its Valid-Until date; this machine's own CA certificates for pip inside (a proxy's, say)
    echo 'Acquire::Check-Valid-Until "false";' > "$ROOT/etc/apt/apt.conf.d/90tinygrad_vk"
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ROOT/usr/local/share/ca-certificates/" \;
    bash "$0" run apt-get update -qq >&2
    bash "$0" run DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
    bash "$0" run update-ca-certificates >/dev/null
    touch "$ROOT/.built"
  fi
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  # setup.sh from /src, where the editable install points whichever checkout is bound there
  (cd "$SRC" && bash "$0" run TINYGRAD_VK_VENV=/opt/venv bash /src/scripts/setup.sh) >&2
}

case "${1:-}" in
  build) build ;;
  run) shift; [ -x "$ROOT/bin/sh" ] || { echo "[sid] no root filesystem at $ROOT: run scripts/sid.sh build" >&2; exit 1; }
       exec unshare --mount --propagation private bash "$0" _enter "$@" ;;
  _enter) shift; enter "$@" ;;
  *) echo "usage: scripts/sid.sh build | run [VAR=value ...] CMD [ARGS...]" >&2; exit 2 ;;
esac

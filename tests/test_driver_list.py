"""The README's test command on a fresh machine: scripts/drivers.sh, run against an empty cache with every download and root step
stubbed (no network, nothing mounted), prints exactly the .env files it wrote, and scripts/test.sh loops over exactly those drivers.
Before, the progress line drivers.sh printed on stdout while fetching became a dozen extra passes on the system's lavapipe."""
import os, pathlib, subprocess
import pytest
from util import ROOT

OS = dict(line.split("=", 1) for line in pathlib.Path("/etc/os-release").read_text().split("\n") if "=" in line)
CODENAME = OS.get("VERSION_CODENAME", "").strip('"')
pytestmark = pytest.mark.skipif(CODENAME not in ("bookworm", "trixie"), reason="scripts/drivers.sh fetches from Debian 12 or 13 only")
SID = os.getuid() == 0 and OS.get("ID") == "debian"   # scripts/sid.sh builds its root filesystem as root on Debian only

# each stub logs its call and says something on stdout, as apt-get and debootstrap do: none of it may reach drivers.sh's stdout
STUBS = {
  "apt-get": """dl=0; for p in "$@"; do [ $dl = 1 ] && [[ $p != -* ]] && touch "${p%%/*}.deb"; [ "$p" = download ] && dl=1; done""",
  "dpkg-deb": """case "$(basename "$2")" in
    chromium-common.deb) mkdir -p "$3/usr/lib/chromium" && touch "$3/usr/lib/chromium/vk_swiftshader_icd.json" ;;
    mesa-vulkan-drivers.deb) mkdir -p "$3/usr/lib/x86_64-linux-gnu" "$3/usr/share/vulkan/icd.d" \
      && touch "$3/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" \
      && echo '{"ICD": {"library_path": "libvulkan_lvp.so"}}' > "$3/usr/share/vulkan/icd.d/lvp_icd.json" ;;
  esac""",
  "debootstrap": """d="${@: -2:1}"; mkdir -p "$d/etc/apt/apt.conf.d" "$d/bin"; touch "$d/bin/sh"; chmod +x "$d/bin/sh" """,
  "unshare": """while [[ $1 == -* ]]; do [[ $1 == --propagation ]] && shift; shift; done; exec "$@" """,
  "mount": "", "chroot": "",
}

@pytest.fixture
def stubbed(tmp_path):
  bin_ = tmp_path / "bin"
  bin_.mkdir()
  for name, body in STUBS.items():
    (bin_ / name).write_text(f'#!/bin/bash\necho "{name} $*" >> {tmp_path}/calls\necho "{name}: working"\n{body}\nexit 0\n')
    (bin_ / name).chmod(0o755)
  return tmp_path, {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "cache")}

def run(args, env) -> subprocess.CompletedProcess:
  return subprocess.run(["bash", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)

def test_drivers_prints_only_env_files(stubbed):
  tmp, env = stubbed
  for attempt in ("empty cache", "cached"):
    r = run(["scripts/drivers.sh"], env)
    assert r.returncode == 0, r.stderr
    cache = tmp / "cache" / "tinygrad_vk" / "drivers"
    want = [cache / f"{n}.env" for n in ["swiftshader"] + ["lavapipe25"] * (CODENAME == "bookworm") + ["lavapipe-sid"] * SID]
    assert r.stdout.splitlines() == [str(p) for p in want], (attempt, r.stdout)
  assert "debootstrap" in (tmp / "calls").read_text() or not SID, "the stubs were not used"
  if not SID: assert "lavapipe-sid (Debian sid's Mesa) skipped:" in r.stderr
  assert (cache / "swiftshader.env").read_text().split() == [f"VK_ICD_FILENAMES={cache}/{CODENAME}/root/usr/lib/chromium/vk_swiftshader_icd.json"]
  if SID: assert (cache / "lavapipe-sid.env").read_text().split() == [f"{ROOT}/scripts/sid.sh", "run"]

def test_test_sh_runs_a_pass_per_driver(stubbed):
  tmp, env = stubbed
  r = run(["scripts/test.sh", "--list"], env)
  assert r.returncode == 0, r.stderr
  cache = tmp / "cache" / "tinygrad_vk" / "drivers"
  drivers = ["swiftshader"] + ["lavapipe25"] * (CODENAME == "bookworm") + ["lavapipe-sid"] * SID
  passes = [line.split() for line in r.stdout.splitlines()]
  assert [p[0] for p in passes] == ["default", "staging", "glsl", "min", *drivers], r.stdout
  for p in passes[4:]: assert p[1:] == (cache / f"{p[0]}.env").read_text().split() + ["VULKAN_VALIDATION=1"]

def test_test_sh_refuses_a_word_that_is_not_an_env_file(tmp_path):
  # a drivers.sh that prints progress on stdout, as before
  (tmp_path / "scripts").mkdir()
  (tmp_path / "scripts" / "test.sh").write_text((pathlib.Path(ROOT) / "scripts" / "test.sh").read_text())
  (tmp_path / "scripts" / "drivers.sh").write_text(f"echo '[drivers] fetching chromium-common'\necho {tmp_path}/x.env\n")
  (tmp_path / "x.env").write_text("VK_ICD_FILENAMES=/nonexistent.json\n")
  r = subprocess.run(["bash", str(tmp_path / "scripts" / "test.sh"), "--list"], capture_output=True, text=True, timeout=60)
  assert r.returncode != 0 and r.stdout == "", (r.stdout, r.stderr)
  assert "'[drivers] fetching chromium-common', which is not an existing .env file" in r.stderr, r.stderr

"""tinygrad's own test/test_tiny.py (shipped in the tinygrad 0.14.0 sdist) on DEV=VULKAN. scripts/setup.sh fetches it outside the
checkout (never committed), so the test run needs no network."""
import os, subprocess, sys
import pytest

TEST_TINY = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad_vk", "tinygrad-0.14.0", "test_tiny.py")

def test_tiny_passes_on_vulkan():
  if not os.path.exists(TEST_TINY): pytest.skip(f"{TEST_TINY} is missing: scripts/setup.sh fetches it from the tinygrad 0.14.0 sdist")
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", TEST_TINY], capture_output=True, text=True,
                     cwd=os.path.dirname(TEST_TINY), env={**os.environ, "DEV": "VULKAN"})
  assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
  # the only skips allowed are the ones DEV=CPU has too: the image tests, which need the CL/QCOM image path
  skips = [l for l in r.stdout.splitlines() if l.startswith("SKIPPED")]
  assert all("image" in l.lower() for l in skips), "\n".join(skips)

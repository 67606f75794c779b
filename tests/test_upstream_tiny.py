"""tinygrad's own test/test_tiny.py (shipped in the tinygrad 0.14.0 sdist) on DEV=VULKAN. Fetched at test time, never committed."""
import glob, os, subprocess, sys, tarfile
from util import ROOT

CACHE = os.path.join(ROOT, ".upstream")

def fetch_test_tiny() -> str:
  path = os.path.join(CACHE, "test_tiny.py")
  if os.path.exists(path): return path
  os.makedirs(CACHE, exist_ok=True)
  subprocess.run([sys.executable, "-m", "pip", "download", "-q", "tinygrad==0.14.0", "--no-deps", "--no-binary", ":all:", "-d", CACHE],
                 check=True, capture_output=True, timeout=300)
  with tarfile.open(glob.glob(os.path.join(CACHE, "tinygrad-0.14.0.tar.gz"))[0]) as tf:
    src = tf.extractfile("tinygrad-0.14.0/test/test_tiny.py").read()
  with open(path, "wb") as f: f.write(src)
  return path

def test_tiny_passes_on_vulkan():
  path = fetch_test_tiny()
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", path], capture_output=True, text=True,
                     timeout=1200, cwd=os.path.dirname(path), env={**os.environ, "DEV": "VULKAN"})
  assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
  # the only skips allowed are the ones DEV=CPU has too: the image tests, which need the CL/QCOM image path
  skips = [l for l in r.stdout.splitlines() if l.startswith("SKIPPED")]
  assert all("image" in l.lower() for l in skips), "\n".join(skips)

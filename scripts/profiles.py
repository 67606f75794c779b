#!/usr/bin/env python3
"""tests/ and tinygrad's backend suite under every VULKAN_PROFILE (caps.PROFILES), and the markdown results table for
docs/capabilities.md: one column per profile, cells passed/failed/skipped/errors.

  python scripts/profiles.py                                  # every profile, tests/ and the whole upstream suite (hours)
  python scripts/profiles.py --profiles min,pi5 --no-upstream
  python scripts/profiles.py --upstream test/backend/test_ops.py test/test_tiny.py    # an upstream subset

tests/ run with the validation layer on (VULKAN_VALIDATION=1), LP_NUM_THREADS=0. The upstream suite needs TG_SRC (an upstream
tree, see ../shared/tools/upstream_suite/README.md) and VENV (a venv from its setup.sh with this package installed); each full
run is wrapped in `flock /tmp/upstream.lock`, so only one full suite runs at a time on the machine; each profile has its own
tinygrad cache.
"""
import argparse, json, os, re, subprocess, sys, tempfile, time
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tinygrad_vk.caps import PROFILES

SUITE = os.environ.get("UPSTREAM_SUITE", os.path.join(ROOT, "..", "shared", "tools", "upstream_suite"))

def cell(p:int, f:int, s:int, e:int) -> str: return f"{p}/{f}/{s}/{e}"

def run_tests(profile:str, args:list[str]) -> tuple[str, float]:
  t0 = time.time()
  r = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *(args or ["tests"])],
                     cwd=ROOT, capture_output=True, text=True,
                     env={**os.environ, "VULKAN_PROFILE": profile, "VULKAN_VALIDATION": "1", "LP_NUM_THREADS": "0"})
  last = (r.stdout.strip().splitlines() or [""])[-1]
  n = {k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}", last)) else 0 for k in ("passed", "failed", "skipped", "error")}
  log = os.path.join(tempfile.gettempdir(), f"profiles-tests-{profile}.log")
  open(log, "w").write(r.stdout + r.stderr)
  for l in r.stdout.splitlines():
    if l.startswith(("FAILED", "ERROR")): print(f"[profiles] {profile}: {l}", file=sys.stderr)
  print(f"[profiles] {profile}: pytest output in {log}", file=sys.stderr)
  return cell(n["passed"], n["failed"], n["skipped"], n["error"]), time.time() - t0

def run_upstream(profile:str, files:list[str]) -> tuple[str, float]:
  out = tempfile.mkdtemp(prefix=f"upstream-{profile}-")
  env = {**os.environ, "VULKAN_PROFILE": profile, "LP_NUM_THREADS": "0", "RESULTS": out,
         "CACHE_DIR": os.path.join(tempfile.gettempdir(), "upstream-cache-profiles", profile)}
  lock = [] if files else ["flock", "/tmp/upstream.lock"]   # one full suite at a time on the machine; a file selection needs no lock
  subprocess.run([*lock, os.path.join(SUITE, "run.sh"), "VULKAN", *files], env=env, capture_output=True, text=True)
  try: s = json.load(open(os.path.join(out, "summary.json")))
  except (OSError, ValueError): return f"no result ({out})", 0.0
  t = s["totals"]
  return cell(t["passed"], t["failed"], t["skipped"], t["errors"]), s.get("wall_s", 0.0)

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated (default: all)")
  ap.add_argument("--tests", nargs="*", default=None, help="pytest arguments instead of tests/")
  ap.add_argument("--upstream", nargs="*", default=None, help="upstream test files instead of the whole suite")
  ap.add_argument("--no-tests", action="store_true")
  ap.add_argument("--no-upstream", action="store_true")
  args = ap.parse_args()
  profiles = args.profiles.split(",")
  rows: dict[str, dict[str, str]] = {}
  for p in profiles:
    if not args.no_tests:
      res, wall = run_tests(p, args.tests or [])
      rows.setdefault("tests/ (VULKAN_VALIDATION=1)", {})[p] = res
      rows.setdefault("tests/ wall time", {})[p] = f"{wall:.0f} s"
    if not args.no_upstream:
      res, wall = run_upstream(p, args.upstream or [])
      rows.setdefault("upstream backend suite" + (f" ({' '.join(args.upstream)})" if args.upstream else ""), {})[p] = res
      rows.setdefault("upstream wall time", {})[p] = f"{wall:.0f} s"
    print(f"[profiles] {p}: " + ", ".join(f"{k} {v[p]}" for k, v in rows.items()), file=sys.stderr, flush=True)
  print("| | " + " | ".join(f"`{p}`" for p in profiles) + " |\n| --- |" + " --- |" * len(profiles))
  for k, v in rows.items(): print(f"| {k} | " + " | ".join(v.get(p, "") for p in profiles) + " |")
  return 0

if __name__ == "__main__": sys.exit(main())

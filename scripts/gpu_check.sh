#!/usr/bin/env bash
# On a machine with a real GPU and its Vulkan driver, one command: the round trip, the tests (stopping at the first failure) and
# scripts/bench.py --quick twice, tensor cores forced on (VULKAN_COOPMAT=1) and off (VULKAN_DISABLE=coopmat), then one summary
# (device, tensor core shapes, each step's result and time, the VULKAN bench rows side by side). Each step has a time limit so the
# whole stays under 10 minutes. Logs go to $GPU_CHECK_OUT (default: a new temporary folder). Needs the .venv of scripts/setup.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${GPU_CHECK_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
[ -x "$PY" ] || { echo "[gpu_check] no $PY: run scripts/setup.sh first" >&2; exit 1; }
export DEV=VULKAN VULKAN_VALIDATE_SPIRV=1
ROWS=() FAILED=0
step() {   # name, time limit (s), command...: its log in $OUT/<name>.log, a summary row
  local name=$1 limit=$2 start=$SECONDS rc=0; shift 2
  echo "[gpu_check] $name: $*"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1 || rc=$?
  local last; last=$(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-100)
  [ $rc = 0 ] || FAILED=1
  ROWS+=("$(printf '%-10s %-8s %4ds  %s' "$name" "$([ $rc = 0 ] && echo ok || { [ $rc = 124 ] && echo TIMEOUT || echo "FAIL $rc"; })" \
            $((SECONDS - start)) "$last")")
}
"$PY" -m tinygrad_vk info > "$OUT/info.log" 2>&1
step roundtrip 60 "$PY" scripts/roundtrip.py
# the limits (seconds) add up to under 10 minutes; a slower host may raise them (a 2-core host with lavapipe needs ~190 s for the
# tests and more than 110 s for each bench)
step tests "${TESTS_S:-270}" "$PY" -m pytest -x -q -p no:cacheprovider -n "${JOBS:-4}" tests
step bench_tc "${BENCH_S:-140}" env VULKAN_COOPMAT=1 "$PY" scripts/bench.py --quick --json "$OUT/bench_tc.json"
step bench_fma "${BENCH_S:-140}" env VULKAN_DISABLE=coopmat "$PY" scripts/bench.py --quick --json "$OUT/bench_fma.json"

echo; echo "[gpu_check] summary (logs in $OUT)"
"$PY" - "$OUT/info.log" "$OUT/bench_tc.json" "$OUT/bench_fma.json" "${ROWS[@]}" <<'EOF'
import json, sys
key = ""
for line in open(sys.argv[1]).read().splitlines():   # info's device, driver and tensor cores rows
  if line.startswith("  ") and line[2:3] != " ": key = line.split()[0]
  if key in ("device", "driver", "tensor"): print(line)
for row in sys.argv[4:]: print("  " + row)
def rows(p):
  try: return json.load(open(p))["results"].get("VULKAN", {})
  except (OSError, ValueError, KeyError): return {}
tc, fma = rows(sys.argv[2]), rows(sys.argv[3])
print(f"  {'VULKAN bench row':<28} {'coopmat on':>14} {'coopmat off':>14}  ratio")
for k in sorted(set(tc) | set(fma)):
  a, b = tc.get(k, {}), fma.get(k, {})
  f = lambda r: f"{r['med']:.4g} {r.get('unit', '')}" if "med" in r else "n/a"
  print(f"  {k:<28} {f(a):>14} {f(b):>14}  {a['med'] / b['med']:.2f}x" if "med" in a and "med" in b and b["med"] else
        f"  {k:<28} {f(a):>14} {f(b):>14}")
EOF
exit $FAILED

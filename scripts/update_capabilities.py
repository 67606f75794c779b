#!/usr/bin/env python3
"""Regenerate the device tables in docs/capabilities.md and README.md from `python -m tinygrad_vk info --markdown`.

Only the text between the `<!-- info:begin -->` and `<!-- info:end -->` markers changes; the rest is written by hand.
"""
import os, re, subprocess, sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def main() -> int:
  table = subprocess.run([sys.executable, "-m", "tinygrad_vk", "info", "--markdown"], capture_output=True, text=True, check=True).stdout
  for doc in ("docs/capabilities.md", "README.md"):
    path = os.path.join(ROOT, doc)
    text = open(path).read()
    new = re.sub(r"(<!-- info:begin -->\n).*?(<!-- info:end -->)", lambda m: m.group(1) + table + m.group(2), text, flags=re.S)
    if new == text and "<!-- info:begin -->" not in text: print(f"{doc}: no markers", file=sys.stderr); return 1
    open(path, "w").write(new)
  return 0

if __name__ == "__main__": sys.exit(main())

#!/usr/bin/env python3
"""Regenerate the device tables in docs/capabilities.md and README.md from `python -m tinygrad_vk info --markdown`, and in
docs/capabilities.md the same under each VULKAN_PROFILE.

Only the text between the `<!-- info:begin -->` and `<!-- info:end -->` markers (`<!-- info:<profile>:begin -->`, ...) changes;
the rest is written by hand.
"""
import os, re, subprocess, sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def info(profile:str) -> str:
  return subprocess.run([sys.executable, "-m", "tinygrad_vk", "info", "--markdown"], capture_output=True, text=True, check=True,
                        env={**os.environ, "VULKAN_PROFILE": profile}).stdout

def main() -> int:
  tables = {"": info(""), "min:": info("min")}
  for doc, keys in (("docs/capabilities.md", tables), ("README.md", [""])):
    path = os.path.join(ROOT, doc)
    text = open(path).read()
    for key in keys:
      begin, end = f"<!-- info:{key}begin -->", f"<!-- info:{key}end -->"
      if begin not in text:
        print(f"{doc}: no {begin} marker", file=sys.stderr)
        return 1
      text = re.sub(f"({re.escape(begin)}\n).*?({re.escape(end)})", lambda m: m.group(1) + tables[key] + m.group(2), text, flags=re.S)
    open(path, "w").write(text)
  return 0

if __name__ == "__main__": sys.exit(main())

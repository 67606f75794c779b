"""Keep a kernel under a driver's budget of loop iterations per invocation.

Mesa's llvmpipe (lavapipe) decrements one counter per shader invocation at every loop back-edge, of every loop, and exits all
loops once it reaches zero (gallivm LP_MAX_TGSI_LOOP_ITERATIONS = 65535): a longer reduction is silently truncated. When the
rendered kernel may exceed the budget, its innermost loops are unrolled k times in the GLSL text (each copy of the body in its
own block, the loop variable redeclared there), which divides their back-edges by k. A kernel that cannot be brought under the
budget that way is refused with a CompileError, never run wrong.
"""
from __future__ import annotations
import math, re
from dataclasses import dataclass, field
from tinygrad.device import CompileError

FOR = re.compile(r"^(\s*)for \((\w+) (\w+) = 0; \3 < (.+); \3\+\+\) \{$")
MAX_UNROLLED_LINES = 4096   # beyond this the shader gets too big to compile in reasonable time: refuse instead

@dataclass
class Loop:
  start: int                  # line index of the `for`
  end: int = -1               # line index of its closing brace
  size: int = 1               # trip count bound
  mult: int = 1               # how many times the loop is entered (product of the enclosing trip counts)
  children: list[Loop] = field(default_factory=list)

def find_loops(lines:list[str], sizes:dict[str, int]) -> list[Loop]:
  """Every counted `for` loop, with its closing line and nesting. Unbounded `for (;;)` loops are not counted."""
  loops, stack, depth_stack, depth = [], [], [], 0
  for i, line in enumerate(lines):
    if (m := FOR.match(line)) is not None:
      lp = Loop(i, size=sizes.get(m.group(3), 1), mult=math.prod(l.size for l in stack) if stack else 1)
      if stack: stack[-1].children.append(lp)
      loops.append(lp)
      stack.append(lp); depth_stack.append(depth)
    depth += line.count("{") - line.count("}")
    while depth_stack and depth <= depth_stack[-1]:
      stack.pop().end = i
      depth_stack.pop()
  return loops

def back_edges(loops:list[Loop], unroll:dict[int, int]) -> int:
  """Upper bound of loop back-edges one invocation executes (entries included, for the exit test of each loop)."""
  return sum(l.mult * (math.ceil(l.size / unroll.get(l.start, 1)) + 1) for l in loops if unroll.get(l.start, 1) < l.size)

def unroll(lines:list[str], lp:Loop, k:int) -> list[str]:
  m = FOR.match(lines[lp.start])
  assert m is not None
  ind, ty, name, n = m.groups()
  body = lines[lp.start+1:lp.end]
  guard = lp.size % k != 0
  out = [] if k >= lp.size else [f"{ind}for ({ty} {name}_u = 0; {name}_u < {n}; {name}_u += {k}) {{"]
  for j in range(min(k, lp.size)):
    idx = str(j) if k >= lp.size else f"{name}_u+{j}"
    out.append(f"{ind}  {{ {ty} {name} = {idx};" + (f" if ({name} < {n}) {{" if guard and k < lp.size else ""))
    out += ["  " + l for l in body]
    out.append(f"{ind}  }}" + ("}" if guard and k < lp.size else ""))
  if k < lp.size: out.append(f"{ind}}}")
  return out

def fit_loop_budget(kernel:list[str], sizes:dict[str, int], budget:int, name:str) -> list[str]:
  """The kernel body, with innermost loops unrolled as needed so an invocation stays under `budget` back-edges."""
  lines = [l for k in kernel for l in k.split("\n")]
  loops = find_loops(lines, sizes)
  if not budget or back_edges(loops, {}) < budget: return kernel
  inner = [l for l in loops if not l.children]
  fixed = back_edges([l for l in loops if l.children], {}) + sum(l.mult for l in inner)
  need = sum(l.mult * l.size for l in inner)
  k = math.ceil(need / room) if (room := budget - 1 - fixed) > 0 else 0
  while 0 < k < max(l.size for l in inner) and back_edges(loops, {l.start: k for l in inner}) >= budget: k += 1
  if k == 0 or back_edges(loops, {l.start: k for l in inner}) >= budget or k * sum(l.end - l.start for l in inner) > MAX_UNROLLED_LINES:
    raise CompileError(f"VULKAN: kernel {name} runs up to {back_edges(loops, {})} loop iterations per invocation, and this driver stops "
                       f"every loop of an invocation after {budget} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS); "
                       "unrolling cannot bring it under that. Use a GPU driver, or split the work (e.g. smaller reductions).")
  for lp in sorted(inner, key=lambda l: -l.start):   # bottom up, so earlier line numbers stay valid
    lines[lp.start:lp.end+1] = unroll(lines, lp, k)
  return lines

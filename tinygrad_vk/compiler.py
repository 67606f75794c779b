"""Kernel source -> SPIR-V, one compiler per renderer. Runs in tinygrad's compile workers: never opens Vulkan.

GLSLCompiler: glslang, then spirv-val on every module. SPIRVCompiler: assembles the SPIR-V renderer's text in-process (no
compiler binary); spirv-val only under VULKAN_VALIDATE_SPIRV=1 (the tests and CI turn it on).
"""
from __future__ import annotations
import functools, hashlib, os, pathlib, re, shutil, struct, subprocess, tempfile
from tinygrad.device import Compiler, CompileError
from tinygrad.helpers import getenv, diskcache_get, diskcache_put
from tinygrad_vk.caps import SpirvTarget, SPIRV_1_5, env_text, env_number
from tinygrad_vk.spv import OPCODES, CAPABILITIES, ENUMS, SPIRV_MAGIC, spirv_instructions, string_words, add_nan_preserve, add_notes

FORMAT_VERSION = 1         # bump when the SPIR-V we produce for the same source changes

def _tool(name:str, pkg:str) -> str:
  if (path := shutil.which(name)) is None: raise RuntimeError(f"VULKAN: {name} not found on PATH; install {pkg}")
  return path

@functools.cache
def glslang_version() -> str:
  out = subprocess.run([_tool("glslangValidator", "glslang-tools"), "--version"], capture_output=True, text=True).stdout
  return m.group(1) if (m := re.search(r"Glslang Version: (\S+)", out)) else "unknown"

def numbered(src:str, lines:set[int]|None=None, ctx:int=3) -> str:
  """The source with line numbers; with `lines`, only those lines and `ctx` around them, the culprits marked with '>'."""
  src_lines = src.splitlines()
  keep = set(range(1, len(src_lines)+1)) if not lines else {n for l in lines for n in range(l-ctx, l+ctx+1) if 1 <= n <= len(src_lines)}
  out, prev = [], 0
  for n in sorted(keep):
    if prev and n != prev+1: out.append("   ...")
    out.append(f"{'>' if lines and n in lines else ' '}{n:4d} | {src_lines[n-1]}")
    prev = n
  return "\n".join(out)

def cached_spirv(table:str, src:str) -> bytes|None:
  """The disk cache's SPIR-V for src, or None when there is none or it is damaged. An entry is (SHA-256, module), and is used
  only when the digest matches and the module is well formed: a damaged module can crash the driver, and a flipped operand bit
  passes any structural check."""
  try: digest, spv = diskcache_get(table, src)
  except Exception: return None   # no entry (None), an entry written in another format, or one that does not unpickle
  if not isinstance(spv, bytes) or hashlib.sha256(spv).digest() != digest: return None
  try: spirv_instructions(spv)
  except ValueError: return None
  return spv

NOTE = re.compile(r"^\s*(?://|;)\s*(tinygrad_vk\.\S+)\s*$", re.M)   # what a renderer noted for the runtime (spv.py KernelMeta)

def validate(spv:bytes, src:str, target:SpirvTarget):
  v = subprocess.run([_tool("spirv-val", "spirv-tools"), "--target-env", target.env, "-"], input=spv, capture_output=True)
  if v.returncode != 0: raise CompileError(f"spirv-val rejected the SPIR-V of this kernel:\n{v.stderr.decode().strip()}\n{numbered(src)}")

class VulkanCompiler(Compiler):
  def compile_cached(self, src:str) -> bytes:
    # tinygrad's Compiler.compile_cached, with entries checked before use (cached_spirv)
    if self.cachekey is None or (lib := cached_spirv(self.cachekey, src)) is None:
      assert not getenv("ASSERT_COMPILE"), f"tried to compile with ASSERT_COMPILE set\n{src}"
      lib = self.compile(src)
      if self.cachekey is not None: diskcache_put(self.cachekey, src, (hashlib.sha256(lib).digest(), lib))
    if (dump := env_text("VULKAN_DUMP")): dump_kernel(dump, src, lib)
    return lib
  def disassemble(self, lib:bytes): print(disassemble(lib))

class GLSLCompiler(VulkanCompiler):
  def __init__(self, nan_widths:tuple[int, ...]=(), target:SpirvTarget=SPIRV_1_5):
    self.nan_widths, self.target = nan_widths, target
    super().__init__(f"compile_glsl_{glslang_version()}_{target.env}_nan{'.'.join(map(str, nan_widths))}_v{FORMAT_VERSION}")
  def compile(self, src:str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinygrad_vk_") as d:
      out = os.path.join(d, "k.spv")
      r = subprocess.run([_tool("glslangValidator", "glslang-tools"), "-V", "--target-env", self.target.env, "--stdin", "-S", "comp", "-o", out],
                         input=src.encode(), capture_output=True)
      if r.returncode != 0:
        # glslang before 16 prints its errors on stdout, 16 on stderr
        text = (r.stdout + r.stderr).decode(errors="replace")
        msg = "\n".join(l for l in text.splitlines() if l.startswith(("ERROR", "WARNING")) or "error" in l.lower())
        bad = {int(m.group(1)) for m in re.finditer(r"ERROR: [^:\n]*:(\d+):", msg)}
        raise CompileError(f"glslang failed to compile the GLSL kernel:\n{msg}\n{numbered(src, bad)}")
      spv = add_notes(add_nan_preserve(pathlib.Path(out).read_bytes(), self.nan_widths), NOTE.findall(src))
    validate(spv, src, self.target)
    return spv

# ---- the SPIR-V renderer's text (spirv-as syntax) -> SPIR-V words. Only what the renderer writes: one instruction a line,
# `%name = OpX ...` or `OpX ...`, operands are %ids, integers, hex/decimal floats (typed by OpConstant's result type), "strings"
# and the enumerant names above. ids are numbered in order of first appearance, as spirv-as does.
NO_RESULT_TYPE = ("OpLabel", "OpExtInstImport")   # and every OpType*
HEXFLOAT = re.compile(r"(-?)0x1(?:\.([0-9a-f]+))?p([+-]?\d+)$")
FLOAT_BITS = {16: (10, 15, "<e"), 32: (23, 127, "<f"), 64: (52, 1023, "<d")}   # mantissa bits, exponent bias, struct format

def _literal(tok:str, ty:tuple[str, int]) -> list[int]:
  """A number of a numeric type as words. Hex floats are how the renderer spells inf and NaN (as spirv-dis does); a signed
  integer narrower than 32 bits is sign-extended, as SPIR-V asks."""
  kind, width = ty
  if kind != "f": bits = int(tok, 0) & ((1 << 64) - 1 if width == 64 else 0xffffffff)
  elif (m := HEXFLOAT.match(tok)):
    mbits, bias, _ = FLOAT_BITS[width]
    frac = m.group(2) or ""
    bits = int(m.group(1) == "-") << (width - 1) | (int(m.group(3)) + bias) << mbits | int(frac or "0", 16) << (mbits - 4 * len(frac))
  else: bits = int.from_bytes(struct.pack(FLOAT_BITS[width][2], float(tok)), "little")
  return [bits & 0xffffffff, bits >> 32] if width == 64 else [bits]

def assemble(text:str, version:int=SPIRV_1_5.word) -> bytes:
  ids: dict[str, int] = {}
  numeric: dict[int, tuple[str, int]] = {}   # id of each OpTypeInt/OpTypeFloat -> (f|s|u, width)
  words: list[int] = []
  for line in text.splitlines():
    if not (toks := line.split()) or toks[0][0] == ";": continue
    res, toks = (toks[0], toks[2:]) if toks[0][0] == "%" else (None, toks)
    name, ops = toks[0], []
    rid = ids.setdefault(res, len(ids) + 1) if res is not None else 0
    if name not in OPCODES: raise CompileError(f"SPIR-V assembler: unknown instruction {name!r} in: {line.strip()}")
    for i, t in enumerate(toks[1:]):
      if t[0] == "%": ops.append(ids.setdefault(t, len(ids) + 1))
      elif t[0] == '"': ops.extend(string_words(t[1:-1]))
      elif name == "OpSpecConstantOp" and i == 1: ops.append(OPCODES["Op" + t])   # the operation, named without its Op
      elif t[0].isdigit() or t[0] == "-":
        ops.extend(_literal(t, numeric[ops[0]]) if name in ("OpConstant", "OpSpecConstant") and i == 1 else [int(t, 0) & 0xffffffff])
      elif (e := (CAPABILITIES if name == "OpCapability" else ENUMS).get(t)) is not None: ops.append(e)
      elif all(f in ENUMS for f in t.split("|")): ops.append(sum(ENUMS[f] for f in t.split("|")))   # a mask: A|B
      else: raise CompileError(f"SPIR-V assembler: unknown operand {t!r} in: {line.strip()}")
    if res is not None:
      if name.startswith("OpType") or name in NO_RESULT_TYPE:
        ops.insert(0, rid)
        if name in ("OpTypeInt", "OpTypeFloat"): numeric[rid] = ("f" if name == "OpTypeFloat" else "su"[ops[2] == 0], ops[1])
      else: ops.insert(1, rid)
    words += [(len(ops) + 1) << 16 | OPCODES[name], *ops]
  return struct.pack(f"<{len(words) + 5}I", SPIRV_MAGIC, version, 0, len(ids) + 1, 0, *words)

class SPIRVCompiler(VulkanCompiler):
  def __init__(self, target:SpirvTarget=SPIRV_1_5):
    self.validate, self.target = bool(env_number("VULKAN_VALIDATE_SPIRV", 0)), target
    # the same bytes either way, but a module cached unvalidated must be checked when validation is asked for
    super().__init__(f"compile_spirv_{target.env}_v{FORMAT_VERSION}{'_val' if self.validate else ''}")
  def compile(self, src:str) -> bytes:
    spv = add_notes(assemble(src, self.target.word), NOTE.findall(src))
    if self.validate: validate(spv, src, self.target)
    return spv

def disassemble(lib:bytes) -> str:
  if shutil.which("spirv-dis") is None: return "(spirv-dis is not installed: install spirv-tools for a disassembly)"
  r = subprocess.run(["spirv-dis", "-"], input=lib, capture_output=True)
  return r.stdout.decode() if r.returncode == 0 else f"spirv-dis failed: {r.stderr.decode()}"

def dump_kernel(folder:str, src:str, lib:bytes) -> pathlib.Path:
  """VULKAN_DUMP=<folder>: <kernel>_<hash>.spv (SPIR-V binary) and .spvasm (readable SPIR-V: the SPIR-V renderer's own text, which
  spirv-as turns into the same .spv; for the GLSL renderer spirv-dis's disassembly), plus .comp (the GLSL) for the GLSL renderer."""
  name = m.group(1) if (m := re.search(r"^(?://|;.*) kernel: (\S+)", src, re.M)) else "kernel"
  base = pathlib.Path(folder) / f"{name}_{hashlib.sha256(src.encode()).hexdigest()[:8]}"
  base.parent.mkdir(parents=True, exist_ok=True)
  if (glsl := src.startswith("#version")): base.with_suffix(".comp").write_text(src)
  base.with_suffix(".spv").write_bytes(lib)
  base.with_suffix(".spvasm").write_text(disassemble(lib) if glsl else src)
  return base

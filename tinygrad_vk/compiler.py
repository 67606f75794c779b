"""GLSL -> SPIR-V with glslang, every module checked by spirv-val. Runs in tinygrad's compile workers: never opens Vulkan."""
from __future__ import annotations
import functools, hashlib, os, pathlib, re, shutil, struct, subprocess, tempfile
from tinygrad.device import Compiler, CompileError
from tinygrad.helpers import getenv, diskcache_get, diskcache_put

TARGET_ENV = "vulkan1.2"   # SPIR-V 1.5: float controls are core, no extension needed
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

# SPIR-V: SignedZeroInfNanPreserve is capability 4466 and execution mode 4461 (SPV_KHR_float_controls, core in SPIR-V 1.4)
OP_CAPABILITY, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_TYPE_FLOAT = 17, 15, 16, 22
CAP_NAN_PRESERVE, MODE_NAN_PRESERVE = 4466, 4461
SPIRV_MAGIC = 0x07230203

def spirv_instructions(spv:bytes) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
  """The module's words, and (word position, opcode, words) of every instruction after the 5-word header. ValueError when the
  module is not well formed: a whole number of words, the magic number, every instruction 1 or more words and inside the module."""
  if len(spv) % 4 or len(spv) < 24: raise ValueError(f"{len(spv)} bytes is not a SPIR-V module")
  words = list(struct.unpack(f"<{len(spv)//4}I", spv))
  if words[0] != SPIRV_MAGIC: raise ValueError(f"bad SPIR-V magic number 0x{words[0]:08x}")
  insts, i = [], 5
  while i < len(words):
    if not 0 < (n := words[i] >> 16) <= len(words) - i: raise ValueError(f"SPIR-V instruction at word {i} has word count {n}")
    insts.append((i, words[i] & 0xffff, words[i:i+n]))
    i += n
  return words, insts

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

def add_nan_preserve(spv:bytes, widths:tuple[int, ...]) -> bytes:
  """Declare SignedZeroInfNanPreserve for every float width the module uses and the device honours. glslang's
  GL_EXT_spirv_intrinsics keeps only one execution mode per mode id, so a kernel using f32 and f16 needs this patch."""
  words, insts = spirv_instructions(spv)
  used = {w[2] for _, op, w in insts if op == OP_TYPE_FLOAT} & set(widths)
  entry = next((w for _, op, w in insts if op == OP_ENTRY_POINT), None)
  if not used or entry is None: return spv
  last_cap = max(pos + len(w) for pos, op, w in insts if op == OP_CAPABILITY)
  entry_end = next(pos + len(w) for pos, op, w in insts if op == OP_ENTRY_POINT)
  modes = [x for wd in sorted(used) for x in ((4 << 16) | OP_EXECUTION_MODE, entry[2], MODE_NAN_PRESERVE, wd)]
  words = words[:last_cap] + [(2 << 16) | OP_CAPABILITY, CAP_NAN_PRESERVE] + words[last_cap:entry_end] + modes + words[entry_end:]
  return struct.pack(f"<{len(words)}I", *words)

class GLSLCompiler(Compiler):
  def __init__(self, nan_widths:tuple[int, ...]=()):
    self.nan_widths = nan_widths
    super().__init__(f"compile_glsl_{glslang_version()}_{TARGET_ENV}_nan{'.'.join(map(str, nan_widths))}_v{FORMAT_VERSION}")

  def compile(self, src:str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinygrad_vk_") as d:
      out = os.path.join(d, "k.spv")
      r = subprocess.run([_tool("glslangValidator", "glslang-tools"), "-V", "--target-env", TARGET_ENV, "--stdin", "-S", "comp", "-o", out],
                         input=src.encode(), capture_output=True)
      if r.returncode != 0:
        msg = "\n".join(l for l in r.stdout.decode(errors="replace").splitlines() if l.startswith(("ERROR", "WARNING")) or "error" in l.lower())
        bad = {int(m.group(1)) for m in re.finditer(r"ERROR: [^:\n]*:(\d+):", msg)}
        raise CompileError(f"glslang failed to compile the GLSL kernel:\n{msg}\n{numbered(src, bad)}")
      spv = add_nan_preserve(pathlib.Path(out).read_bytes(), self.nan_widths)
      pathlib.Path(out).write_bytes(spv)
      v = subprocess.run([_tool("spirv-val", "spirv-tools"), "--target-env", TARGET_ENV, out], capture_output=True, text=True)
      if v.returncode != 0: raise CompileError(f"spirv-val rejected the SPIR-V of this kernel:\n{v.stderr.strip()}\n{numbered(src)}")
    return spv

  def compile_cached(self, src:str) -> bytes:
    # tinygrad's Compiler.compile_cached, with entries checked before use (cached_spirv)
    if self.cachekey is None or (lib := cached_spirv(self.cachekey, src)) is None:
      assert not getenv("ASSERT_COMPILE"), f"tried to compile with ASSERT_COMPILE set\n{src}"
      lib = self.compile(src)
      if self.cachekey is not None: diskcache_put(self.cachekey, src, (hashlib.sha256(lib).digest(), lib))
    if (dump := getenv("VULKAN_DUMP", "")): dump_kernel(dump, src, lib)
    return lib

  def disassemble(self, lib:bytes): print(disassemble(lib))

def disassemble(lib:bytes) -> str:
  r = subprocess.run([_tool("spirv-dis", "spirv-tools"), "-"], input=lib, capture_output=True)
  return r.stdout.decode() if r.returncode == 0 else f"spirv-dis failed: {r.stderr.decode()}"

def dump_kernel(folder:str, src:str, lib:bytes) -> pathlib.Path:
  """VULKAN_DUMP=<folder>: <kernel>_<hash>.comp (GLSL), .spv (SPIR-V binary), .spvasm (disassembly)."""
  name = m.group(1) if (m := re.search(r"^// kernel: (\S+)", src, re.M)) else "kernel"
  base = pathlib.Path(folder) / f"{name}_{hashlib.sha256(src.encode()).hexdigest()[:8]}"
  base.parent.mkdir(parents=True, exist_ok=True)
  base.with_suffix(".comp").write_text(src)
  base.with_suffix(".spv").write_bytes(lib)
  base.with_suffix(".spvasm").write_text(disassemble(lib))
  return base

"""The `vulkan` package's cffi handles plus the few helpers every runtime module needs.

We call `lib` directly with structs made by `new`: the package's Python wrappers build each struct through several layers of
Python, which costs tens of microseconds per call on the launch path.
"""
import functools
from typing import Any

try:
  import vulkan as vk
  from vulkan._vulkan import ffi, lib as lib   # lib: re-exported, the package calls Vulkan through it
except OSError as e:  # the package dlopens libvulkan at import
  raise RuntimeError("VULKAN: no Vulkan loader (libvulkan.so.1) found; install libvulkan1 and a driver "
                     "(mesa-vulkan-drivers gives lavapipe on any CPU)") from e

NULL = ffi.NULL
# the `vulkan` package gives the error codes that extensions added a positive value (VK_ERROR_OUT_OF_POOL_MEMORY = 1000069000):
# every VkResult error is negative
def _result(name:str) -> int: return -abs(getattr(vk, name)) if name.startswith("VK_ERROR_") else getattr(vk, name)
_RESULTS = {_result(n): n for n in dir(vk) if n.startswith(("VK_ERROR_", "VK_NOT_READY", "VK_TIMEOUT", "VK_INCOMPLETE"))
            and isinstance(getattr(vk, n), int)}
ERROR_OUT_OF_POOL_MEMORY, ERROR_FRAGMENTED_POOL = _result("VK_ERROR_OUT_OF_POOL_MEMORY"), _result("VK_ERROR_FRAGMENTED_POOL")
OOM = (vk.VK_ERROR_OUT_OF_HOST_MEMORY, vk.VK_ERROR_OUT_OF_DEVICE_MEMORY)

class VulkanError(RuntimeError): pass
def result_name(res:int) -> str: return _RESULTS.get(res, str(res))

def check(res:int|None, what:str) -> int|None:
  if res is None or res >= 0: return res   # VK_SUCCESS and the positive status codes (VK_NOT_READY, VK_TIMEOUT, ...)
  msg = f"{what} failed: {result_name(res)}"
  if res in OOM: raise MemoryError(msg)
  raise VulkanError(msg)

def new(ctype:str, **fields) -> Any:
  """ffi.new of a Vulkan struct; sType is filled in from the struct name."""
  if "sType" not in fields and (stype := _stype(ctype)) is not None: fields["sType"] = stype
  return ffi.new(ctype + "*", fields)

@functools.cache
def _stype(ctype:str) -> int|None:
  if not any(f == "sType" for f, _ in ffi.typeof(ctype).fields): return None
  # VkPhysicalDeviceVulkan12Features -> VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES
  name, out = ctype[2:], []
  for i, ch in enumerate(name):
    if ch.isupper() and i and (not name[i-1].isupper() or (i+1 < len(name) and name[i+1].islower())): out.append("_")
    elif ch.isdigit() and i and not name[i-1].isdigit() and name[i-1] != "_": out.append("_")
    out.append(ch.upper())
  key = ("VK_STRUCTURE_TYPE_" + "".join(out)).replace("VULKAN_1", "VULKAN_1_").replace("VULKAN_1__", "VULKAN_1_")
  if (val := getattr(vk, key, None)) is None: raise KeyError(f"no {key} for {ctype}: pass sType=")
  return val

def enumerate_(fn, ctype:str, *args, **fields) -> list:   # the two-call idiom: ask for the count, then fill an array (of `fields`)
  cnt = ffi.new("uint32_t*")
  check(fn(*args, cnt, NULL), "enumerate")
  arr = ffi.new(f"{ctype}[]", [fields] * cnt[0] if fields else cnt[0])
  check(fn(*args, cnt, arr), "enumerate")
  return [arr[i] for i in range(cnt[0])]

def cstr(x) -> str: return ffi.string(x).decode(errors="replace")
def version_str(v:int) -> str: return f"{v >> 22}.{(v >> 12) & 0x3ff}.{v & 0xfff}"

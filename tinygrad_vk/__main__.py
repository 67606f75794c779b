"""python -m tinygrad_vk info [--markdown]: what every Vulkan device here can do, and what tinygrad_vk makes of it."""
import argparse, shutil, sys
from tinygrad.helpers import size_to_str as size
from tinygrad_vk.vk import version_str
from tinygrad_vk.probe import measure
from tinygrad_vk.caps import DTYPE_RULES, FLAGS, LIMIT_NAMES, dtype_support, apply_profile, spirv_target, env_text

def mem_flags(f:int) -> str:
  names = ["DEVICE_LOCAL", "HOST_VISIBLE", "HOST_COHERENT", "HOST_CACHED", "LAZILY_ALLOCATED", "PROTECTED"]
  return "|".join(n for i, n in enumerate(names) if f & (1 << i)) or "-"

def profile_changes(phys) -> list[str]:
  """What VULKAN_PROFILE turned off or lowered on this device."""
  real = phys.real_caps()
  prof = apply_profile(real, env_text("VULKAN_PROFILE"))
  out = [f"{FLAGS[f]}" for f in FLAGS if f in real and f not in prof]
  def fmt(k, v): return f"{v // 10}.{v % 10}" if k == "vk" else v
  return out + [f"{name} {fmt(k, getattr(real, k))} -> {fmt(k, getattr(prof, k))}" for k, name in LIMIT_NAMES.items()
                if getattr(real, k) != getattr(prof, k)]

def unsupported(phys, caps) -> list[str]:
  out, prof, own = [], apply_profile(phys.real_caps(), env_text("VULKAN_PROFILE")), phys.caps()
  for flag, what in FLAGS.items():
    # reach is a choice, not a capability: without it buffers past the range go by address, the faster way there
    if flag not in caps and flag != "reach": out.append(f"no {what}" + (" (VULKAN_PROFILE)" if flag in phys.flags() and flag not in prof else
                                                    " (VULKAN_DISABLE)" if flag in prof and flag not in own else
                                                    " (another device of VULKAN_DEVICES has not)" if flag in own else ""))
  if caps.maxloop: out.append(f"at most {caps.maxloop} loop passes per SIMD vector of invocations (the driver's loop limiter, measured: "
                              "llvmpipe before Mesa 25.0): longer reductions are spread over the workgroup; a long loop that is not a reduction "
                              f"into registers, or a reduction of more than {caps.wginv} x {caps.maxloop} passes per invocation, is refused")
  if "reach" in caps: out.append(f"loads by address measured {measure(phys).address_cost:.1f}x as slow as through a descriptor (probe.py): "
                                  "buffers past maxStorageBufferRange go in windows and pieces as without bufferDeviceAddress")
  if "bda" not in caps: out.append(f"a buffer over maxStorageBufferRange ({size(caps.range)}) goes in pieces of workgroups or through "
                                    f"several windows (renderer/abi.py); refused where they need more than {caps.bufs} descriptors")
  out += [f"views must sit at a multiple of their element size inside minStorageBufferOffsetAlignment ({caps.align} B)" +
          (" (types packed in 32-bit words: at any byte)" if any(dtype_support(n, caps) == "packed" for n in DTYPE_RULES) else ""),
          "float4 accesses are real vec4 loads/stores only where the view offset keeps them aligned (a pipeline variant otherwise packs scalars)",
          "sin/cos use tinygrad's decomposition: Vulkan bounds sin only on [-pi, pi]",
          "one compute queue, no asynchronous transfer queue", "Tensor.from_blob (external host memory) is not supported"]
  if not caps.flags & {"nan32"}: out.append("NaN/Inf/signed zero not guaranteed by the driver: isnan uses a bit test")
  return out

def tensor_cores(phys, caps) -> str|list[str]:
  """The cooperative matrix shapes (M x N x K, A/B type -> C type), and whether tinygrad gets them as tensor cores."""
  from tinygrad_vk.renderer.coopmat import COMPONENT, tensor_cores
  if not phys.coop_shapes: return "none (no VK_KHR_cooperative_matrix shape at subgroup scope)"
  names = {v: repr(d)[7:] for v, d in COMPONENT.items()}
  shapes = [f"{m}x{n}x{k} {names.get(a, a)} -> {names.get(c, c)}" for m, n, k, a, c in zip(*[iter(phys.coop_shapes)] * 5)]
  if "coopmat" in caps: state = f"on: {len(tensor_cores(caps))} as tinygrad tensor cores of {caps.sg} threads (VULKAN_DISABLE=coopmat off)"
  else: state = (f"off: a WMMA measured {measure(phys).coop_speedup:.2f}x the speed of FMAs (probe.py; VULKAN_COOPMAT=1 forces it on)"
                 if measure(phys).coop_speedup else "off (VULKAN_COOPMAT=0, VULKAN_DISABLE or VULKAN_PROFILE)")
  return shapes + [state]

def describe(dev_idx:int, phys) -> list[tuple[str, str|list[str]]]:
  """(property, value) rows; a list value is one item a line (markdown: joined by '; ', as the items may contain ';' themselves)"""
  from tinygrad_vk.instance import DEVICE_TYPES, PORTABILITY_SUBSET, instance
  from tinygrad_vk.memory import BUDGET_EXT, HEAP_SHARE
  caps, lim = instance().caps(phys), phys.limits
  rows: list[tuple[str, str|list[str]]] = [
    ("device", f"VULKAN:{dev_idx} = {phys.name} ({DEVICE_TYPES.get(phys.type, phys.type)}, enumeration index {phys.index})"),
    ("driver", phys.driver), ("Vulkan API", f"{caps.vk // 10}.{caps.vk % 10} in use (the device: {version_str(phys.api_version)})"),
    ("kernels", spirv_target(caps).name)]
  if PORTABILITY_SUBSET in phys.extensions: rows.append(("portability", f"{PORTABILITY_SUBSET} enabled (a non-conformant layered driver)"))
  if (spec := env_text("VULKAN_PROFILE")):
    rows += [("profile", f"VULKAN_PROFILE={spec}"), ("turned off by the profile", profile_changes(phys) or "nothing")]
  rows += [(f"memory heap {i}", f"{size(s)}{' DEVICE_LOCAL' if f & 1 else ''}") for i, (s, f) in enumerate(phys.heaps)]
  rows += [(f"memory type {t.index}", f"heap {t.heap}: {mem_flags(t.flags)}") for t in phys.memory_types]
  rows += [("maxStorageBufferRange", size(caps.range)), ("maxPushConstantsSize", f"{caps.pc} B"),
           ("maxComputeWorkGroupSize", str(caps.wgsize)), ("maxComputeWorkGroupInvocations", str(caps.wginv)),
           ("maxComputeWorkGroupCount", f"{caps.wgcount} (x is split past it: up to 2^31-1 workgroups)"),
           ("maxComputeSharedMemorySize", size(caps.smem)), ("subgroup size", str(phys.subgroup_size)),
           ("maxPerStageDescriptorStorageBuffers", str(caps.bufs)), ("minStorageBufferOffsetAlignment", f"{caps.align} B"),
           ("max buffer size", size(phys.max_buffer)), ("maxMemoryAllocationSize", size(phys.max_alloc)),
           ("maxMemoryAllocationCount", f"{caps.allocs} (buffers are suballocated from a few blocks)"),
           ("heap budget", BUDGET_EXT if BUDGET_EXT in phys.extensions else f"{HEAP_SHARE:.0%} of each heap (no {BUDGET_EXT})"),
           ("timestamps", f"{phys.timestamp_bits} bits, {lim['timestampPeriod']} ns/tick"), ("tensor cores", tensor_cores(phys, caps))]
  groups: dict[str, list[str]] = {}
  for name in DTYPE_RULES: groups.setdefault(dtype_support(name, caps), []).append(name)
  from tinygrad_vk.device import RENDERERS
  what = {"SPIRV": "in-process, no compiler binary", "GLSL": f"glslang-tools {'installed' if shutil.which('glslangValidator') else 'not installed'}"}
  names = [r.__name__.upper().removesuffix("RENDERER") for r in RENDERERS]
  rows += [("renderers", ", ".join(f"{n} ({what[n]}{'; the default' if i == 0 else ''}; DEV=VULKAN:{n})" for i, n in enumerate(names)))]
  rows += [(f"dtypes {k}", ", ".join(v)) for k, v in sorted(groups.items())]
  refused = [f"{n}: {DTYPE_RULES[n][2]}" for n in groups.get("refused", [])]
  rows += [("refused because", refused)] if refused else []
  rows += [("not supported", unsupported(phys, caps))]
  return rows

def main():
  ap = argparse.ArgumentParser(prog="python -m tinygrad_vk", description=__doc__)
  ap.add_argument("command", choices=["info"])
  ap.add_argument("--markdown", action="store_true", help="markdown tables (docs/capabilities.md is made with this)")
  args = ap.parse_args()
  try:
    from tinygrad_vk.instance import instance
    inst = instance()
  except RuntimeError as e:
    print(e, file=sys.stderr)
    return 1
  if not args.markdown:
    print(f"{len(inst.all)} Vulkan device(s); VULKAN:n uses {', '.join(p.name for p in inst.devices)} "
          f"(VULKAN_DEVICES={env_text('VULKAN_DEVICES')})")
  for i, phys in enumerate(inst.devices):
    rows = describe(i, phys)
    if args.markdown:
      print(f"### VULKAN:{i}: {phys.name}\n\n| property | value |\n| --- | --- |")
      for k, v in rows: print(f"| {k} | {v if isinstance(v, str) else '; '.join(v)} |")
      print()
    else:
      print()
      for k, v in rows:
        for j, item in enumerate([v] if isinstance(v, str) else v): print(f"  {k if j == 0 else '':36s} {item}")
  return 0

if __name__ == "__main__": sys.exit(main())

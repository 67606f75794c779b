"""What a driver does but does not report, measured by one tiny kernel per driver version and kept in tinygrad's disk cache.

* The loop budget: Mesa's llvmpipe before 25.0 ends every loop of an invocation after 65535 passes in total without a word
  (gallivm's loop limiter, removed by Mesa commit ac0f643d4b03 "gallivm: Remove loop limiting", first released in 25.0.0,
  https://docs.mesa3d.org/relnotes/25.0.0.html). No property reports it, so a loop of LOOP_PASSES passes counts what runs.
* Whether float32 denormals survive arithmetic. No driver here reports shaderDenormPreserveFloat32 or ...FlushToZeroFloat32, so
  either may happen: lavapipe keeps them, SwiftShader flushes them.
* What a load by buffer device address costs beside one through a descriptor, where the device has bufferDeviceAddress: llvmpipe
  in Mesa 22.3 turns each global (by-address) load into a loop over the SIMD lanes, a branch on the lane's mask and a scalar load
  each (gallivm lp_bld_nir_soa.c emit_load_global), ~10x the cost of its storage-buffer load; Mesa 25's lavapipe costs the same
  either way. No property says which, so ADDR_KERNEL times the same loads both ways (abi.py then reaches buffers past
  maxStorageBufferRange through windows and pieces where the address ones are over ADDR_SLOW times slower: caps.FLAGS "reach").
* What a cooperative matrix MulAdd costs beside the FMAs it stands for, where the device has VK_KHR_cooperative_matrix: lavapipe
  (Mesa 26.2) runs it on the CPU's vector units lane by lane (nir_lower_cooperative_matrix), slower than plain FMAs; a GPU's
  matrix units are many times faster. COOP_KERNEL times the same multiply-adds both ways (caps.FLAGS "coopmat").
The kernel runs on a VkDevice of its own, before tinygrad_vk opens the real one, so that `Caps` are whole from the start.
"""
from __future__ import annotations
import functools, struct, time
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING
from tinygrad.helpers import diskcache_get, diskcache_put
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import Caps, spirv_target
from tinygrad_vk.compiler import assemble
from tinygrad_vk.memory import USAGE_ADDRESS, ALLOCATE_ADDRESS
from tinygrad_vk.program import REQUIRE_FULL_SUBGROUPS
if TYPE_CHECKING: from tinygrad_vk.instance import PhysicalDevice

VERSION = 4                  # bump when the kernel or what is read from it changes: the disk cache keys on it
LOOP_PASSES = (1 << 17) + 7  # past llvmpipe's 65535
ONE, DENORMAL = 0x3f800000, 0x00400000   # float32 bits: 1.0, 2^-127

@dataclass(frozen=True)
class Measured:
  loop_limit: int    # passes a loop may make, 0: unbounded
  denorm32: bool     # a float32 denormal times 1.0 is itself
  address_cost: float = 0.0   # a load by address's time over a load through a descriptor's (ADDR_KERNEL), 0: not measured
  coop_speedup: float = 0.0   # the FMAs' time over the cooperative matrices' (COOP_KERNEL), 0: not measured

# the probe kernels' one storage buffer of words at binding 0: its decorations, then the types it needs
BUFFER = """OpDecorate %arr ArrayStride 4
OpMemberDecorate %S 0 Offset 0
OpDecorate %S Block
OpDecorate %buf DescriptorSet 0
OpDecorate %buf Binding 0
%void = OpTypeVoid
%fn = OpTypeFunction %void
%bool = OpTypeBool
%uint = OpTypeInt 32 0
%float = OpTypeFloat 32
%arr = OpTypeRuntimeArray %uint
%S = OpTypeStruct %arr
%pS = OpTypePointer StorageBuffer %S
%pu = OpTypePointer StorageBuffer %uint
%buf = OpVariable %pS StorageBuffer
"""

# words[0] = n; words[1] = passes of a loop of n; words[4] = words[2] * words[3] (floats)
KERNEL = """OpCapability Shader
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main"{interface}
OpExecutionMode %main LocalSize 1 1 1
""" + BUFFER + "".join(f"%c{i} = OpConstant %uint {i}\n" for i in range(5)) + """%main = OpFunction %void None %fn
%entry = OpLabel
%p0 = OpAccessChain %pu %buf %c0 %c0
%n = OpLoad %uint %p0
OpBranch %head
%head = OpLabel
%i = OpPhi %uint %c0 %entry %next %cont
OpLoopMerge %merge %cont None
OpBranch %cond
%cond = OpLabel
%more = OpULessThan %bool %i %n
OpBranchConditional %more %cont %merge
%cont = OpLabel
%next = OpIAdd %uint %i %c1
OpBranch %head
%merge = OpLabel
%p1 = OpAccessChain %pu %buf %c0 %c1
OpStore %p1 %i
%p2 = OpAccessChain %pu %buf %c0 %c2
%db = OpLoad %uint %p2
%d = OpBitcast %float %db
%p3 = OpAccessChain %pu %buf %c0 %c3
%ob = OpLoad %uint %p3
%o = OpBitcast %float %ob
%m = OpFMul %float %d %o
%mb = OpBitcast %uint %m
%p4 = OpAccessChain %pu %buf %c0 %c4
OpStore %p4 %mb
OpReturn
OpFunctionEnd
"""

# words[0] = n; every invocation sums 4 words a pass for n passes from words[128:128+4096] into words[64 + its index]: by
# descriptor (binding 0) or by the address in the push constants, the loads alike otherwise
ADDR_KERNEL = """OpCapability Shader
{caps}OpMemoryModel {model} GLSL450
OpEntryPoint GLCompute %main "main" %lid{interface}
OpExecutionMode %main LocalSize 64 1 1
OpDecorate %lid BuiltIn LocalInvocationId
OpDecorate %arr ArrayStride 4
OpMemberDecorate %S 0 Offset 0
OpDecorate %S Block
{decorate}%void = OpTypeVoid
%fn = OpTypeFunction %void
%bool = OpTypeBool
%uint = OpTypeInt 32 0
%arr = OpTypeRuntimeArray %uint
%S = OpTypeStruct %arr
%v3 = OpTypeVector %uint 3
%pin = OpTypePointer Input %v3
%lid = OpVariable %pin Input
""" + "".join(f"%c{i} = OpConstant %uint {i}\n" for i in (0, 1, 64, 1023, 128, 1152, 2176, 3200)) + """{types}%main = OpFunction %void None %fn
%entry = OpLabel
{base}%l3 = OpLoad %v3 %lid
%l = OpCompositeExtract %uint %l3 0
%pn = OpAccessChain %pu %buf %c0 %c0
%n = OpLoad %uint %pn{aligned}
OpBranch %head
%head = OpLabel
%i = OpPhi %uint %c0 %entry %next %cont
%s = OpPhi %uint %c0 %entry %s4 %cont
OpLoopMerge %merge %cont None
OpBranch %cond
%cond = OpLabel
%more = OpULessThan %bool %i %n
OpBranchConditional %more %body %merge
%body = OpLabel
%t = OpIMul %uint %i %c64
%t2 = OpIAdd %uint %t %l
%t3 = OpBitwiseAnd %uint %t2 %c1023
""" + "".join(f"%i{k} = OpIAdd %uint %t3 %c{128 + 1024 * k}\n%p{k} = OpAccessChain %pu %buf %c0 %i{k}\n%e{k} = OpLoad %uint %p{k}{{aligned}}\n"
              f"%s{k + 1} = OpIAdd %uint %{'s' if k == 0 else f's{k}'} %e{k}\n" for k in range(4)) + """OpBranch %cont
%cont = OpLabel
%next = OpIAdd %uint %i %c1
OpBranch %head
%merge = OpLabel
%o = OpIAdd %uint %l %c64
%po = OpAccessChain %pu %buf %c0 %o
OpStore %po %s{aligned}
OpReturn
OpFunctionEnd
"""
ADDR_PASSES, ADDR_GROUPS, ADDR_SLOW = 1024, 16, 2.0   # 4M loads a launch (a few ms by descriptor on lavapipe); "reach" past 2x

def addr_kernel(by_address:bool, version:tuple[int, int]) -> str:
  """ADDR_KERNEL reading its buffer through binding 0 or through the address in its push constants."""
  ext = "OpExtension \"SPV_KHR_physical_storage_buffer\"\n" if version < (1, 5) else ""
  if not by_address:
    return ADDR_KERNEL.format(caps="", model="Logical", interface=" %buf" if version >= (1, 4) else "", aligned="",
                              decorate="OpDecorate %buf DescriptorSet 0\nOpDecorate %buf Binding 0\n", base="",
                              types="%pS = OpTypePointer StorageBuffer %S\n%pu = OpTypePointer StorageBuffer %uint\n"
                                    "%buf = OpVariable %pS StorageBuffer\n")
  return ADDR_KERNEL.format(caps="OpCapability PhysicalStorageBufferAddresses\n" + ext, model="PhysicalStorageBuffer64",
                            interface=" %pcv" if version >= (1, 4) else "", aligned=" Aligned 4",
                            decorate="OpMemberDecorate %PC 0 Offset 0\nOpDecorate %PC Block\n",
                            types="%pS = OpTypePointer PhysicalStorageBuffer %S\n%pu = OpTypePointer PhysicalStorageBuffer %uint\n"
                                  "%PC = OpTypeStruct %pS\n%ppc = OpTypePointer PushConstant %PC\n%pps = OpTypePointer PushConstant %pS\n"
                                  "%pcv = OpVariable %ppc PushConstant\n",
                            base="%pp = OpAccessChain %pps %pcv %c0\n%buf = OpLoad %pS %pp\n")

@functools.cache
def measure(phys:PhysicalDevice) -> Measured:
  """The driver's measured behaviour, from the disk cache when this driver version has been measured before."""
  key = f"{phys.name}|{phys.driver}|{phys.driver_version}|{phys.api_version}|{phys.vk}|v{VERSION}"
  if (words := diskcache_get("vulkan_probe", key)) is None:
    words = run(phys) + [round(1000 * address_cost(phys)) if phys.features["bufferDeviceAddress"] else 0, round(1000 * coop_speedup(phys))]
    diskcache_put("vulkan_probe", key, words)
  return Measured(loop_limit=words[1] if words[1] < LOOP_PASSES else 0, denorm32=words[4] == DENORMAL, address_cost=words[-2] / 1000,
                  coop_speedup=words[-1] / 1000)

def run(phys:PhysicalDevice) -> list[int]:
  """Run KERNEL once on a device of its own."""
  target = spirv_target(Caps(vk=phys.vk))   # SPIR-V 1.4 on lists every global variable an entry point uses, before only Input/Output
  spv = assemble(KERNEL.format(interface=" %buf" if target.version >= (1, 4) else ""), target.word)
  p = Scratch(phys, Caps(vk=phys.vk))
  try:
    ptr, size = p.buffer([LOOP_PASSES, 0, DENORMAL, ONE, 0, 0])
    p.launch(*p.pipeline(spv))
    return list(struct.unpack(f"<{size // 4}I", ffi.buffer(ptr, size)))
  finally: p.close()

def address_cost(phys:PhysicalDevice) -> float:
  """ADDR_KERNEL's time by address over its time by descriptor: the best of 3 launches each, taken in turn (a busy CPU slows both)."""
  caps = Caps(frozenset({"bda"}), vk=phys.vk)
  target, p = spirv_target(caps), Scratch(phys, caps)
  try:
    p.buffer([ADDR_PASSES] + list(range(1, 128 + 4096)))
    push = struct.pack("<Q", p.address())
    desc, addr = (p.pipeline(assemble(addr_kernel(a, target.version), target.word), 8 * a) for a in (False, True))
    p.launch(*desc, ADDR_GROUPS), p.launch(*addr, ADDR_GROUPS, push)   # warm
    times = [(p.launch(*desc, ADDR_GROUPS), p.launch(*addr, ADDR_GROUPS, push)) for _ in range(3)]
    return min(t for _, t in times) / max(min(t for t, _ in times), 1e-9)
  finally: p.close()

# n = words[0] passes. Each invocation of a subgroup-sized workgroup adds M*N*K/S multiply-adds a pass to its M*N/S float
# accumulators, as a WMMA of the renderer does it (renderer/coopmat.py): its fragments of A, B (the pass number) and C into
# workgroup tiles, OpCooperativeMatrixMulAddKHR, its fragment of the result back; or as M*N/S chains of K FMAs.
# words[1 + invocation] = its first accumulator.
COOP_KERNEL = """OpCapability Shader
OpCapability Float16
OpCapability VulkanMemoryModel
{caps}{ext}OpMemoryModel Logical Vulkan
OpEntryPoint GLCompute %main "main" %lid{interface}
OpExecutionMode %main LocalSize {S} 1 1
OpDecorate %lid BuiltIn LocalInvocationIndex
""" + BUFFER + """%half = OpTypeFloat 16
%pin = OpTypePointer Input %uint
%lid = OpVariable %pin Input
%zero = OpConstant %float 0
%one = OpConstant %float 1
{consts}{types}%main = OpFunction %void None %fn
%entry = OpLabel
%l = OpLoad %uint %lid
%pn = OpAccessChain %pu %buf %c0 %c0
%n = OpLoad %uint %pn
OpBranch %head
%head = OpLabel
%i = OpPhi %uint %c0 %entry %next %cont
{phis}OpLoopMerge %merge %cont None
OpBranch %cond
%cond = OpLabel
%more = OpULessThan %bool %i %n
OpBranchConditional %more %body %merge
%body = OpLabel
%x = OpConvertUToF %float %i
%xh = OpFConvert %half %x
{body}OpBranch %cont
%cont = OpLabel
%next = OpIAdd %uint %i %c1
OpBranch %head
%merge = OpLabel
%rb = OpBitcast %uint %a0_0
%o = OpIAdd %uint %l %c1
%po = OpAccessChain %pu %buf %c0 %o
OpStore %po %rb
OpReturn
OpFunctionEnd
"""
COOP_GROUPS, COOP_FAST = 1024, 1.2   # workgroups a launch; "coopmat" on by default where the WMMAs are over 1.2x faster

def coop_kernel(M:int, N:int, K:int, S:int, coop:bool, version:tuple[int, int]) -> str:
  """COOP_KERNEL for an MxNxK shape of float16 A and B and float32 C on S-wide subgroups: by WMMA or by FMA."""
  E, fa, fb = M * N // S, M * K // S, K * N // S
  consts = "".join(f"%c{v} = OpConstant %uint {v}\n" for v in sorted({0, 1, 2, 3, 0x108, M, N, K, fa, fb, E, M * K, K * N, M * N} |
                                                                       set(range(max(fa, fb, E)))))
  phis = "".join(f"%a{e}_0 = OpPhi %float %zero %entry %a{e}_1 %cont\n" for e in range(E))
  ext, iface = 'OpExtension "SPV_KHR_vulkan_memory_model"\n' if version < (1, 5) else "", " %buf" if version >= (1, 4) else ""
  if not coop:   # E chains of K FMAs: a = fma(a, x, 1)
    body = "".join(f"%a{e}_{1 if k == K - 1 else f'f{k}'} = OpExtInst %float %glsl Fma {f'%a{e}_f{k-1}' if k else f'%a{e}_0'} %x %one\n"
                   for e in range(E) for k in range(K))
    return COOP_KERNEL.format(caps="", ext=ext + '%glsl = OpExtInstImport "GLSL.std.450"\n', interface=iface, S=S, consts=consts, types="",
                              phis=phis, body=body)
  vis, pub = "MakePointerVisible|NonPrivatePointer %c2", "MakePointerAvailable|NonPrivatePointer %c2"
  tiles = {"A": ("half", M * K, fa), "B": ("half", K * N, fb), "C": ("float", M * N, E)}
  types = "".join(dict.fromkeys(f"%{t}{n} = OpTypeArray %{t} %c{n}\n%pw{t}{n} = OpTypePointer Workgroup %{t}{n}\n" for t, n, _ in tiles.values()))
  types += "%pwhalf = OpTypePointer Workgroup %half\n%pwfloat = OpTypePointer Workgroup %float\n" + "".join(
    f"%t{k} = OpVariable %pw{t}{n} Workgroup\n" for k, (t, n, _) in tiles.items())
  types += "".join(f"%cm{k} = OpTypeCooperativeMatrixKHR %{tiles[k][0]} %c3 %c{r} %c{c} %c{use}\n"
                   for use, (k, r, c) in enumerate((("A", M, K), ("B", K, N), ("C", M, N))))
  body = ""
  for k, (t, _, f) in tiles.items():   # the invocation's fragment into its tile
    body += f"%b{k} = OpIMul %uint %l %c{f}\n"
    for e in range(f):
      body += f"%o{k}{e} = OpIAdd %uint %b{k} %c{e}\n%p{k}{e} = OpAccessChain %pw{t} %t{k} %o{k}{e}\n"
      if k != "C": body += f"OpStore %p{k}{e} %xh {pub}\n"
      else: body += f"OpStore %p{k}{e} %a{e}_0 {pub}\n"
  body += "OpControlBarrier %c3 %c3 %c264\n"
  for k, lay, stride in (("A", 0, K), ("B", 1, K), ("C", 0, N)):
    body += f"%q{k} = OpAccessChain %pw{tiles[k][0]} %t{k} %c0\n%m{k} = OpCooperativeMatrixLoadKHR %cm{k} %q{k} %c{lay} %c{stride} {vis}\n"
  body += f"%d = OpCooperativeMatrixMulAddKHR %cmC %mA %mB %mC\nOpCooperativeMatrixStoreKHR %qC %d %c0 %c{N} {pub}\nOpControlBarrier %c3 %c3 %c264\n"
  body += "".join(f"%a{e}_1 = OpLoad %float %pC{e} {vis}\n" for e in range(E))
  return COOP_KERNEL.format(caps="OpCapability CooperativeMatrixKHR\n", ext='OpExtension "SPV_KHR_cooperative_matrix"\n' + ext,
                            interface=iface + (" %tA %tB %tC" if version >= (1, 4) else ""), S=S, consts=consts, types=types, phis=phis, body=body)

def coop_speedup(phys:PhysicalDevice) -> float:
  """COOP_KERNEL's time with FMAs over its time by WMMA, on the device's first float16 x float16 + float32 shape (0: none): passes
  multiplied by 4 until the FMAs take 2 ms (a GPU's launch would hide them), the best of 3 launches each, taken in turn."""
  shapes = [phys.coop_shapes[i:i+5] for i in range(0, len(phys.coop_shapes), 5)]
  S = phys.subgroup_size
  if not (shape := next((s for s in shapes if s[3:] == (0, 1) and min(s[0] * s[1], s[0] * s[2], s[2] * s[1]) >= S), None)): return 0.0
  M, N, K, _, _ = shape
  need = {"coopmat", "vmm", "fullsg", "f16", "i16", "s16"} | ({"sgsize"} if phys.min_subgroup != phys.max_subgroup else set())
  if not (need <= phys.feature_flags() and ("sgsize" not in need or phys.size_control)): return 0.0
  caps = Caps(frozenset(need), vk=phys.vk, sg=S)
  target, p = spirv_target(caps), Scratch(phys, caps)
  try:
    p.buffer([0] * (1 + S))
    fma, coop = (p.pipeline(assemble(coop_kernel(M, N, K, S, m, target.version), target.word), full=True) for m in (False, True))
    n = 16
    while True:
      ffi.cast("uint32_t*", p.ptr)[0] = n
      times = [(p.launch(*fma, COOP_GROUPS), p.launch(*coop, COOP_GROUPS)) for _ in range(3)]
      if min(t for t, _ in times) > 2e-3 or n >= 1 << 20: break
      n *= 4
    return min(t for t, _ in times) / max(min(t for _, t in times), 1e-9)
  finally: p.close()

class Scratch:
  """A VkDevice of its own with one storage buffer and what launches over it need; close() destroys all of it."""
  def __init__(self, phys:PhysicalDevice, caps:Caps):
    self.phys, self.caps = phys, caps
    self.made: list[tuple[Any, Any]] = []   # (destroy function, handle), undone in reverse
    self.d = phys.create_device(caps, [], "probe")
    self.sets: dict[int, tuple] = {}        # push constant bytes -> (descriptor set layout array, pipeline layout, descriptor set)
  def create(self, fn, destroy, ctype:str, info):
    h = ffi.new(ctype + "*")
    check(fn(self.d, info, NULL, h), f"creating a {ctype} (probe)")
    self.made.append((destroy, h[0]))
    return h[0]
  def buffer(self, words:list[int]):
    """The storage buffer, host-visible and mapped, holding `words`: (its mapping, its size)."""
    self.size, bda = (size := 4 * len(words)), "bda" in self.caps
    self.buf = self.create(lib.vkCreateBuffer, lib.vkDestroyBuffer, "VkBuffer", new("VkBufferCreateInfo", size=size,
                           sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | (USAGE_ADDRESS if bda else 0)))
    req, ptr = ffi.new("VkMemoryRequirements*"), ffi.new("void**")
    lib.vkGetBufferMemoryRequirements(self.d, self.buf, req)
    host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    ti = next(t.index for t in self.phys.memory_types if req.memoryTypeBits >> t.index & 1 and t.flags & host == host)
    flags = new("VkMemoryAllocateFlagsInfo", flags=ALLOCATE_ADDRESS) if bda else NULL
    mem = self.create(lib.vkAllocateMemory, lib.vkFreeMemory, "VkDeviceMemory",
                      new("VkMemoryAllocateInfo", pNext=flags, allocationSize=req.size, memoryTypeIndex=ti))
    check(lib.vkBindBufferMemory(self.d, self.buf, mem, 0), "vkBindBufferMemory")
    check(lib.vkMapMemory(self.d, mem, 0, size, 0, ptr), "vkMapMemory")
    ffi.memmove(ptr[0], struct.pack(f"<{len(words)}I", *words), size)
    self.ptr = ptr[0]
    return ptr[0], size
  def address(self) -> int:
    """The buffer's device address (vkGetBufferDeviceAddressKHR before Vulkan 1.2)."""
    fn = lib.vkGetBufferDeviceAddress if self.caps.vk >= 12 else \
      ffi.cast("PFN_vkGetBufferDeviceAddressKHR", lib.vkGetDeviceProcAddr(self.d, b"vkGetBufferDeviceAddressKHR"))
    return int(fn(self.d, new("VkBufferDeviceAddressInfo", buffer=self.buf)))
  def layout(self, pc:int) -> tuple:
    """The pipeline layout with `pc` bytes of push constants and the buffer at binding 0, and its descriptor set."""
    if pc in self.sets: return self.sets[pc]
    SB, c = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, self.create
    bind = ffi.new("VkDescriptorSetLayoutBinding*", {"descriptorType": SB, "descriptorCount": 1, "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT})
    sls = ffi.new("VkDescriptorSetLayout[1]", [c(lib.vkCreateDescriptorSetLayout, lib.vkDestroyDescriptorSetLayout, "VkDescriptorSetLayout",
                                                 new("VkDescriptorSetLayoutCreateInfo", bindingCount=1, pBindings=bind))])
    rng = ffi.new("VkPushConstantRange*", {"stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0, "size": pc})
    pl = c(lib.vkCreatePipelineLayout, lib.vkDestroyPipelineLayout, "VkPipelineLayout",
           new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sls, pushConstantRangeCount=int(pc > 0), pPushConstantRanges=rng))
    sizes = ffi.new("VkDescriptorPoolSize*", {"type": SB, "descriptorCount": 1})
    pool = c(lib.vkCreateDescriptorPool, lib.vkDestroyDescriptorPool, "VkDescriptorPool",
             new("VkDescriptorPoolCreateInfo", maxSets=1, poolSizeCount=1, pPoolSizes=sizes))
    ds = ffi.new("VkDescriptorSet*")
    check(lib.vkAllocateDescriptorSets(self.d, new("VkDescriptorSetAllocateInfo", descriptorPool=pool, descriptorSetCount=1, pSetLayouts=sls), ds),
          "vkAllocateDescriptorSets")
    info = ffi.new("VkDescriptorBufferInfo*", {"buffer": self.buf, "offset": 0, "range": self.size})
    lib.vkUpdateDescriptorSets(self.d, 1, new("VkWriteDescriptorSet", dstSet=ds[0], descriptorCount=1, descriptorType=SB, pBufferInfo=info), 0, NULL)
    self.sets[pc] = (sls, pl, ds)
    return self.sets[pc]
  def pipeline(self, spv:bytes, pc:int=0, full=False) -> tuple[Any, Any, Any]:
    """The kernel's compute pipeline: (pipeline, its layout, its descriptor set)."""
    code, (_, pl, ds) = ffi.from_buffer("uint32_t[]", spv), self.layout(pc)
    module = self.create(lib.vkCreateShaderModule, lib.vkDestroyShaderModule, "VkShaderModule",
                         new("VkShaderModuleCreateInfo", codeSize=len(spv), pCode=code))
    entry, pipe = ffi.new("char[]", b"main"), ffi.new("VkPipeline*")
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": module,
             "pName": entry, "flags": REQUIRE_FULL_SUBGROUPS if full else 0,
             "pNext": new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo", requiredSubgroupSize=self.caps.sg)
                      if "sgsize" in self.caps else NULL}
    check(lib.vkCreateComputePipelines(self.d, NULL, 1, new("VkComputePipelineCreateInfo", stage=stage, layout=pl), NULL, pipe),
          "vkCreateComputePipelines (probe)")
    self.made.append((lib.vkDestroyPipeline, pipe[0]))
    return pipe[0], pl, ds
  def launch(self, pipe, pl, ds, groups:int=1, push:bytes=b"") -> float:
    """`groups` workgroups of the pipeline over the buffer, waited for: the seconds from submission to the fence."""
    d, c, cmd, q = self.d, self.create, ffi.new("VkCommandBuffer*"), ffi.new("VkQueue*")
    cpool = c(lib.vkCreateCommandPool, lib.vkDestroyCommandPool, "VkCommandPool",
              new("VkCommandPoolCreateInfo", queueFamilyIndex=self.phys.queue_family))
    check(lib.vkAllocateCommandBuffers(d, new("VkCommandBufferAllocateInfo", commandPool=cpool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                              commandBufferCount=1), cmd), "vkAllocateCommandBuffers")
    check(lib.vkBeginCommandBuffer(cmd[0], new("VkCommandBufferBeginInfo")), "vkBeginCommandBuffer")
    lib.vkCmdBindPipeline(cmd[0], vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
    lib.vkCmdBindDescriptorSets(cmd[0], vk.VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, ds, 0, NULL)
    if push: lib.vkCmdPushConstants(cmd[0], pl, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), ffi.from_buffer(push))
    lib.vkCmdDispatch(cmd[0], groups, 1, 1)
    barrier = new("VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT, dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
    lib.vkCmdPipelineBarrier(cmd[0], vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, barrier, 0, NULL, 0, NULL)
    check(lib.vkEndCommandBuffer(cmd[0]), "vkEndCommandBuffer")
    fence = c(lib.vkCreateFence, lib.vkDestroyFence, "VkFence", new("VkFenceCreateInfo"))
    lib.vkGetDeviceQueue(d, self.phys.queue_family, 0, q)
    t0 = time.perf_counter()
    check(lib.vkQueueSubmit(q[0], 1, new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmd), fence), "vkQueueSubmit (probe)")
    if check(lib.vkWaitForFences(d, 1, ffi.new("VkFence[1]", [fence]), 1, 60 * 10**9), "vkWaitForFences (probe)") == vk.VK_TIMEOUT:
      raise RuntimeError(f"VULKAN: {self.phys.name} did not run a probe kernel in 60 s")
    return time.perf_counter() - t0
  def close(self):
    lib.vkDeviceWaitIdle(self.d)
    for destroy, h in reversed(self.made): destroy(self.d, h, NULL)
    lib.vkDestroyDevice(self.d, NULL)

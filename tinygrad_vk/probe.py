"""What a driver does but does not report, measured by one tiny kernel per driver version and kept in tinygrad's disk cache.

* The loop budget: Mesa's llvmpipe before 25.0 ends every loop of an invocation after 65535 passes in total without a word
  (gallivm's loop limiter, removed by Mesa commit ac0f643d4b03 "gallivm: Remove loop limiting", first released in 25.0.0,
  https://docs.mesa3d.org/relnotes/25.0.0.html). No property reports it, so a loop of LOOP_PASSES passes counts what runs.
* Whether float32 denormals survive arithmetic. No driver here reports shaderDenormPreserveFloat32 or ...FlushToZeroFloat32, so
  either may happen: lavapipe keeps them, SwiftShader flushes them.
The kernel runs on a VkDevice of its own, before tinygrad_vk opens the real one, so that `Caps` are whole from the start.
"""
from __future__ import annotations
import functools, struct
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING
from tinygrad.helpers import diskcache_get, diskcache_put
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import Caps, spirv_target
from tinygrad_vk.compiler import assemble
if TYPE_CHECKING: from tinygrad_vk.instance import PhysicalDevice

VERSION = 2                  # bump when the kernel or what is read from it changes: the disk cache keys on it
LOOP_PASSES = (1 << 17) + 7  # past llvmpipe's 65535
ONE, DENORMAL = 0x3f800000, 0x00400000   # float32 bits: 1.0, 2^-127

@dataclass(frozen=True)
class Measured:
  loop_limit: int    # passes a loop may make, 0: unbounded
  denorm32: bool     # a float32 denormal times 1.0 is itself

# words[0] = n; words[1] = passes of a loop of n; words[4] = words[2] * words[3] (floats)
KERNEL = """OpCapability Shader
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main"{interface}
OpExecutionMode %main LocalSize 1 1 1
OpDecorate %arr ArrayStride 4
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
""" + "".join(f"%c{i} = OpConstant %uint {i}\n" for i in range(5)) + """%main = OpFunction %void None %fn
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

@functools.cache
def measure(phys:PhysicalDevice) -> Measured:
  """The driver's measured behaviour, from the disk cache when this driver version has been measured before."""
  key = f"{phys.name}|{phys.driver}|{phys.driver_version}|{phys.api_version}|{phys.vk}|v{VERSION}"
  if (words := diskcache_get("vulkan_probe", key)) is None: diskcache_put("vulkan_probe", key, words := run(phys))
  return Measured(loop_limit=words[1] if words[1] < LOOP_PASSES else 0, denorm32=words[4] == DENORMAL)

def run(phys:PhysicalDevice) -> list[int]:
  """Run KERNEL once on a device of its own."""
  target = spirv_target(Caps(vk=phys.vk))   # SPIR-V 1.4 on lists every global variable an entry point uses, before only Input/Output
  spv = assemble(KERNEL.format(interface=" %buf" if target.version >= (1, 4) else ""), target.word)
  p = Scratch(phys, Caps(vk=phys.vk))
  try:
    ptr, size = p.buffer([LOOP_PASSES, 0, DENORMAL, ONE, 0, 0])
    p.dispatch(spv)
    return list(struct.unpack(f"<{size // 4}I", ffi.buffer(ptr, size)))
  finally: p.close()

class Scratch:
  """A VkDevice of its own with one storage buffer and what one dispatch over it needs; close() destroys all of it."""
  def __init__(self, phys:PhysicalDevice, caps:Caps):
    self.phys = phys
    self.made: list[tuple[Any, Any]] = []   # (destroy function, handle), undone in reverse
    self.d = phys.create_device(caps, [], "probe")
  def create(self, fn, destroy, ctype:str, info):
    h = ffi.new(ctype + "*")
    check(fn(self.d, info, NULL, h), f"creating a {ctype} (probe)")
    self.made.append((destroy, h[0]))
    return h[0]
  def buffer(self, words:list[int]):
    """The storage buffer, host-visible and mapped, holding `words`: (its mapping, its size)."""
    self.size = size = 4 * len(words)
    self.buf = self.create(lib.vkCreateBuffer, lib.vkDestroyBuffer, "VkBuffer", new("VkBufferCreateInfo", size=size,
                           usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE))
    req, ptr = ffi.new("VkMemoryRequirements*"), ffi.new("void**")
    lib.vkGetBufferMemoryRequirements(self.d, self.buf, req)
    host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    ti = next(t.index for t in self.phys.memory_types if req.memoryTypeBits >> t.index & 1 and t.flags & host == host)
    mem = self.create(lib.vkAllocateMemory, lib.vkFreeMemory, "VkDeviceMemory",
                      new("VkMemoryAllocateInfo", allocationSize=req.size, memoryTypeIndex=ti))
    check(lib.vkBindBufferMemory(self.d, self.buf, mem, 0), "vkBindBufferMemory")
    check(lib.vkMapMemory(self.d, mem, 0, size, 0, ptr), "vkMapMemory")
    ffi.memmove(ptr[0], struct.pack(f"<{len(words)}I", *words), size)
    return ptr[0], size
  def dispatch(self, spv:bytes):
    """One workgroup of the kernel over the buffer (binding 0), waited for."""
    SB, d, c = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, self.d, self.create
    code, sizes = ffi.from_buffer("uint32_t[]", spv), ffi.new("VkDescriptorPoolSize*", {"type": SB, "descriptorCount": 1})
    module = c(lib.vkCreateShaderModule, lib.vkDestroyShaderModule, "VkShaderModule", new("VkShaderModuleCreateInfo", codeSize=len(spv), pCode=code))
    bind = ffi.new("VkDescriptorSetLayoutBinding*", {"descriptorType": SB, "descriptorCount": 1, "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT})
    sls = ffi.new("VkDescriptorSetLayout[1]", [c(lib.vkCreateDescriptorSetLayout, lib.vkDestroyDescriptorSetLayout, "VkDescriptorSetLayout",
                                                 new("VkDescriptorSetLayoutCreateInfo", bindingCount=1, pBindings=bind))])
    pl = c(lib.vkCreatePipelineLayout, lib.vkDestroyPipelineLayout, "VkPipelineLayout",
           new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sls))
    entry, pipe = ffi.new("char[]", b"main"), ffi.new("VkPipeline*")
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": module,
             "pName": entry}
    check(lib.vkCreateComputePipelines(d, NULL, 1, new("VkComputePipelineCreateInfo", stage=stage, layout=pl), NULL, pipe),
          "vkCreateComputePipelines (probe)")
    self.made.append((lib.vkDestroyPipeline, pipe[0]))
    pool = c(lib.vkCreateDescriptorPool, lib.vkDestroyDescriptorPool, "VkDescriptorPool",
             new("VkDescriptorPoolCreateInfo", maxSets=1, poolSizeCount=1, pPoolSizes=sizes))
    ds, cmd, q = ffi.new("VkDescriptorSet*"), ffi.new("VkCommandBuffer*"), ffi.new("VkQueue*")
    check(lib.vkAllocateDescriptorSets(d, new("VkDescriptorSetAllocateInfo", descriptorPool=pool, descriptorSetCount=1, pSetLayouts=sls), ds),
          "vkAllocateDescriptorSets")
    info = ffi.new("VkDescriptorBufferInfo*", {"buffer": self.buf, "offset": 0, "range": self.size})
    lib.vkUpdateDescriptorSets(d, 1, new("VkWriteDescriptorSet", dstSet=ds[0], descriptorCount=1, descriptorType=SB, pBufferInfo=info), 0, NULL)
    cpool = c(lib.vkCreateCommandPool, lib.vkDestroyCommandPool, "VkCommandPool",
              new("VkCommandPoolCreateInfo", queueFamilyIndex=self.phys.queue_family))
    check(lib.vkAllocateCommandBuffers(d, new("VkCommandBufferAllocateInfo", commandPool=cpool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                              commandBufferCount=1), cmd), "vkAllocateCommandBuffers")
    check(lib.vkBeginCommandBuffer(cmd[0], new("VkCommandBufferBeginInfo")), "vkBeginCommandBuffer")
    lib.vkCmdBindPipeline(cmd[0], vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe[0])
    lib.vkCmdBindDescriptorSets(cmd[0], vk.VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, ds, 0, NULL)
    lib.vkCmdDispatch(cmd[0], 1, 1, 1)
    barrier = new("VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT, dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
    lib.vkCmdPipelineBarrier(cmd[0], vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, barrier, 0, NULL, 0, NULL)
    check(lib.vkEndCommandBuffer(cmd[0]), "vkEndCommandBuffer")
    fence = c(lib.vkCreateFence, lib.vkDestroyFence, "VkFence", new("VkFenceCreateInfo"))
    lib.vkGetDeviceQueue(d, self.phys.queue_family, 0, q)
    check(lib.vkQueueSubmit(q[0], 1, new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmd), fence), "vkQueueSubmit (probe)")
    if check(lib.vkWaitForFences(d, 1, ffi.new("VkFence[1]", [fence]), 1, 60 * 10**9), "vkWaitForFences (probe)") == vk.VK_TIMEOUT:
      raise RuntimeError(f"VULKAN: {self.phys.name} did not run a one-invocation probe kernel in 60 s")
  def close(self):
    lib.vkDeviceWaitIdle(self.d)
    for destroy, h in reversed(self.made): destroy(self.d, h, NULL)
    lib.vkDestroyDevice(self.d, NULL)

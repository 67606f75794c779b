"""The floor on this Vulkan driver without tinygrad: the same kinds of dispatches through the `vulkan` package's cffi handles.

Run alone it prints one JSON object; scripts/bench.py runs it in a subprocess. Buffers are host-visible (the floor need not
stage) and every figure is wall clock around submit + fence wait, with the GPU-side time from timestamp queries beside it.
"""
import array, json, random, statistics, subprocess, sys, tempfile, time
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new, enumerate_, cstr   # cffi helpers only: tinygrad_vk.vk imports no tinygrad

TRIVIAL = "layout(local_size_x=1) in; layout(std430, binding=0) buffer A { float a[]; }; void main() { a[0] += 1.0; }"
# the kind of kernel the TinyJit launch benchmark chains: out = in*1.0001+1 over 16 floats, 4 invocations of 4, two bindings and a
# push-constant word (tinygrad_vk's view offsets), ping-ponging between two buffers so that each dispatch depends on the last
STEP = """layout(local_size_x=4) in; layout(push_constant) uniform PC { uint _off[1]; };
layout(std430, binding=0) buffer O { float o[]; }; layout(std430, binding=1) readonly buffer I { float i[]; };
void main() { int l = int(gl_LocalInvocationID.x);
  for (int k = 0; k < 4; k++) o[4*l+k+int(_off[0] & 255u)] = i[4*l+k+int((_off[0] >> 8) & 255u)] * 1.0001 + 1.0; }"""
ADD4 = """layout(local_size_x=256) in;
layout(std430, binding=0) buffer C { vec4 c[]; }; layout(std430, binding=1) readonly buffer A { vec4 a[]; };
layout(std430, binding=2) readonly buffer B { vec4 b[]; };
void main() { uint i = gl_GlobalInvocationID.x; c[i] = a[i] + b[i]; }"""
GEMM = """layout(local_size_x=16, local_size_y=16) in; layout(push_constant) uniform P { uint n; };
layout(std430, binding=0) buffer C { float c[]; }; layout(std430, binding=1) readonly buffer A { float a[]; };
layout(std430, binding=2) readonly buffer B { float b[]; };
void main() { uint col = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y; float acc = 0.0;
  for (uint k = 0; k < n; k++) acc += a[row*n + k] * b[k*n + col];
  c[row*n + col] = acc; }"""

# The best GEMM and conv found for llvmpipe (lavapipe), the floor tinygrad's kernels are held to. On Mesa 22.3, 2 cores, quiet: GEMM 1024
# 46 and conv2d b8 32->64 3x3 64x64 42 GFLOP/s against tinygrad's 36 and 34 in the same process, fma_peak (no reads) 65. Found there:
#  * operands through storage texel buffers: gallivm loads a storage buffer lane by lane behind a branch, a texel buffer with one
#    gather (lp_bld_nir_soa.c emit_load_mem, scripts/load_cost.py); an RGBA32F texel brings 4 floats per lane for about the cost
#    of one R32 gather (1.15-1.35x over four R32 reads in this GEMM);
#  * 8 rows x 8 columns per invocation (64 accumulators) beat 4x8 by 1.3x; 8x16 and 16x8 gained nothing more;
#  * lanes along the output's columns, so B's reads across a SIMD vector are neighbours and A's are one address;
#  * subgroupBroadcast to share A's reads across lanes (each lane reads a different k, then broadcast) ran 2-3x slower.
# The conv only matches tinygrad's own kernel: its weights, the same for every lane, still cost a gather each.
F4, F1 = vk.VK_FORMAT_R32G32B32A32_SFLOAT, vk.VK_FORMAT_R32_SFLOAT
def gemm_tiled(R:int=8, CV:int=2, LY:int=8) -> str:
  """C = A @ B (n x n, n a multiple of 8*4*CV and LY*R), R rows x 4*CV columns per invocation, A and B as RGBA32F texel buffers."""
  acc = [(r, c) for r in range(R) for c in range(CV)]
  body = [f"vec4 a{r} = imageLoad(A, (row+{r})*n4 + k/4);" for r in range(R)]
  for kk in range(4):
    body += [f"vec4 b{kk}_{c} = imageLoad(B, (k+{kk})*n4 + col4+{c});" for c in range(CV)]
    body += [f"acc{r}_{c} += a{r}[{kk}] * b{kk}_{c};" for r, c in acc]
  return f"""layout(local_size_x=8, local_size_y={LY}) in; layout(push_constant) uniform P {{ uint n; }};
layout(std430, binding=0) buffer C {{ vec4 c[]; }};
layout(binding=1, rgba32f) uniform readonly imageBuffer A; layout(binding=2, rgba32f) uniform readonly imageBuffer B;
void main() {{ int n4 = int(n)/4, col4 = int(gl_GlobalInvocationID.x)*{CV}, row = int(gl_GlobalInvocationID.y)*{R};
  {" ".join(f"vec4 acc{r}_{c} = vec4(0.0);" for r, c in acc)}
  for (int k = 0; k < int(n); k += 4) {{ {" ".join(body)} }}
  {" ".join(f"c[(row+{r})*n4 + col4+{c}] = acc{r}_{c};" for r, c in acc)} }}"""

def conv_tiled(CI:int, H:int, W:int, CO:int, LY:int=4) -> str:
  """out = conv2d(inp, w, padding=1), 3x3, NCHW, W a multiple of 64: 8 output channels x 8 columns per invocation, lanes along x.
  The input through an RGBA32F view (two vec4 per row) and an R32F one (the two neighbours), the weights through R32F."""
  acc = [(o, h) for o in range(8) for h in range(2)]
  body = []
  for ky in range(3):
    body += [f"int y{ky} = y+{ky - 1}; float m{ky} = float(y{ky} >= 0 && y{ky} < {H}); int b{ky} = (plane + clamp(y{ky}, 0, {H-1}))*{W} + x0;",
             f"vec4 p{ky} = imageLoad(I4, b{ky}/4)*m{ky}, q{ky} = imageLoad(I4, b{ky}/4+1)*m{ky};",
             f"float l{ky} = x0 > 0 ? imageLoad(I1, b{ky}-1).x*m{ky} : 0.0, r{ky} = x0+8 < {W} ? imageLoad(I1, b{ky}+8).x*m{ky} : 0.0;",
             f"float v{ky}[10] = float[10](l{ky}, p{ky}.x, p{ky}.y, p{ky}.z, p{ky}.w, q{ky}.x, q{ky}.y, q{ky}.z, q{ky}.w, r{ky});"]
    for o in range(8):
      for kx in range(3):
        body.append(f"float w{ky}_{o}_{kx} = imageLoad(Wt, ((co0+{o})*{CI}+ci)*9 + {3*ky+kx}).x;")
        body += [f"acc{o}_{h} += w{ky}_{o}_{kx} * vec4(v{ky}[{kx+4*h}], v{ky}[{kx+4*h+1}], v{ky}[{kx+4*h+2}], v{ky}[{kx+4*h+3}]);"
             for h in range(2)]
  return f"""layout(local_size_x={W // 8}, local_size_y={LY}) in;
layout(std430, binding=0) buffer O {{ vec4 o[]; }}; layout(binding=1, rgba32f) uniform readonly imageBuffer I4;
layout(binding=2, r32f) uniform readonly imageBuffer I1; layout(binding=3, r32f) uniform readonly imageBuffer Wt;
void main() {{ int x0 = int(gl_LocalInvocationID.x)*8, y = int(gl_GlobalInvocationID.y), co0 = int(gl_WorkGroupID.z % {CO // 8})*8;
  int n = int(gl_WorkGroupID.z) / {CO // 8};
  {" ".join(f"vec4 acc{o}_{h} = vec4(0.0);" for o, h in acc)}
  for (int ci = 0; ci < {CI}; ci++) {{ int plane = (n*{CI} + ci)*{H}; {" ".join(body)} }}
  {" ".join(f"o[(((n*{CO} + co0+{o})*{H} + y)*{W} + x0)/4 + {h}] = acc{o}_{h};" for o, h in acc)} }}"""

def spirv(src:str) -> bytes:
  with tempfile.TemporaryDirectory() as d:
    subprocess.run(["glslangValidator", "-V", "--target-env", "vulkan1.2", "--stdin", "-S", "comp", "-o", f"{d}/k.spv"],
                   input=("#version 450\n" + src).encode(), check=True, capture_output=True)
    return open(f"{d}/k.spv", "rb").read()

class Floor:
  def __init__(self):
    app = new("VkApplicationInfo", apiVersion=(1 << 22) | (2 << 12))
    inst = ffi.new("VkInstance*")
    check(lib.vkCreateInstance(new("VkInstanceCreateInfo", pApplicationInfo=app), NULL, inst), "vkCreateInstance")
    self.phys = enumerate_(lib.vkEnumeratePhysicalDevices, "VkPhysicalDevice", inst[0])[0]
    props = ffi.new("VkPhysicalDeviceProperties*")
    lib.vkGetPhysicalDeviceProperties(self.phys, props)
    self.name, self.ts_period = cstr(props.deviceName), props.limits.timestampPeriod
    qfs = enumerate_(lib.vkGetPhysicalDeviceQueueFamilyProperties, "VkQueueFamilyProperties", self.phys)
    fam = next(i for i, q in enumerate(qfs) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
    prio = ffi.new("float[1]", [1.0])   # named: cffi does not keep a struct field's pointee alive
    qinfo = new("VkDeviceQueueCreateInfo", queueFamilyIndex=fam, queueCount=1, pQueuePriorities=prio)
    dev = ffi.new("VkDevice*")
    check(lib.vkCreateDevice(self.phys, new("VkDeviceCreateInfo", queueCreateInfoCount=1, pQueueCreateInfos=qinfo), NULL, dev), "vkCreateDevice")
    self.dev, q = dev[0], ffi.new("VkQueue*")
    lib.vkGetDeviceQueue(self.dev, fam, 0, q)
    self.queue = q[0]
    pool = ffi.new("VkCommandPool*")
    check(lib.vkCreateCommandPool(self.dev, new("VkCommandPoolCreateInfo", queueFamilyIndex=fam), NULL, pool), "vkCreateCommandPool")
    cmd = ffi.new("VkCommandBuffer*")
    check(lib.vkAllocateCommandBuffers(self.dev, new("VkCommandBufferAllocateInfo", commandPool=pool[0], level=0, commandBufferCount=1), cmd), "cmd")
    self.cmd, self.fence, self.qpool = cmd[0], ffi.new("VkFence*"), ffi.new("VkQueryPool*")
    check(lib.vkCreateFence(self.dev, new("VkFenceCreateInfo"), NULL, self.fence), "vkCreateFence")
    qinfo = new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2)
    check(lib.vkCreateQueryPool(self.dev, qinfo, NULL, self.qpool), "vkCreateQueryPool")
    sizes = ffi.new("VkDescriptorPoolSize[2]", [{"type": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "descriptorCount": 64},
                                                    {"type": vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, "descriptorCount": 64}])
    dp = ffi.new("VkDescriptorPool*")
    check(lib.vkCreateDescriptorPool(self.dev, new("VkDescriptorPoolCreateInfo", maxSets=64, poolSizeCount=2, pPoolSizes=sizes), NULL, dp), "dpool")
    self.dpool = dp[0]
    mp = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(self.phys, mp)
    want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    self.memtype = next(i for i in range(mp.memoryTypeCount) if mp.memoryTypes[i].propertyFlags & want == want)

  def buffer(self, nbytes:int):
    """A host-visible buffer and a numpy-free memoryview onto its mapping."""
    buf, mem, req, p = ffi.new("VkBuffer*"), ffi.new("VkDeviceMemory*"), ffi.new("VkMemoryRequirements*"), ffi.new("void**")
    usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT
    check(lib.vkCreateBuffer(self.dev, new("VkBufferCreateInfo", size=nbytes, usage=usage), NULL, buf), "buf")
    lib.vkGetBufferMemoryRequirements(self.dev, buf[0], req)
    check(lib.vkAllocateMemory(self.dev, new("VkMemoryAllocateInfo", allocationSize=req.size, memoryTypeIndex=self.memtype), NULL, mem), "mem")
    check(lib.vkBindBufferMemory(self.dev, buf[0], mem[0], 0), "bind")
    check(lib.vkMapMemory(self.dev, mem[0], 0, nbytes, 0, p), "map")
    return buf[0], ffi.buffer(p[0], nbytes)

  def kernel(self, src:str, bufs:list, pc_size:int=0, code:bytes|None=None, texel:dict|None=None):
    """Pipeline, layout and one descriptor set binding `bufs` in order; `texel` {binding: VkFormat} binds those as storage texel
    buffers (a view over the whole buffer)."""
    texel = texel or {}
    def dtype(i): return vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER if i in texel else vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    binds = ffi.new("VkDescriptorSetLayoutBinding[]", [{"binding": i, "descriptorType": dtype(i),
                    "descriptorCount": 1, "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT} for i in range(len(bufs))])
    sl, pl, mod = ffi.new("VkDescriptorSetLayout*"), ffi.new("VkPipelineLayout*"), ffi.new("VkShaderModule*")
    pipe, ds = ffi.new("VkPipeline*"), ffi.new("VkDescriptorSet*")
    check(lib.vkCreateDescriptorSetLayout(self.dev, new("VkDescriptorSetLayoutCreateInfo", bindingCount=len(bufs), pBindings=binds), NULL, sl), "dsl")
    rng = ffi.new("VkPushConstantRange*", {"stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0, "size": max(pc_size, 4)})
    check(lib.vkCreatePipelineLayout(self.dev, new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sl,
                                     pushConstantRangeCount=int(pc_size > 0), pPushConstantRanges=rng), NULL, pl), "layout")
    code = code or spirv(src)
    minfo = new("VkShaderModuleCreateInfo", codeSize=len(code), pCode=ffi.from_buffer("uint32_t[]", code))
    check(lib.vkCreateShaderModule(self.dev, minfo, NULL, mod), "vkCreateShaderModule")
    entry = ffi.new("char[]", b"main")
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": mod[0],
             "pName": entry}
    check(lib.vkCreateComputePipelines(self.dev, NULL, 1, new("VkComputePipelineCreateInfo", stage=stage, layout=pl[0]), NULL, pipe), "pipeline")
    ainfo = new("VkDescriptorSetAllocateInfo", descriptorPool=self.dpool, descriptorSetCount=1, pSetLayouts=sl)
    check(lib.vkAllocateDescriptorSets(self.dev, ainfo, ds), "vkAllocateDescriptorSets")
    infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": b, "offset": 0, "range": 0xFFFFFFFFFFFFFFFF} for b in bufs])
    views = ffi.new("VkBufferView[]", [self.view(b, texel[i]) if i in texel else NULL for i, b in enumerate(bufs)])
    writes = ffi.new("VkWriteDescriptorSet[]", [{"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": ds[0], "dstBinding": i,
                     "descriptorCount": 1, "descriptorType": dtype(i), "pBufferInfo": infos + i, "pTexelBufferView": views + i}
                     for i in range(len(bufs))])
    lib.vkUpdateDescriptorSets(self.dev, len(bufs), writes, 0, NULL)
    return pipe[0], pl[0], ds
  def view(self, buf, fmt:int):
    v = ffi.new("VkBufferView*")
    info = new("VkBufferViewCreateInfo", buffer=buf, format=fmt, offset=0, range=0xFFFFFFFFFFFFFFFF)   # VK_WHOLE_SIZE
    check(lib.vkCreateBufferView(self.dev, info, NULL, v), "vkCreateBufferView")
    return v[0]

  def record(self, k, groups, n:int=1, pc=None, k2=None) -> float:
    """Record n dispatches of kernel k (alternating with k2, when given) with a full compute->compute barrier between them;
    returns host seconds per dispatch."""
    barrier = new("VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                  dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
    cs = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    check(lib.vkBeginCommandBuffer(self.cmd, new("VkCommandBufferBeginInfo")), "begin")
    lib.vkCmdResetQueryPool(self.cmd, self.qpool[0], 0, 2)
    lib.vkCmdWriteTimestamp(self.cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, self.qpool[0], 0)
    st = time.perf_counter()
    for i in range(n):   # rebind per dispatch, as a framework launching independent kernels must
      pipe, layout, ds = k if k2 is None or i % 2 == 0 else k2
      lib.vkCmdBindPipeline(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
      lib.vkCmdBindDescriptorSets(self.cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, ds, 0, NULL)
      if pc is not None: lib.vkCmdPushConstants(self.cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, ffi.sizeof(pc), pc)
      lib.vkCmdDispatch(self.cmd, *groups)
      if i + 1 < n: lib.vkCmdPipelineBarrier(self.cmd, cs, cs, 0, 1, barrier, 0, NULL, 0, NULL)
    rec = (time.perf_counter() - st) / n
    lib.vkCmdWriteTimestamp(self.cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.qpool[0], 1)
    check(lib.vkEndCommandBuffer(self.cmd), "end")
    return rec

  def submit(self) -> tuple[float, float]:
    """Submit the recorded command buffer and wait: (wall seconds, device seconds from the timestamps)."""
    cmds = ffi.new("VkCommandBuffer[1]", [self.cmd])
    st = time.perf_counter()
    check(lib.vkQueueSubmit(self.queue, 1, new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds), self.fence[0]), "submit")
    check(lib.vkWaitForFences(self.dev, 1, self.fence, 1, 0xFFFFFFFFFFFFFFFF), "wait")
    wall = time.perf_counter() - st
    lib.vkResetFences(self.dev, 1, self.fence)
    ts = ffi.new("uint64_t[2]")
    check(lib.vkGetQueryPoolResults(self.dev, self.qpool[0], 0, 2, 16, ts, 8, vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT), "queries")
    return wall, (ts[1] - ts[0]) * self.ts_period * 1e-9

def stat(vals:list[float], unit:str, **extra) -> dict:
  return {"med": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals), "unit": unit, **extra}

def run(quick:bool, out:dict):
  """Fills `out` as it goes, so a failure keeps the figures taken before it."""
  f, reps = Floor(), 3 if quick else 7
  def timed(fn, reps=reps, warm=1):
    for _ in range(warm): fn()
    return [fn() for _ in range(reps)]
  out["device"] = f.name
  tiny, _ = f.buffer(64)
  (x, _), (y, _), code = f.buffer(64), f.buffer(64), spirv(STEP)
  n = 300 if quick else 1000
  rec = f.record(f.kernel("", [y, x], 4, code), (1, 1, 1), n, pc=ffi.new("uint32_t[1]", [0]), k2=f.kernel("", [x, y], 4, code))
  runs = timed(f.submit)
  out["batched_dispatch"] = stat([w / n * 1e6 for w, _ in runs], "us", gpu_us=statistics.median(g / n * 1e6 for _, g in runs), record_us=rec * 1e6)
  if "--dispatch-only" in sys.argv: return
  f.record(f.kernel(TRIVIAL, [tiny]), (1, 1, 1), 1)
  out["submit_dispatch"] = stat([statistics.median(f.submit()[0] for _ in range(50)) * 1e6 for _ in range(reps)], "us")
  # cold kernel: a constant no driver cache has seen; GLSL->SPIR-V alone, then pipeline creation + first submit and wait
  glslang, cold = [], []
  for _ in range(reps + 1):
    src = TRIVIAL.replace("1.0", repr(random.uniform(1, 2)))
    st = time.perf_counter()
    code = spirv(src)
    glslang.append((time.perf_counter() - st) * 1e3)
    st = time.perf_counter()
    f.record(f.kernel("", [tiny], code=code), (1, 1, 1))
    f.submit()
    cold.append((time.perf_counter() - st) * 1e3)
  out["cold_glslang"], out["cold_pipeline"] = stat(glslang[1:], "ms"), stat(cold[1:], "ms")
  N = 16 << 20
  (c, _), (a, am), (b, bm) = f.buffer(4 * N), f.buffer(4 * N), f.buffer(4 * N)
  am[:] = bytes(4 * N)   # touch the pages so the first run doesn't pay the faults
  bm[:] = bytes(4 * N)
  f.record(f.kernel(ADD4, [c, a, b]), (N // 4 // 256, 1, 1))
  runs = timed(f.submit)
  out["add_vec4"] = stat([3 * 4 * N / w / 1e9 for w, _ in runs], "GB/s", gpu=statistics.median(3 * 4 * N / g / 1e9 for _, g in runs))
  G = 1024
  (c, _), (a, _), (b, _) = f.buffer(4 * G * G), f.buffer(4 * G * G), f.buffer(4 * G * G)
  f.record(f.kernel(GEMM, [c, a, b], 4), (G // 16, G // 16, 1), pc=ffi.new("uint32_t[1]", [G]))
  runs = timed(f.submit, reps=1 if quick else 3, warm=0 if quick else 1)
  out["gemm_naive_1024"] = stat([2 * G**3 / w / 1e9 for w, _ in runs], "GFLOP/s")
  out["gemm_tiled_1024"] = tiled_gemm(f, G, reps=1 if quick else 3, warm=0 if quick else 1)
  out["conv_tiled"] = tiled_conv(f, reps=1 if quick else 3, warm=0 if quick else 1)
  out["fma_peak"] = fma_peak(f, reps=1 if quick else 3)

def fma_peak(f, reps:int, chains:int=32, n:int=4096, groups:int=256) -> dict:
  """The arithmetic ceiling: `chains` independent multiply-adds per pass in registers, no memory inside the loop (a GEMM or conv
  here cannot pass it: every FMA of theirs also waits on reads)."""
  init = " ".join(f"float x{i} = float(gl_GlobalInvocationID.x + {i}u) * 1e-9;" for i in range(chains))
  src = f"""layout(local_size_x=64) in; layout(push_constant) uniform P {{ uint n; }}; layout(std430, binding=0) buffer C {{ float c[]; }};
void main() {{ float m = 0.999, a = 1e-7; {init}
  for (uint k = 0; k < n; k++) {{ {" ".join(f"x{i} = fma(x{i}, m, a);" for i in range(chains))} }}
  c[gl_GlobalInvocationID.x] = {" + ".join(f"x{i}" for i in range(chains))}; }}"""
  c, _ = f.buffer(4 * 64 * groups)
  return timed_rate(f, f.kernel(src, [c], 4), (groups, 1, 1), 2 * chains * n * 64 * groups, reps, 1, pc=ffi.new("uint32_t[1]", [n]))

# small integers: every product and sum is exact in float32, so the spot checks compare exactly
def ints(n:int, mul:int, mod:int) -> bytes: return array.array("f", [(i * mul) % mod - mod // 2 for i in range(n)]).tobytes()
def floats(mem) -> array.array: return array.array("f", bytes(mem))
def timed_rate(f, k, groups, flops:float, reps:int, warm:int, pc=None) -> dict:
  f.record(k, groups, pc=pc)
  for _ in range(warm): f.submit()
  runs = [f.submit() for _ in range(reps)]
  return stat([flops / w / 1e9 for w, _ in runs], "GFLOP/s", gpu=statistics.median(flops / g / 1e9 for _, g in runs))

def tiled_gemm(f, G:int, reps:int, warm:int) -> dict:
  (c, cm), (a, am), (b, bm) = f.buffer(4 * G * G), f.buffer(4 * G * G), f.buffer(4 * G * G)
  am[:], bm[:] = ints(G * G, 7, 13), ints(G * G, 5, 11)
  k = f.kernel(gemm_tiled(), [c, a, b], 4, texel={1: F4, 2: F4})
  res = timed_rate(f, k, (G // 64, G // 64, 1), 2 * G**3, reps, warm, pc=ffi.new("uint32_t[1]", [G]))
  A, B, C = floats(am), floats(bm), floats(cm)
  for i, j in ((random.randrange(G), random.randrange(G)) for _ in range(32)):
    if C[i * G + j] != sum(A[i * G + q] * B[q * G + j] for q in range(G)): raise RuntimeError(f"gemm_tiled wrong at {i},{j}")
  return res

def tiled_conv(f, reps:int, warm:int, N:int=8, CI:int=32, H:int=64, W:int=64, CO:int=64) -> dict:
  """The bench's conv2d row: b8 32->64 3x3 64x64, padding 1."""
  (o, om), (x, xm), (w, wm) = f.buffer(4 * N * CO * H * W), f.buffer(4 * N * CI * H * W), f.buffer(4 * CO * CI * 9)
  xm[:], wm[:] = ints(N * CI * H * W, 7, 13), ints(CO * CI * 9, 5, 11)
  k = f.kernel(conv_tiled(CI, H, W, CO), [o, x, x, w], texel={1: F4, 2: F1, 3: F1})
  res = timed_rate(f, k, (1, H // 4, N * CO // 8), 2 * N * CO * H * W * CI * 9, reps, warm)
  X, Wt, O = floats(xm), floats(wm), floats(om)
  def px(n, ci, y, x): return X[((n * CI + ci) * H + y) * W + x] if 0 <= y < H and 0 <= x < W else 0.0
  for n, co, y, xx in ((random.randrange(N), random.randrange(CO), random.choice((0, H - 1, random.randrange(H))),
                        random.choice((0, 7, 8, W - 1, random.randrange(W)))) for _ in range(32)):
    want = sum(px(n, ci, y + ky - 1, xx + kx - 1) * Wt[(co * CI + ci) * 9 + ky * 3 + kx] for ci in range(CI) for ky in range(3) for kx in range(3))
    if O[((n * CO + co) * H + y) * W + xx] != want: raise RuntimeError(f"conv_tiled wrong at {n},{co},{y},{xx}")
  return res

if __name__ == "__main__":
  res = {}
  try: run("--quick" in sys.argv, res)
  except Exception as e: res["error"] = f"{type(e).__name__}: {e}"
  if "--out" in sys.argv:
    with open(sys.argv[sys.argv.index("--out") + 1], "w") as fh: json.dump(res, fh)
  else: print(json.dumps(res))

/*
 * family_vcuda.c - GPU-Manager's vcuda family (tencent.com/vcuda-core and
 * vcuda-memory): shares of one GPU below 100 cores with memory in 256 MiB
 * blocks, or whole GPUs in multiples of 100, packed in GPU-Manager's order.
 * The family table and its operations (cluster/family.h).
 */
#include "cluster/family.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"
#include "cluster/podparts.h"

#include <inttypes.h>

extern const struct gpu_family gpu_family_vcuda;

#define VCUDA_BLOCK_MIB 256

static bool vcuda_claims(const struct gpu_amounts *a)
{
    bool core, memory;
    gpu_amount(a, RES_VCUDA_CORE, &core);
    gpu_amount(a, RES_VCUDA_MEMORY, &memory);
    return core || memory;
}

static int vcuda_whole(struct container_request *c, int64_t cores, struct strbuf *err)
{
    if (cores % 100 != 0) {
        strbuf_printf(err,
                      "container \"%s\": %s %" PRId64 " is neither below 100 (a share of one GPU) "
                      "nor a multiple of 100 (whole GPUs)",
                      c->name, RES_VCUDA_CORE, cores);
        return -1;
    }
    c->whole_gpus = (int)(cores / 100 > MAX_GPUS_PER_CONTAINER ? MAX_GPUS_PER_CONTAINER + 1 : cores / 100);
    return 0;
}

static int vcuda_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    bool has_core, has_memory;
    int64_t cores = gpu_amount(a, RES_VCUDA_CORE, &has_core);
    int64_t memory = gpu_amount(a, RES_VCUDA_MEMORY, &has_memory);
    if (!has_core) {
        strbuf_printf(err, "container \"%s\" asks for %s without %s", c->name, RES_VCUDA_MEMORY, RES_VCUDA_CORE);
        return -1;
    }
    c->cores = cores;
    c->memory = memory;
    c->memory_given = has_memory;
    if (cores >= 100)
        return vcuda_whole(c, cores, err);
    if (!has_memory) {
        strbuf_printf(err,
                      "container \"%s\" asks for %s %" PRId64 " (a share of one GPU) without %s; "
                      "GPU-Manager needs both (or a CustomResourceLimitation default)",
                      c->name, RES_VCUDA_CORE, cores, RES_VCUDA_MEMORY);
        return -1;
    }
    return 0;
}

static bool vcuda_offered(const struct node_spec *s)
{
    return node_spec_offer(s, &gpu_family_vcuda) > 0;
}

static int64_t vcuda_gpus_counted(const struct node_spec *s)
{
    int64_t cores = node_spec_offer(s, &gpu_family_vcuda);
    return cores >= 100 ? cores / 100 : 0;
}

/* GPU-Manager splits the node's vcuda-memory evenly unless the topology
 * annotation knows the GPU's memory. */
static int64_t vcuda_gpu_memory(const struct node_spec *s, int n, int64_t topology_mib)
{
    if (topology_mib > 0 && vcuda_offered(s))
        return topology_mib / VCUDA_BLOCK_MIB;
    return node_spec_memory_offer(s, gpu_family_vcuda.memory_pool) / n;
}

const struct gpu_family gpu_family_vcuda = {
    .name = "vcuda",
    .core_resource = RES_VCUDA_CORE,
    .memory_resource = RES_VCUDA_MEMORY,
    .node_core_resource = RES_VCUDA_CORE,
    .node_memory_resource = RES_VCUDA_MEMORY,
    .resources = {{RES_VCUDA_CORE, false}, {RES_VCUDA_MEMORY, false}},
    .kind = 0,
    .memory_pool = 0,
    .memory_unit_bytes = (int64_t)VCUDA_BLOCK_MIB << 20,
    .flags = GPU_FAMILY_SHARES | GPU_FAMILY_BINPACK_ONLY | GPU_FAMILY_GPU_MANAGER_KEYS,
    .placement = GPU_PLACE_SHARES_OR_WHOLE,
    .claims = vcuda_claims,
    .classify = vcuda_classify,
    .offered = vcuda_offered,
    .gpus_counted = vcuda_gpus_counted,
    .gpu_memory = vcuda_gpu_memory,
};

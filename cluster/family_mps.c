/*
 * family_mps.c - the NVIDIA MPS plugin's family (nvidia.com/mps-core and
 * mps-memory): shares of one GPU, 1..100 cores, memory in the plugin's
 * units (taken as 1 GiB, docs/reference.md). The family table and its
 * operations (cluster/family.h).
 */
#include "cluster/family.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"

#include <inttypes.h>

extern const struct gpu_family gpu_family_mps;

static bool mps_claims(const struct gpu_amounts *a)
{
    bool core, memory;
    gpu_amount(a, RES_MPS_CORE, &core);
    gpu_amount(a, RES_MPS_MEMORY, &memory);
    return core || memory;
}

static int mps_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    bool has_core, has_memory;
    int64_t cores = gpu_amount(a, RES_MPS_CORE, &has_core);
    int64_t memory = gpu_amount(a, RES_MPS_MEMORY, &has_memory);
    if (!has_core) {
        strbuf_printf(err, "container \"%s\" asks for %s without %s", c->name, RES_MPS_MEMORY, RES_MPS_CORE);
        return -1;
    }
    if (cores > 100) {
        strbuf_printf(err, "container \"%s\": %s %" PRId64 " is above 100 (MPS shares one GPU, 1..100)", c->name,
                      RES_MPS_CORE, cores);
        return -1;
    }
    c->cores = cores;
    c->memory = memory;
    c->memory_given = has_memory;
    return 0;
}

static bool mps_offered(const struct node_spec *s)
{
    return node_spec_offer(s, &gpu_family_mps) > 0;
}

static int64_t mps_gpus_counted(const struct node_spec *s)
{
    int64_t cores = node_spec_offer(s, &gpu_family_mps);
    return cores >= 100 ? cores / 100 : 0;
}

const struct gpu_family gpu_family_mps = {
    .name = "mps",
    .core_resource = RES_MPS_CORE,
    .memory_resource = RES_MPS_MEMORY,
    .node_core_resource = RES_MPS_CORE,
    .node_memory_resource = RES_MPS_MEMORY,
    .resources = {{RES_MPS_CORE, false}, {RES_MPS_MEMORY, false}},
    .kind = 1,
    .memory_pool = 1,
    .memory_unit_bytes = INT64_C(1) << 30,
    .flags = GPU_FAMILY_SHARES,
    .placement = GPU_PLACE_SHARES_OR_WHOLE,
    .claims = mps_claims,
    .classify = mps_classify,
    .offered = mps_offered,
    .gpus_counted = mps_gpus_counted,
};

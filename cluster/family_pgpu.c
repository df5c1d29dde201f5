/*
 * family_pgpu.c - whole GPUs (nvidia.com/gpu): a count of completely free
 * GPUs, chosen on the node's topology; on a HAMi node the same request is
 * served as that many vGPUs with HAMi's defaults. The family table and its
 * operations (cluster/family.h).
 */
#include "cluster/family.h"
#include "cluster/hami_pod.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"
#include "cluster/podparts.h"

extern const struct gpu_family gpu_family_pgpu;

/* nvidia.com/gpu alone, or with HAMi's marks of a plain whole-GPU
 * container (hami_amounts_whole_gpus); a container naming HAMi's memory or
 * cores otherwise is HAMi's. */
static bool pgpu_claims(const struct gpu_amounts *a)
{
    struct hami_amounts h;
    hami_amounts_read(a, &h);
    return h.has_gpus && !(hami_amounts_explicit(&h) && !hami_amounts_whole_gpus(&h));
}

/* Whole GPUs, or on a HAMi node as many vGPUs with HAMi's defaults (which
 * cannot fail within the whole-GPU limit). */
static int pgpu_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    struct hami_amounts h;
    hami_amounts_read(a, &h);
    int64_t n = h.gpus > MAX_GPUS_PER_CONTAINER ? MAX_GPUS_PER_CONTAINER + 1 : h.gpus;
    c->whole_gpus = (int)n;
    c->cores = n * 100;
    if (n <= HAMI_MAX_VGPUS)
        return hami_request_from_amounts(&h, c->name, &c->hami, err);
    return 0;
}

static bool pgpu_offered(const struct node_spec *s)
{
    return node_spec_offer(s, &gpu_family_pgpu) > 0;
}

/* On a HAMi node nvidia.com/gpu counts vGPUs; its devices are counted apart. */
static int64_t pgpu_gpus_counted(const struct node_spec *s)
{
    return s->hami ? 0 : node_spec_offer(s, &gpu_family_pgpu);
}

const struct gpu_family gpu_family_pgpu = {
    .name = "gpu",
    .core_resource = RES_NVIDIA_GPU,
    .node_core_resource = RES_NVIDIA_GPU,
    .resources = {{RES_NVIDIA_GPU, false}},
    .kind = 2,
    .memory_pool = -1,
    .flags = GPU_FAMILY_COUNTS_GPUS | GPU_FAMILY_ON_HAMI,
    .placement = GPU_PLACE_SHARES_OR_WHOLE,
    .claims = pgpu_claims,
    .classify = pgpu_classify,
    .offered = pgpu_offered,
    .gpus_counted = pgpu_gpus_counted,
};

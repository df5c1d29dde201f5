/*
 * family_hami.c - HAMi's vGPUs (nvidia.com/gpu with nvidia.com/gpumem,
 * gpumem-percentage or gpucores): served only by the devices a HAMi node
 * registers (cluster/hami_node.h), placed by the HAMi fit. The family
 * table and its operations (cluster/family.h); HAMi's pod and node
 * formats are in hami_pod.c and hami_node.c.
 */
#include "cluster/family.h"
#include "cluster/hami_node.h"
#include "cluster/hami_pod.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"

static const char *const hami_interest_only[] = {RES_HAMI_PRIORITY, NULL};

static bool hami_claims(const struct gpu_amounts *a)
{
    struct hami_amounts h;
    hami_amounts_read(a, &h);
    return hami_amounts_explicit(&h) && !hami_amounts_whole_gpus(&h);
}

static int hami_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    struct hami_amounts h;
    hami_amounts_read(a, &h);
    if (hami_request_from_amounts(&h, c->name, &c->hami, err) != 0)
        return -1;
    c->cores = (int64_t)c->hami.nums * c->hami.cores;
    return 0;
}

static bool hami_offered(const struct node_spec *s)
{
    return s->hami != NULL;
}

static void hami_explain_not_offered(const char *container, struct strbuf *why)
{
    strbuf_printf(why,
                  "node is not a HAMi node (no %s annotation); container \"%s\" asks for HAMi vGPUs (%s, %s or %s)",
                  HAMI_REGISTER_ANNOTATION, container, RES_HAMI_MEMORY, RES_HAMI_MEMORY_PERCENT, RES_HAMI_CORES);
}

const struct gpu_family gpu_family_hami = {
    .name = "hami",
    .core_resource = RES_NVIDIA_GPU,
    .memory_resource = RES_HAMI_MEMORY,
    .resources = {{RES_HAMI_MEMORY, true},
                  {RES_HAMI_MEMORY_PERCENT, false},
                  {RES_HAMI_CORES, true},
                  {RES_NVIDIA_GPU, false}},
    .interest_only = hami_interest_only,
    .kind = 2,
    .memory_pool = -1,
    .flags = GPU_FAMILY_ON_HAMI,
    .placement = GPU_PLACE_HAMI_DEVICES,
    .claims = hami_claims,
    .classify = hami_classify,
    .offered = hami_offered,
    .explain_not_offered = hami_explain_not_offered,
};

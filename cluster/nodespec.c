/* nodespec.c - Node object -> node_spec. See nodespec.h. */
#include "cluster/nodespec.h"
#include "cluster/hami_topology.h"
#include "cluster/podspec.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "topology/select.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *model_label = DEFAULT_GPU_MODEL_LABEL;
static const char *pool_label = DEFAULT_GPU_POOL_LABEL;

void nodespec_set_labels(const char *model, const char *pool)
{
    model_label = model;
    pool_label = pool;
}

/* Every string label, packed into one block (selectors read them). */
static int keep_labels(struct node_spec *s, const cJSON *labels)
{
    size_t size = 1;
    const cJSON *l;
    cJSON_ArrayForEach(l, labels) if (cJSON_IsString(l) && l->string) size +=
        strlen(l->string) + strlen(l->valuestring) + 2;
    if (size == 1)
        return 0;
    char *p = s->labels = malloc(size);
    if (!p)
        return -1;
    cJSON_ArrayForEach(l, labels) if (cJSON_IsString(l) && l->string)
    {
        size_t k = strlen(l->string) + 1, v = strlen(l->valuestring) + 1;
        memcpy(p, l->string, k);
        memcpy(p + k, l->valuestring, v);
        p += k + v;
    }
    *p = '\0';
    return 0;
}

const char *node_spec_label(const struct node_spec *s, const char *key)
{
    for (const char *p = s ? s->labels : NULL; p && *p;) {
        const char *value = p + strlen(p) + 1;
        if (strcmp(p, key) == 0)
            return value;
        p = value + strlen(value) + 1;
    }
    return NULL;
}

const char *node_spec_model_name(const struct node_spec *s)
{
    if (!s)
        return "";
    if (s->model)
        return s->model;
    if (s->topology && s->topology->count > 0 && s->topology->gpus[0].model)
        return s->topology->gpus[0].model;
    return "";
}

static int read_labels(struct node_spec *s, const cJSON *meta)
{
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    if (cJSON_IsObject(labels) && keep_labels(s, labels) != 0)
        return -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(labels, model_label);
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(labels, pool_label);
    if (cJSON_IsString(model) && *model->valuestring && !(s->model = strdup(model->valuestring)))
        return -1;
    if (cJSON_IsString(pool) && *pool->valuestring && !(s->pool = strdup(pool->valuestring)))
        return -1;
    return 0;
}

/* One offered amount. Counts (cores, GPUs) past GPU_AMOUNT_MAX are capped
 * at it (the GPU count they imply is clamped later anyway), so that sums
 * over nodes (capacity figures, issue 22) stay far from int64's end.
 * Memory amounts are divided among the GPUs and summed with pods' charges,
 * so they must stay within GPU_AMOUNT_MAX. A value that fails either check
 * is refused (counted as 0) with a reason; the rest of the node is still
 * used. */
static int64_t amount(const cJSON *list, const char *resource, const char *node, bool is_memory)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(list, resource);
    int64_t value = 0;
    if (!v)
        return 0;
    qty_status st = QTY_ERR_SYNTAX;
    if (cJSON_IsString(v)) {
        st = quantity_parse_int(v->valuestring, strlen(v->valuestring), &value);
    } else if (cJSON_IsNumber(v)) {
        /* The same rule as pods: a fraction of an integer resource is invalid. */
        double d = v->valuedouble;
        st = d < 0 ? QTY_ERR_NEGATIVE : d != floor(d) ? QTY_ERR_FRACTION : d >= 9e18 ? QTY_ERR_RANGE : QTY_OK;
        value = st == QTY_OK ? (int64_t)d : 0;
    }
    if (st == QTY_OK && is_memory && value > GPU_AMOUNT_MAX) {
        log_warn("node %s: %s %" PRId64 " is out of range (at most %" PRId64 "); counted as 0", node, resource, value,
                 GPU_AMOUNT_MAX);
        return 0;
    }
    if (st != QTY_OK) {
        log_warn("node %s: %s is not usable (%s); counted as 0", node, resource, quantity_status_text(st));
        return 0;
    }
    if (value > GPU_AMOUNT_MAX) {
        log_warn("node %s: %s %" PRId64 " is out of range; counted as %" PRId64, node, resource, value, GPU_AMOUNT_MAX);
        return GPU_AMOUNT_MAX;
    }
    return value;
}

/* Allocatable is what the kubelet offers to pods; capacity is the fallback
 * for hand-written state files that omit it. */
static const cJSON *offered_amounts(const cJSON *status)
{
    const cJSON *alloc = cJSON_GetObjectItemCaseSensitive(status, "allocatable");
    if (cJSON_IsObject(alloc) && alloc->child)
        return alloc;
    return cJSON_GetObjectItemCaseSensitive(status, "capacity");
}

static void read_topology(struct node_spec *spec, const cJSON *meta)
{
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(ann, TOPOLOGY_ANNOTATION);
    if (!cJSON_IsString(text))
        return;
    char *err = NULL;
    spec->topology = topology_parse(text->valuestring, &err);
    if (!spec->topology) {
        spec->topology_error = err;
        log_warn("node %s: annotation %s ignored: %s", spec->name, TOPOLOGY_ANNOTATION, err ? err : "out of memory");
    }
}

/* design.md section 3, in int64: a count read from the API is never narrowed
 * to int before it is known to fit (2^32 + 1 GPUs must not become 1). The
 * first family in the registry that counts GPUs on the node counts them. */
static int64_t advertised_gpus(const struct node_spec *s)
{
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        int64_t n = fam->gpus_counted ? fam->gpus_counted(s) : 0;
        if (n > 0)
            return n;
    }
    if (s->hami)
        return 0; /* the HAMi devices are counted apart */
    return s->topology ? s->topology->count : 0;
}

/* Clamped to what the model and the topology search handle (design.md: 64). */
static int count_gpus(const struct node_spec *s)
{
    int64_t n = advertised_gpus(s);
    if (n > TOPOLOGY_MAX_GPUS) {
        log_warn("node %s advertises %" PRId64 " GPUs; only the first %d are used", s->name, n, TOPOLOGY_MAX_GPUS);
        return TOPOLOGY_MAX_GPUS;
    }
    return (int)n;
}

/* A topology that disagrees with the advertised GPU count would map minors
 * onto the wrong devices, so it is dropped rather than half-used. */
static void check_topology_fits(struct node_spec *s)
{
    int advertised = s->gpu_count == 0 && s->hami ? s->hami->count : s->gpu_count;
    if (!s->topology || s->topology->count == advertised)
        return;
    char msg[160];
    snprintf(msg, sizeof(msg), "the annotation lists %d GPUs but the node advertises %d", s->topology->count,
             advertised);
    log_warn("node %s: annotation %s ignored: %s", s->name, TOPOLOGY_ANNOTATION, msg);
    topology_free(s->topology);
    s->topology = NULL;
    s->topology_error = strdup(msg);
}

/* design.md section 5: a node without the annotation is all-SYS with unknown
 * NUMA, and still schedules; the set search then only breaks ties. */
/* single_best, single_gpus and single_exact: what scoring one whole GPU
 * asks of the shape, once per Node instead of at every charge. */
static void score_single_gpus(struct node_spec *s)
{
    s->single_best = topology_best_possible(s->shape, 1);
    s->single_exact = true;
    for (int g = 0; g < s->gpu_count && g < 64; g++) {
        int64_t alone = topology_set_score(s->shape, 1ULL << g);
        if (alone == s->single_best && s->single_best > 0)
            s->single_gpus |= 1ULL << g;
        else if (alone != 0)
            s->single_exact = false;
    }
}

static struct gpu_topology *all_sys_shape(int count)
{
    struct gpu_topology *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->version = 1;
    t->count = count;
    t->gpus = calloc((size_t)count, sizeof(*t->gpus));
    t->links = calloc((size_t)count * (size_t)count, sizeof(*t->links));
    if (!t->gpus || !t->links) {
        topology_free(t);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        t->gpus[i] = (struct topo_gpu){.index = i, .minor = i, .numa = -1};
        for (int j = 0; j < count; j++)
            t->links[i * count + j] = (struct topo_link){i == j ? TOPO_LINK_SELF : TOPO_LINK_SYS, 0};
    }
    return t;
}

static void fill_gpus(struct node_spec *s)
{
    int n = s->gpu_count;
    for (int i = 0; i < n; i++) {
        struct node_gpu_spec *g = &s->gpus[i];
        const struct topo_gpu *t = s->topology ? &s->topology->gpus[i] : NULL;
        g->minor = t ? t->minor : i;
        g->numa = t ? t->numa : -1;
        for (size_t f = 0; f < gpu_family_count(); f++) {
            const struct gpu_family *fam = gpu_family_at(f);
            if (fam->memory_pool < 0)
                continue;
            g->memory[fam->memory_pool] =
                fam->gpu_memory ? fam->gpu_memory(s, n, t ? t->memory_mib : 0) : s->memory_offer[fam->memory_pool] / n;
        }
    }
}

/* The topology GPU of each HAMi device: by UUID when the annotation names
 * UUIDs, else by index. A mapping that is not one-to-one is not used. */
static void map_hami_topology(struct node_spec *s)
{
    const struct gpu_topology *t = s->topology;
    struct hami_node *h = s->hami;
    if (!t || !h || t->count != h->count)
        return;
    uint64_t seen = 0;
    for (int i = 0; i < h->count; i++) {
        struct hami_device *d = &h->devices[i];
        d->topo = -1;
        for (int g = 0; g < t->count && d->topo < 0; g++)
            if (t->gpus[g].uuid && strcmp(t->gpus[g].uuid, d->uuid) == 0)
                d->topo = g;
        if (d->topo < 0 && d->index < t->count)
            d->topo = d->index;
        if (d->topo < 0 || (seen >> d->topo & 1))
            break;
        seen |= 1ULL << d->topo;
    }
    if (__builtin_popcountll(seen) == h->count)
        return;
    for (int i = 0; i < h->count; i++)
        h->devices[i].topo = -1;
    log_warn("node %s: annotation %s does not map one-to-one onto the HAMi devices; not used for them", s->name,
             TOPOLOGY_ANNOTATION);
}

/* Quota counts by model; a HAMi node without the model label is of its
 * (first) device's type, e.g. "NVIDIA-Tesla V100-PCIE-32GB". */
/* A MIG node without the model label is of its parent GPU's product
 * (nvidia.com/gpu.product, the -MIG-<profile> suffix removed), e.g.
 * "NVIDIA-A100-SXM4-40GB"; under the single strategy, of its instances. */
static int mig_model(struct node_spec *s)
{
    const struct mig_node *m = s->mig;
    if (s->model || !m || !m->product[0])
        return 0;
    /* Single strategy: nvidia.com/gpu counts instances, so the model says
     * so ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", as GFD's product label). */
    if (m->single && m->nprofiles > 0) {
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "%s-MIG-%s", m->product, m->profiles[0].profile.canonical);
        return (s->model = strbuf_detach(&sb, NULL)) ? 0 : -1;
    }
    return (s->model = strdup(m->product)) ? 0 : -1;
}

static int hami_model(struct node_spec *s)
{
    if (s->model || !s->hami || s->hami->count == 0)
        return 0;
    return (s->model = strdup(s->hami->devices[0].type)) ? 0 : -1;
}

/* Each family's node resources (a name two families share is read once
 * per family: the same figure). */
static void read_offers(struct node_spec *s, const cJSON *offered)
{
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        if (fam->node_core_resource)
            s->offer[f] = amount(offered, fam->node_core_resource, s->name, false);
        if (fam->node_memory_resource && fam->memory_pool >= 0)
            s->memory_offer[fam->memory_pool] = amount(offered, fam->node_memory_resource, s->name, true);
    }
}

/* NVIDIA's device plugin and GFD: the node's MIG instances by profile
 * (cluster/mig.h), kept only when the node says anything of MIG. Entries
 * that cannot be used are skipped there, with reasons, said at debug level
 * (a node repeats them at every update). */
static int read_mig(struct node_spec *s, const cJSON *meta, const cJSON *status)
{
    struct mig_node *m = malloc(sizeof(*m));
    if (!m)
        return -1;
    mig_node_read(cJSON_GetObjectItemCaseSensitive(meta, "labels"),
                  cJSON_GetObjectItemCaseSensitive(status, "capacity"),
                  cJSON_GetObjectItemCaseSensitive(status, "allocatable"), m);
    if (m->nprofiles == 0 && m->strategy == MIG_STRATEGY_ABSENT) {
        free(m);
        return 0;
    }
    for (int i = 0; i < m->nskipped && i < MIG_MAX_REASONS; i++)
        log_debug("node %s: MIG entry skipped: %s", s->name, m->skipped[i]);
    s->mig = m;
    return 0;
}

/* The offer of the node core resource `name`, as read_offers read it. */
static int64_t offer_named(const struct node_spec *s, const char *name)
{
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const char *res = gpu_family_at(f)->node_core_resource;
        if (res && strcmp(res, name) == 0)
            return s->offer[f];
    }
    return 0;
}

struct node_spec *node_spec_from_json(const cJSON *obj, char **err)
{
    if (err)
        *err = NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    if (!cJSON_IsString(name) || !*name->valuestring) {
        if (err)
            *err = strdup("node has no metadata.name");
        return NULL;
    }
    struct node_spec *s = calloc(1, sizeof(*s));
    if (!s || !(s->name = strdup(name->valuestring)))
        goto oom;
    const cJSON *offered = offered_amounts(cJSON_GetObjectItemCaseSensitive(obj, "status"));
    read_offers(s, offered);
    if (read_labels(s, meta) != 0)
        goto oom;
    read_topology(s, meta);
    if (read_mig(s, meta, cJSON_GetObjectItemCaseSensitive(obj, "status")) != 0 || mig_model(s) != 0)
        goto oom;
    if (hami_node_from_annotations(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
                                   offer_named(s, RES_NVIDIA_GPU), s->name, &s->hami) != 0 ||
        hami_topology_read(cJSON_GetObjectItemCaseSensitive(meta, "annotations"), s->hami, s->name) != 0 ||
        hami_model(s) != 0)
        goto oom;
    for (size_t f = 0; f < gpu_family_count(); f++)
        if (gpu_family_at(f)->offered(s))
            s->offers |= (uint8_t)(1u << f);
    s->gpu_count = count_gpus(s);
    check_topology_fits(s);
    map_hami_topology(s);
    if (s->gpu_count > 0) {
        s->gpus = calloc((size_t)s->gpu_count, sizeof(*s->gpus));
        if (!s->gpus)
            goto oom;
        fill_gpus(s);
        s->shape = s->topology ? s->topology : all_sys_shape(s->gpu_count);
        if (!s->shape)
            goto oom;
        score_single_gpus(s);
    }
    return s;
oom:
    node_spec_free(s);
    if (err)
        *err = strdup("out of memory");
    return NULL;
}

void node_spec_free(struct node_spec *s)
{
    if (!s)
        return;
    free(s->name);
    free(s->gpus);
    if (s->shape != s->topology)
        topology_free(s->shape);
    topology_free(s->topology);
    free(s->topology_error);
    free(s->model);
    free(s->pool);
    free(s->labels);
    free(s->mig);
    if (s->hami) /* attached by hami_topology_read, so freed here (hami_node.c does not know it) */
        hami_pair_scores_free(s->hami->pair_scores);
    hami_node_free(s->hami);
    free(s);
}

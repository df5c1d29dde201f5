/* nodespec.c - Node object -> node_spec. See nodespec.h. */
#include "cluster/nodespec.h"
#include "cluster/podspec.h"
#include "lib/log.h"
#include "lib/quantity.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VCUDA_BLOCK_MIB 256

static const char *model_label = DEFAULT_GPU_MODEL_LABEL;
static const char *pool_label = DEFAULT_GPU_POOL_LABEL;

void nodespec_set_labels(const char *model, const char *pool)
{
    model_label = model;
    pool_label = pool;
}

static int read_labels(struct node_spec *s, const cJSON *meta)
{
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(labels, model_label);
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(labels, pool_label);
    if (cJSON_IsString(model) && *model->valuestring && !(s->model = strdup(model->valuestring)))
        return -1;
    if (cJSON_IsString(pool) && *pool->valuestring && !(s->pool = strdup(pool->valuestring)))
        return -1;
    return 0;
}

/* One offered amount. Counts (cores, GPUs) may be any int64: the GPU count
 * they imply is clamped later. Memory amounts are divided among the GPUs
 * and summed with pods' charges, so they must stay within GPU_AMOUNT_MAX.
 * A value that fails either check is refused (counted as 0) with a reason;
 * the rest of the node is still used. */
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

/* DESIGN section 3, in int64: a count read from the API is never narrowed
 * to int before it is known to fit (2^32 + 1 GPUs must not become 1). */
static int64_t advertised_gpus(const struct node_spec *s)
{
    if (s->vcuda_core >= 100)
        return s->vcuda_core / 100;
    if (s->mps_core >= 100)
        return s->mps_core / 100;
    if (s->nvidia_gpu > 0)
        return s->nvidia_gpu;
    return s->topology ? s->topology->count : 0;
}

/* Clamped to what the model and the topology search handle (DESIGN: 64). */
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
    if (!s->topology || s->topology->count == s->gpu_count)
        return;
    char msg[160];
    snprintf(msg, sizeof(msg), "the annotation lists %d GPUs but the node advertises %d", s->topology->count,
             s->gpu_count);
    log_warn("node %s: annotation %s ignored: %s", s->name, TOPOLOGY_ANNOTATION, msg);
    topology_free(s->topology);
    s->topology = NULL;
    s->topology_error = strdup(msg);
}

/* DESIGN section 5: a node without the annotation is all-SYS with unknown
 * NUMA, and still schedules; the set search then only breaks ties. */
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
        g->vcuda_memory = s->vcuda_memory / n;
        if (t && t->memory_mib > 0 && s->vcuda_core > 0)
            g->vcuda_memory = t->memory_mib / VCUDA_BLOCK_MIB;
        g->mps_memory = s->mps_memory / n;
    }
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
    s->vcuda_core = amount(offered, RES_VCUDA_CORE, s->name, false);
    s->vcuda_memory = amount(offered, RES_VCUDA_MEMORY, s->name, true);
    s->mps_core = amount(offered, RES_MPS_CORE, s->name, false);
    s->mps_memory = amount(offered, RES_MPS_MEMORY, s->name, true);
    s->nvidia_gpu = amount(offered, RES_NVIDIA_GPU, s->name, false);
    if (read_labels(s, meta) != 0)
        goto oom;
    read_topology(s, meta);
    s->gpu_count = count_gpus(s);
    check_topology_fits(s);
    if (s->gpu_count > 0) {
        s->gpus = calloc((size_t)s->gpu_count, sizeof(*s->gpus));
        if (!s->gpus)
            goto oom;
        fill_gpus(s);
        s->shape = s->topology ? s->topology : all_sys_shape(s->gpu_count);
        if (!s->shape)
            goto oom;
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
    free(s);
}

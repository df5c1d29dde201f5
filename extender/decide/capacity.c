/* capacity.c - capacity, fragmentation and stranded GPU resources. See capacity.h. */
#include "extender/decide/capacity.h"
#include "cluster/hami_node.h"
#include "cluster/podspec.h"
#include "extender/decide/metrics.h"
#include "lib/dict.h"
#include "lib/grow.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The resources of the figures: two per registered family (cluster/family.h),
 * r = 2 x its index for its node core resource and 2 x its index + 1 for
 * its node memory resource; a family without one leaves the slot unnamed
 * (and its allocatable 0, so no series is written for it). */
#define R_COUNT (2 * GPU_FAMILY_MAX)

static const struct gpu_family *family_of(int r)
{
    return gpu_family_at((size_t)r / 2);
}

static bool is_memory(int r)
{
    return r % 2 == 1;
}

static const char *res_name(int r)
{
    const struct gpu_family *f = family_of(r);
    if (!f)
        return NULL;
    return is_memory(r) ? (f->memory_pool >= 0 ? f->node_memory_resource : NULL) : f->node_core_resource;
}

/* The unit each resource counts in, and its size in the metric's base unit
 * (a vcuda-memory block is 256 MiB; an mps-memory unit is taken as 1 GiB,
 * the unit of the reference MPS device plugin: docs/reference.md). */
enum res_unit { UNIT_CORES, UNIT_BYTES, UNIT_GPUS };

static enum res_unit res_unit(int r)
{
    if (is_memory(r))
        return UNIT_BYTES;
    return family_of(r) && (family_of(r)->flags & GPU_FAMILY_COUNTS_GPUS) ? UNIT_GPUS : UNIT_CORES;
}

/* v times scale, saturating at INT64_MAX (amounts are capped at
 * GPU_AMOUNT_MAX blocks, which in bytes would pass int64's end). */
static int64_t scaled(int64_t v, int64_t scale)
{
    int64_t r;
    if (__builtin_mul_overflow(v, scale, &r))
        return v < 0 ? INT64_MIN : INT64_MAX;
    return r;
}

static int64_t in_base_unit(int r, int64_t v)
{
    return scaled(v, is_memory(r) && family_of(r) ? family_of(r)->memory_unit_bytes : 1);
}

enum gpu_use { USE_IDLE, USE_PARTIAL, USE_FULL, USE_COUNT };

static const char *const use_names[USE_COUNT] = {"idle", "partial", "full"};

/* The figures of one model/pool group, one node, or the whole cluster. */
#define FIGURE_UNITS 32

struct figures {
    int64_t allocatable[R_COUNT];
    int64_t allocated[R_COUNT];
    int64_t stranded[R_COUNT]; /* core and memory resources only */
    int64_t gpus[USE_COUNT];
    int64_t free_cores[USE_COUNT]; /* on idle and on partly used GPUs */
    int64_t nodes;
    /* Units self-placing families keep (MIG instances), per resource name;
     * past FIGURE_UNITS distinct names the rest are not summed. */
    int nunits;

    struct unit_figure {
        char resource[GPU_AMOUNT_NAME_MAX + 32];
        int64_t total, used;
    } units[FIGURE_UNITS];
};

struct group {
    const char *model, *pool; /* point into a node_spec: valid while the read lock is held */
    struct figures f;
};

/* Every sum saturates: per-node amounts are capped at GPU_AMOUNT_MAX when
 * the node is read (nodespec.c), so only some 8 million absurd nodes could
 * reach int64's end, and a figure stuck at INT64_MAX is still a figure,
 * where a wrapped one would be negative (issue 22). */
static inline void add_to(int64_t *to, int64_t v)
{
    if (__builtin_add_overflow(*to, v, to))
        *to = v < 0 ? INT64_MIN : INT64_MAX;
}

static inline int64_t sum2(int64_t a, int64_t b)
{
    add_to(&a, b);
    return a;
}

static const char *model_of(const struct node_state *n)
{
    const char *m = node_spec_model_name(n->spec);
    return *m ? m : "unknown";
}

static const char *pool_of(const struct node_state *n)
{
    return n->spec && n->spec->pool ? n->spec->pool : "none";
}

static enum gpu_use use_of(const struct gpu_state *g)
{
    if (g->core_used >= 100)
        return USE_FULL;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        if (g->mem_used[p] != 0)
            return USE_PARTIAL;
    return g->core_used == 0 ? USE_IDLE : USE_PARTIAL;
}

/* The family a node's GPUs are shared by (its pods' cores land in core_used). */
static const struct gpu_family *core_family(const struct node_spec *s)
{
    return gpu_family_primary(s);
}

/* Free cores on a GPU whose memory (in the core family's pool) is all
 * taken, and free memory on one whose cores are. */
static void stranded_on_gpu(const struct gpu_state *g, const struct gpu_family *core, struct figures *f)
{
    int pool = core ? core->memory_pool : -1;
    if (pool < 0 || g->mem_total[pool] <= 0)
        return;
    int r = 2 * (int)gpu_family_index(core);
    int64_t cores_free = 100 - g->core_used;
    if (g->mem_used[pool] >= g->mem_total[pool] && cores_free > 0)
        add_to(&f->stranded[r], cores_free);
    if (cores_free <= 0 && g->mem_total[pool] > g->mem_used[pool])
        add_to(&f->stranded[r + 1], g->mem_total[pool] - g->mem_used[pool]);
}

static void add_unit(struct figures *f, const char *resource, int64_t total, int64_t used)
{
    int i = 0;
    while (i < f->nunits && strcmp(f->units[i].resource, resource) != 0)
        i++;
    if (i == f->nunits) {
        if (f->nunits == FIGURE_UNITS || strlen(resource) >= sizeof(f->units[0].resource))
            return;
        memcpy(f->units[i].resource, resource, strlen(resource) + 1);
        f->units[i].total = f->units[i].used = 0;
        f->nunits++;
    }
    add_to(&f->units[i].total, total);
    add_to(&f->units[i].used, used);
}

static void put_node_unit(void *ctx, const char *resource, int64_t total, int64_t used)
{
    add_unit(ctx, resource, total, used);
}

/* The self-placing families' units of node n, added to f. */
static void add_node_units(const struct node_state *n, struct figures *f)
{
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *fam = gpu_family_at(i);
        if (fam->units && n->family_state[i])
            fam->units(n->family_state[i], n, put_node_unit, f);
    }
}

/* Add one node's figures to f. */
static void add_node(const struct node_state *n, struct figures *f)
{
    const struct node_spec *s = n->spec;
    if (!s)
        return;
    f->nodes++;
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *fam = gpu_family_at(i);
        if (fam->node_core_resource)
            add_to(&f->allocatable[2 * i], node_spec_offer(s, fam));
        if (fam->node_memory_resource)
            add_to(&f->allocatable[2 * i + 1], node_spec_memory_offer(s, fam->memory_pool));
    }
    add_node_units(n, f);
    const struct gpu_family *core = core_family(s);
    int64_t cores = n->unattributed.cores, mem[GPU_MEMORY_POOLS];
    memcpy(mem, n->unattributed.mem, sizeof(mem));
    for (int i = 0; i < n->gpu_count; i++) {
        const struct gpu_state *g = &n->gpus[i];
        enum gpu_use use = use_of(g);
        f->gpus[use]++;
        if (use != USE_FULL)
            add_to(&f->free_cores[use], 100 - g->core_used);
        add_to(&cores, g->core_used);
        for (int p = 0; p < GPU_MEMORY_POOLS; p++)
            add_to(&mem[p], g->mem_used[p]);
        stranded_on_gpu(g, core, f);
    }
    if (n->gpu_count == 0 || !core)
        return;
    bool counts_gpus = core->flags & GPU_FAMILY_COUNTS_GPUS;
    add_to(&f->allocated[2 * gpu_family_index(core)], counts_gpus ? cores / 100 + (cores % 100 > 0) : cores);
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *fam = gpu_family_at(i);
        if (fam->node_memory_resource && fam->memory_pool >= 0)
            add_to(&f->allocated[2 * i + 1],
                   node_spec_memory_offer(s, fam->memory_pool) > 0 ? mem[fam->memory_pool] : 0);
    }
}

/* Does the node have GPUs or units of a self-placing family to count? */
static bool has_gpu_figures(const struct node_state *n)
{
    if (n->gpu_count > 0)
        return true;
    for (size_t i = 0; i < gpu_family_count(); i++)
        if (n->family_state[i])
            return true;
    return false;
}

static void add_figures(struct figures *to, const struct figures *from)
{
    for (int i = 0; i < from->nunits; i++)
        add_unit(to, from->units[i].resource, from->units[i].total, from->units[i].used);
    for (int r = 0; r < R_COUNT; r++) {
        add_to(&to->allocatable[r], from->allocatable[r]);
        add_to(&to->allocated[r], from->allocated[r]);
        add_to(&to->stranded[r], from->stranded[r]);
    }
    for (int u = 0; u < USE_COUNT; u++) {
        add_to(&to->gpus[u], from->gpus[u]);
        add_to(&to->free_cores[u], from->free_cores[u]);
    }
    add_to(&to->nodes, from->nodes);
}

static double fragmentation(const struct figures *f)
{
    int64_t free_all = sum2(f->free_cores[USE_IDLE], f->free_cores[USE_PARTIAL]);
    return free_all > 0 ? (double)f->free_cores[USE_PARTIAL] / (double)free_all : 0.0;
}

static int compare_groups(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    return c ? c : strcmp(x->pool, y->pool);
}

/* Nodes with GPUs grouped by model and pool, sorted; call under the read lock.
 * NULL with *n 0 when memory ran out (or no node has GPUs). */
static struct group *collect(struct cluster_cache *cache, size_t *n)
{
    struct dict index;
    struct group *groups = NULL;
    size_t count = 0, cap = 0, pos = 0;
    *n = 0;
    if (dict_init(&index, 16) != 0)
        return NULL;
    struct dict_entry *de;
    while ((de = dict_next(&cache->nodes, &pos))) {
        const struct node_state *node = de->value;
        if (!node->present || !has_gpu_figures(node))
            continue;
        struct strbuf key;
        strbuf_init(&key);
        strbuf_printf(&key, "%s\x1f%s", model_of(node), pool_of(node));
        uintptr_t at = key.data ? (uintptr_t)dict_get(&index, key.data) : 0;
        if (!at && key.data) {
            struct group *grown = grow_array(groups, &cap, count + 1, sizeof(*grown), 8);
            if (grown)
                groups = grown;
        }
        if (!at && key.data && count < cap && dict_set(&index, key.data, (void *)(uintptr_t)(count + 1), NULL) == 0) {
            groups[count] = (struct group){.model = model_of(node), .pool = pool_of(node)};
            at = ++count;
        }
        strbuf_free(&key);
        if (!at) { /* out of memory: partial figures would mislead */
            free(groups);
            dict_free(&index);
            return NULL;
        }
        add_node(node, &groups[at - 1].f);
    }
    dict_free(&index);
    if (count)
        qsort(groups, count, sizeof(*groups), compare_groups);
    *n = count;
    return groups;
}

static void put_group_labels(struct strbuf *out, const struct group *g)
{
    strbuf_puts(out, "model=");
    metrics_label_value(out, g->model);
    strbuf_puts(out, ",pool=");
    metrics_label_value(out, g->pool);
}

static void family(struct strbuf *out, const char *name, const char *help)
{
    strbuf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* One gauge family over the groups, one series per resource (values picked by get). */
static void render_resource_family(struct strbuf *out, const struct group *groups, size_t n, const char *name,
                                   const char *help, const int64_t *(*get)(const struct figures *), bool shared_only)
{
    family(out, name, help);
    for (size_t i = 0; i < n; i++) {
        const int64_t *v = get(&groups[i].f);
        for (int r = 0; r < R_COUNT; r++) {
            const char *resource = res_name(r);
            if (!groups[i].f.allocatable[r] || (shared_only && res_unit(r) == UNIT_GPUS) || !resource)
                continue;
            strbuf_printf(out, "%s{resource=\"%s\",", name, resource);
            put_group_labels(out, &groups[i]);
            strbuf_printf(out, "} %" PRId64 "\n", v[r]);
        }
    }
}

static const int64_t *get_allocatable(const struct figures *f)
{
    return f->allocatable;
}

static const int64_t *get_allocated(const struct figures *f)
{
    return f->allocated;
}

static const int64_t *get_stranded(const struct figures *f)
{
    return f->stranded;
}

static void render_use_family(struct strbuf *out, const struct group *groups, size_t n, const char *name,
                              const char *help, bool cores)
{
    family(out, name, help);
    for (size_t i = 0; i < n; i++)
        for (int u = 0; u < (cores ? USE_FULL : USE_COUNT); u++) {
            strbuf_printf(out, "%s{state=\"%s\",", name, use_names[u]);
            put_group_labels(out, &groups[i]);
            strbuf_printf(out, "} %" PRId64 "\n", cores ? groups[i].f.free_cores[u] : groups[i].f.gpus[u]);
        }
}

/* One family per unit (issue 27): the resources of that unit only, memory
 * converted to bytes. */
static void render_unit_family(struct strbuf *out, const struct group *groups, size_t n, const char *name,
                               const char *help, enum res_unit unit, const int64_t *(*get)(const struct figures *))
{
    family(out, name, help);
    for (size_t i = 0; i < n; i++) {
        const int64_t *v = get(&groups[i].f);
        for (int r = 0; r < R_COUNT; r++) {
            const char *resource = res_name(r);
            if (!groups[i].f.allocatable[r] || res_unit(r) != unit || !resource)
                continue;
            strbuf_printf(out, "%s{resource=\"%s\",", name, resource);
            put_group_labels(out, &groups[i]);
            strbuf_printf(out, "} %" PRId64 "\n", in_base_unit(r, v[r]));
        }
    }
}

static void render_unit_families(struct strbuf *out, const struct group *groups, size_t n)
{
    render_unit_family(out, groups, n, "gqa_resource_allocatable_cores",
                       "GPU cores nodes offer (100 = one GPU), per core resource, GPU model and pool.", UNIT_CORES,
                       get_allocatable);
    render_unit_family(out, groups, n, "gqa_resource_allocatable_memory_bytes",
                       "GPU memory nodes offer, in bytes, per memory resource, GPU model and pool.", UNIT_BYTES,
                       get_allocatable);
    render_unit_family(out, groups, n, "gqa_resource_allocatable_gpus",
                       "Whole GPUs nodes offer (nvidia.com/gpu), per GPU model and pool.", UNIT_GPUS, get_allocatable);
    render_unit_family(out, groups, n, "gqa_resource_allocated_cores",
                       "GPU cores held by pods (100 = one GPU), per core resource, GPU model and pool.", UNIT_CORES,
                       get_allocated);
    render_unit_family(out, groups, n, "gqa_resource_allocated_memory_bytes",
                       "GPU memory held by pods, in bytes, per memory resource, GPU model and pool.", UNIT_BYTES,
                       get_allocated);
    render_unit_family(out, groups, n, "gqa_resource_allocated_gpus",
                       "Whole GPUs held by pods (nvidia.com/gpu), per GPU model and pool.", UNIT_GPUS, get_allocated);
    render_unit_family(out, groups, n, "gqa_resource_stranded_cores",
                       "Free GPU cores on GPUs whose memory is all taken, per core resource, GPU model and pool.",
                       UNIT_CORES, get_stranded);
    render_unit_family(out, groups, n, "gqa_resource_stranded_memory_bytes",
                       "Free GPU memory in bytes on GPUs whose cores are all taken, per memory resource, GPU model "
                       "and pool.",
                       UNIT_BYTES, get_stranded);
}

static void render_instance_family(struct strbuf *out, const struct group *groups, size_t n, const char *name,
                                   const char *help, bool used)
{
    family(out, name, help);
    for (size_t i = 0; i < n; i++)
        for (int u = 0; u < groups[i].f.nunits; u++) {
            const struct unit_figure *uf = &groups[i].f.units[u];
            strbuf_printf(out, "%s{resource=", name);
            metrics_label_value(out, uf->resource);
            strbuf_putc(out, ',');
            put_group_labels(out, &groups[i]);
            strbuf_printf(out, "} %" PRId64 "\n", used ? uf->used : uf->total);
        }
}

static void render_group_metrics(struct strbuf *out, const struct group *groups, size_t n)
{
    render_resource_family(out, groups, n, "gqa_resource_allocatable",
                           "Deprecated (mixes units; use gqa_resource_allocatable_cores, _memory_bytes, _gpus): GPU "
                           "resources nodes offer, per resource, GPU model and pool.",
                           get_allocatable, false);
    render_resource_family(out, groups, n, "gqa_resource_allocated",
                           "Deprecated (mixes units; use gqa_resource_allocated_cores, _memory_bytes, _gpus): GPU "
                           "resources held by pods (bound or assumed), per resource, GPU model and pool.",
                           get_allocated, false);
    render_resource_family(out, groups, n, "gqa_resource_stranded",
                           "Deprecated (mixes units; use gqa_resource_stranded_cores, _memory_bytes): free GPU cores "
                           "on GPUs whose memory is all taken, and free GPU memory on GPUs whose cores are, per "
                           "resource, GPU model and pool.",
                           get_stranded, true);
    render_unit_families(out, groups, n);
    render_instance_family(out, groups, n, "gqa_instances_allocatable",
                           "Instances nodes offer of each resource a family counts itself (MIG: "
                           "nvidia.com/mig-<profile>), per GPU model and pool.",
                           false);
    render_instance_family(out, groups, n, "gqa_instances_allocated",
                           "Instances held by pods (bound or decided) of each resource a family counts itself "
                           "(MIG: nvidia.com/mig-<profile>), per GPU model and pool.",
                           true);
    render_use_family(out, groups, n, "gqa_gpus", "GPUs by use (idle, partial, full), per GPU model and pool.", false);
    render_use_family(out, groups, n, "gqa_gpu_free_cores",
                      "Free cores (100 = one GPU) on idle and on partly used GPUs, per GPU model and pool.", true);
    family(out, "gqa_gpu_fragmentation_ratio",
           "Share of free GPU cores that sit on partly used GPUs (0: all free capacity is whole GPUs).");
    for (size_t i = 0; i < n; i++) {
        strbuf_puts(out, "gqa_gpu_fragmentation_ratio{");
        put_group_labels(out, &groups[i]);
        strbuf_printf(out, "} %.4f\n", fragmentation(&groups[i].f));
    }
}

static void put_node_series(struct strbuf *out, const char *name, const struct node_state *n, const char *label,
                            const char *value, int64_t v)
{
    strbuf_printf(out, "%s{node=", name);
    metrics_label_value(out, n->name);
    strbuf_printf(out, ",%s=\"%s\"} %" PRId64 "\n", label, value, v);
}

/* --metrics-per-node: one series per node (and resource or GPU use). */
static void render_node_metrics(struct cluster_cache *cache, struct strbuf *out)
{
    static const char *const names[] = {"gqa_node_gpus", "gqa_node_resource_allocatable", "gqa_node_resource_allocated",
                                        "gqa_node_resource_stranded"};
    static const char *const helps[] = {
        "GPUs of a node by use (--metrics-per-node).", "GPU resources a node offers (--metrics-per-node).",
        "GPU resources held on a node (--metrics-per-node).", "Stranded GPU resources on a node (--metrics-per-node)."};
    for (int m = 0; m < 4; m++) {
        family(out, names[m], helps[m]);
        size_t pos = 0;
        struct dict_entry *de;
        while ((de = dict_next(&cache->nodes, &pos))) {
            const struct node_state *n = de->value;
            if (!n->present || !has_gpu_figures(n))
                continue;
            struct figures f = {0};
            add_node(n, &f);
            for (int k = 0; k < (m == 0 ? USE_COUNT : R_COUNT); k++) {
                if (m == 0)
                    put_node_series(out, names[m], n, "state", use_names[k], f.gpus[k]);
                else if (f.allocatable[k] && res_name(k) && !(m == 3 && res_unit(k) == UNIT_GPUS))
                    put_node_series(out, names[m], n, "resource", res_name(k),
                                    m == 1   ? f.allocatable[k]
                                    : m == 2 ? f.allocated[k]
                                             : f.stranded[k]);
            }
        }
    }
}

/* ---- per GPU: labelled as DCGM exporter labels its series ------------------------------ */

/* What one GPU's series say: DCGM exporter's labels (Hostname, gpu: the
 * nvidia-smi index, UUID, modelName, device: nvidia<minor>) and the figures. */
struct gpu_series {
    const char *node, *uuid, *model;
    int index, minor;
    int64_t cores, memory_bytes, capacity_bytes;
    int pods;
};

static void put_gpu_labels(struct strbuf *out, const struct gpu_series *g)
{
    strbuf_puts(out, "{Hostname=");
    metrics_label_value(out, g->node);
    strbuf_printf(out, ",gpu=\"%d\",UUID=", g->index);
    metrics_label_value(out, g->uuid);
    strbuf_puts(out, ",modelName=");
    metrics_label_value(out, g->model);
    if (g->minor >= 0)
        strbuf_printf(out, ",device=\"nvidia%d\"", g->minor);
    strbuf_puts(out, "}");
}

enum gpu_figure { GPU_CORES, GPU_MEMORY, GPU_CAPACITY, GPU_PODS, GPU_FIGURES };

static int64_t gpu_figure(const struct gpu_series *g, enum gpu_figure which)
{
    return which == GPU_CORES      ? g->cores
           : which == GPU_MEMORY   ? g->memory_bytes
           : which == GPU_CAPACITY ? g->capacity_bytes
                                   : g->pods;
}

/* The series of a node's GPUs (gqa GPU table, or a HAMi node's devices), each handed to put. */
/* Bytes of one unit of memory pool `pool`. */
static int64_t pool_unit_bytes(int pool)
{
    for (size_t i = 0; i < gpu_family_count(); i++)
        if (gpu_family_at(i)->memory_pool == pool)
            return gpu_family_at(i)->memory_unit_bytes;
    return 1;
}

/* The memory pool a node's per-GPU series show: the core family's, else
 * the first pool with memory on the node's GPUs, else -1 (whole GPUs). */
static int shown_pool(const struct node_state *n)
{
    const struct gpu_family *core = core_family(n->spec);
    if (core && core->memory_pool >= 0 && node_spec_offer(n->spec, core) > 0)
        return core->memory_pool;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        for (int i = 0; i < n->gpu_count; i++)
            if (n->gpus[i].mem_total[p] > 0)
                return p;
    return -1;
}

static void each_gpu(const struct node_state *n, void (*put)(void *ctx, const struct gpu_series *g), void *ctx)
{
    const struct node_spec *s = n->spec;
    const char *fallback_model = model_of(n);
    int pool = shown_pool(n);
    for (int i = 0; i < n->gpu_count; i++) {
        const struct gpu_state *g = &n->gpus[i];
        const struct topo_gpu *t = s->topology && i < s->topology->count ? &s->topology->gpus[i] : NULL;
        struct gpu_series gs = {.node = n->name,
                                .uuid = t && t->uuid ? t->uuid : "",
                                .model = t && t->model ? t->model : fallback_model,
                                .index = i,
                                .minor = g->minor,
                                .cores = g->core_used,
                                .pods = g->pods};
        if (pool >= 0) {
            int64_t unit = pool_unit_bytes(pool);
            gs.memory_bytes = scaled(g->mem_used[pool], unit);
            gs.capacity_bytes = scaled(g->mem_total[pool], unit);
        } else if (t && t->memory_mib > 0) { /* whole GPUs: all of its memory goes with it */
            gs.capacity_bytes = scaled(t->memory_mib, 1LL << 20);
            gs.memory_bytes = g->core_used > 0 ? gs.capacity_bytes : 0;
        }
        put(ctx, &gs);
    }
    if (!n->hami || !s->hami)
        return;
    for (int i = 0; i < n->hami->count && i < s->hami->count; i++) {
        const struct hami_device *d = &s->hami->devices[i];
        const struct hami_gpu_state *h = &n->hami->gpus[i];
        struct gpu_series gs = {.node = n->name,
                                .uuid = d->uuid ? d->uuid : "",
                                .model = d->type ? d->type : fallback_model,
                                .index = d->index,
                                .minor = -1,
                                .cores = h->cores_used,
                                .memory_bytes = scaled(h->memory_used, 1LL << 20),
                                .capacity_bytes = scaled(h->memory_mib, 1LL << 20),
                                .pods = h->tasks};
        put(ctx, &gs);
    }
}

struct gpu_family_ctx {
    struct strbuf *out;
    const char *name;
    enum gpu_figure which;
};

static void put_gpu_series(void *ctx, const struct gpu_series *g)
{
    struct gpu_family_ctx *c = ctx;
    strbuf_puts(c->out, c->name);
    put_gpu_labels(c->out, g);
    strbuf_printf(c->out, " %" PRId64 "\n", gpu_figure(g, c->which));
}

/* --metrics-per-node: one series per GPU, joinable with DCGM exporter's
 * (on UUID, or on Hostname and gpu). Call under the read lock. */
static void render_gpu_metrics(struct cluster_cache *cache, struct strbuf *out)
{
    static const char *const names[GPU_FIGURES] = {"gqa_gpu_allocated_cores", "gqa_gpu_allocated_memory_bytes",
                                                   "gqa_gpu_capacity_memory_bytes", "gqa_gpu_shared_pods"};
    static const char *const helps[GPU_FIGURES] = {
        "Cores of one GPU held by pods (100 = the whole GPU), labelled as DCGM exporter's series (--metrics-per-node).",
        "Memory of one GPU held by pods, in bytes, labelled as DCGM exporter's series (--metrics-per-node).",
        "Memory of one GPU that pods may ask for, in bytes, labelled as DCGM exporter's series (--metrics-per-node).",
        "Container shares placed on one GPU, labelled as DCGM exporter's series (--metrics-per-node)."};
    for (int m = 0; m < GPU_FIGURES; m++) {
        family(out, names[m], helps[m]);
        struct gpu_family_ctx ctx = {.out = out, .name = names[m], .which = (enum gpu_figure)m};
        size_t pos = 0;
        struct dict_entry *de;
        while ((de = dict_next(&cache->nodes, &pos))) {
            const struct node_state *n = de->value;
            if (n->present && n->spec)
                each_gpu(n, put_gpu_series, &ctx);
        }
    }
}

/* HAMi MIG-mode GPUs (docs/mig.md): per node with such GPUs (their number
 * is small, so the series come without --metrics-per-node), the largest
 * MIG fragmentation of its GPUs: 1 - (slots of the largest instance that
 * still fits) / (free slots). Call under the read lock. */
static void render_mig_metrics(struct cluster_cache *cache, struct strbuf *out)
{
    family(out, "gqa_node_mig_fragmentation_ratio",
           "Largest MIG fragmentation of a node's HAMi MIG-mode GPUs: 1 - slots of the largest MIG instance that "
           "still fits / free slots (0: the free slots take one instance).");
    size_t pos = 0;
    struct dict_entry *de;
    while ((de = dict_next(&cache->nodes, &pos))) {
        const struct node_state *n = de->value;
        int gpus = 0;
        double ratio = n->present ? hami_mig_node_fragmentation(n, &gpus) : 0;
        if (gpus == 0)
            continue;
        strbuf_puts(out, "gqa_node_mig_fragmentation_ratio{node=");
        metrics_label_value(out, n->name);
        strbuf_printf(out, "} %.4f\n", ratio);
    }
}

void capacity_render_metrics(struct cluster_cache *cache, bool per_node, struct strbuf *out)
{
    cache_read_lock(cache);
    size_t n = 0;
    struct group *groups = collect(cache, &n);
    render_group_metrics(out, groups, n);
    render_mig_metrics(cache, out);
    if (per_node) {
        render_node_metrics(cache, out);
        render_gpu_metrics(cache, out);
    }
    cache_unlock(cache);
    free(groups);
}

/* ---- per pod: what each pod holds on each GPU ---------------------------------------------- */

struct pod_gpu_series {
    const struct pod_entry *pod;
    const char *gpu, *uuid; /* "" for use not placed on a GPU */
    int64_t cores, memory_bytes;
};

static void put_pod_series(struct strbuf *out, const char *name, const struct pod_gpu_series *p, int64_t v)
{
    strbuf_printf(out, "%s{namespace=", name);
    metrics_label_value(out, p->pod->info->ns);
    strbuf_puts(out, ",pod=");
    metrics_label_value(out, p->pod->info->name);
    strbuf_puts(out, ",node=");
    metrics_label_value(out, p->pod->node->name);
    strbuf_puts(out, ",gpu=");
    metrics_label_value(out, p->gpu);
    strbuf_puts(out, ",UUID=");
    metrics_label_value(out, p->uuid);
    strbuf_printf(out, ",state=\"%s\"} %" PRId64 "\n", p->pod->bound ? "bound" : "assumed", v);
}

/* Units of every memory pool, in bytes. */
static int64_t pools_in_bytes(const int64_t mem[GPU_MEMORY_POOLS])
{
    int64_t bytes = 0;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        bytes = sum2(bytes, scaled(mem[p], pool_unit_bytes(p)));
    return bytes;
}

/* Each GPU share of pod e (and its use placed on no GPU), handed to put. */
static void each_pod_share(const struct pod_entry *e, void (*put)(void *ctx, const struct pod_gpu_series *p), void *ctx)
{
    const struct node_state *n = e->node;
    const struct node_spec *s = n->spec;
    char index[16];
    for (int i = 0; i < e->nslots; i++) {
        const struct slot_charge *c = &e->slots[i];
        const struct topo_gpu *t =
            s && s->topology && c->slot >= 0 && c->slot < s->topology->count ? &s->topology->gpus[c->slot] : NULL;
        snprintf(index, sizeof(index), "%d", c->slot);
        struct pod_gpu_series p = {.pod = e,
                                   .gpu = index,
                                   .uuid = t && t->uuid ? t->uuid : "",
                                   .cores = c->cores,
                                   .memory_bytes = pools_in_bytes(c->mem)};
        put(ctx, &p);
    }
    const struct node_usage *u = &e->unattributed;
    if (u->cores || pools_in_bytes(u->mem)) {
        struct pod_gpu_series p = {
            .pod = e, .gpu = "", .uuid = "", .cores = u->cores, .memory_bytes = pools_in_bytes(u->mem)};
        put(ctx, &p);
    }
    const struct hami_pod_charge *h = e->hami_charge;
    if (!h)
        return;
    for (int i = 0; i < h->nslots; i++) {
        const struct hami_charge *c = &h->slots[i];
        const struct hami_device *d =
            s && s->hami && c->dev >= 0 && c->dev < s->hami->count ? &s->hami->devices[c->dev] : NULL;
        snprintf(index, sizeof(index), "%d", d ? d->index : c->dev);
        struct pod_gpu_series p = {.pod = e,
                                   .gpu = index,
                                   .uuid = d && d->uuid ? d->uuid : "",
                                   .cores = c->cores,
                                   .memory_bytes = scaled(c->memory_mib, 1LL << 20)};
        put(ctx, &p);
    }
    if (h->unattributed.cores || h->unattributed.memory_mib) {
        struct pod_gpu_series p = {.pod = e,
                                   .gpu = "",
                                   .uuid = "",
                                   .cores = h->unattributed.cores,
                                   .memory_bytes = scaled(h->unattributed.memory_mib, 1LL << 20)};
        put(ctx, &p);
    }
}

struct pod_family_ctx {
    struct strbuf *out;
    const char *name;
    bool memory;
};

static void put_pod_share(void *ctx, const struct pod_gpu_series *p)
{
    struct pod_family_ctx *c = ctx;
    put_pod_series(c->out, c->name, p, c->memory ? p->memory_bytes : p->cores);
}

void capacity_render_pod_metrics(struct cluster_cache *cache, struct strbuf *out)
{
    static const char *const names[] = {"gqa_pod_gpu_allocated_cores", "gqa_pod_gpu_allocated_memory_bytes"};
    static const char *const helps[] = {
        "GPU cores a pod holds on one GPU (100 = the whole GPU); gpu \"\" for use placed on no GPU "
        "(--metrics-per-pod).",
        "GPU memory a pod holds on one GPU, in bytes; gpu \"\" for use placed on no GPU (--metrics-per-pod)."};
    cache_read_lock(cache);
    for (int m = 0; m < 2; m++) {
        family(out, names[m], helps[m]);
        struct pod_family_ctx ctx = {.out = out, .name = names[m], .memory = m == 1};
        size_t pos = 0;
        struct dict_entry *de;
        while ((de = dict_next(&cache->pods, &pos))) {
            const struct pod_entry *e = de->value;
            if (e->node && e->info)
                each_pod_share(e, put_pod_share, &ctx);
        }
    }
    cache_unlock(cache);
}

static void put_json_figures(struct strbuf *out, const struct figures *f)
{
    strbuf_printf(out, "\"nodes\":%" PRId64 ",\"gpus\":{\"total\":%" PRId64, f->nodes,
                  sum2(sum2(f->gpus[USE_IDLE], f->gpus[USE_PARTIAL]), f->gpus[USE_FULL]));
    for (int u = 0; u < USE_COUNT; u++)
        strbuf_printf(out, ",\"%s\":%" PRId64, use_names[u], f->gpus[u]);
    strbuf_printf(out, "},\"freeCores\":{\"idle\":%" PRId64 ",\"partial\":%" PRId64 "},\"fragmentation\":%.4f",
                  f->free_cores[USE_IDLE], f->free_cores[USE_PARTIAL], fragmentation(f));
    strbuf_puts(out, ",\"resources\":{");
    bool first = true;
    for (int r = 0; r < R_COUNT; r++) {
        if (!f->allocatable[r])
            continue;
        strbuf_printf(out, "%s\"%s\":{\"allocatable\":%" PRId64 ",\"allocated\":%" PRId64 ",\"stranded\":%" PRId64 "}",
                      first ? "" : ",", res_name(r), f->allocatable[r], f->allocated[r], f->stranded[r]);
        first = false;
    }
    strbuf_puts(out, "},\"units\":{");
    for (int i = 0; i < f->nunits; i++) {
        strbuf_printf(out, "%s", i ? "," : "");
        strbuf_json_string(out, f->units[i].resource);
        strbuf_printf(out, ":{\"total\":%" PRId64 ",\"used\":%" PRId64 "}", f->units[i].total, f->units[i].used);
    }
    strbuf_putc(out, '}');
}

void capacity_render_json(struct cluster_cache *cache, struct strbuf *out)
{
    cache_read_lock(cache);
    size_t n = 0;
    struct group *groups = collect(cache, &n);
    struct figures total = {0};
    strbuf_puts(out, "{\"groups\":[");
    for (size_t i = 0; i < n; i++) {
        strbuf_puts(out, i ? ",{\"model\":" : "{\"model\":");
        strbuf_json_string(out, groups[i].model);
        strbuf_puts(out, ",\"pool\":");
        strbuf_json_string(out, groups[i].pool);
        strbuf_putc(out, ',');
        put_json_figures(out, &groups[i].f);
        strbuf_putc(out, '}');
        add_figures(&total, &groups[i].f);
    }
    cache_unlock(cache);
    free(groups);
    strbuf_puts(out, "],\"total\":{");
    put_json_figures(out, &total);
    strbuf_puts(out, "}}\n");
}

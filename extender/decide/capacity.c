/* capacity.c - capacity, fragmentation and stranded GPU resources. See capacity.h. */
#include "extender/decide/capacity.h"
#include "cluster/podspec.h"
#include "extender/decide/metrics.h"
#include "lib/dict.h"
#include "lib/grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum res_index { R_VCUDA_CORE, R_VCUDA_MEMORY, R_MPS_CORE, R_MPS_MEMORY, R_NVIDIA_GPU, R_COUNT };

static const char *const res_names[R_COUNT] = {RES_VCUDA_CORE, RES_VCUDA_MEMORY, RES_MPS_CORE, RES_MPS_MEMORY,
                                               RES_NVIDIA_GPU};

enum gpu_use { USE_IDLE, USE_PARTIAL, USE_FULL, USE_COUNT };

static const char *const use_names[USE_COUNT] = {"idle", "partial", "full"};

/* The figures of one model/pool group, one node, or the whole cluster. */
struct figures {
    int64_t allocatable[R_COUNT];
    int64_t allocated[R_COUNT];
    int64_t stranded[R_COUNT]; /* core and memory resources only */
    int64_t gpus[USE_COUNT];
    int64_t free_cores[USE_COUNT]; /* on idle and on partly used GPUs */
    int64_t nodes;
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
    return g->core_used == 0 && g->vmem_used == 0 && g->mmem_used == 0 ? USE_IDLE : USE_PARTIAL;
}

/* Which core resource a node's GPUs are shared by (its pods' cores land in core_used). */
static enum res_index core_resource(const struct node_spec *s)
{
    return s->vcuda_core > 0 ? R_VCUDA_CORE : s->mps_core > 0 ? R_MPS_CORE : R_NVIDIA_GPU;
}

static void stranded_on_gpu(const struct gpu_state *g, enum res_index core, struct figures *f)
{
    int64_t cores_free = 100 - g->core_used;
    if (core == R_VCUDA_CORE && g->vmem_total > 0) {
        if (g->vmem_used >= g->vmem_total && cores_free > 0)
            add_to(&f->stranded[R_VCUDA_CORE], cores_free);
        if (cores_free <= 0 && g->vmem_total > g->vmem_used)
            add_to(&f->stranded[R_VCUDA_MEMORY], g->vmem_total - g->vmem_used);
    } else if (core == R_MPS_CORE && g->mmem_total > 0) {
        if (g->mmem_used >= g->mmem_total && cores_free > 0)
            add_to(&f->stranded[R_MPS_CORE], cores_free);
        if (cores_free <= 0 && g->mmem_total > g->mmem_used)
            add_to(&f->stranded[R_MPS_MEMORY], g->mmem_total - g->mmem_used);
    }
}

/* Add one node's figures to f. */
static void add_node(const struct node_state *n, struct figures *f)
{
    const struct node_spec *s = n->spec;
    if (!s)
        return;
    f->nodes++;
    int64_t amounts[R_COUNT] = {s->vcuda_core, s->vcuda_memory, s->mps_core, s->mps_memory, s->nvidia_gpu};
    for (int r = 0; r < R_COUNT; r++)
        add_to(&f->allocatable[r], amounts[r]);
    enum res_index core = core_resource(s);
    int64_t cores = n->unattributed.cores, vmem = n->unattributed.vmem, mmem = n->unattributed.mmem;
    for (int i = 0; i < n->gpu_count; i++) {
        const struct gpu_state *g = &n->gpus[i];
        enum gpu_use use = use_of(g);
        f->gpus[use]++;
        if (use != USE_FULL)
            add_to(&f->free_cores[use], 100 - g->core_used);
        add_to(&cores, g->core_used);
        add_to(&vmem, g->vmem_used);
        add_to(&mmem, g->mmem_used);
        stranded_on_gpu(g, core, f);
    }
    if (n->gpu_count == 0)
        return;
    add_to(&f->allocated[core], core == R_NVIDIA_GPU ? cores / 100 + (cores % 100 > 0) : cores);
    add_to(&f->allocated[R_VCUDA_MEMORY], s->vcuda_memory > 0 ? vmem : 0);
    add_to(&f->allocated[R_MPS_MEMORY], s->mps_memory > 0 ? mmem : 0);
}

static void add_figures(struct figures *to, const struct figures *from)
{
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
        if (!node->present || node->gpu_count == 0)
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
            if (!groups[i].f.allocatable[r] || (shared_only && r == R_NVIDIA_GPU))
                continue;
            strbuf_printf(out, "%s{resource=\"%s\",", name, res_names[r]);
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

static void render_group_metrics(struct strbuf *out, const struct group *groups, size_t n)
{
    render_resource_family(out, groups, n, "gqa_resource_allocatable",
                           "GPU resources nodes offer, per resource, GPU model and pool.", get_allocatable, false);
    render_resource_family(out, groups, n, "gqa_resource_allocated",
                           "GPU resources held by pods (bound or assumed), per resource, GPU model and pool.",
                           get_allocated, false);
    render_resource_family(out, groups, n, "gqa_resource_stranded",
                           "Free GPU cores on GPUs whose memory is all taken, and free GPU memory on GPUs whose cores "
                           "are, per resource, GPU model and pool.",
                           get_stranded, true);
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
            if (!n->present || n->gpu_count == 0)
                continue;
            struct figures f = {0};
            add_node(n, &f);
            for (int k = 0; k < (m == 0 ? USE_COUNT : R_COUNT); k++) {
                if (m == 0)
                    put_node_series(out, names[m], n, "state", use_names[k], f.gpus[k]);
                else if (f.allocatable[k] && !(m == 3 && k == R_NVIDIA_GPU))
                    put_node_series(out, names[m], n, "resource", res_names[k],
                                    m == 1   ? f.allocatable[k]
                                    : m == 2 ? f.allocated[k]
                                             : f.stranded[k]);
            }
        }
    }
}

void capacity_render_metrics(struct cluster_cache *cache, bool per_node, struct strbuf *out)
{
    cache_read_lock(cache);
    size_t n = 0;
    struct group *groups = collect(cache, &n);
    render_group_metrics(out, groups, n);
    if (per_node)
        render_node_metrics(cache, out);
    cache_unlock(cache);
    free(groups);
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
                      first ? "" : ",", res_names[r], f->allocatable[r], f->allocated[r], f->stranded[r]);
        first = false;
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

/* explainsum.c - groups, near miss and hint of an explain answer. See explainsum.h. */
#include "extender/decide/explainsum.h"
#include "lib/dict.h"
#include "lib/grow.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Examples listed per group; the full list is in "nodes". */
#define GROUP_EXAMPLES 5

struct group {
    enum reason_class why;
    char *message;
    size_t count;
    size_t examples[GROUP_EXAMPLES];
};

static const struct container_request *why_container(const struct pod_info *pod, const struct verdict *v)
{
    return v->why_container >= 0 && v->why_container < pod->ncontainers ? &pod->containers[v->why_container] : NULL;
}

/* More than one GPU container: messages name the container. */
static int gpu_containers(const struct pod_info *pod)
{
    int n = 0;
    for (int i = 0; i < pod->ncontainers; i++)
        n += pod->containers[i].family != NULL;
    return n;
}

/* The group message: the same text for every node the class refuses for the same cause. */
static void group_message(const struct evaluation *ev, const struct pod_info *pod, const struct verdict *v, char *buf,
                          size_t size)
{
    const struct container_request *c = why_container(pod, v);
    char who[96] = "";
    if (c && gpu_containers(pod) > 1)
        snprintf(who, sizeof(who), " (container \"%.60s\")", c->name);
    switch ((enum reason_class)v->why) {
    case REASON_NODE_UNKNOWN:
        snprintf(buf, size, "not in the extender's cache");
        return;
    case REASON_NO_GPU:
        snprintf(buf, size, "no GPUs");
        return;
    case REASON_NO_CAPACITY:
        if (c) {
            snprintf(buf, size, "no %s capacity%s", gpu_family_core_name(c->family), who);
            return;
        }
        break;
    case REASON_GPU_CORES:
        if (c) {
            snprintf(buf, size, "no GPU with %" PRId64 " %s free%s", c->cores, gpu_family_core_name(c->family), who);
            return;
        }
        break;
    case REASON_GPU_MEMORY:
        if (c) {
            snprintf(buf, size, "no GPU with both %" PRId64 " %s and %" PRId64 " %s free%s", c->cores,
                     gpu_family_core_name(c->family), c->memory, gpu_family_memory_name(c->family), who);
            return;
        }
        break;
    case REASON_WHOLE_GPUS:
        if (c) {
            snprintf(buf, size, "fewer than %d completely free GPUs%s", c->whole_gpus, who);
            return;
        }
        break;
    case REASON_UNATTRIBUTED:
        snprintf(buf, size, "GPU use by pods without GPU assignment leaves too little");
        return;
    case REASON_HAMI_DEVICES:
        snprintf(buf, size, "no HAMi GPU with the memory, cores and a free task slot the vGPUs need");
        return;
    case REASON_INSTANCES:
        if (c) {
            if (c->profile[0] && c->family && c->family->resource_prefix)
                snprintf(buf, size, "too few free %s%s%s", c->family->resource_prefix, c->profile, who);
            else
                snprintf(buf, size, "too few free %s%s", c->family ? c->family->core_resource : "instances", who);
            return;
        }
        break;
    default:
        break;
    }
    /* Classes whose reason text is already the same on every node (quota, the pod itself, ...). */
    snprintf(buf, size, "%s", verdict_reason(ev, v));
}

static int compare_groups(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    if (x->why != y->why)
        return x->why < y->why ? -1 : 1;
    return strcmp(x->message, y->message);
}

static void free_groups(struct group *groups, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(groups[i].message);
    free(groups);
}

/* Failed verdicts grouped by message, in rank order within each group. NULL
 * when memory ran out (*n is then 0). */
static struct group *make_groups(const struct evaluation *ev, const struct pod_info *pod, const size_t *order,
                                 size_t *n)
{
    struct dict index;
    struct group *groups = NULL;
    size_t count = 0, cap = 0;
    *n = 0;
    if (dict_init(&index, 16) != 0)
        return NULL;
    char msg[FIT_REASON_MAX];
    for (size_t i = 0; i < ev->count; i++) {
        const struct verdict *v = &ev->verdicts[order[i]];
        if (v->fits)
            continue;
        group_message(ev, pod, v, msg, sizeof(msg));
        uintptr_t at = (uintptr_t)dict_get(&index, msg);
        if (!at) {
            struct group *grown = grow_array(groups, &cap, count + 1, sizeof(*grown), 8);
            if (!grown)
                goto oom;
            groups = grown;
            groups[count] = (struct group){.why = (enum reason_class)v->why, .message = strdup(msg)};
            if (!groups[count].message || dict_set(&index, msg, (void *)(uintptr_t)(count + 1), NULL) != 0) {
                free(groups[count].message);
                goto oom;
            }
            at = ++count;
        }
        struct group *g = &groups[at - 1];
        if (g->count < GROUP_EXAMPLES)
            g->examples[g->count] = order[i];
        g->count++;
    }
    dict_free(&index);
    if (count)
        qsort(groups, count, sizeof(*groups), compare_groups);
    *n = count;
    return groups;
oom:
    dict_free(&index);
    free_groups(groups, count);
    return NULL;
}

/* How far a failed node is from taking the pod, 0 (only policy stands in
 * the way) up; negative when the node is no candidate at all. */
static double distance(const struct pod_info *pod, const struct verdict *v)
{
    const struct container_request *c = why_container(pod, v);
    switch ((enum reason_class)v->why) {
    case REASON_QUOTA_EXHAUSTED:
    case REASON_HAMI_QUOTA:
        return 0.0;
    case REASON_GPU_CORES:
        return c && c->cores > 0 ? (double)v->short_by / (double)c->cores : -1.0;
    case REASON_GPU_MEMORY:
        return c && c->memory > 0 ? (double)v->short_by / (double)c->memory : -1.0;
    case REASON_WHOLE_GPUS:
        return c && c->whole_gpus > 0 ? (double)v->short_by / (double)c->whole_gpus : -1.0;
    case REASON_UNATTRIBUTED: {
        int64_t cores = pod_total_cores(pod);
        return cores > 0 ? (double)v->short_by / (double)cores : 1.0;
    }
    default:
        return -1.0;
    }
}

static ssize_t near_miss(const struct evaluation *ev, const struct pod_info *pod, const size_t *order)
{
    ssize_t best = -1;
    double best_d = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const struct verdict *v = &ev->verdicts[order[i]];
        double d = v->fits ? -1.0 : distance(pod, v);
        if (d >= 0 && (best < 0 || d < best_d)) {
            best = (ssize_t)order[i];
            best_d = d;
        }
    }
    return best;
}

/* Cores as GPUs for hints: 320 -> "3.2", 325 -> "3.25", 300 -> "3". */
static void gpus_of(int64_t cores, char *buf, size_t size)
{
    if (cores % 10 == 0 && cores % 100 != 0)
        snprintf(buf, size, "%" PRId64 ".%" PRId64, cores / 100, cores % 100 / 10);
    else if (cores % 100 != 0)
        snprintf(buf, size, "%" PRId64 ".%02" PRId64, cores / 100, cores % 100);
    else
        snprintf(buf, size, "%" PRId64, cores / 100);
}

/* The container's share of the pod's quota charge. */
static int64_t container_cores(const struct container_request *c)
{
    return c->whole_gpus > 0 ? 100LL * c->whole_gpus : c->cores;
}

/* A hint that frees capacity on the node ("free 2 more whole GPUs on N")
 * and offers a smaller request ("ask for K"), with the quota left (cores;
 * -1: unlimited) taken into account: the smaller request never exceeds
 * what quota leaves this container, and freeing capacity alone is not
 * offered when quota would refuse the full request anyway. */
static void free_or_ask(const struct pod_info *pod, const struct container_request *c, int64_t left,
                        const char *free_text, int64_t ask, int64_t ask_unit, const char *ask_text, char *buf,
                        size_t size)
{
    int64_t need = pod_total_cores(pod);
    if (left < 0 || left >= need) {
        snprintf(buf, size, "%s, or ask for %s%" PRId64, free_text, ask_text, ask);
        return;
    }
    char left_text[32], short_text[32];
    gpus_of(left, left_text, sizeof(left_text));
    gpus_of(need - left, short_text, sizeof(short_text));
    int64_t room = left - (need - container_cores(c)); /* what quota leaves this container */
    int64_t quota_ask = room > 0 ? room / ask_unit : 0;
    if (quota_ask < ask)
        ask = quota_ask;
    if (ask > 0)
        snprintf(buf, size,
                 "ask for %s%" PRId64 " (namespace %s has %s GPUs of quota left for this node's model), or %s and "
                 "raise that quota by %s GPUs",
                 ask_text, ask, pod->ns, left_text, free_text, short_text);
    else
        snprintf(buf, size, "%s and raise namespace %s's GPU quota for this node's model by %s GPUs (%s left)",
                 free_text, pod->ns, short_text, left_text);
}

/* What would make the pod fit on the near-miss node; left is the quota
 * the namespace has there (cores; -1: unlimited). */
static void hint(const struct pod_info *pod, const struct verdict *v, int64_t left, char *buf, size_t size)
{
    const struct container_request *c = why_container(pod, v);
    int gpu = v->why_gpu;
    char free_text[FIT_REASON_MAX / 2];
    switch ((enum reason_class)v->why) {
    case REASON_GPU_CORES:
        snprintf(free_text, sizeof(free_text), "free %" PRId64 " more %s on GPU %d of %s", v->short_by,
                 gpu_family_core_name(c->family), gpu, v->name);
        free_or_ask(pod, c, left, free_text, c->cores - v->short_by, 1, "at most ", buf, size);
        return;
    case REASON_GPU_MEMORY:
        snprintf(buf, size, "free %" PRId64 " more %s on GPU %d of %s, or ask for at most %" PRId64, v->short_by,
                 gpu_family_memory_name(c->family), gpu, v->name, c->memory - v->short_by);
        return;
    case REASON_WHOLE_GPUS:
        snprintf(free_text, sizeof(free_text), "free %" PRId64 " more whole GPU%s on %s", v->short_by,
                 v->short_by == 1 ? "" : "s", v->name);
        free_or_ask(pod, c, left, free_text, (int64_t)c->whole_gpus - v->short_by, 100, "", buf, size);
        return;
    case REASON_UNATTRIBUTED:
        snprintf(buf, size,
                 "give the pods on %s that hold GPUs without index annotations their GPU assignment, or free %" PRId64
                 " cores there",
                 v->name, v->short_by);
        return;
    case REASON_QUOTA_EXHAUSTED:
        snprintf(buf, size, "raise namespace %s's GPU quota for the model of %s, or end pods of %s that use it",
                 pod->ns, v->name, pod->ns);
        return;
    case REASON_HAMI_QUOTA:
        snprintf(buf, size,
                 "raise namespace %s's ResourceQuota on limits.nvidia.com/gpumem or gpucores, or end HAMi pods of %s",
                 pod->ns, pod->ns);
        return;
    default:
        buf[0] = '\0';
        return;
    }
}

static void put_groups(struct strbuf *sb, const struct evaluation *ev, const struct group *groups, size_t n)
{
    strbuf_puts(sb, ",\"summary\":[");
    for (size_t i = 0; i < n; i++) {
        const struct group *g = &groups[i];
        strbuf_printf(sb, "%s{\"reason\":\"%s\",\"count\":%zu,\"message\":", i ? "," : "", reason_class_name(g->why),
                      g->count);
        strbuf_json_string(sb, g->message);
        strbuf_puts(sb, ",\"examples\":[");
        for (size_t k = 0; k < g->count && k < GROUP_EXAMPLES; k++) {
            if (k)
                strbuf_putc(sb, ',');
            strbuf_json_string(sb, ev->verdicts[g->examples[k]].name);
        }
        strbuf_puts(sb, "]}");
    }
    strbuf_putc(sb, ']');
}

static void put_near_miss(struct strbuf *sb, const struct evaluation *ev, const struct pod_info *pod, ssize_t at,
                          const struct explain_quota *quota)
{
    strbuf_puts(sb, ",\"nearMiss\":");
    if (at < 0) {
        strbuf_puts(sb, "null");
        return;
    }
    const struct verdict *v = &ev->verdicts[at];
    char text[FIT_REASON_MAX];
    hint(pod, v, quota && quota->left ? quota->left(quota->ctx, v->name) : -1, text, sizeof(text));
    strbuf_puts(sb, "{\"node\":");
    strbuf_json_string(sb, v->name);
    strbuf_printf(sb, ",\"reason\":\"%s\",\"gpu\":%d,\"shortBy\":%" PRId64 ",\"message\":", reason_class_name(v->why),
                  v->why_gpu, v->short_by);
    strbuf_json_string_n(sb, verdict_reason(ev, v), v->reason_len);
    strbuf_puts(sb, ",\"hint\":");
    strbuf_json_string(sb, text);
    strbuf_putc(sb, '}');
}

void explain_put_summary(struct strbuf *sb, const struct evaluation *ev, const struct pod_info *pod,
                         const size_t *order, const struct explain_quota *quota)
{
    size_t feasible = 0, ngroups = 0;
    for (size_t i = 0; i < ev->count; i++)
        feasible += ev->verdicts[i].fits;
    strbuf_printf(sb, ",\"feasible\":%zu", feasible);
    if (ev->error) { /* the request itself was refused: no node was judged */
        strbuf_puts(sb, ",\"summary\":[],\"nearMiss\":null");
        return;
    }
    struct group *groups = make_groups(ev, pod, order, &ngroups);
    if (!groups && feasible < ev->count) {
        sb->failed = 1; /* out of memory: the answer would be incomplete */
        return;
    }
    put_groups(sb, ev, groups, ngroups);
    put_near_miss(sb, ev, pod, feasible ? -1 : near_miss(ev, pod, order), quota);
    free_groups(groups, ngroups);
}

/* Nodes that could never take the pod (no GPUs, another kind of GPU, not
 * cached) say little about why it waits; the pod itself, or the nodes of
 * its kind that are full or out of quota, do. */
static bool actionable(enum reason_class c)
{
    return c != REASON_NODE_UNKNOWN && c != REASON_NO_GPU && c != REASON_NO_CAPACITY;
}

enum reason_class explain_main_reason(const struct evaluation *ev)
{
    size_t counts[REASON_CLASS_COUNT] = {0};
    for (size_t i = 0; i < ev->count; i++) {
        if (ev->verdicts[i].fits)
            return REASON_NONE;
        counts[ev->verdicts[i].why < REASON_CLASS_COUNT ? ev->verdicts[i].why : REASON_NONE]++;
    }
    enum reason_class main = REASON_NONE;
    for (int c = 1; c < REASON_CLASS_COUNT; c++) {
        if (!counts[c])
            continue;
        bool better = main == REASON_NONE || (actionable(c) && !actionable(main)) ||
                      (actionable(c) == actionable(main) && counts[c] > counts[main]);
        if (better)
            main = (enum reason_class)c;
    }
    return main;
}

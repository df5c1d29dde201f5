/* hami_fit.c - HAMi vGPUs on one node. See hami_fit.h. */
#include "extender/decide/hami_fit.h"
#include "cluster/hami_occupancy.h"
#include "cluster/hami_topology.h"
#include "cluster/mig_hami.h"
#include "cluster/podparts.h"
#include "lib/clock.h"
#include "lib/strbuf.h"
#include "topology/select.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why a device cannot take one vGPU of a container, most promising first. */
enum verdict { V_OK = 0, V_MEMORY, V_CORES, V_SPLIT, V_EXCLUSIVE, V_CORES_FULL, V_MIG, V_TOO_SMALL, V_COUNT };

/* The placement policy of MIG instances: HAMi's profile, and among its free
 * placements the one that keeps the largest profiles possible (docs/mig.md). */
#define HAMI_MIG_POLICY MIG_POLICY_KEEP_LARGEST

struct hstate {
    const struct node_state *n;
    const struct hami_node *h;
    const struct pod_info *pod;
    struct fit_result *fit;
    bool spread;
    struct hami_gpu_state use[HAMI_MAX_DEVICES];
    struct hami_usage unattributed;
    uint64_t eligible; /* devices the pod may use at all */
    /* the node's hami.io/node-nvidia-score when the pod asks topology-aware, else NULL */
    const struct hami_pair_scores *pair_scores;
    int64_t pairs;
    bool has_mig;                              /* the node has MIG-mode devices with profiles */
    struct hami_mig_use mig[HAMI_MAX_DEVICES]; /* their instances in use (only when has_mig) */
    char mig_reason[FIT_REASON_MAX];           /* the MIG choices made, for explain */
    size_t mig_reason_len;
};

/* Devices left out before any capacity check, for explanations. */
struct excluded {
    int unhealthy, mig, cordoned, other_mode, other_type, other_uuid;
};

bool hami_pod_on(const struct pod_info *pod, const struct node_state *n)
{
    if (!pod->hami || !hami_node_is(n))
        return false;
    for (int i = 0; i < pod->ncontainers; i++)
        if (hami_container_on(&pod->containers[i], n))
            return true;
    return false;
}

static bool fail(struct hstate *st, bool unresolvable, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(struct hstate *st, bool unresolvable, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fit_vrefuse(st->fit, unresolvable, fmt, ap);
    va_end(ap);
    return false;
}

static bool fail_with(struct hstate *st, bool unresolvable, struct strbuf *sb)
{
    bool rc = fail(st, unresolvable, "%s", strbuf_failed(sb) ? "no HAMi GPU of this node can take the pod" : sb->data);
    strbuf_free(sb);
    return rc;
}

/* ---- state ------------------------------------------------------------------- */

static void release(struct hstate *st, const struct pod_entry *e)
{
    const struct hami_pod_charge *pc = e ? e->hami_charge : NULL;
    if (!pc || e->node != st->n)
        return;
    for (int i = 0; i < pc->nslots; i++) {
        const struct hami_charge *c = &pc->slots[i];
        st->use[c->dev].tasks--;
        st->use[c->dev].memory_used -= c->memory_mib;
        st->use[c->dev].cores_used -= c->cores;
        if (c->mig.tmpl >= 0 && st->has_mig)
            hami_mig_remove(&st->mig[c->dev], c->mig);
    }
    st->unattributed.vgpus -= pc->unattributed.vgpus;
    st->unattributed.memory_mib -= pc->unattributed.memory_mib;
    st->unattributed.cores -= pc->unattributed.cores;
    st->unattributed.pods -= pc->unattributed.pods;
}

/* hami_pod_type_ok, reusing the verdict of the previous device when its
 * type was the same text (*last, *last_ok). */
static bool type_ok_cached(const struct hami_pod *p, const struct hami_device *dev, const char **last, bool *last_ok)
{
    if (*last && strcmp(*last, dev->type_upper) == 0)
        return *last_ok;
    *last = dev->type_upper;
    *last_ok = hami_pod_type_ok(p, dev);
    return *last_ok;
}

/* Which devices the pod may use at all: healthy, not MIG mode without
 * profiles (placing an instance needs the geometry HAMi v2.10 registers),
 * of the pod's mode, type and UUIDs. With counts non-NULL, also why the
 * others are not. */
static uint64_t classify_devices(const struct hstate *st, struct excluded *counts)
{
    const struct hami_pod *p = st->pod->hami;
    if (!p->filters && !counts)
        return st->h->usable;
    uint64_t eligible = 0;
    struct excluded c = {0};
    /* A node's GPUs are mostly of one type: its verdict is reused while
     * the type stays the same. */
    const char *last_type = NULL;
    bool last_type_ok = false;
    for (int d = 0; d < st->h->count; d++) {
        const struct hami_device *dev = &st->h->devices[d];
        if (!dev->healthy)
            c.unhealthy++;
        else if (dev->mode == HAMI_MODE_MIG && !dev->mig)
            c.mig++;
        else if (dev->cordoned)
            c.cordoned++;
        else if (!hami_pod_mode_ok(p, dev))
            c.other_mode++;
        else if (!type_ok_cached(p, dev, &last_type, &last_type_ok))
            c.other_type++;
        else if (!hami_pod_uuid_ok(p, dev))
            c.other_uuid++;
        else
            eligible |= 1ULL << d;
    }
    if (counts)
        *counts = c;
    return eligible;
}

/* A MIG instance for a vGPU of `need` MiB on MIG-mode device d, next to
 * the instances in use: 0 with *c, or -1 with c->reason. */
static int mig_pick(const struct hstate *st, int d, int64_t need, int cores, struct mig_choice *c)
{
    struct mig_gpu g;
    hami_mig_gpu(st->h->devices[d].mig, &st->mig[d], &g);
    return mig_choose(&g, need, cores, HAMI_MIG_POLICY, c);
}

static bool is_mig(const struct hstate *st, int d)
{
    return st->has_mig && st->h->devices[d].mig != NULL;
}

/* Capacity and use both come from st->use (the node's device table); a
 * MIG-mode device must also have a profile and placement free (HAMi checks
 * those last). */
static enum verdict check_device(const struct hstate *st, int d, const struct hami_request *r, int64_t *need)
{
    const struct hami_gpu_state *u = &st->use[d];
    *need = hami_request_memory(r, u->memory_mib);
    if (*need > u->memory_mib || r->cores > u->cores)
        return V_TOO_SMALL;
    if (u->tasks >= u->split)
        return V_SPLIT;
    if (u->memory_mib - u->memory_used < *need)
        return V_MEMORY;
    if (u->cores - u->cores_used < r->cores)
        return V_CORES;
    if (u->cores == 100 && r->cores == 100 && u->tasks > 0)
        return V_EXCLUSIVE;
    if (u->cores > 0 && u->cores_used >= u->cores && r->cores == 0)
        return V_CORES_FULL;
    struct mig_choice c;
    if (is_mig(st, d) && mig_pick(st, d, *need, r->cores, &c) != 0)
        return V_MIG;
    return V_OK;
}

/* The memory HAMi's ComputeScore (pkg/scheduler/policy/gpu_policy.go)
 * counts for a request: gpumem as asked, but a percentage as
 * Totalmem * (pct / 100) in Go's int32 arithmetic, which is the whole GPU
 * at 100% and 0 below. */
static int64_t score_memory(const struct hami_request *r, int64_t device_mib)
{
    if (r->memory_percent > 0)
        return r->memory_percent >= 100 ? device_mib : 0;
    return r->memory_mib;
}

/* HAMi's device score, computed once per container before its fit (and so
 * with the container's whole vGPU count as the task share): the share of
 * tasks, cores and memory in use, weighted by the pod's
 * hami.io/device-scoring-weights (default 1 each). Binpack tries the
 * highest first, spread the lowest. */
static double device_score(const struct hstate *st, int d, const struct hami_request *r, int64_t need)
{
    (void)need;
    const struct hami_gpu_state *u = &st->use[d];
    const struct hami_pod *p = st->pod->hami;
    return (double)p->weight_slot * (double)(u->tasks + r->nums) * u->inv_split +
           (double)p->weight_memory * (double)(u->memory_used + score_memory(r, u->memory_mib)) * u->inv_memory +
           (double)p->weight_core * (double)(u->cores_used + r->cores) * u->inv_cores;
}

/* ---- explanations --------------------------------------------------------------- */

static void device_label(const struct hstate *st, int d, char *buf, size_t size)
{
    char uuid[32];
    hami_short_uuid(st->h->devices[d].uuid, uuid, sizeof(uuid));
    snprintf(buf, size, "GPU %d (%s)", st->h->devices[d].index, uuid);
}

static void put_device_reason(struct strbuf *sb, const struct hstate *st, int d, enum verdict v,
                              const struct hami_request *r)
{
    const struct hami_device *dev = &st->h->devices[d];
    const struct hami_gpu_state *u = &st->use[d];
    int64_t need = hami_request_memory(r, dev->memory_mib);
    char label[64];
    device_label(st, d, label, sizeof(label));
    switch (v) {
    case V_MEMORY:
        strbuf_printf(sb, "%s has %" PRId64 " MiB free, container needs %" PRId64, label,
                      dev->memory_mib - u->memory_used, need);
        break;
    case V_CORES:
        strbuf_printf(sb, "%s has %" PRId64 "%% cores free, container needs %d", label, dev->cores - u->cores_used,
                      r->cores);
        break;
    case V_SPLIT:
        strbuf_printf(sb, "%s already holds %d of its %d tasks", label, u->tasks, dev->split);
        break;
    case V_EXCLUSIVE:
        strbuf_printf(sb, "%s is in use by %d task%s, container needs it alone (gpucores 100)", label, u->tasks,
                      u->tasks == 1 ? "" : "s");
        break;
    case V_CORES_FULL:
        strbuf_printf(sb, "%s has no cores left, and a container reserving none may not join it", label);
        break;
    case V_MIG: {
        struct mig_choice c;
        mig_pick(st, d, need, r->cores, &c);
        strbuf_printf(sb, "%s (MIG mode): %s", label, c.reason);
        break;
    }
    default:
        strbuf_printf(sb, "%s has %" PRId64 " MiB and %d%% cores in all, container needs %" PRId64 " and %d", label,
                      dev->memory_mib, dev->cores, need, r->cores);
        break;
    }
}

static void put_request(struct strbuf *sb, const struct container_request *c)
{
    const struct hami_request *r = &c->hami;
    strbuf_printf(sb, "container \"%s\" needs ", c->name);
    if (r->nums > 1)
        strbuf_printf(sb, "%d vGPUs on different GPUs, each with ", r->nums);
    if (r->memory_mib > 0)
        strbuf_printf(sb, "%" PRId64 " MiB", r->memory_mib);
    else
        strbuf_printf(sb, "%d%% of the GPU's memory", r->memory_percent);
    strbuf_printf(sb, " and %d%% cores%s", r->cores, r->nums > 1 ? "" : " on one GPU");
}

static void put_excluded(struct strbuf *sb, const struct hstate *st)
{
    struct excluded c;
    classify_devices(st, &c);

    const struct {
        int count;
        const char *what;
    } parts[] = {{c.unhealthy, "unhealthy"},
                 {c.mig, "in MIG mode without usable migProfiles"},
                 {c.cordoned, "cordoned by " HAMI_DEVICE_CORDON_ANNOTATION},
                 {c.other_mode, "of another mode than " HAMI_VGPU_MODE_ANNOTATION},
                 {c.other_type, "excluded by " HAMI_USE_TYPE_ANNOTATION "/nouse-gputype"},
                 {c.other_uuid, "excluded by " HAMI_USE_UUID_ANNOTATION "/nouse-gpuuuid"}};

    bool first = true;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (!parts[i].count)
            continue;
        strbuf_printf(sb, "%s%d %s", first ? " (not considered: " : ", ", parts[i].count, parts[i].what);
        first = false;
    }
    if (!first)
        strbuf_putc(sb, ')');
}

/* The eligible device of verdict v not in done with the most free memory
 * (the nearest miss), or -1. */
static int closest(const struct hstate *st, const enum verdict *why, enum verdict v, uint64_t done)
{
    int best = -1;
    for (int d = 0; d < st->h->count; d++) {
        if (!(st->eligible >> d & 1) || why[d] != v || (done >> d & 1))
            continue;
        int64_t free_d = st->use[d].memory_mib - st->use[d].memory_used;
        if (best < 0 || free_d > st->use[best].memory_mib - st->use[best].memory_used)
            best = d;
    }
    return best;
}

/* The container fits on `fitting` GPUs only: name the closest misses. */
static bool explain(struct hstate *st, int ci, int fitting)
{
    const struct container_request *c = &st->pod->containers[ci];
    enum verdict why[HAMI_MAX_DEVICES];
    for (int d = 0; d < st->h->count; d++) {
        int64_t need;
        why[d] = (st->eligible >> d & 1) ? check_device(st, d, &c->hami, &need) : V_TOO_SMALL;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    put_request(&sb, c);
    if (fitting > 0)
        strbuf_printf(&sb, "; only %d GPU%s can take one", fitting, fitting == 1 ? "" : "s");
    int listed = 0, more = 0, possible = fitting;
    uint64_t done = 0;
    for (enum verdict v = V_MEMORY; v < V_COUNT; v++)
        for (int d; (d = closest(st, why, v, done)) >= 0;) {
            done |= 1ULL << d;
            possible += v != V_TOO_SMALL;
            if (listed == 3) {
                more++;
                continue;
            }
            strbuf_puts(&sb, listed ? "; " : ": ");
            put_device_reason(&sb, st, d, v, &c->hami);
            listed++;
        }
    if (more)
        strbuf_printf(&sb, "; %d more GPU%s cannot either", more, more == 1 ? "" : "s");
    if (st->eligible == 0)
        strbuf_puts(&sb, ": no GPU of this node may be used");
    put_excluded(&sb, st);
    return fail_with(st, possible < c->hami.nums, &sb);
}

/* ---- choosing -------------------------------------------------------------------- */

/* Order candidates by the policy. Ties go to the higher position: HAMi
 * sorts the devices (for up to 12 an insertion sort, so equal scores keep
 * the registration order) and its Fit walks the sorted list from the end. */
static void order(const struct hstate *st, int *cand, double *score, int nc)
{
    for (int i = 1; i < nc; i++) {
        int c = cand[i];
        double s = score[i];
        int j = i - 1;
        while (j >= 0 && (st->spread ? score[j] >= s : score[j] <= s)) {
            cand[j + 1] = cand[j];
            score[j + 1] = score[j];
            j--;
        }
        cand[j + 1] = c;
        score[j + 1] = s;
    }
}

static bool topology_usable(const struct hstate *st)
{
    const struct gpu_topology *t = st->n->spec->topology;
    return t && t->count == st->h->count && st->h->count > 0 && st->h->devices[0].topo >= 0;
}

static uint64_t to_topology(const struct hstate *st, uint64_t devices)
{
    uint64_t m = 0;
    for (int d = 0; d < st->h->count; d++)
        if (devices >> d & 1)
            m |= 1ULL << st->h->devices[d].topo;
    return m;
}

static uint64_t from_topology(const struct hstate *st, uint64_t gpus)
{
    uint64_t m = 0;
    for (int d = 0; d < st->h->count; d++)
        if (gpus >> st->h->devices[d].topo & 1)
            m |= 1ULL << d;
    return m;
}

/* Several vGPUs: the policy's pick, unless the topology offers a better
 * connected set among the candidates. */
static uint64_t with_topology(struct hstate *st, uint64_t candidates, uint64_t pick, int k)
{
    if (k < 2 || !topology_usable(st))
        return pick;
    const struct gpu_topology *t = st->n->spec->topology;
    int64_t pick_score = topology_set_score(t, to_topology(st, pick)), best_score = 0;
    uint64_t best = topology_best_set(t, to_topology(st, candidates), k, &best_score);
    bool better = best && best_score > pick_score;
    st->fit->set_score += better ? best_score : pick_score;
    st->fit->set_best += topology_best_possible(t, k);
    st->pairs += (int64_t)k * (k - 1) / 2;
    return better ? from_topology(st, best) : pick;
}

/* The MIG instance for one vGPU of r on device d (check_device said it
 * fits): recorded in use; the device is charged the profile's memory and
 * cores, as HAMi's AddResourceUsage charges them. 0 with the choice in *c,
 * or -1. */
static int take_mig(struct hstate *st, int d, const struct hami_request *r, struct mig_choice *c)
{
    if (mig_pick(st, d, hami_request_memory(r, st->use[d].memory_mib), r->cores, c) != 0)
        return -1;
    const struct mig_template *t = &st->h->devices[d].mig->templates[c->template_index];
    hami_mig_add(&st->mig[d],
                 (struct hami_mig_inst){(int16_t)c->template_index, (int8_t)c->at.start, (int8_t)c->at.size});
    st->use[d].tasks++;
    st->use[d].memory_used += t->memory_mib;
    st->use[d].cores_used += t->cores;
    return 0;
}

/* The choice's reason, appended to the node's note for explain (cut at
 * FIT_REASON_MAX). */
static void note_mig(struct hstate *st, int ci, int d, const struct mig_choice *c)
{
    char label[64];
    device_label(st, d, label, sizeof(label));
    size_t room = sizeof(st->mig_reason) - st->mig_reason_len;
    int n = snprintf(st->mig_reason + st->mig_reason_len, room, "%scontainer \"%s\" on %s: %s",
                     st->mig_reason_len ? "; " : "", st->pod->containers[ci].name, label, c->reason);
    st->mig_reason_len = n < 0               ? st->mig_reason_len
                         : (size_t)n >= room ? sizeof(st->mig_reason) - 1
                                             : st->mig_reason_len + (size_t)n;
}

static void take(struct hstate *st, int ci, uint64_t set)
{
    const struct hami_request *r = &st->pod->containers[ci].hami;
    for (int d = 0; d < st->h->count; d++) {
        if (!(set >> d & 1))
            continue;
        struct mig_choice c;
        if (is_mig(st, d) && take_mig(st, d, r, &c) == 0) {
            note_mig(st, ci, d, &c);
            continue;
        }
        st->use[d].tasks++;
        st->use[d].memory_used += hami_request_memory(r, st->use[d].memory_mib);
        st->use[d].cores_used += r->cores;
    }
    if (st->fit->hami_masks)
        st->fit->hami_masks[ci] = set;
}

/* One vGPU (the usual request): the policy's best device, no sorting. */
static bool place_one(struct hstate *st, int ci)
{
    const struct hami_request *r = &st->pod->containers[ci].hami;
    int best = -1;
    double best_score = 0;
    for (uint64_t m = st->eligible; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        int64_t need;
        if (check_device(st, d, r, &need) != V_OK)
            continue;
        double s = device_score(st, d, r, need);
        /* equal scores: the later device, as HAMi's Fit walks from the end */
        if (best < 0 || (st->spread ? s <= best_score : s >= best_score)) {
            best = d;
            best_score = s;
        }
    }
    if (best < 0)
        return explain(st, ci, 0);
    take(st, ci, 1ULL << best);
    return true;
}

static bool place(struct hstate *st, int ci)
{
    const struct hami_request *r = &st->pod->containers[ci].hami;
    if (r->nums > st->h->count)
        return fail(st, true, "container \"%s\" needs %d vGPUs on different GPUs; the node has %d HAMi GPU%s",
                    st->pod->containers[ci].name, r->nums, st->h->count, st->h->count == 1 ? "" : "s");
    if (r->nums == 1 && !st->pair_scores)
        return place_one(st, ci);
    int cand[HAMI_MAX_DEVICES], nc = 0;
    double score[HAMI_MAX_DEVICES];
    uint64_t candidates = 0;
    for (uint64_t m = st->eligible; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        int64_t need = 0;
        if (check_device(st, d, r, &need) != V_OK)
            continue;
        score[nc] = device_score(st, d, r, need);
        cand[nc++] = d;
        candidates |= 1ULL << d;
    }
    if (nc < r->nums)
        return explain(st, ci, nc);
    order(st, cand, score, nc);
    uint64_t pick = 0;
    for (int i = 0; i < r->nums; i++)
        pick |= 1ULL << cand[i];
    if (st->pair_scores) { /* HAMi's topology-aware pick; its policy's first ones past the search bound */
        uint64_t chosen = hami_topology_choose(st->pair_scores, cand, nc, r->nums);
        take(st, ci, chosen ? chosen : pick);
        return true;
    }
    take(st, ci, with_topology(st, candidates, pick, r->nums));
    return true;
}

/* ---- the node ---------------------------------------------------------------------- */

struct totals {
    int64_t tasks, tasks_used, memory, memory_used, cores, cores_used;
};

/* Capacity and use of the devices anyone can use (healthy, not MIG). */
static struct totals node_totals(const struct hstate *st)
{
    struct totals t = {0};
    for (uint64_t m = st->h->usable; m; m &= m - 1) {
        const struct hami_gpu_state *u = &st->use[__builtin_ctzll(m)];
        t.tasks += u->split;
        t.tasks_used += u->tasks;
        t.memory += u->memory_mib;
        t.memory_used += u->memory_used;
        t.cores += u->cores;
        t.cores_used += u->cores_used;
    }
    t.tasks_used += st->unattributed.vgpus;
    t.memory_used += st->unattributed.memory_mib;
    t.cores_used += st->unattributed.cores;
    return t;
}

/* HAMi use without a device is held against the node's totals. */
static bool check_unattributed(struct hstate *st)
{
    const struct hami_usage *u = &st->unattributed;
    if (u->pods <= 0)
        return true;
    struct totals t = node_totals(st);
    if (t.tasks_used <= t.tasks && t.memory_used <= t.memory && t.cores_used <= t.cores)
        return true;
    return fail(st, false,
                "%d pod%s without a usable %s annotation hold%s %" PRId64 " vGPUs, %" PRId64 " MiB and %" PRId64
                "%% cores on this node; with this pod placed the node would need %" PRId64 " of %" PRId64
                " tasks, %" PRId64 " of %" PRId64 " MiB and %" PRId64 "%% of %" PRId64 "%% cores",
                u->pods, u->pods == 1 ? "" : "s", HAMI_ALLOCATED_ANNOTATION, u->pods == 1 ? "s" : "", u->vgpus,
                u->memory_mib, u->cores, t.tasks_used, t.tasks, t.memory_used, t.memory, t.cores_used, t.cores);
}

/* HAMi's node score: the share of tasks, cores and memory in use once the
 * pod is placed; binpack prefers full nodes, spread empty ones. */
static int policy_score(const struct hstate *st, enum pack_policy node)
{
    struct totals t = node_totals(st);
    double used = 0;
    int terms = 0;
    if (t.tasks > 0)
        used += (double)t.tasks_used / (double)t.tasks, terms++;
    if (t.memory > 0)
        used += (double)t.memory_used / (double)t.memory, terms++;
    if (t.cores > 0)
        used += (double)t.cores_used / (double)t.cores, terms++;
    double util = terms ? used / terms : 0;
    util = util > 1 ? 1 : util < 0 ? 0 : util;
    int score = (int)(util * FIT_SCORE_MAX + 0.5);
    return node == POLICY_SPREAD ? FIT_SCORE_MAX - score : score;
}

static void load(struct hstate *st, const struct pod_entry *const *excluded, size_t nexcluded)
{
    for (int d = 0; d < st->h->count; d++)
        st->use[d] = st->n->hami->gpus[d];
    st->has_mig = st->n->hami->mig != NULL;
    if (st->has_mig)
        memcpy(st->mig, st->n->hami->mig, sizeof(st->mig[0]) * (size_t)st->h->count);
    st->mig_reason[0] = '\0';
    st->mig_reason_len = 0;
    st->unattributed = st->n->hami->unattributed;
    for (size_t i = 0; i < nexcluded; i++)
        release(st, excluded[i]);
}

bool hami_fit(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *const *excluded,
              size_t nexcluded, const struct alloc_policy *policy, struct fit_result *fit, struct hami_fit_score *out)
{
    struct hstate st; /* the device table is filled by load() for the node's devices only */
    st.n = n;
    st.h = n->spec->hami;
    st.pod = pod;
    st.fit = fit;
    st.pairs = 0;
    enum hami_pack gp = pod->hami->gpu_policy;
    st.spread = gp == HAMI_PACK_SPREAD || (gp == HAMI_PACK_DEFAULT && policy->hami_gpu == POLICY_SPREAD);
    /* HAMi sorts by any policy other than binpack as by spread */
    st.pair_scores = pod->hami->topology_aware ? st.h->pair_scores : NULL;
    st.spread |= st.pair_scores != NULL;
    char why[FIT_REASON_MAX];
    /* Only a pending handshake request depends on the time. */
    int64_t now = st.h->handshake == HAMI_HS_REQUESTING ? clock_realtime_ns() : 0;
    if (hami_node_unusable(st.h, now, why, sizeof(why)))
        return fail(&st, true, "%s", why);
    if (n->hami->count != st.h->count)
        return fail(&st, false, "the node's HAMi devices are not in the extender's cache");
    load(&st, excluded, nexcluded);
    st.eligible = classify_devices(&st, NULL);
    for (int i = 0; i < pod->ncontainers; i++)
        if (hami_container_on(&pod->containers[i], n) && !place(&st, i))
            return false;
    if (!check_unattributed(&st))
        return false;
    out->policy = policy_score(&st, policy->node);
    out->pairs = st.pairs;
    /* A fitting node's reason is empty, but for the MIG choices: explain
     * shows where the instances go and what stays possible. */
    if (st.mig_reason_len > 0) {
        memcpy(fit->reason, st.mig_reason, st.mig_reason_len + 1);
        fit->reason_len = st.mig_reason_len;
    }
    return true;
}

/* ---- the decision's MIG instances ------------------------------------------------------ */

/* The pod's own charge on n (an earlier decision), which its new fit does
 * not count against it. */
static const struct pod_entry *own_charge(const struct node_state *n, const struct pod_info *pod)
{
    for (const struct pod_entry *e = n->charged; e; e = e->node_next)
        if (e->info && strcmp(e->info->key, pod->key) == 0)
            return e;
    return NULL;
}

/* HAMi lists the allocations as it walks its device list: init containers
 * first, each container's vGPUs in order. */
static int by_container_device(const void *a, const void *b)
{
    const struct mig_hami_allocation *x = a, *y = b;
    if (x->container_index != y->container_index)
        return x->container_index < y->container_index ? -1 : 1;
    return (x->device_index > y->device_index) - (x->device_index < y->device_index);
}

int hami_fit_mig(const struct node_state *n, const struct pod_info *pod, const uint64_t *masks,
                 struct hami_alloc *alloc, struct mig_hami_allocation **out, int *count, char **err)
{
    *out = NULL;
    *count = 0;
    *err = NULL;
    const struct hami_node *h = n->spec ? n->spec->hami : NULL;
    if (!h || !n->hami || !n->hami->mig || n->hami->count != h->count)
        return 0;
    struct hstate *st = calloc(1, sizeof(*st));
    int total = 0;
    for (int i = 0; i < pod->ncontainers; i++)
        total += __builtin_popcountll(masks[i]);
    struct mig_hami_allocation *a = total ? calloc((size_t)total, sizeof(*a)) : NULL;
    if (!st || (total && !a)) {
        free(st);
        free(a);
        return -1;
    }
    st->n = n;
    st->h = h;
    st->pod = pod;
    const struct pod_entry *self = own_charge(n, pod);
    load(st, &self, self ? 1 : 0);
    int rc = 0, na = 0;
    for (int i = 0; rc == 0 && i < pod->ncontainers; i++) {
        int entry = pod_hami_entry(pod, i), k = 0;
        const struct hami_request *r = &pod->containers[i].hami;
        for (int d = 0; rc == 0 && d < h->count; d++) {
            if (!(masks[i] >> d & 1))
                continue;
            struct mig_choice c;
            struct hami_alloc_device *ad =
                entry >= 0 && entry < alloc->ncontainers && k < alloc->containers[entry].count
                    ? &alloc->containers[entry].devices[k]
                    : NULL;
            if (is_mig(st, d) && (!ad || take_mig(st, d, r, &c) != 0)) {
                rc = strbuf_set_error(err, "container \"%s\": no MIG instance free on GPU %d any more",
                                      pod->containers[i].name, h->devices[d].index);
            } else if (is_mig(st, d)) {
                const struct mig_template *t = &h->devices[d].mig->templates[c.template_index];
                ad->memory_mib = t->memory_mib; /* HAMi writes the profile's memory and cores */
                ad->cores = t->cores;
                struct mig_hami_allocation *m = &a[na++];
                m->container_index = entry;
                m->device_index = k;
                snprintf(m->gpu_uuid, sizeof(m->gpu_uuid), "%s", h->devices[d].uuid);
                snprintf(m->profile, sizeof(m->profile), "%s", t->name);
                m->placement = c.at;
            }
            k++;
        }
    }
    free(st);
    if (rc != 0 || na == 0) {
        free(a);
        return rc;
    }
    qsort(a, (size_t)na, sizeof(*a), by_container_device);
    *out = a;
    *count = na;
    return 0;
}

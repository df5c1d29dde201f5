/* allocator.c - fit one pod on one node. See allocator.h. */
#include "extender/decide/allocator.h"
#include "extender/decide/hami_fit.h"
#include "topology/select.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool pod_has_binpack_only_share(const struct pod_info *pod)
{
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct container_request *r = &pod->containers[i];
        if (r->family && (r->family->flags & GPU_FAMILY_BINPACK_ONLY) && r->whole_gpus == 0)
            return true;
    }
    return false;
}

/* The node policy that shapes the pod's scores on every node: a HAMi pod's
 * hami.io/node-scheduler-policy overrides --node-policy (the one place the
 * override is written; the summary line and the full path both ask it). */
static inline enum pack_policy node_policy_of(const struct pod_info *pod, const struct alloc_policy *policy)
{
    if (pod->hami && pod->hami->node_policy != HAMI_PACK_DEFAULT)
        return pod->hami->node_policy == HAMI_PACK_SPREAD ? POLICY_SPREAD : POLICY_BINPACK;
    return policy->node;
}

/* Free amounts of each GPU while the pod's containers are placed one by one. */
struct free_gpu {
    int64_t cores;
    int64_t mem[GPU_MEMORY_POOLS], mem_total[GPU_MEMORY_POOLS]; /* per memory pool (cluster/family.h) */
    int pods; /* container charges on the GPU: the stand-in for GPU-Manager's process count */
    int minor;
};

struct fit_state {
    const struct node_state *node;
    const struct pod_info *pod;
    const struct alloc_policy *policy;
    struct fit_result *fit;
    struct free_gpu gpus[TOPOLOGY_MAX_GPUS];
    struct node_usage unattributed;
};

/* The amount a whole-GPU request names: a count for a family that counts
 * GPUs (nvidia.com/gpu: 2), else cores (vcuda-core: 200). */
static int64_t whole_amount(const struct container_request *r)
{
    return (r->family->flags & GPU_FAMILY_COUNTS_GPUS) ? (int64_t)r->whole_gpus : r->cores;
}

/* Give back what an excluded pod holds on this node. */
static void release(struct fit_state *st, const struct pod_entry *self)
{
    if (!self || self->node != st->node)
        return;
    for (int i = 0; i < self->nslots; i++) {
        const struct slot_charge *sc = &self->slots[i];
        st->gpus[sc->slot].cores += sc->cores;
        for (int p = 0; p < GPU_MEMORY_POOLS; p++)
            st->gpus[sc->slot].mem[p] += sc->mem[p];
        st->gpus[sc->slot].pods--;
    }
    st->unattributed.cores -= self->unattributed.cores;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        st->unattributed.mem[p] -= self->unattributed.mem[p];
    st->unattributed.pods -= self->unattributed.pods;
}

static void load_free(struct fit_state *st, const struct pod_entry *const *excluded, size_t nexcluded)
{
    const struct node_state *n = st->node;
    for (int s = 0; s < n->gpu_count; s++) {
        const struct gpu_state *g = &n->gpus[s];
        struct free_gpu *f = &st->gpus[s];
        f->cores = 100 - g->core_used;
        for (int p = 0; p < GPU_MEMORY_POOLS; p++) {
            f->mem[p] = g->mem_total[p] - g->mem_used[p];
            f->mem_total[p] = g->mem_total[p];
        }
        f->pods = g->pods;
        f->minor = g->minor;
    }
    st->unattributed = n->unattributed;
    for (size_t i = 0; i < nexcluded; i++)
        release(st, excluded[i]);
}

/* Free units of the family's memory pool on the GPU (0 for a family without one). */
static int64_t mem_free(const struct free_gpu *g, const struct gpu_family *f)
{
    return f->memory_pool >= 0 ? g->mem[f->memory_pool] : 0;
}

static bool gpu_idle(const struct free_gpu *g)
{
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        if (g->mem[p] != g->mem_total[p])
            return false;
    return g->cores == 100;
}

/* "GPU 3" or, when the device minor differs from the position, "GPU 3 (/dev/nvidia5)". */
static void gpu_label(const struct fit_state *st, int slot, char *buf, size_t size)
{
    int minor = st->gpus[slot].minor;
    if (minor == slot)
        snprintf(buf, size, "GPU %d", slot);
    else
        snprintf(buf, size, "GPU %d (/dev/nvidia%d)", slot, minor);
}

/* The class of the failure fail() is about to explain. */
static void classify(struct fit_state *st, enum reason_class why, int container, int gpu, int64_t short_by)
{
    st->fit->why = why;
    st->fit->why_container = container;
    st->fit->why_gpu = gpu;
    st->fit->short_by = short_by;
}

static bool fail(struct fit_state *st, bool unresolvable, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(struct fit_state *st, bool unresolvable, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fit_vrefuse(st->fit, unresolvable, fmt, ap);
    va_end(ap);
    return false;
}

/* Is GPU a a better pick than GPU b for a shared request? Binpack follows
 * GPU-Manager's order as far as the extender can see it, because GPU-Manager
 * re-checks shared placements on the node: fewest free cores, then fewest
 * free memory, then (GPU-Manager: fewest processes running on the GPU,
 * which the extender cannot see) fewest pods charged on it, then lowest
 * minor. Spread turns the first two around; fewer pods first either way. */
static bool better_shared(const struct fit_state *st, const struct gpu_family *f, int a, int b)
{
    const struct free_gpu *ga = &st->gpus[a], *gb = &st->gpus[b];
    int64_t ma = mem_free(ga, f), mb = mem_free(gb, f);
    bool spread = st->policy->gpu == POLICY_SPREAD;
    if (ga->cores != gb->cores)
        return spread ? ga->cores > gb->cores : ga->cores < gb->cores;
    if (ma != mb)
        return spread ? ma > mb : ma < mb;
    if (ga->pods != gb->pods)
        return ga->pods < gb->pods;
    return ga->minor < gb->minor;
}

static bool explain_shared_misfit(struct fit_state *st, int ci)
{
    const struct container_request *r = &st->pod->containers[ci];
    const char *core_res = r->family->core_resource;
    const char *mem_res = r->family->memory_resource ? r->family->memory_resource : "memory";
    int freest = 0, roomiest = -1;
    for (int s = 0; s < st->node->gpu_count; s++) {
        if (st->gpus[s].cores > st->gpus[freest].cores)
            freest = s;
        if (st->gpus[s].cores >= r->cores &&
            (roomiest < 0 || mem_free(&st->gpus[s], r->family) > mem_free(&st->gpus[roomiest], r->family)))
            roomiest = s;
    }
    char label[48];
    if (roomiest < 0) {
        classify(st, REASON_GPU_CORES, ci, freest, r->cores - st->gpus[freest].cores);
        gpu_label(st, freest, label, sizeof(label));
        return fail(st, false, "container \"%s\" needs %" PRId64 " %s on one GPU; the freest, %s, has %" PRId64 " free",
                    r->name, r->cores, core_res, label, st->gpus[freest].cores);
    }
    classify(st, REASON_GPU_MEMORY, ci, roomiest, r->memory - mem_free(&st->gpus[roomiest], r->family));
    gpu_label(st, roomiest, label, sizeof(label));
    return fail(st, false,
                "container \"%s\" needs %" PRId64 " %s and %" PRId64 " %s on one GPU; %s has %" PRId64
                " %s free but only %" PRId64 " %s, and no GPU has both",
                r->name, r->cores, core_res, r->memory, mem_res, label, st->gpus[roomiest].cores, core_res,
                mem_free(&st->gpus[roomiest], r->family), mem_res);
}

/* Take cores and `memory` units of memory pool `pool` (-1: none) of a GPU. */
static void take(struct fit_state *st, int ci, int slot, int64_t cores, int pool, int64_t memory)
{
    struct free_gpu *g = &st->gpus[slot];
    g->cores -= cores;
    if (pool >= 0)
        g->mem[pool] -= memory;
    st->fit->masks[ci] |= 1ULL << slot;
}

/* Take a GPU whole: its cores and every memory pool. */
static void take_whole(struct fit_state *st, int ci, int slot)
{
    take(st, ci, slot, 100, -1, 0);
    memset(st->gpus[slot].mem, 0, sizeof(st->gpus[slot].mem));
}

static bool place_shared(struct fit_state *st, int ci)
{
    const struct container_request *r = &st->pod->containers[ci];
    int best = -1;
    for (int s = 0; s < st->node->gpu_count; s++) {
        if (st->gpus[s].cores < r->cores || mem_free(&st->gpus[s], r->family) < r->memory)
            continue;
        if (best < 0 || better_shared(st, r->family, s, best))
            best = s;
    }
    if (best < 0)
        return explain_shared_misfit(st, ci);
    take(st, ci, best, r->cores, r->family->memory_pool, r->memory);
    return true;
}

/* Whole GPUs held back for unattributed usage: every started 100 cores
 * the node cannot place might sit on any idle GPU. */
static int reserved_whole(const struct fit_state *st)
{
    int64_t cores = st->unattributed.cores;
    return cores <= 0 ? 0 : (int)((cores + 99) / 100);
}

/* Whole GPUs: the best-connected set of idle GPUs on the node's shape
 * (topology/select.c), which also leaves the best-connected sets free. */
static void choose_whole(struct fit_state *st, int ci, int want)
{
    const struct gpu_topology *shape = st->node->spec->shape;
    uint64_t idle = 0;
    for (int s = 0; s < st->node->gpu_count; s++)
        if (gpu_idle(&st->gpus[s]))
            idle |= 1ULL << s;
    int64_t score = 0;
    uint64_t set = shape && shape->count == st->node->gpu_count ? topology_best_set(shape, idle, want, &score) : 0;
    if (!set) {
        /* No usable shape: device order. */
        for (int s = 0; s < st->node->gpu_count && __builtin_popcountll(set) < want; s++)
            if (idle >> s & 1)
                set |= 1ULL << s;
    } else {
        st->fit->set_score += score;
        st->fit->set_best += topology_best_possible(shape, want);
    }
    for (int s = 0; s < st->node->gpu_count; s++)
        if (set >> s & 1)
            take_whole(st, ci, s);
}

static bool place_whole(struct fit_state *st, int ci)
{
    const struct container_request *r = &st->pod->containers[ci];
    int idle = 0;
    for (int s = 0; s < st->node->gpu_count; s++)
        idle += gpu_idle(&st->gpus[s]);
    int held = reserved_whole(st);
    if (idle - held >= r->whole_gpus) {
        choose_whole(st, ci, r->whole_gpus);
        return true;
    }
    /* Refused: the free GPUs are listed (only now: formatting is dearer than deciding). */
    char list[256] = "";
    size_t used = 0;
    for (int s = 0, listed = 0; s < st->node->gpu_count; s++)
        if (gpu_idle(&st->gpus[s]) && used < sizeof(list))
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", listed++ ? "," : "", s);
    classify(st, REASON_WHOLE_GPUS, ci, -1, r->whole_gpus - (idle - held));
    char held_note[160] = "";
    if (held > 0)
        snprintf(held_note, sizeof(held_note),
                 ", and %d of them %s held for %" PRId64 " cores used by pods without GPU assignment", held,
                 held == 1 ? "is" : "are", st->unattributed.cores);
    return fail(st, r->whole_gpus > st->node->gpu_count,
                "container \"%s\" needs %d whole GPUs (%s %" PRId64 "); %d %s completely free%s%s%s%s", r->name,
                r->whole_gpus, r->family->core_resource, whole_amount(r), idle, idle == 1 ? "is" : "are",
                idle ? " (GPUs " : "", list, idle ? ")" : "", held_note);
}

/* Usage without a GPU is charged against the node's totals: the pod fits
 * only if what stays free across all GPUs still covers it. */
/* "a cores, b vcuda-memory and c mps-memory": the cores and every memory pool. */
static void put_usage(struct strbuf *sb, int64_t cores, const int64_t mem[GPU_MEMORY_POOLS])
{
    strbuf_printf(sb, "%" PRId64 " cores", cores);
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        strbuf_printf(sb, "%s%" PRId64 " %s", p + 1 == GPU_MEMORY_POOLS ? " and " : ", ", mem[p],
                      gpu_memory_pool_name(p));
}

static bool check_unattributed(struct fit_state *st)
{
    const struct node_usage *u = &st->unattributed;
    if (u->pods <= 0)
        return true;
    int64_t cores_left = 0, mem_left[GPU_MEMORY_POOLS] = {0};
    bool enough = true;
    for (int s = 0; s < st->node->gpu_count; s++) {
        cores_left += st->gpus[s].cores;
        for (int p = 0; p < GPU_MEMORY_POOLS; p++)
            mem_left[p] += st->gpus[s].mem[p];
    }
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        enough &= mem_left[p] >= u->mem[p];
    if (cores_left >= u->cores && enough)
        return true;
    classify(st, REASON_UNATTRIBUTED, -1, -1, u->cores > cores_left ? u->cores - cores_left : 0);
    struct strbuf used, left;
    strbuf_init(&used);
    strbuf_init(&left);
    put_usage(&used, u->cores, u->mem);
    put_usage(&left, cores_left, mem_left);
    fail(st, false,
         "%d pod%s without GPU assignment %s %s on this node; with this pod placed only %s would be left for them",
         u->pods, u->pods == 1 ? "" : "s", u->pods == 1 ? "uses" : "use", used.data ? used.data : "?",
         left.data ? left.data : "?");
    strbuf_free(&used);
    strbuf_free(&left);
    return false;
}

/* Weight of an NVSwitch A100 pair (NV12): the yardstick of a well-connected
 * pair across node shapes. */
#define IDEAL_PAIR_WEIGHT 340

static int policy_score(const struct fit_state *st)
{
    int64_t capacity = 100LL * st->node->gpu_count, used = st->unattributed.cores;
    for (int s = 0; s < st->node->gpu_count; s++)
        used += 100 - st->gpus[s].cores;
    if (used > capacity)
        used = capacity;
    int util = capacity ? (int)(used * FIT_SCORE_MAX / capacity) : 0;
    return st->policy->node == POLICY_SPREAD ? FIT_SCORE_MAX - util : util;
}

static int64_t whole_pairs(const struct pod_info *pod, const struct node_state *n)
{
    int64_t pairs = 0;
    for (int i = 0; i < pod->ncontainers; i++) {
        if (hami_container_on(&pod->containers[i], n))
            continue;
        int64_t k = pod->containers[i].whole_gpus;
        pairs += k * (k - 1) / 2;
    }
    return pairs;
}

/* design.md section 5: for sets of whole GPUs the score combines the chosen
 * sets' quality relative to the best this node's shape allows (a DGX-1
 * whose NVLinked quads are broken scores below an intact one), an absolute
 * term weighted higher (so an NVLinked node beats a PCIe-only or unknown
 * one even when binpack prefers the other), and a little of the node
 * policy. Shares and single whole GPUs have no locality to gain: they use
 * the node policy alone. Weights: 300 + 600 + 0.1 x 1000 = 1000 at most.
 * Several vGPUs of one HAMi container placed with a topology count alike. */
static int combine_score(int policy, int64_t pairs, const struct fit_result *f)
{
    if (pairs == 0)
        return policy;
    double rel = f->set_best > 0 ? (double)f->set_score / (double)f->set_best : 1.0;
    double abs_q = (double)f->set_score / (double)(pairs * IDEAL_PAIR_WEIGHT);
    rel = rel > 1.0 ? 1.0 : rel;
    abs_q = abs_q > 1.0 ? 1.0 : abs_q;
    return (int)(300.0 * rel + 600.0 * abs_q + 0.1 * policy + 0.5);
}

/* Does the pod ask for per-GPU shares or whole GPUs (the GPU table) here? */
static bool pod_has_classic_gpus(const struct fit_state *st)
{
    for (int i = 0; i < st->pod->ncontainers; i++) {
        const struct container_request *r = &st->pod->containers[i];
        if (r->family && r->family->placement == GPU_PLACE_SHARES_OR_WHOLE && !hami_container_on(r, st->node))
            return true;
    }
    return false;
}

static int score_node(const struct fit_state *st, const struct hami_fit_score *hami, int units_util)
{
    /* On a HAMi node the pod's vGPUs shape the score, as HAMi scores nodes;
     * a pod of a self-placing family alone (MIG), the use of its units. */
    int policy = hami ? hami->policy : policy_score(st);
    if (!hami && units_util >= 0 && !pod_has_classic_gpus(st))
        policy = st->policy->node == POLICY_SPREAD ? FIT_SCORE_MAX - units_util : units_util;
    int64_t pairs = whole_pairs(st->pod, st->node) + (hami ? hami->pairs : 0);
    return combine_score(policy, pairs, st->fit);
}

/* Why a container's family is not on this node: the family's own words, or
 * "node has no <resource> capacity". */
static bool refuse_not_offered(struct fit_state *st, int ci)
{
    const struct container_request *r = &st->pod->containers[ci];
    classify(st, REASON_NO_CAPACITY, ci, -1, 0);
    if (!r->family->explain_not_offered)
        return fail(st, true, "node has no %s capacity (container \"%s\" asks for it)", r->family->core_resource,
                    r->name);
    struct strbuf why;
    strbuf_init(&why);
    r->family->explain_not_offered(r->name, &why);
    fail(st, true, "%s", why.data ? why.data : "node does not offer the container's GPU family");
    strbuf_free(&why);
    return false;
}

/* Does the node offer a self-placing family (MIG) the pod asks for? Such a
 * node may have no GPU table at all. */
static bool offers_units_asked(const struct fit_state *st)
{
    for (int i = 0; i < st->pod->ncontainers; i++) {
        const struct container_request *r = &st->pod->containers[i];
        if (r->family && r->family->placement == GPU_PLACE_FAMILY && (st->node->spec->offers & r->family_bit))
            return true;
    }
    return false;
}

static bool check_node_kind(struct fit_state *st)
{
    if (st->node->gpu_count == 0 && !hami_node_is(st->node) && (pod_has_classic_gpus(st) || !offers_units_asked(st))) {
        struct strbuf names;
        strbuf_init(&names);
        gpu_family_list_core_resources(&names, true);
        classify(st, REASON_NO_GPU, -1, -1, 0);
        fail(st, true, "node advertises no GPUs (no %s capacity and no %s annotation)", names.data ? names.data : "GPU",
             TOPOLOGY_ANNOTATION);
        strbuf_free(&names);
        return false;
    }
    for (int i = 0; i < st->pod->ncontainers; i++) {
        const struct container_request *r = &st->pod->containers[i];
        if (!r->family || hami_container_on(r, st->node))
            continue;
        if (!(st->node->spec->offers & r->family_bit))
            return refuse_not_offered(st, i);
    }
    return true;
}

/* The families that count their own units (GPU_PLACE_FAMILY: MIG), each
 * asked once for all the pod's containers of it; *util: the last one's use
 * of its units with the pod placed (0..1000), -1 when the pod has none. */
static bool fit_family_units(struct fit_state *st, const struct pod_entry *const *excluded, size_t nexcluded, int *util)
{
    uint8_t asked = 0;
    int first = -1;
    for (int i = 0; i < st->pod->ncontainers; i++) {
        const struct container_request *r = &st->pod->containers[i];
        if (r->family && r->family->placement == GPU_PLACE_FAMILY) {
            asked |= r->family_bit;
            first = first < 0 ? i : first;
        }
    }
    for (size_t f = 0; asked && f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        const void *state = st->node->family_state[f];
        if (!(asked & gpu_family_bit(fam)))
            continue;
        struct strbuf why;
        strbuf_init(&why);
        bool fits = state && fam->fit_node(state, st->node, st->pod, excluded, nexcluded, util, &why);
        if (!fits) {
            classify(st, REASON_INSTANCES, first, -1, 0);
            fail(st, false, "%s", why.data ? why.data : "the node keeps no count of these instances");
        }
        strbuf_free(&why);
        if (!fits)
            return false;
    }
    return true;
}

bool allocator_fit(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *self,
                   const struct alloc_policy *policy, struct fit_result *fit)
{
    return allocator_fit_excluding(n, pod, &self, self ? 1 : 0, policy, fit);
}

/* ---- the summary-line shortcut (cluster/nodefit.h) ---------------------- */

enum line_outcome { LINE_UNDECIDED = 0, LINE_DECIDED };

/* policy_score, on the line, with `placed` more cores in use. */
static int line_policy_score(const struct node_fit *f, int64_t placed, enum pack_policy node_policy)
{
    int64_t capacity = 100LL * f->count, used = (int64_t)f->cores_used + placed;
    if (used > capacity)
        used = capacity;
    int util = (int)(used * FIT_SCORE_MAX / capacity);
    return node_policy == POLICY_SPREAD ? FIT_SCORE_MAX - util : util;
}

/* The GPU place_shared would take on the line, or -1 when none has room:
 * better_shared's order, the smaller the better, of free cores, then free
 * memory (each fewest first under binpack, most first under spread), then
 * fewer pods, then the lower minor; the first of equals. */
#if defined(__SSE2__) && !defined(GQA_NO_SSE2)
#include <emmintrin.h>

/* Eight bytes as eight 16-bit lanes. */
static inline __m128i widen8(const uint8_t *p)
{
    return _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(const void *)p), _mm_setzero_si128());
}

/* Bit s: lane s of a 16-bit lane mask is set. */
static inline unsigned lane_bits(__m128i m)
{
    return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(m, m)) & 0xFFu;
}

/* Bit s: lane s (unsigned) is at least need (0..65535). */
static inline unsigned lanes_at_least(__m128i v, uint16_t need)
{
    __m128i short_by = _mm_subs_epu16(_mm_set1_epi16((short)need), v);
    return lane_bits(_mm_cmpeq_epi16(short_by, _mm_setzero_si128()));
}

/* Of the lanes in cand (never empty), those holding their smallest value
 * (unsigned). The others are lifted to the maximum first; a candidate
 * holding the maximum too is still told apart by cand. */
static inline unsigned smallest_lanes(__m128i v, unsigned cand)
{
    const __m128i bias = _mm_set1_epi16((short)0x8000); /* unsigned order as signed */
    const __m128i bit = _mm_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128);
    __m128i in = _mm_cmpeq_epi16(_mm_and_si128(_mm_set1_epi16((short)cand), bit), bit);
    __m128i x = _mm_or_si128(_mm_and_si128(in, _mm_xor_si128(v, bias)), _mm_andnot_si128(in, _mm_set1_epi16(0x7FFF)));
    __m128i m = _mm_min_epi16(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_epi16(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm_min_epi16(m, _mm_shufflelo_epi16(_mm_shufflehi_epi16(m, _MM_SHUFFLE(2, 3, 0, 1)), _MM_SHUFFLE(2, 3, 0, 1)));
    return lane_bits(_mm_cmpeq_epi16(x, m)) & cand;
}

/* The four keys lane-wise, each deciding among the ties the last left. */
static int line_choose(const struct node_fit *f, const uint16_t *mem, int64_t cores, int64_t memory, bool spread)
{
    if (cores > UINT16_MAX || memory > UINT16_MAX)
        return -1;
    __m128i free_cores = widen8(f->cores_free);
    __m128i free_mem = _mm_loadu_si128((const __m128i *)(const void *)mem);
    unsigned cand = lanes_at_least(free_cores, (uint16_t)(cores > 0 ? cores : 0)) &
                    lanes_at_least(free_mem, (uint16_t)(memory > 0 ? memory : 0)) & ((1u << f->count) - 1);
    if (!cand)
        return -1;
    if (spread) { /* most free first */
        free_cores = _mm_xor_si128(free_cores, _mm_set1_epi16(UINT8_MAX));
        free_mem = _mm_xor_si128(free_mem, _mm_set1_epi16((short)UINT16_MAX));
    }
    cand = smallest_lanes(free_cores, cand);
    if (cand & (cand - 1))
        cand = smallest_lanes(free_mem, cand);
    if (cand & (cand - 1))
        cand = smallest_lanes(widen8(f->pods), cand);
    if (cand & (cand - 1))
        cand = smallest_lanes(widen8(f->minor), cand);
    return __builtin_ctz(cand); /* the first of equals */
}
#else
static uint64_t line_rank(uint64_t cores, uint64_t mem, uint64_t pods, uint64_t minor, bool spread)
{
    if (spread) {
        cores ^= UINT8_MAX;
        mem ^= UINT16_MAX;
    }
    return cores << 40 | mem << 24 | pods << 8 | minor;
}

static int line_choose(const struct node_fit *f, const uint16_t *mem, int64_t cores, int64_t memory, bool spread)
{
    uint64_t best_rank = UINT64_MAX;
    int best = -1;
    for (int s = 0; s < f->count; s++) {
        uint64_t rank = line_rank(f->cores_free[s], mem[s], f->pods[s], f->minor[s], spread);
        bool room = f->cores_free[s] >= cores && mem[s] >= memory;
        if (room && rank < best_rank) { /* the first of equals, as place_shared */
            best_rank = rank;
            best = s;
        }
    }
    return best;
}
#endif

/* A shared container that fits: the GPU place_shared would take and the
 * node policy's score (policy_score with the share placed). Undecided
 * when it does not fit: the full path explains. */
static enum line_outcome line_shared(const struct node_fit *f, const struct container_request *r,
                                     const struct alloc_policy *policy, enum pack_policy node_policy,
                                     struct fit_result *fit)
{
    const uint16_t *mem = f->mem_free[r->family->memory_pool]; /* line_applies: a family with a pool */
    int best = line_choose(f, mem, r->cores, r->memory, policy->gpu == POLICY_SPREAD);
    if (best < 0)
        return LINE_UNDECIDED;
    fit->masks[0] = 1ULL << best;
    fit->score = line_policy_score(f, r->cores, node_policy);
    return LINE_DECIDED;
}

/* Whole GPUs when the idle ones are exactly as many as asked: no choice to
 * make (choose_whole takes them all, and its topology search returns them
 * at once), so the line decides; with more idle GPUs the search chooses. */
static enum line_outcome line_whole_forced(const struct node_state *n, const struct container_request *r,
                                           enum pack_policy node_policy, struct fit_result *fit)
{
    const struct node_fit *f = &n->fit;
    if (r->whole_gpus == 1 && f->idle && !(f->idle & (f->idle - 1)) && f->best1 != NODE_FIT_BEST1_UNKNOWN) {
        /* One GPU, as the line scores it (nodefit.h): the shape is not read. */
        fit->set_score = f->best1_gpus & f->idle ? f->best1 : 0;
        fit->set_best = f->best1;
    } else {
        if (__builtin_popcount(f->idle) != r->whole_gpus)
            return LINE_UNDECIDED;
        const struct gpu_topology *shape = n->spec->shape;
        int64_t score = 0;
        if (shape && shape->count == n->gpu_count && topology_best_set(shape, f->idle, r->whole_gpus, &score)) {
            fit->set_score = score;
            fit->set_best = topology_best_possible(shape, r->whole_gpus);
        }
    }
    fit->masks[0] = f->idle;
    int64_t pairs = (int64_t)r->whole_gpus * (r->whole_gpus - 1) / 2;
    fit->score = combine_score(line_policy_score(f, 100LL * r->whole_gpus, node_policy), pairs, fit);
    return LINE_DECIDED;
}

/* Whole GPUs refused because none is completely free (place_whole's text
 * for that case); formatted once and reused while the request repeats. */
static enum line_outcome line_whole_refused(const struct node_fit *f, const struct container_request *r,
                                            struct fit_result *fit)
{
    if (fit->memo_request != r) {
        int len = snprintf(fit->memo, sizeof(fit->memo),
                           "container \"%s\" needs %d whole GPUs (%s %" PRId64 "); 0 are completely free", r->name,
                           r->whole_gpus, r->family->core_resource, whole_amount(r));
        fit->memo_len = len < 0 ? 0 : (size_t)len < sizeof(fit->memo) ? (size_t)len : sizeof(fit->memo) - 1;
        fit->memo_request = r;
    }
    memcpy(fit->reason, fit->memo, fit->memo_len + 1);
    fit->reason_len = fit->memo_len;
    fit->reason_memo = r;
    fit->fits = false;
    fit->unresolvable = r->whole_gpus > f->count;
    fit->score = 0;
    fit->why = REASON_WHOLE_GPUS;
    fit->why_container = 0;
    fit->why_gpu = -1;
    fit->short_by = r->whole_gpus;
    return LINE_DECIDED;
}

/* May the line decide this pod on this node? One GPU container on a node
 * whose line is exact (hence a known node with a spec and not a HAMi node:
 * no container is served by HAMi devices there) and that offers the
 * family, with no excluded charge on the node (the line holds them). */
static bool line_applies(const struct node_state *n, const struct pod_info *pod,
                         const struct pod_entry *const *excluded, size_t nexcluded)
{
    if (!n->fit.usable || pod->ncontainers != 1)
        return false;
    const struct container_request *r = &pod->containers[0];
    if (!r->family || r->family->placement != GPU_PLACE_SHARES_OR_WHOLE)
        return false;
    bool shared = r->whole_gpus == 0 && (r->family->flags & GPU_FAMILY_SHARES) && r->family->memory_pool >= 0;
    if (!(shared || r->whole_gpus > 0) || !(n->fit.offers & r->family_bit))
        return false;
    for (size_t i = 0; i < nexcluded; i++)
        if (excluded[i] && excluded[i]->node == n)
            return false;
    return true;
}

static enum line_outcome fit_by_line(const struct node_state *n, const struct pod_info *pod,
                                     const struct alloc_policy *policy, struct fit_result *fit)
{
    const struct container_request *r = &pod->containers[0];
    fit->set_score = fit->set_best = 0;
    fit->unresolvable = false;
    fit->masks[0] = 0;
    if (fit->hami_masks)
        fit->hami_masks[0] = 0;
    if (r->whole_gpus > 0 && n->fit.idle == 0)
        return line_whole_refused(&n->fit, r, fit);
    enum pack_policy node_policy = node_policy_of(pod, policy);
    enum line_outcome got = r->whole_gpus > 0 ? line_whole_forced(n, r, node_policy, fit)
                                              : line_shared(&n->fit, r, policy, node_policy, fit);
    if (got != LINE_DECIDED)
        return LINE_UNDECIDED;
    fit->reason[0] = '\0';
    fit->reason_len = 0;
    fit->fits = true;
    fit->why = REASON_NONE;
    fit->why_container = fit->why_gpu = -1;
    fit->short_by = 0;
    return LINE_DECIDED;
}

bool allocator_fit_excluding(const struct node_state *n, const struct pod_info *pod,
                             const struct pod_entry *const *excluded, size_t nexcluded,
                             const struct alloc_policy *policy, struct fit_result *fit)
{
    fit->reason_memo = NULL;
    if (line_applies(n, pod, excluded, nexcluded) && fit_by_line(n, pod, policy, fit) == LINE_DECIDED)
        return fit->fits;
    return allocator_fit_full(n, pod, excluded, nexcluded, policy, fit);
}

bool allocator_fit_full(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *const *excluded,
                        size_t nexcluded, const struct alloc_policy *policy, struct fit_result *fit)
{
    /* Only the fields used are set: the GPU table (3 KB) is filled by
     * load_free for the node's GPUs, and zeroing it per node would cost a
     * 5000-node request megabytes of memset. */
    struct fit_state st;
    st.node = n;
    st.pod = pod;
    st.policy = policy;
    st.fit = fit;
    memset(&st.unattributed, 0, sizeof(st.unattributed));
    fit->reason[0] = '\0';
    fit->reason_len = 0;
    fit->reason_memo = NULL;
    fit->set_score = fit->set_best = 0;
    fit->fits = true;
    fit->unresolvable = false;
    classify(&st, REASON_NONE, -1, -1, 0);
    for (int i = 0; i < pod->ncontainers; i++)
        fit->masks[i] = 0;
    if (!n->spec) {
        classify(&st, REASON_NODE_UNKNOWN, -1, -1, 0);
        return fail(&st, false, "node is not in the extender's cache");
    }
    struct alloc_policy own;
    if (node_policy_of(pod, policy) != policy->node) {
        own = *policy;
        own.node = node_policy_of(pod, policy);
        st.policy = policy = &own;
    }
    if (fit->hami_masks)
        for (int i = 0; i < pod->ncontainers; i++)
            fit->hami_masks[i] = 0;
    if (!check_node_kind(&st))
        return false;
    load_free(&st, excluded, nexcluded);
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct container_request *r = &pod->containers[i];
        if (!r->family || r->family->placement != GPU_PLACE_SHARES_OR_WHOLE || hami_container_on(r, n))
            continue;
        if (!(r->whole_gpus > 0 ? place_whole(&st, i) : place_shared(&st, i)))
            return false;
    }
    if (!check_unattributed(&st))
        return false;
    int units_util = -1;
    if (!fit_family_units(&st, excluded, nexcluded, &units_util))
        return false;
    struct hami_fit_score hami;
    bool on_hami = pod->hami && n->hami && hami_pod_on(pod, n);
    if (on_hami && !hami_fit(n, pod, excluded, nexcluded, policy, fit, &hami)) {
        classify(&st, REASON_HAMI_DEVICES, -1, -1, 0);
        return false;
    }
    fit->score = score_node(&st, on_hami ? &hami : NULL, units_util);
    return true;
}

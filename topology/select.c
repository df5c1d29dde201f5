/* select.c - scoring GPU sets and finding the best free set; see select.h.
 *
 * Link weights (topology_link_weight):
 *
 *   X (self)  0        PHB   30
 *   SYS      10        PXB   40
 *   NODE     20        PIX   50
 *                      NV<n> 100 + 20 * n   (NV1 120, NV2 140, NV12 340, NV18 460)
 *
 * Every NVLink class beats every PCIe class (NV1 > PIX), and each bonded
 * NVLink adds 20, twice a step of the PCIe ladder, so more links always
 * weigh more (a DGX-1's NV2 pairs beat its NV1 pairs). SYS is above zero:
 * even a cross-socket set is worth more than nothing.
 *
 * NUMA bonus: 15, once per set, when every member has the same known NUMA
 * node (a single GPU with a known node included). It is less than one
 * bonded NVLink (20), so it never outweighs a better link; it decides
 * between sets the links rate equal, e.g. on an all-NV12 DGX A100, where
 * the two GPUs of one NUMA node make the best pair.
 *
 * Search (topology_best_set), exact when at most TOPOLOGY_EXACT_MAX GPUs
 * are free: branch and bound, bounded by the best gains left, seeded with
 * the greedy score, and walking only one set per family of interchangeable
 * GPUs ("twins", see dfs()). Ties (equal score) are broken by what the
 * choice leaves behind, R = the free GPUs minus the set:
 *   1. for each size t in {k, 2, 4, 8, 16, 32} with 2 <= t < |R|, largest
 *      first: the best score of a t-set within R (multi-GPU pods mostly ask
 *      for powers of two, and the larger sets are the harder ones to keep);
 *   2. the sum over all pairs in R of link weight plus the NUMA bonus for
 *      pairs on one known node (how well connected the rest stays overall);
 *   3. the lowest mask.
 * With more GPUs free: greedy. k == 1 takes the free GPU with the least
 * summed affinity to the other free GPUs (then the lowest index); larger k
 * grow a set from every free GPU in turn, adding whichever GPU raises the
 * score most, and keep the best (then the lowest mask).
 */
#include "topology/select.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_SYS 10
#define WEIGHT_NODE 20
#define WEIGHT_PHB 30
#define WEIGHT_PXB 40
#define WEIGHT_PIX 50
#define WEIGHT_NV_BASE 100
#define WEIGHT_NV_PER_LINK 20
#define NUMA_BONUS 15

/* NUMA state of a partial set: nothing chosen yet, members on different or
 * unknown nodes, or (>= 0) the node they all share. */
#define NUMA_EMPTY (-2)
#define NUMA_MIXED (-1)

/* Remainder sizes judged by the tie-break: k and the powers of two below
 * TOPOLOGY_MAX_GPUS. */
#define KEY_SIZES 6

int64_t topology_link_weight(struct topo_link link)
{
    switch (link.cls) {
    case TOPO_LINK_SYS:
        return WEIGHT_SYS;
    case TOPO_LINK_NODE:
        return WEIGHT_NODE;
    case TOPO_LINK_PHB:
        return WEIGHT_PHB;
    case TOPO_LINK_PXB:
        return WEIGHT_PXB;
    case TOPO_LINK_PIX:
        return WEIGHT_PIX;
    case TOPO_LINK_NV:
        return WEIGHT_NV_BASE + WEIGHT_NV_PER_LINK * (int64_t)link.nvlinks;
    default:
        return 0; /* X, or a class we do not know: no credit */
    }
}

static bool usable(const struct gpu_topology *t)
{
    return t && t->count > 0 && t->count <= TOPOLOGY_MAX_GPUS && t->links && t->gpus;
}

static uint64_t all_gpus(int count)
{
    return count >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << count) - 1;
}

static int gpu_numa(const struct gpu_topology *t, int i)
{
    return t->gpus[i].numa >= 0 ? t->gpus[i].numa : NUMA_MIXED;
}

static int numa_add(int state, int numa)
{
    if (state == NUMA_EMPTY)
        return numa >= 0 ? numa : NUMA_MIXED;
    return state == numa ? state : NUMA_MIXED;
}

static int64_t numa_bonus(int state)
{
    return state >= 0 ? NUMA_BONUS : 0;
}

int64_t topology_set_score(const struct gpu_topology *t, uint64_t set)
{
    if (!usable(t))
        return 0;
    set &= all_gpus(t->count);
    if (set && !(set & (set - 1))) /* one GPU, the whole-GPU pod's usual set: no links */
        return numa_bonus(numa_add(NUMA_EMPTY, gpu_numa(t, __builtin_ctzll(set))));
    int64_t score = 0;
    int numa = NUMA_EMPTY;
    for (int i = 0; i < t->count; i++) {
        if (!(set >> i & 1))
            continue;
        numa = numa_add(numa, gpu_numa(t, i));
        for (int j = i + 1; j < t->count; j++)
            if (set >> j & 1)
                score += topology_link_weight(topology_link(t, i, j));
    }
    return score + numa_bonus(numa);
}

/* ------------------------------------------------------------ candidates */

/* The free GPUs, renumbered 0..n-1 in index order ("positions"), so that a
 * position mask orders like the GPU mask it stands for. */
struct cands {
    int n;
    int idx[TOPOLOGY_MAX_GPUS];
    int numa[TOPOLOGY_MAX_GPUS];
    int twin[TOPOLOGY_MAX_GPUS]; /* lowest position of the twin class */
    int32_t w[TOPOLOGY_MAX_GPUS][TOPOLOGY_MAX_GPUS];
};

static void cands_init(struct cands *c, const struct gpu_topology *t, uint64_t free_mask)
{
    c->n = 0;
    for (int i = 0; i < t->count; i++) {
        if (free_mask >> i & 1) {
            c->idx[c->n] = i;
            c->numa[c->n] = gpu_numa(t, i);
            c->twin[c->n] = c->n; /* find_twins() groups them when it pays */
            c->n++;
        }
    }
    for (int a = 0; a < c->n; a++)
        for (int b = 0; b < c->n; b++)
            c->w[a][b] = (int32_t)topology_link_weight(topology_link(t, c->idx[a], c->idx[b]));
}

/* Twins: same NUMA node and the same weight to every other GPU, so
 * swapping them maps every set and every remainder onto an equal one (the
 * members of an NVSwitch island, the two GPUs behind one PCIe switch). It
 * is an equivalence; each class is named by its lowest position. */
static bool twins(const struct cands *c, int a, int b)
{
    if (c->numa[a] != c->numa[b])
        return false;
    for (int x = 0; x < c->n; x++)
        if (x != a && x != b && c->w[a][x] != c->w[b][x])
            return false;
    return true;
}

static void find_twins(struct cands *c)
{
    for (int p = 0; p < c->n; p++) {
        c->twin[p] = p;
        for (int q = 0; q < p; q++) {
            if (c->twin[q] == q && twins(c, q, p)) {
                c->twin[p] = q;
                break;
            }
        }
    }
}

static uint64_t to_gpu_mask(const struct cands *c, uint64_t positions)
{
    uint64_t mask = 0;
    for (int p = 0; p < c->n; p++)
        if (positions >> p & 1)
            mask |= (uint64_t)1 << c->idx[p];
    return mask;
}

/* Link weight plus the NUMA bonus for a pair on one known node: how much
 * the two GPUs are worth to each other. */
static int64_t affinity(const struct cands *c, int a, int b)
{
    return c->w[a][b] + (c->numa[a] >= 0 && c->numa[a] == c->numa[b] ? NUMA_BONUS : 0);
}

static int64_t positions_score(const struct cands *c, uint64_t set)
{
    int64_t score = 0;
    int numa = NUMA_EMPTY;
    for (int a = 0; a < c->n; a++) {
        if (!(set >> a & 1))
            continue;
        numa = numa_add(numa, c->numa[a]);
        for (int b = a + 1; b < c->n; b++)
            if (set >> b & 1)
                score += c->w[a][b];
    }
    return score + numa_bonus(numa);
}

static int64_t affinity_sum(const struct cands *c, uint64_t set)
{
    int64_t sum = 0;
    for (int a = 0; a < c->n; a++)
        for (int b = a + 1; b < c->n; b++)
            if ((set >> a & 1) && (set >> b & 1))
                sum += affinity(c, a, b);
    return sum;
}

/* ---------------------------------------------------------------- greedy */

/* Greedy growth from one GPU: each step adds the allowed position that
 * raises the score most (the lowest among equals). Returns the set and its
 * score in *score. */
static uint64_t greedy_from(const struct cands *c, uint64_t allowed, int k, int seed, int64_t *score)
{
    int64_t gain[TOPOLOGY_MAX_GPUS];
    for (int q = 0; q < c->n; q++)
        gain[q] = c->w[q][seed];
    uint64_t set = (uint64_t)1 << seed;
    int64_t pairs = 0;
    int numa = numa_add(NUMA_EMPTY, c->numa[seed]);
    for (int size = 1; size < k; size++) {
        int pick = -1;
        int64_t pick_delta = INT64_MIN;
        for (int q = 0; q < c->n; q++) {
            if (!(allowed >> q & 1) || (set >> q & 1))
                continue;
            int64_t delta = gain[q] + numa_bonus(numa_add(numa, c->numa[q])) - numa_bonus(numa);
            if (delta > pick_delta) {
                pick_delta = delta;
                pick = q;
            }
        }
        if (pick < 0)
            break; /* fewer than k allowed: callers never ask for that */
        set |= (uint64_t)1 << pick;
        pairs += gain[pick];
        numa = numa_add(numa, c->numa[pick]);
        for (int q = 0; q < c->n; q++)
            gain[q] += c->w[q][pick];
    }
    *score = pairs + numa_bonus(numa);
    return set;
}

/* The allowed position with the least summed affinity to the other
 * allowed positions, among those with the best single score: taking it
 * breaks the fewest good links. */
static uint64_t least_connected(const struct cands *c, uint64_t allowed)
{
    int best = -1;
    int64_t best_single = -1, best_degree = 0;
    for (int a = 0; a < c->n; a++) {
        if (!(allowed >> a & 1))
            continue;
        int64_t single = numa_bonus(c->numa[a]), degree = 0;
        for (int b = 0; b < c->n; b++)
            if (b != a && (allowed >> b & 1))
                degree += affinity(c, a, b);
        if (single > best_single || (single == best_single && degree < best_degree)) {
            best = a;
            best_single = single;
            best_degree = degree;
        }
    }
    return best < 0 ? 0 : (uint64_t)1 << best;
}

/* Greedy k-set among `allowed` (k <= popcount(allowed)), grown from every
 * GPU in turn and the best kept (the lowest mask among equals): O(n^2 k),
 * and a single start would wander off when its first picks exhaust its
 * island. Usually optimal on real topologies; the exact search uses its
 * score as the bar to beat. */
static uint64_t greedy(const struct cands *c, uint64_t allowed, int k)
{
    if (k <= 0)
        return 0;
    if (k == 1)
        return least_connected(c, allowed);
    uint64_t best = 0;
    int64_t best_score = INT64_MIN;
    for (int seed = 0; seed < c->n; seed++) {
        if (!(allowed >> seed & 1))
            continue;
        int64_t score;
        uint64_t set = greedy_from(c, allowed, k, seed, &score);
        if (score > best_score || (score == best_score && set < best)) {
            best = set;
            best_score = score;
        }
    }
    return best;
}

/* ---------------------------------------------------------- exact search */

struct tiebreak;

/* Branch and bound over positions, deciding the highest position first and
 * trying "leave it out" before "take it": sets are then met in increasing
 * mask order, so the first set reaching a score is the lowest mask. */
struct search {
    const struct cands *c;
    uint32_t allowed;
    int k;
    int64_t best;                         /* best score reached (or the greedy bar) */
    uint32_t best_set;                    /* 0 until a set reaching `best` was met */
    struct tiebreak *tb;                  /* NULL: only the best value is wanted */
    int32_t pair_max[TOPOLOGY_EXACT_MAX]; /* max weight among allowed <= p */
    int left[TOPOLOGY_EXACT_MAX];         /* allowed positions <= p */
    int64_t gain[TOPOLOGY_EXACT_MAX];     /* weight to the chosen GPUs */
    int below[TOPOLOGY_EXACT_MAX];        /* allowed twins below p */
    uint32_t started;                     /* twin classes with a member taken */
    int owed;                             /* their lower members still to take */
};

static void search_init(struct search *s, const struct cands *c, uint32_t allowed, int k, struct tiebreak *tb)
{
    memset(s, 0, sizeof(*s));
    s->c = c;
    s->allowed = allowed;
    s->k = k;
    s->tb = tb;
    int32_t max = 0;
    int left = 0;
    for (int p = 0; p < c->n; p++) {
        if (allowed >> p & 1) {
            left++;
            for (int q = 0; q < p; q++)
                if ((allowed >> q & 1) && c->w[p][q] > max)
                    max = c->w[p][q];
        }
        s->pair_max[p] = max;
        s->left[p] = left;
        for (int q = 0; q < p; q++)
            s->below[p] += (allowed >> q & 1) && c->twin[q] == c->twin[p];
    }
}

/* Sum of the r largest gains among allowed positions <= pos. */
static int64_t top_gains(const struct search *s, int pos, int r)
{
    int64_t top[TOPOLOGY_EXACT_MAX];
    int have = 0;
    for (int q = pos; q >= 0; q--) {
        if (!(s->allowed >> q & 1))
            continue;
        int64_t g = s->gain[q];
        if (have == r && g <= top[r - 1])
            continue;
        int i = have < r ? have++ : r - 1;
        for (; i > 0 && top[i - 1] < g; i--)
            top[i] = top[i - 1];
        top[i] = g;
    }
    int64_t sum = 0;
    for (int i = 0; i < have; i++)
        sum += top[i];
    return sum;
}

/* What any completion of the partial set can reach at most: each new GPU
 * adds at most its gain to the chosen ones, each new pair at most the
 * heaviest pair left, and the NUMA bonus if still possible. */
static int64_t upper_bound(const struct search *s, int pos, int r, int64_t cur, int numa)
{
    return cur + top_gains(s, pos, r) + (int64_t)r * (r - 1) / 2 * s->pair_max[pos] +
           (numa == NUMA_MIXED ? 0 : NUMA_BONUS);
}

static bool challenger_wins(struct tiebreak *tb, uint32_t set);
static void tiebreak_reset(struct tiebreak *tb, uint32_t set);

static void leaf(struct search *s, uint32_t set, int64_t score)
{
    if (!s->tb) {
        if (score > s->best)
            s->best = score;
        return;
    }
    if (score < s->best)
        return;
    if (score > s->best || s->best_set == 0) {
        s->best = score;
        s->best_set = set;
        tiebreak_reset(s->tb, set);
    } else if (challenger_wins(s->tb, set)) {
        s->best_set = set;
    }
}

static void add_gains(struct search *s, int pos, int sign)
{
    for (int q = 0; q < pos; q++)
        s->gain[q] += sign * s->c->w[q][pos];
}

/* Sets are only met in canonical form: from each twin class, its lowest
 * members. Any other set has a canonical twin with the same score and the
 * same remainder key and a lower mask, so the answer is unchanged, and a
 * node of identical GPUs costs a handful of sets instead of C(n, k). In
 * descending order that means: once a class member is taken, every lower
 * member must be taken too ("owed"), and one may only start a class if
 * its lower members still fit. */
static void dfs(struct search *s, int pos, uint32_t chosen, int nchosen, int64_t cur, int numa)
{
    int r = s->k - nchosen;
    if (r == 0) {
        leaf(s, chosen, cur + numa_bonus(numa));
        return;
    }
    while (pos >= 0 && !(s->allowed >> pos & 1))
        pos--;
    if (pos < 0 || s->left[pos] < r)
        return;
    int64_t bound = upper_bound(s, pos, r, cur, numa);
    /* The main search must meet every set that ties the best (the
     * tie-break may prefer it); a value-only search needs strictly better. */
    if (bound < s->best || (!s->tb && bound == s->best))
        return;
    uint32_t cls = (uint32_t)1 << s->c->twin[pos];
    bool forced = s->started & cls;
    if (!forced)
        dfs(s, pos - 1, chosen, nchosen, cur, numa);
    if (!forced && s->owed + s->below[pos] > r - 1)
        return;
    uint32_t started = s->started;
    int owed = s->owed;
    s->started |= cls;
    s->owed += forced ? -1 : s->below[pos];
    int64_t with = cur + s->gain[pos];
    add_gains(s, pos, 1);
    dfs(s, pos - 1, chosen | (uint32_t)1 << pos, nchosen + 1, with, numa_add(numa, s->c->numa[pos]));
    add_gains(s, pos, -1);
    s->started = started;
    s->owed = owed;
}

static int popcount64(uint64_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* Best score of a k-set among `allowed` (exact; n <= TOPOLOGY_EXACT_MAX). */
static int64_t best_value(const struct cands *c, uint32_t allowed, int k)
{
    int have = popcount64(allowed);
    if (k <= 0 || k > have)
        return 0;
    if (k == have)
        return positions_score(c, allowed);
    struct search s;
    search_init(&s, c, allowed, k, NULL);
    s.best = positions_score(c, greedy(c, allowed, k));
    dfs(&s, c->n - 1, 0, 0, 0, NUMA_EMPTY);
    return s.best;
}

/* ------------------------------------------------------------- tie-break */

/* Compares what two equally scored sets leave free; see the rules at the
 * top of the file. The incumbent's key is computed lazily and kept. */
struct tiebreak {
    const struct cands *c;
    uint32_t free;
    int nsizes;
    int sizes[KEY_SIZES]; /* descending */
    bool caps_known;
    int64_t cap[KEY_SIZES]; /* best t-set among all free GPUs */
    uint32_t set;           /* incumbent */
    bool have[KEY_SIZES];
    int64_t key[KEY_SIZES];
    bool have_sum;
    int64_t sum;
};

static void add_size(struct tiebreak *tb, int t, int remain)
{
    if (t < 2 || t >= remain)
        return;
    for (int i = 0; i < tb->nsizes; i++)
        if (tb->sizes[i] == t)
            return;
    int i = tb->nsizes++;
    for (; i > 0 && tb->sizes[i - 1] < t; i--)
        tb->sizes[i] = tb->sizes[i - 1];
    tb->sizes[i] = t;
}

static void tiebreak_init(struct tiebreak *tb, const struct cands *c, uint32_t free, int k)
{
    memset(tb, 0, sizeof(*tb));
    tb->c = c;
    tb->free = free;
    int remain = popcount64(free) - k;
    add_size(tb, k, remain);
    for (int t = 2; t <= 32; t *= 2)
        add_size(tb, t, remain);
}

static void tiebreak_reset(struct tiebreak *tb, uint32_t set)
{
    tb->set = set;
    memset(tb->have, 0, sizeof(tb->have));
    tb->have_sum = false;
}

static int64_t key_part(const struct tiebreak *tb, uint32_t set, int i)
{
    return best_value(tb->c, tb->free & ~set, tb->sizes[i]);
}

static int64_t incumbent_part(struct tiebreak *tb, int i)
{
    if (!tb->have[i]) {
        tb->key[i] = key_part(tb, tb->set, i);
        tb->have[i] = true;
    }
    return tb->key[i];
}

static int64_t incumbent_sum(struct tiebreak *tb)
{
    if (!tb->have_sum) {
        tb->sum = affinity_sum(tb->c, tb->free & ~tb->set);
        tb->have_sum = true;
    }
    return tb->sum;
}

/* True when the incumbent already leaves the best t-set of every size
 * intact: then no challenger can do better on those parts, and the cheap
 * pair sum decides before anything expensive is computed. */
static bool incumbent_at_caps(struct tiebreak *tb)
{
    if (!tb->caps_known) {
        for (int i = 0; i < tb->nsizes; i++)
            tb->cap[i] = best_value(tb->c, tb->free, tb->sizes[i]);
        tb->caps_known = true;
    }
    for (int i = 0; i < tb->nsizes; i++)
        if (incumbent_part(tb, i) != tb->cap[i])
            return false;
    return true;
}

/* Makes `set` the incumbent with the key parts already computed for it. */
static void adopt(struct tiebreak *tb, uint32_t set, const int64_t *parts, int nparts, const int64_t *sum)
{
    tiebreak_reset(tb, set);
    for (int i = 0; i < nparts; i++) {
        tb->key[i] = parts[i];
        tb->have[i] = true;
    }
    if (sum) {
        tb->sum = *sum;
        tb->have_sum = true;
    }
}

static bool wins_against_capped(struct tiebreak *tb, uint32_t set)
{
    int64_t sum = affinity_sum(tb->c, tb->free & ~set);
    if (sum <= incumbent_sum(tb))
        return false; /* equal parts at best, and a higher mask */
    int64_t parts[KEY_SIZES];
    for (int i = 0; i < tb->nsizes; i++) {
        parts[i] = key_part(tb, set, i);
        if (parts[i] != tb->cap[i])
            return false;
    }
    adopt(tb, set, parts, tb->nsizes, &sum);
    return true;
}

/* Challengers come in increasing mask order, so on a full tie the
 * incumbent (the lower mask) stays. */
static bool challenger_wins(struct tiebreak *tb, uint32_t set)
{
    if (incumbent_at_caps(tb))
        return wins_against_capped(tb, set);
    int64_t parts[KEY_SIZES];
    for (int i = 0; i < tb->nsizes; i++) {
        parts[i] = key_part(tb, set, i);
        int64_t mine = incumbent_part(tb, i);
        if (parts[i] != mine) {
            if (parts[i] < mine)
                return false;
            adopt(tb, set, parts, i + 1, NULL);
            return true;
        }
    }
    int64_t sum = affinity_sum(tb->c, tb->free & ~set);
    if (sum <= incumbent_sum(tb))
        return false;
    adopt(tb, set, parts, tb->nsizes, &sum);
    return true;
}

/* --------------------------------------------------------------- entries */

static uint64_t exact_set(struct cands *c, int k)
{
    uint32_t free = (uint32_t)(((uint64_t)1 << c->n) - 1);
    if (k == c->n)
        return free;
    find_twins(c);
    struct tiebreak tb;
    tiebreak_init(&tb, c, free, k);
    struct search s;
    search_init(&s, c, free, k, &tb);
    s.best = positions_score(c, greedy(c, free, k));
    dfs(&s, c->n - 1, 0, 0, 0, NUMA_EMPTY);
    return s.best_set;
}

static uint64_t shape_hash(const struct gpu_topology *t);
static bool set_memo_get(uint64_t shape, uint64_t free_mask, int k, uint64_t *set, int64_t *score);
static void set_memo_put(uint64_t shape, uint64_t free_mask, int k, uint64_t set, int64_t score);

uint64_t topology_best_set(const struct gpu_topology *t, uint64_t free_mask, int k, int64_t *score)
{
    if (score)
        *score = 0;
    if (!usable(t) || k <= 0)
        return 0;
    free_mask &= all_gpus(t->count);
    if (popcount64(free_mask) < k)
        return 0;
    if (popcount64(free_mask) == k) { /* no choice: every free GPU (the common one-GPU case) */
        if (score)
            *score = topology_set_score(t, free_mask);
        return free_mask;
    }
    uint64_t shape = shape_hash(t), set;
    int64_t value;
    if (!set_memo_get(shape, free_mask, k, &set, &value)) {
        /* Stack-allocated: ~16 KiB, and no allocation that could fail. */
        struct cands c;
        cands_init(&c, t, free_mask);
        uint64_t positions = c.n <= TOPOLOGY_EXACT_MAX ? exact_set(&c, k) : greedy(&c, all_gpus(c.n), k);
        set = to_gpu_mask(&c, positions);
        value = topology_set_score(t, set);
        set_memo_put(shape, free_mask, k, set, value);
    }
    if (score)
        *score = value;
    return set;
}

/* ------------------------------------------------------------ best possible */

/* Memo of topology_best_possible, per topology shape (count, links, NUMA
 * nodes: what the score depends on). The allocator asks for every node of
 * every request, and a cluster has few shapes, so a small table with
 * 4-way probing and round-robin eviction catches nearly every call. Readers
 * share a rwlock; a miss computes outside the lock, so two threads may
 * compute the same value once each, which is harmless. */
#define MEMO_SLOTS 64
#define MEMO_WAYS 4

struct memo_entry {
    uint64_t hash;
    int count;               /* 0: empty */
    struct topo_link *links; /* count * count */
    int *numa;               /* count */
    uint64_t known[2];       /* bit k: value[k] is set (k <= 64) */
    int64_t value[TOPOLOGY_MAX_GPUS + 1];
};

static struct memo_entry memo[MEMO_SLOTS];
static unsigned memo_victim;
static pthread_rwlock_t memo_lock = PTHREAD_RWLOCK_INITIALIZER;

_Static_assert(sizeof(struct topo_link) == 2, "struct topo_link must have no padding");

/* Word-at-a-time multiply-xorshift: the allocator hashes the shape of
 * every node it scores, so this must be quick, not cryptographic (equal
 * hashes are confirmed by a full comparison). */
static uint64_t mix(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (; len > 0; p += 8, len = len > 8 ? len - 8 : 0) {
        uint64_t v = 0;
        memcpy(&v, p, len < 8 ? len : 8);
        h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    return h;
}

static uint64_t shape_hash(const struct gpu_topology *t)
{
    uint64_t h = mix(0x243f6a8885a308d3ULL, &t->count, sizeof(t->count));
    h = mix(h, t->links, (size_t)t->count * (size_t)t->count * sizeof(*t->links));
    for (int i = 0; i < t->count; i++)
        h = mix(h, &t->gpus[i].numa, sizeof(t->gpus[i].numa));
    return h;
}

static bool same_shape(const struct memo_entry *e, uint64_t hash, const struct gpu_topology *t)
{
    if (e->count != t->count || e->hash != hash)
        return false;
    if (memcmp(e->links, t->links, (size_t)t->count * (size_t)t->count * sizeof(*t->links)) != 0)
        return false;
    for (int i = 0; i < t->count; i++)
        if (e->numa[i] != t->gpus[i].numa)
            return false;
    return true;
}

static struct memo_entry *memo_find(uint64_t hash, const struct gpu_topology *t)
{
    for (unsigned w = 0; w < MEMO_WAYS; w++) {
        struct memo_entry *e = &memo[(hash + w) % MEMO_SLOTS];
        if (same_shape(e, hash, t))
            return e;
    }
    return NULL;
}

static bool memo_get(uint64_t hash, const struct gpu_topology *t, int k, int64_t *out)
{
    bool hit = false;
    pthread_rwlock_rdlock(&memo_lock);
    const struct memo_entry *e = memo_find(hash, t);
    if (e && (e->known[k / 64] >> (k % 64) & 1)) {
        *out = e->value[k];
        hit = true;
    }
    pthread_rwlock_unlock(&memo_lock);
    return hit;
}

/* Fills a slot with a copy of the shape; false (slot left empty) when the
 * copy cannot be allocated, which only costs a recomputation later. */
static bool memo_fill(struct memo_entry *e, uint64_t hash, const struct gpu_topology *t)
{
    free(e->links);
    free(e->numa);
    memset(e, 0, sizeof(*e));
    size_t cells = (size_t)t->count * (size_t)t->count;
    e->links = malloc(cells * sizeof(*e->links));
    e->numa = malloc((size_t)t->count * sizeof(*e->numa));
    if (!e->links || !e->numa) {
        free(e->links);
        free(e->numa);
        e->links = NULL;
        e->numa = NULL;
        return false;
    }
    memcpy(e->links, t->links, cells * sizeof(*e->links));
    for (int i = 0; i < t->count; i++)
        e->numa[i] = t->gpus[i].numa;
    e->hash = hash;
    e->count = t->count;
    return true;
}

static struct memo_entry *memo_slot(uint64_t hash, const struct gpu_topology *t)
{
    struct memo_entry *e = memo_find(hash, t);
    if (e)
        return e;
    for (unsigned w = 0; w < MEMO_WAYS; w++) {
        e = &memo[(hash + w) % MEMO_SLOTS];
        if (e->count == 0)
            return memo_fill(e, hash, t) ? e : NULL;
    }
    e = &memo[(hash + memo_victim++ % MEMO_WAYS) % MEMO_SLOTS];
    return memo_fill(e, hash, t) ? e : NULL;
}

static void memo_put(uint64_t hash, const struct gpu_topology *t, int k, int64_t value)
{
    pthread_rwlock_wrlock(&memo_lock);
    struct memo_entry *e = memo_slot(hash, t);
    if (e) {
        e->value[k] = value;
        e->known[k / 64] |= (uint64_t)1 << (k % 64);
    }
    pthread_rwlock_unlock(&memo_lock);
}

static int64_t compute_best_possible(const struct gpu_topology *t, int k)
{
    struct cands c;
    cands_init(&c, t, all_gpus(t->count));
    if (c.n <= TOPOLOGY_EXACT_MAX) {
        find_twins(&c);
        return best_value(&c, (uint32_t)all_gpus(c.n), k);
    }
    return positions_score(&c, greedy(&c, all_gpus(c.n), k));
}

/* The best single GPU: cheaper to compute than to look up (the memo hashes
 * the whole link table), and every one-GPU request asks on every node. */
static int64_t best_single(const struct gpu_topology *t)
{
    /* A single GPU has no links: its score is the NUMA bonus alone, which
     * any GPU on a known NUMA node earns. */
    for (int i = 0; i < t->count; i++)
        if (numa_bonus(numa_add(NUMA_EMPTY, gpu_numa(t, i))) > 0)
            return NUMA_BONUS;
    return 0;
}

int64_t topology_best_possible(const struct gpu_topology *t, int k)
{
    if (!usable(t) || k <= 0 || k > t->count)
        return 0;
    if (k == 1 && t->count <= TOPOLOGY_EXACT_MAX)
        return best_single(t);
    uint64_t hash = shape_hash(t);
    int64_t value;
    if (memo_get(hash, t, k, &value))
        return value;
    value = compute_best_possible(t, k);
    memo_put(hash, t, k, value);
    return value;
}

/* ------------------------------------------------------------ best set memo */

/* Memo of topology_best_set by (shape hash, free GPUs, k). The allocator
 * asks for the best set on every node of every request (filter, prioritize
 * and bind of one pod ask the same three times), a cluster has few shapes,
 * and between two pods only the node just chosen changes its free GPUs: so
 * nearly every call is a repeat, and the search (microseconds for 8 GPUs)
 * was most of the extender's CPU for whole-GPU pods (docs/comparison.md).
 * A direct-mapped table of seqlocked slots: readers take no lock, a writer
 * that finds its slot being written skips the memo. A hit is used only
 * when its set lies within the free GPUs and has k members, so even two
 * shapes whose 64-bit hashes collided could only make a set less well
 * connected, never one with a busy GPU. Zero-initialised: seq 0 is empty. */
#define SET_MEMO_SLOTS 4096

struct set_memo_slot {
    _Atomic uint64_t seq; /* odd while a writer fills the slot; 0: never filled */
    _Atomic uint64_t shape;
    _Atomic uint64_t free_mask;
    _Atomic uint64_t set;
    _Atomic int64_t score;
    _Atomic int k;
};

static struct set_memo_slot set_memo[SET_MEMO_SLOTS];

static struct set_memo_slot *set_memo_slot(uint64_t shape, uint64_t free_mask, int k)
{
    uint64_t h = (shape ^ (free_mask * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)k) * 0xff51afd7ed558ccdULL;
    return &set_memo[(h >> 32) % SET_MEMO_SLOTS];
}

static bool set_memo_get(uint64_t shape, uint64_t free_mask, int k, uint64_t *set, int64_t *score)
{
    struct set_memo_slot *s = set_memo_slot(shape, free_mask, k);
    uint64_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (before == 0 || (before & 1))
        return false;
    bool same = atomic_load_explicit(&s->shape, memory_order_relaxed) == shape &&
                atomic_load_explicit(&s->free_mask, memory_order_relaxed) == free_mask &&
                atomic_load_explicit(&s->k, memory_order_relaxed) == k;
    uint64_t got = atomic_load_explicit(&s->set, memory_order_relaxed);
    int64_t value = atomic_load_explicit(&s->score, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (!same || atomic_load_explicit(&s->seq, memory_order_relaxed) != before)
        return false;
    if ((got & ~free_mask) != 0 || popcount64(got) != k)
        return false;
    *set = got;
    *score = value;
    return true;
}

static void set_memo_put(uint64_t shape, uint64_t free_mask, int k, uint64_t set, int64_t score)
{
    struct set_memo_slot *s = set_memo_slot(shape, free_mask, k);
    uint64_t before = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if ((before & 1) || !atomic_compare_exchange_strong_explicit(&s->seq, &before, before + 1, memory_order_relaxed,
                                                                 memory_order_relaxed))
        return; /* another writer has the slot: this result is simply not kept */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->shape, shape, memory_order_relaxed);
    atomic_store_explicit(&s->free_mask, free_mask, memory_order_relaxed);
    atomic_store_explicit(&s->k, k, memory_order_relaxed);
    atomic_store_explicit(&s->set, set, memory_order_relaxed);
    atomic_store_explicit(&s->score, score, memory_order_relaxed);
    atomic_store_explicit(&s->seq, before + 2, memory_order_release);
}

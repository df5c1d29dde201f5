/* test_topology_select.c - unit tests for topology/select.c.
 *
 * Expected sets below are worked out by hand from the link tables, with the
 * weights of select.c (SYS 10, NODE 20, PHB 30, PXB 40, PIX 50,
 * NV<n> 100 + 20n, NUMA bonus 15) and its tie-break (best t-set left free
 * for t in {k, 2, 4, 8, ...} below |R|, largest first; then the affinity sum
 * of what is left; then the lowest mask). A brute-force oracle checks the
 * same rules on random topologies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "topology/annotation.h"
#include "topology/select.h"

/* ------------------------------------------------------------- helpers */

static struct gpu_topology *new_topo(int n)
{
    struct gpu_topology *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->version = 1;
    t->count = n;
    t->gpus = calloc((size_t)n, sizeof(*t->gpus));
    t->links = calloc((size_t)n * (size_t)n, sizeof(*t->links));
    assert_non_null(t->gpus);
    assert_non_null(t->links);
    for (int i = 0; i < n; i++) {
        t->gpus[i].index = i;
        t->gpus[i].minor = i;
        t->gpus[i].numa = -1;
        for (int j = 0; j < n; j++)
            t->links[i * n + j] = (struct topo_link){
                .cls = (uint8_t)(i == j ? TOPO_LINK_SELF : TOPO_LINK_SYS), .nvlinks = 0};
    }
    return t;
}

static void set_link(struct gpu_topology *t, int i, int j, const char *token)
{
    struct topo_link link;
    assert_int_equal(topology_parse_link(token, &link), 0);
    t->links[i * t->count + j] = link;
    t->links[j * t->count + i] = link;
}

/* From rows of space-separated tokens (only the upper triangle is read). */
static struct gpu_topology *from_rows(int n, const char *const *rows, const int *numa)
{
    struct gpu_topology *t = new_topo(n);
    for (int i = 0; i < n; i++) {
        char row[512];
        snprintf(row, sizeof row, "%s", rows[i]);
        char *save = NULL;
        char *tok = strtok_r(row, " ", &save);
        for (int j = 0; j < n; j++, tok = strtok_r(NULL, " ", &save)) {
            assert_non_null(tok);
            if (j > i)
                set_link(t, i, j, tok);
        }
        if (numa)
            t->gpus[i].numa = numa[i];
    }
    return t;
}

static const char *const dgx1_rows[] = {
    "X NV1 NV1 NV2 NV2 SYS SYS SYS", "NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X NV2 SYS SYS NV1 SYS", "NV2 NV1 NV2 X SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X NV1 NV1 NV2", "SYS NV2 SYS SYS NV1 X NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X NV2", "SYS SYS SYS NV1 NV2 NV1 NV2 X",
};

static const char *const pcie_rows[] = {
    "X PIX PXB PXB SYS SYS SYS SYS",   "PIX X PXB PXB SYS SYS SYS SYS",
    "PXB PXB X PIX SYS SYS SYS SYS",   "PXB PXB PIX X SYS SYS SYS SYS",
    "SYS SYS SYS SYS X PIX NODE NODE", "SYS SYS SYS SYS PIX X NODE NODE",
    "SYS SYS SYS SYS NODE NODE X PIX", "SYS SYS SYS SYS NODE NODE PIX X",
};
static const int pcie_numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};

static const char *const t4_rows[] = {
    "X PHB SYS SYS", "PHB X SYS SYS", "SYS SYS X NODE", "SYS SYS NODE X",
};
static const int t4_numa[4] = {0, 0, 1, 1};

static struct gpu_topology *dgx1(void)
{
    return from_rows(8, dgx1_rows, NULL);
}

/* n GPUs, every pair `token`, numa[i] (NULL: unknown). */
static struct gpu_topology *all_pairs(int n, const char *token, const int *numa)
{
    struct gpu_topology *t = new_topo(n);
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++)
            set_link(t, i, j, token);
        if (numa)
            t->gpus[i].numa = numa[i];
    }
    return t;
}

static const int a100_numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};

/* `islands` NVSwitch islands of `size` GPUs (`token` inside, SYS between),
 * island i on NUMA node i when with_numa. */
static struct gpu_topology *islands(int islands_n, int size, const char *token, int with_numa)
{
    struct gpu_topology *t = new_topo(islands_n * size);
    for (int i = 0; i < t->count; i++) {
        for (int j = i + 1; j < t->count; j++)
            if (i / size == j / size)
                set_link(t, i, j, token);
        t->gpus[i].numa = with_numa ? i / size : -1;
    }
    return t;
}

static uint64_t best(const struct gpu_topology *t, uint64_t free_mask, int k, int64_t expect_score)
{
    int64_t score = -1;
    uint64_t set = topology_best_set(t, free_mask, k, &score);
    assert_int_equal(score, expect_score);
    assert_int_equal(score, topology_set_score(t, set));
    return set;
}

#define ALL8 0xFFu

/* --------------------------------------------------------------- weights */

static void test_link_weights(void **state)
{
    (void)state;
    static const struct {
        const char *token;
        int64_t weight;
    } table[] = {
        {"X", 0},      {"SYS", 10},   {"NODE", 20},  {"PHB", 30},   {"PXB", 40},
        {"PIX", 50},   {"NV1", 120},  {"NV2", 140},  {"NV4", 180},  {"NV6", 220},
        {"NV12", 340}, {"NV18", 460}, {"NV64", 1380},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        struct topo_link link;
        assert_int_equal(topology_parse_link(table[i].token, &link), 0);
        assert_int_equal(topology_link_weight(link), table[i].weight);
    }
    /* A corrupt class earns nothing. */
    assert_int_equal(topology_link_weight((struct topo_link){.cls = 99, .nvlinks = 0}), 0);
}

static void test_set_score(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(topology_set_score(t, 0x0F), 3 * 120 + 3 * 140);
    assert_int_equal(topology_set_score(t, 0x11), 140);   /* GPU0-GPU4: NV2 */
    assert_int_equal(topology_set_score(t, 0x21), 10);    /* GPU0-GPU5: SYS */
    assert_int_equal(topology_set_score(t, 0x01), 0);     /* one GPU, NUMA unknown */
    assert_int_equal(topology_set_score(t, 0), 0);
    /* Bits past the GPU count are ignored. */
    assert_int_equal(topology_set_score(t, 0x0F | (uint64_t)1 << 40), 780);
    assert_int_equal(topology_set_score(NULL, 0x0F), 0);
    topology_free(t);

    t = from_rows(4, t4_rows, t4_numa);
    assert_int_equal(topology_set_score(t, 0x3), 30 + 15);   /* PHB, one NUMA node */
    assert_int_equal(topology_set_score(t, 0x5), 10);        /* SYS, two nodes */
    assert_int_equal(topology_set_score(t, 0x1), 15);        /* one GPU, known node */
    assert_int_equal(topology_set_score(t, 0xF), 30 + 20 + 4 * 10);
    topology_free(t);
}

/* ---------------------------------------------------------------- DGX-1 */

/* The two fully NVLinked quads score 3 x NV1 + 3 x NV2 = 780; every other
 * quad has a SYS pair. They tie, leave each other intact, and the lower
 * mask wins. */
static void test_dgx1_quad(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(best(t, ALL8, 4, 780), 0x0F);
    assert_int_equal(best(t, 0xF0, 4, 780), 0xF0);
    /* GPU 1 busy: the other quad is the only full one. */
    assert_int_equal(best(t, ALL8 & ~0x02u, 4, 780), 0xF0);
    topology_free(t);
}

/* GPU 0 busy, k = 2: the NV2 pairs left are 1-2, 1-5, 2-3, 4-7, 5-6, 6-7.
 * Only 1-2 and 2-3 keep the quad 4-7 intact (best 4-set left: 780); of
 * those, 2-3 leaves GPU 1 with its NV2 to GPU 5 (affinity sum 950 vs 930). */
static void test_dgx1_pair_with_gpu0_busy(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(best(t, ALL8 & ~0x01u, 2, 140), 0x0C);
    /* Empty node: the NV2 pairs inside a quad (0-3, 1-2, 2-3; 4-7, 5-6,
     * 6-7) all leave the other quad whole and the same sum (each GPU has
     * 550 of affinity); 1-2 is the lowest mask (0x06 < 0x09). */
    assert_int_equal(best(t, ALL8, 2, 140), 0x06);
    topology_free(t);
}

/* GPU 4 busy, k = 1: taking 5, 6 or 7 keeps the quad 0-3 intact; 7 has the
 * least affinity to the others (410 vs 430), so the most is left. */
static void test_dgx1_single_keeps_quad(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(best(t, ALL8 & ~0x10u, 1, 0), 0x80);
    /* GPUs 0 and 5 busy: both quads are broken. Whatever goes, a 540 quad
     * (NV1 + 2 x NV2 + NV1 + 2 x SYS) and an NV2 pair stay; GPUs 1 and 4 lost
     * their NV2 partners and have the least affinity left (290), and 1 is
     * the lower. */
    uint64_t set = best(t, ALL8 & ~0x21u, 1, 0);
    assert_int_equal(set, 0x02);
    topology_free(t);
}

/* k = 3: triples 0-2-3, 1-2-3, 4-6-7 and 5-6-7 score 400 (NV1 + 2 x NV2);
 * all leave the other quad whole and equal sums, so the lowest mask. */
static void test_dgx1_triple(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(best(t, ALL8, 3, 400), 0x0D);
    topology_free(t);
}

static void test_all_free_takes_all(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    assert_int_equal(best(t, ALL8, 8, topology_set_score(t, ALL8)), ALL8);
    topology_free(t);
}

/* -------------------------------------------------------------- PCIe box */

/* PIX pairs 0-1, 2-3, 4-5, 6-7 score 50 + 15. Taking one on socket 1 keeps
 * the PXB-connected quad 0-3 (275) instead of the NODE-connected 4-7 (195);
 * 4-5 and 6-7 are mirror images, and 4-5 is the lower mask. */
static void test_pcie_pair(void **state)
{
    (void)state;
    struct gpu_topology *t = from_rows(8, pcie_rows, pcie_numa);
    uint64_t set = best(t, ALL8, 2, 65);
    assert_int_equal(set, 0x30);
    assert_int_equal(t->gpus[4].numa, t->gpus[5].numa);
    assert_int_equal(best(t, ALL8, 4, 50 + 50 + 4 * 40 + 15), 0x0F);
    /* Socket 0 busy: a PIX pair on socket 1. */
    assert_int_equal(best(t, 0xF0, 2, 65), 0x30);
    /* GPUs 0 and 5 busy: PIX pairs 2-3 and 6-7 are left. Taking 6-7 keeps
     * 1-2-3 (PXB, PIX) together: affinity left 205 against 165. */
    assert_int_equal(best(t, 0xDE, 2, 65), 0xC0);
    topology_free(t);
}

/* 4 x T4: PHB pair 0-1 (45) beats NODE pair 2-3 (35); a single GPU comes
 * from the weaker pair so that the PHB pair stays. */
static void test_t4(void **state)
{
    (void)state;
    struct gpu_topology *t = from_rows(4, t4_rows, t4_numa);
    assert_int_equal(best(t, 0xF, 2, 45), 0x3);
    assert_int_equal(best(t, 0xF, 1, 15), 0x4);
    assert_int_equal(best(t, 0xE, 1, 15), 0x2);   /* GPU 0 busy: 1 is alone */
    topology_free(t);
}

/* ----------------------------------------------------------- NVSwitch */

/* DGX A100: every pair NV12, NUMA pairs (0,1) (2,3) (4,5) (6,7). */
static void test_dgx_a100(void **state)
{
    (void)state;
    struct gpu_topology *t = all_pairs(8, "NV12", a100_numa);
    /* k = 2: a NUMA pair (340 + 15), the lowest. */
    assert_int_equal(best(t, ALL8, 2, 355), 0x03);
    /* k = 3: nothing earns the bonus; a whole NUMA pair plus one keeps two
     * pairs intact (the most possible), lowest mask 0-1-2. */
    assert_int_equal(best(t, ALL8, 3, 3 * 340), 0x07);
    /* k = 1 with GPU 2 busy: its partner 3 goes, every pair stays whole. */
    assert_int_equal(best(t, ALL8 & ~0x04u, 1, 15), 0x08);
    /* k = 1 with GPU 5 busy: GPU 4. */
    assert_int_equal(best(t, ALL8 & ~0x20u, 1, 15), 0x10);
    /* Deterministic: the same answer every time (GPU 2 busy, k = 2: the
     * whole NUMA pairs all leave two pairs whole; the lowest). */
    for (int i = 0; i < 3; i++)
        assert_int_equal(topology_best_set(t, ALL8 & ~0x04u, 2, NULL), 0x03);
    topology_free(t);
}

/* HGX H100: NV18 everywhere, two NUMA nodes. */
static void test_hgx_h100(void **state)
{
    (void)state;
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    struct gpu_topology *t = all_pairs(8, "NV18", numa);
    assert_int_equal(best(t, ALL8, 4, 6 * 460 + 15), 0x0F);
    assert_int_equal(best(t, ALL8 & ~0x01u, 4, 6 * 460 + 15), 0xF0);
    assert_int_equal(best(t, ALL8, 2, 475), 0x03);
    /* GPUs 0-2 busy: GPU 3 is the odd one on node 0. */
    assert_int_equal(best(t, 0xF8, 1, 15), 0x08);
    topology_free(t);
}

/* Uniform node, nothing known about NUMA: all sets alike, lowest mask. */
static void test_uniform(void **state)
{
    (void)state;
    struct gpu_topology *t = all_pairs(16, "NV6", NULL);
    assert_int_equal(best(t, 0xFFFF, 8, 28 * 220), 0xFF);
    assert_int_equal(best(t, 0xFF00, 3, 3 * 220), 0x0700);
    topology_free(t);
}

/* ------------------------------------------------------------ edge cases */

static void test_edges(void **state)
{
    (void)state;
    struct gpu_topology *t = dgx1();
    int64_t score = 7;
    assert_int_equal(topology_best_set(t, ALL8, 0, &score), 0);
    assert_int_equal(score, 0);
    score = 7;
    assert_int_equal(topology_best_set(t, 0x07, 4, &score), 0);   /* 3 free */
    assert_int_equal(score, 0);
    assert_int_equal(topology_best_set(t, ALL8, 9, NULL), 0);
    assert_int_equal(topology_best_set(t, ALL8, -1, NULL), 0);
    assert_int_equal(topology_best_set(NULL, ALL8, 2, &score), 0);
    assert_int_equal(score, 0);
    /* Bits past the GPU count are not GPUs. */
    assert_int_equal(topology_best_set(t, ~(uint64_t)0, 8, NULL), ALL8);
    assert_int_equal(topology_best_set(t, (uint64_t)0xF << 8, 1, NULL), 0);
    topology_free(t);

    struct gpu_topology *one = new_topo(1);
    assert_int_equal(best(one, 1, 1, 0), 1);
    assert_int_equal(topology_best_possible(one, 1), 0);
    topology_free(one);
}

/* -------------------------------------------------------- beyond 16 GPUs */

static void test_greedy_above_exact_limit(void **state)
{
    (void)state;
    struct gpu_topology *t = islands(4, 8, "NV12", 1);
    uint64_t all = 0xFFFFFFFFu;
    assert_int_equal(best(t, all, 8, 28 * 340 + 15), 0xFF);
    assert_int_equal(best(t, all, 4, 6 * 340 + 15), 0x0F);
    /* Island 0 is busy: the next one. */
    assert_int_equal(best(t, all & ~0xFFu, 8, 28 * 340 + 15), 0xFF00);
    /* k = 1 with GPU 0 busy: a GPU of the broken island (the least
     * connected), keeping the three whole islands whole. */
    assert_int_equal(best(t, all & ~1u, 1, 15), 0x02);
    /* 16 free GPUs or fewer: the exact search, even on a 32-GPU node. */
    assert_int_equal(best(t, 0xFFFF0000u, 8, 28 * 340 + 15), 0x00FF0000u);
    assert_int_equal(best(t, 0xFFFF0000u, 2, 355), 0x00030000u);
    topology_free(t);

    /* 64 GPUs, all bits in use. */
    t = islands(8, 8, "NV18", 0);
    assert_int_equal(best(t, ~(uint64_t)0, 8, 28 * 460), 0xFF);
    assert_int_equal(best(t, ~(uint64_t)0 << 4, 8, 28 * 460), 0xFF00);
    assert_int_equal(topology_best_possible(t, 8), 28 * 460);
    assert_int_equal(topology_best_possible(t, 64), topology_set_score(t, ~(uint64_t)0));
    topology_free(t);
}

/* --------------------------------------------------------- best possible */

static void test_best_possible(void **state)
{
    (void)state;
    struct gpu_topology *shapes[] = {
        dgx1(), from_rows(8, pcie_rows, pcie_numa), all_pairs(8, "NV12", a100_numa),
        from_rows(4, t4_rows, t4_numa), islands(2, 8, "NV18", 1),
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct gpu_topology *t = shapes[s];
        uint64_t all = ((uint64_t)1 << t->count) - 1;
        for (int k = 1; k <= t->count; k++) {
            int64_t score;
            topology_best_set(t, all, k, &score);
            assert_int_equal(topology_best_possible(t, k), score);
            assert_int_equal(topology_best_possible(t, k), score);   /* memoised */
        }
        assert_int_equal(topology_best_possible(t, 0), 0);
        assert_int_equal(topology_best_possible(t, t->count + 1), 0);
    }
    assert_int_equal(topology_best_possible(shapes[0], 4), 780);
    /* Same links, different NUMA: a different shape. */
    struct gpu_topology *plain = all_pairs(8, "NV12", NULL);
    assert_int_equal(topology_best_possible(plain, 2), 340);
    assert_int_equal(topology_best_possible(shapes[2], 2), 355);
    topology_free(plain);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        topology_free(shapes[s]);
    assert_int_equal(topology_best_possible(NULL, 2), 0);
}

#define SHAPES 96
#define THREADS 8

struct shared_shapes {
    struct gpu_topology *t[SHAPES];
    int64_t expect[SHAPES][9];
    int failures;
    pthread_mutex_t lock;
};

/* More shapes than the memo has slots, so threads evict each other's
 * entries while they read. */
static void *hammer(void *arg)
{
    struct shared_shapes *sh = arg;
    int bad = 0;
    for (int round = 0; round < 20; round++)
        for (int s = 0; s < SHAPES; s++)
            for (int k = 1; k <= 8; k++)
                bad += topology_best_possible(sh->t[s], k) != sh->expect[s][k];
    pthread_mutex_lock(&sh->lock);
    sh->failures += bad;
    pthread_mutex_unlock(&sh->lock);
    return NULL;
}

static void test_best_possible_threads(void **state)
{
    (void)state;
    static struct shared_shapes sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.lock, NULL);
    for (int s = 0; s < SHAPES; s++) {
        /* A DGX-1 whose NUMA nodes spell s in binary. */
        sh.t[s] = dgx1();
        for (int i = 0; i < 8; i++)
            sh.t[s]->gpus[i].numa = i < 7 ? (s >> i & 1) : -1;
        for (int k = 1; k <= 8; k++) {
            int64_t score;
            topology_best_set(sh.t[s], ALL8, k, &score);
            sh.expect[s][k] = score;
        }
    }
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &sh), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(sh.failures, 0);
    for (int s = 0; s < SHAPES; s++)
        topology_free(sh.t[s]);
    pthread_mutex_destroy(&sh.lock);
}

/* --------------------------------------------------------------- oracle */

/* The documented rule, by brute force over every subset. */
static int popcount(uint64_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

static int64_t brute_best(const struct gpu_topology *t, uint64_t within, int k)
{
    int64_t top = 0;
    for (uint64_t s = within;; s = (s - 1) & within) {
        if (popcount(s) == k) {
            int64_t v = topology_set_score(t, s);
            if (v > top)
                top = v;
        }
        if (s == 0)
            break;
    }
    return top;
}

static int64_t brute_affinity(const struct gpu_topology *t, uint64_t r)
{
    int64_t sum = 0;
    for (int i = 0; i < t->count; i++)
        for (int j = i + 1; j < t->count; j++)
            if ((r >> i & 1) && (r >> j & 1))
                sum += topology_link_weight(topology_link(t, i, j)) +
                       (t->gpus[i].numa >= 0 && t->gpus[i].numa == t->gpus[j].numa ? 15 : 0);
    return sum;
}

/* Key of the remainder r: best t-set for t in {k, 2, 4, ...} (2 <= t < |r|)
 * from largest to smallest, then the affinity sum. */
static int brute_key(const struct gpu_topology *t, uint64_t r, int k, int64_t *key)
{
    int remain = popcount(r), n = 0;
    for (int size = remain - 1; size >= 2; size--) {
        int power_of_two = (size & (size - 1)) == 0;
        if (size == k || power_of_two)
            key[n++] = brute_best(t, r, size);
    }
    key[n] = brute_affinity(t, r);
    return n + 1;
}

static uint64_t brute_set(const struct gpu_topology *t, uint64_t free_mask, int k)
{
    uint64_t best_set = 0;
    int64_t best_score = -1, best_key[10];
    int nkey = 0;
    for (uint64_t s = 1; s <= free_mask; s++) {
        if ((s & ~free_mask) || popcount(s) != k)
            continue;
        int64_t score = topology_set_score(t, s), key[10];
        int n = brute_key(t, free_mask & ~s, k, key);
        int cmp = score > best_score ? 1 : score < best_score ? -1 : 0;
        for (int i = 0; cmp == 0 && i < n; i++)
            cmp = key[i] > best_key[i] ? 1 : key[i] < best_key[i] ? -1 : 0;
        if (cmp > 0) {
            best_set = s;
            best_score = score;
            memcpy(best_key, key, sizeof key);
            nkey = n;
        }
    }
    (void)nkey;
    return best_set;
}

static uint32_t rng_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % n;
}

/* Random symmetric topologies: a small alphabet makes many ties. */
static struct gpu_topology *random_topo(int n, int rich)
{
    static const char *const rich_tokens[] = {"SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV2", "NV4"};
    static const char *const poor_tokens[] = {"SYS", "PIX", "NV2"};
    struct gpu_topology *t = new_topo(n);
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++)
            set_link(t, i, j, rich ? rich_tokens[rnd(8)] : poor_tokens[rnd(3)]);
        t->gpus[i].numa = (int)rnd(3) - 1;
    }
    return t;
}

/* GPUs in a few groups, links and NUMA by group: many interchangeable
 * GPUs, as on real NVSwitch and PCIe-switch nodes. */
static struct gpu_topology *clustered_topo(int n)
{
    static const char *const tokens[] = {"SYS", "NODE", "PXB", "PIX", "NV2", "NV12"};
    int groups = 1 + (int)rnd(4), group[16], numa_of[4];
    const char *link[4][4];
    for (int a = 0; a < groups; a++) {
        numa_of[a] = (int)rnd(3) - 1;
        for (int b = a; b < groups; b++)
            link[a][b] = link[b][a] = tokens[rnd(6)];
    }
    struct gpu_topology *t = new_topo(n);
    for (int i = 0; i < n; i++) {
        group[i] = (int)rnd((uint32_t)groups);
        t->gpus[i].numa = numa_of[group[i]];
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            set_link(t, i, j, link[group[i]][group[j]]);
    return t;
}

static void test_against_oracle(void **state)
{
    (void)state;
    int checked = 0;
    for (int round = 0; round < 600; round++) {
        int n = 2 + (int)rnd(8);     /* 2..9 GPUs */
        struct gpu_topology *t = round % 3 == 2 ? clustered_topo(n) : random_topo(n, round % 3);
        uint64_t all = ((uint64_t)1 << n) - 1;
        for (int m = 0; m < 3; m++) {
            uint64_t free_mask = m == 0 ? all : all & ~(uint64_t)rnd(1u << n);
            for (int k = 1; k <= popcount(free_mask); k++) {
                uint64_t want = brute_set(t, free_mask, k);
                uint64_t got = topology_best_set(t, free_mask, k, NULL);
                if (got != want)
                    fail_msg("round %d, n %d, free %#llx, k %d: got %#llx, oracle %#llx", round, n,
                             (unsigned long long)free_mask, k, (unsigned long long)got,
                             (unsigned long long)want);
                checked++;
            }
        }
        for (int k = 1; k <= n; k++)
            assert_int_equal(topology_best_possible(t, k), brute_best(t, all, k));
        topology_free(t);
    }
    assert_true(checked > 1000);
}

/* topology_best_set keeps its answers in a memo keyed by shape, free GPUs
 * and k: shapes that differ in one link or one NUMA node, asked in turn
 * for every free mask and k, twice (the second pass is served from the
 * memo), each get their own oracle's answer. */
static void test_best_set_memo_keeps_shapes_apart(void **state)
{
    (void)state;
    struct gpu_topology *t[3] = {dgx1(), dgx1(), dgx1()};
    set_link(t[1], 0, 5, "NV2"); /* one link more */
    t[2]->gpus[3].numa = 1;      /* one NUMA node other */
    int checked = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t free_mask = 1; free_mask <= ALL8; free_mask++)
            for (int k = 1; k <= popcount(free_mask); k++)
                for (int i = 0; i < 3; i++) {
                    int64_t score = -1;
                    uint64_t got = topology_best_set(t[i], free_mask, k, &score);
                    uint64_t want = brute_set(t[i], free_mask, k);
                    if (got != want || score != topology_set_score(t[i], want))
                        fail_msg("pass %d, shape %d, free %#llx, k %d: got %#llx (score %lld), oracle %#llx", pass,
                                 i, (unsigned long long)free_mask, k, (unsigned long long)got, (long long)score,
                                 (unsigned long long)want);
                    checked++;
                }
    assert_true(checked > 6000);
    for (int i = 0; i < 3; i++)
        topology_free(t[i]);
}

/* ------------------------------------------------------- sixteen GPUs */

/* The exact search answers for every k on 16-GPU shapes. How fast it is,
 * is the benchmark's to say (tests/bench/bench_topology.c): a time limit
 * here failed under valgrind on a loaded machine. */
static void test_sixteen_gpus_every_k(void **state)
{
    (void)state;
    struct gpu_topology *shapes[] = {islands(2, 8, "NV12", 1), all_pairs(16, "NV6", NULL),
                                     islands(2, 8, "NV12", 0)};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int k = 1; k <= 16; k++) {
            uint64_t set = topology_best_set(shapes[s], 0xFFFF, k, NULL);
            assert_int_equal(__builtin_popcountll(set), k);
        }
        topology_free(shapes[s]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_weights),
        cmocka_unit_test(test_set_score),
        cmocka_unit_test(test_dgx1_quad),
        cmocka_unit_test(test_dgx1_pair_with_gpu0_busy),
        cmocka_unit_test(test_dgx1_single_keeps_quad),
        cmocka_unit_test(test_dgx1_triple),
        cmocka_unit_test(test_all_free_takes_all),
        cmocka_unit_test(test_pcie_pair),
        cmocka_unit_test(test_t4),
        cmocka_unit_test(test_dgx_a100),
        cmocka_unit_test(test_hgx_h100),
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_greedy_above_exact_limit),
        cmocka_unit_test(test_best_possible),
        cmocka_unit_test(test_best_possible_threads),
        cmocka_unit_test(test_against_oracle),
        cmocka_unit_test(test_best_set_memo_keeps_shapes_apart),
        cmocka_unit_test(test_sixteen_gpus_every_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

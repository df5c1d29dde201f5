/* test_nodefit.c - the one-line node summary (cluster/nodefit.h): it agrees
 * with the per-GPU table after every add, update and delete, it is marked
 * unusable whenever a value does not fit it, and the allocator's decision on
 * it is the full path's decision, field for field. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_names.h"
#include "extender/decide/allocator.h"
#include "topology/select.h"
#include "tests/unit/support.h"

/* Every field of the line against the GPU table, read directly. */
static void expect_line_matches(const struct cluster_cache *c, const char *name)
{
    const struct node_state *n = cache_find_node(c, name);
    assert_non_null(n);
    const struct node_fit *f = &n->fit;
    assert_true(node_fit_agrees(n));
    bool exact = n->spec && !n->hami && n->gpu_count >= 1 && n->gpu_count <= NODE_FIT_SLOTS &&
                 n->unattributed.pods == 0 && n->unattributed.cores == 0;
    int64_t used = 0;
    for (int s = 0; s < n->gpu_count; s++) {
        const struct gpu_state *g = &n->gpus[s];
        exact = exact && g->core_used >= 0 && g->core_used <= 100 && g->mem_used[POOL_VCUDA] <= g->mem_total[POOL_VCUDA] &&
                g->mem_used[POOL_MPS] <= g->mem_total[POOL_MPS] && g->mem_total[POOL_VCUDA] - g->mem_used[POOL_VCUDA] <= 65535 &&
                g->mem_total[POOL_MPS] - g->mem_used[POOL_MPS] <= 65535 && g->pods <= 255 && g->minor >= 0 && g->minor <= 255;
        used += g->core_used;
    }
    assert_int_equal(f->usable, exact);
    if (!exact)
        return;
    assert_int_equal(f->count, n->gpu_count);
    assert_int_equal(f->cores_used, used);
    for (int s = 0; s < n->gpu_count; s++) {
        const struct gpu_state *g = &n->gpus[s];
        assert_int_equal(f->cores_free[s], 100 - g->core_used);
        assert_int_equal(f->mem_free[POOL_VCUDA][s], g->mem_total[POOL_VCUDA] - g->mem_used[POOL_VCUDA]);
        assert_int_equal(f->mem_free[POOL_MPS][s], g->mem_total[POOL_MPS] - g->mem_used[POOL_MPS]);
        assert_int_equal(f->pods[s], g->pods);
        assert_int_equal(f->minor[s], g->minor);
        bool idle = g->core_used == 0 && g->mem_used[POOL_VCUDA] == 0 && g->mem_used[POOL_MPS] == 0;
        assert_int_equal(f->idle >> s & 1, idle);
    }
    /* One whole GPU's scores, from the topology itself. */
    const struct gpu_topology *shape = n->spec->shape;
    if (!shape || shape->count != n->gpu_count) {
        assert_int_equal(f->best1, 0);
        assert_int_equal(f->best1_gpus, 0);
        return;
    }
    int64_t best = topology_best_possible(shape, 1);
    assert_int_equal(f->best1, best);
    for (int s = 0; s < n->gpu_count; s++) {
        int64_t alone = topology_set_score(shape, 1ULL << s);
        assert_int_equal(f->best1_gpus >> s & 1, alone == best && best > 0);
        assert_true(alone == 0 || alone == best);
    }
}

/* A running vcuda pod on node; idx < 0: no index annotation (unattributed). */
static void put_pod(struct cluster_cache *c, const char *name, const char *node, int idx, int cores, int mem)
{
    char buf[2048], ann[512] = "";
    if (idx >= 0)
        fmt(ann, sizeof(ann),
            ",'annotations':{'tencent.com/predicate-gpu-idx-0':'%d','tencent.com/predicate-node':'%s',"
            "'tencent.com/gpu-assigned':'true','tencent.com/predicate-time':'1763700000000000000'}",
            idx, node);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','uid':'u-%s'%s},'spec':{'nodeName':'%s','containers':[{'name':'c',"
        "'resources':{'limits':{'tencent.com/vcuda-core':'%d','tencent.com/vcuda-memory':'%d'}}}]},"
        "'status':{'phase':'Running'}}",
        name, name, ann, node, cores, mem);
    add_pod(c, buf, clock_realtime_ns());
}

static void test_line_follows_every_change(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n1", 8, 40);
    expect_line_matches(c, "n1");
    assert_int_equal(cache_find_node(c, "n1")->fit.idle, 0xff);
    put_pod(c, "a", "n1", 3, 30, 10);
    expect_line_matches(c, "n1");
    put_pod(c, "b", "n1", 3, 50, 20);
    expect_line_matches(c, "n1");
    put_pod(c, "a", "n1", 5, 20, 5); /* update: moves from GPU 3 to GPU 5 */
    expect_line_matches(c, "n1");
    assert_int_equal(cache_find_node(c, "n1")->fit.cores_free[3], 50);
    assert_int_equal(cache_find_node(c, "n1")->fit.cores_free[5], 80);
    assert_int_equal(cache_delete_pod(c, "t/b"), 0);
    expect_line_matches(c, "n1");
    assert_int_equal(cache_delete_pod(c, "t/a"), 0);
    expect_line_matches(c, "n1");
    assert_int_equal(cache_find_node(c, "n1")->fit.idle, 0xff);
    add_vcuda_node(c, "n1", 4, 40); /* the node shrinks: its pods are charged again */
    expect_line_matches(c, "n1");
    assert_int_equal(cache_find_node(c, "n1")->fit.count, 4);
}

static void test_line_unusable_when_inexact(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n1", 2, 40);
    put_pod(c, "loose", "n1", -1, 30, 10); /* no index: unattributed */
    expect_line_matches(c, "n1");
    assert_false(cache_find_node(c, "n1")->fit.usable);
    assert_int_equal(cache_delete_pod(c, "t/loose"), 0);
    expect_line_matches(c, "n1");
    assert_true(cache_find_node(c, "n1")->fit.usable);
    put_pod(c, "over1", "n1", 0, 80, 10);
    put_pod(c, "over2", "n1", 0, 80, 10); /* 160 cores on GPU 0: overcommitted */
    expect_line_matches(c, "n1");
    assert_false(cache_find_node(c, "n1")->fit.usable);
    add_vcuda_node(c, "big", 16, 40); /* more GPUs than the line holds */
    expect_line_matches(c, "big");
    assert_false(cache_find_node(c, "big")->fit.usable);
    add_vcuda_node(c, "roomy", 2, 70000); /* memory beyond 16 bits */
    expect_line_matches(c, "roomy");
    assert_false(cache_find_node(c, "roomy")->fit.usable);
    put_pod(c, "ghost", "gone", 0, 10, 1); /* a placeholder node */
    assert_false(cache_find_node(c, "gone")->fit.usable);
    assert_int_equal(cache_delete_node(c, "n1"), 0);
    expect_line_matches(c, "n1"); /* pods still bound: now unattributed */
}

struct fit_out {
    struct fit_result r;
    uint64_t masks[2];
};

static void fit_both(const struct node_state *n, const struct pod_info *p, const struct alloc_policy *pol,
                     struct fit_out *line, struct fit_out *full)
{
    memset(line, 0, sizeof(*line));
    memset(full, 0, sizeof(*full));
    line->r.masks = line->masks;
    full->r.masks = full->masks;
    const struct pod_entry *none = NULL;
    bool a = allocator_fit_excluding(n, p, &none, 0, pol, &line->r);
    bool b = allocator_fit_full(n, p, &none, 0, pol, &full->r);
    assert_int_equal(a, b);
    assert_int_equal(line->r.fits, full->r.fits);
    assert_int_equal(line->r.score, full->r.score);
    assert_int_equal(line->masks[0], full->masks[0]);
    assert_string_equal(line->r.reason, full->r.reason);
    assert_int_equal(line->r.why, full->r.why);
    assert_int_equal(line->r.why_container, full->r.why_container);
    assert_int_equal(line->r.why_gpu, full->r.why_gpu);
    assert_int_equal(line->r.short_by, full->r.short_by);
    assert_int_equal(line->r.unresolvable, full->r.unresolvable);
    assert_int_equal(line->r.set_score, full->r.set_score);
    assert_int_equal(line->r.set_best, full->r.set_best);
}

static struct pod_info *request_with(const char *limits, const char *node_policy)
{
    char buf[1024], ann[128] = "";
    if (node_policy)
        fmt(ann, sizeof(ann), ",'annotations':{'hami.io/node-scheduler-policy':'%s'}", node_policy);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'new','namespace':'t'%s},'spec':{'containers':[{'name':'main',"
        "'resources':{'limits':%s}}]}}",
        ann, limits);
    return pod_of(buf);
}

static struct pod_info *request(const char *limits)
{
    return request_with(limits, NULL);
}

/* Random occupancy (pods of up to pod_mem memory units) and random
 * shared and whole requests (up to req_mem units), both GPU and node
 * policies, on `node`: the line and the full path agree on every field. */
static void random_rounds(struct cluster_cache *c, const char *node, unsigned seed, int pod_mem, int req_mem)
{
    int on_line = 0;
    for (int round = 0; round < 60; round++) {
        char name[16], key[32];
        fmt(name, sizeof(name), "%s-p%d", node, round % 12);
        fmt(key, sizeof(key), "t/%s-p3", node);
        if (round % 5 == 4)
            cache_delete_pod(c, key);
        else
            put_pod(c, name, node, (int)(rand_r(&seed) % 8), 5 + (int)(rand_r(&seed) % 40),
                    1 + (int)(rand_r(&seed) % (unsigned)pod_mem));
        expect_line_matches(c, node);
        on_line += cache_find_node(c, node)->fit.usable;
        char limits[256];
        int cores = 1 + (int)(rand_r(&seed) % 100), mem = (int)(rand_r(&seed) % (unsigned)req_mem);
        const char *kinds[] = {"{'tencent.com/vcuda-core':'%d','tencent.com/vcuda-memory':'%d'}",
                               "{'nvidia.com/mps-core':'%d','nvidia.com/mps-memory':'%d'}",
                               "{'nvidia.com/gpu':'%d'}"};
        int k = round % 3;
        if (k == 2)
            fmt(limits, sizeof(limits), kinds[k], 1 + (int)(rand_r(&seed) % 9));
        else
            fmt(limits, sizeof(limits), kinds[k], cores, mem);
        /* Some pods carry HAMi's node policy, which overrides --node-policy. */
        const char *node_policies[] = {NULL, "spread", "binpack", NULL};
        struct pod_info *p = request_with(limits, node_policies[round / 3 % 4]);
        for (int pol = 0; pol < 4; pol++) {
            struct alloc_policy ap = {.gpu = pol & 1 ? POLICY_SPREAD : POLICY_BINPACK,
                                      .node = pol & 2 ? POLICY_SPREAD : POLICY_BINPACK};
            struct fit_out line, full;
            cache_read_lock(c);
            fit_both(cache_find_node(c, node), p, &ap, &line, &full);
            cache_unlock(c);
        }
        pod_info_free(p);
    }
    assert_true(on_line > 20); /* most rounds compared the line, not two full paths */
}

/* On a node with 40 memory units a GPU, and on one with 65,000 (free
 * amounts on both sides of 32,768, where a signed comparison of 16-bit
 * lanes would go wrong). */
static void test_line_decides_like_the_full_path(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'kind':'Node','metadata':{'name':'n1'},'status':{'allocatable':{'tencent.com/vcuda-core':'800',"
                "'tencent.com/vcuda-memory':'320','nvidia.com/mps-core':'800','nvidia.com/mps-memory':'320',"
                "'nvidia.com/gpu':'8'}}}");
    add_node(c, "{'kind':'Node','metadata':{'name':'big'},'status':{'allocatable':{'tencent.com/vcuda-core':'800',"
                "'tencent.com/vcuda-memory':'520000','nvidia.com/mps-core':'800','nvidia.com/mps-memory':'520000',"
                "'nvidia.com/gpu':'8'}}}");
    random_rounds(c, "n1", 15, 15, 40);
    random_rounds(c, "big", 16, 40000, 65000);
}

/* Whole GPUs when exactly as many are idle as asked: the line takes them,
 * with the full path's set score, best possible set and node score, on a
 * DGX-1 shape, on one whose GPUs 6 and 7 have no NUMA node, and on a node
 * without one, under both node policies; down to the last idle GPU. */
static void test_forced_whole_sets_on_the_line(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'kind':'Node','metadata':{'name':'dgx','annotations':{'gpu-admission.io/topology':'"
                SUPPORT_DGX1_TOPOLOGY "'}},'status':{'allocatable':{'tencent.com/vcuda-core':'800',"
                "'tencent.com/vcuda-memory':'320','nvidia.com/gpu':'8'}}}");
    add_node(c, "{'kind':'Node','metadata':{'name':'plain'},'status':{'allocatable':{"
                "'tencent.com/vcuda-core':'800','tencent.com/vcuda-memory':'320','nvidia.com/gpu':'8'}}}");
    add_node(c, "{'kind':'Node','metadata':{'name':'mixed','annotations':{'gpu-admission.io/topology':'"
                SUPPORT_MIXED_NUMA_TOPOLOGY "'}},'status':{'allocatable':{'tencent.com/vcuda-core':'800',"
                "'tencent.com/vcuda-memory':'320','nvidia.com/gpu':'8'}}}");
    const char *nodes[] = {"dgx", "plain", "mixed"};
    for (size_t i = 0; i < 3; i++) {
        expect_line_matches(c, nodes[i]);
        /* Busy: 0, 4, 2, 6, 1, 5, 3 in turn; idle left: 7..1 GPUs, then asks for as many. */
        static const int busy_order[] = {0, 4, 2, 6, 1, 5, 3};
        for (int b = 0; b < 7; b++) {
            char name[32];
            fmt(name, sizeof(name), "%s-b%d", nodes[i], b);
            put_pod(c, name, nodes[i], busy_order[b], 10, 1);
            const struct node_state *n = cache_find_node(c, nodes[i]);
            assert_true(n->fit.usable);
            int idle = __builtin_popcount(n->fit.idle);
            assert_int_equal(idle, 7 - b);
            char limits[64];
            fmt(limits, sizeof(limits), "{'nvidia.com/gpu':'%d'}", idle);
            struct pod_info *p = request(limits);
            for (int pol = 0; pol < 2; pol++) {
                struct alloc_policy ap = {.gpu = POLICY_BINPACK, .node = pol ? POLICY_SPREAD : POLICY_BINPACK};
                struct fit_out line, full;
                cache_read_lock(c);
                fit_both(n, p, &ap, &line, &full);
                cache_unlock(c);
                assert_true(line.r.fits);
                assert_int_equal(line.masks[0], n->fit.idle);
                if (i == 0)
                    assert_true(line.r.set_best > 0 && line.r.set_score <= line.r.set_best);
                if (i == 2 && idle == 1) /* GPU 7 alone, without a NUMA node: no bonus, while others have one */
                    assert_true(line.r.set_score == 0 && line.r.set_best > 0);
            }
            pod_info_free(p);
        }
    }
}

/* The memo of a refusal text is the request's: a second request of another
 * size on the same fit_result gets its own text. */
static void test_refusal_memo_follows_the_request(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'kind':'Node','metadata':{'name':'n1'},'status':{'allocatable':{'nvidia.com/gpu':'2',"
                "'tencent.com/vcuda-core':'200','tencent.com/vcuda-memory':'80'}}}");
    put_pod(c, "busy0", "n1", 0, 10, 1); /* no GPU completely free */
    put_pod(c, "busy1", "n1", 1, 10, 1);
    struct pod_info *one = request("{'nvidia.com/gpu':'1'}"), *three = request("{'nvidia.com/gpu':'3'}");
    struct fit_out out;
    memset(&out, 0, sizeof(out));
    out.r.masks = out.masks;
    struct alloc_policy ap = {0};
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, "n1");
    assert_true(n->fit.usable); /* the refusals below are decided on the line */
    assert_false(allocator_fit(n, one, NULL, &ap, &out.r));
    char first[FIT_REASON_MAX];
    snprintf(first, sizeof(first), "%s", out.r.reason);
    assert_false(allocator_fit(n, three, NULL, &ap, &out.r));
    cache_unlock(c);
    assert_string_not_equal(first, out.r.reason);
    assert_non_null(strstr(out.r.reason, "needs 3 whole GPUs"));
    assert_true(out.r.unresolvable);
    pod_info_free(one);
    pod_info_free(three);
}

#define T(f) cmocka_unit_test_setup_teardown(f, cache_setup, cache_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_line_follows_every_change),
        T(test_line_unusable_when_inexact),
        T(test_line_decides_like_the_full_path),
        T(test_forced_whole_sets_on_the_line),
        T(test_refusal_memo_follows_the_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

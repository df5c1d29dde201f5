/* test_cache.c - unit tests for cluster/cache.c: the per-GPU occupancy
 * index under pod and node adds, updates and deletes, assumptions and their
 * expiry, and how decision annotations are attributed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_names.h"
#include "cluster/cache.h"
#include "tests/unit/support.h"

/* A pod t/NAME: bound to `node` (or unbound when NULL), with `annotations`
 * (an object's members, may be empty) and one container "c" of `limits`. */
static void pod(struct cluster_cache *c, const char *name, const char *node, const char *annotations,
                const char *limits, const char *phase, int64_t now)
{
    char buf[2048], spec_node[128] = "";
    if (node)
        fmt(spec_node, sizeof(spec_node), "'nodeName':'%s',", node);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','annotations':{%s}},'spec':{%s'containers':[{'name':'c',"
        "'resources':{'limits':%s}}]},'status':{'phase':'%s'}}",
        name, annotations, spec_node, limits, phase);
    add_pod(c, buf, now);
}

/* Bound and running, with a tencent.com index annotation when idx != NULL. */
static void bound(struct cluster_cache *c, const char *name, const char *node, const char *idx, const char *limits)
{
    char ann[512] = "";
    if (idx)
        fmt(ann, sizeof(ann),
            "'tencent.com/predicate-gpu-idx-0':'%s','tencent.com/predicate-node':'%s',"
            "'tencent.com/gpu-assigned':'true','tencent.com/predicate-time':'1763700000000000000'",
            idx, node);
    pod(c, name, node, ann, limits, "Running", clock_realtime_ns());
}

/* Unbound, assumed on `node` at time `t` (gpu-admission.io keys), applied at `now`. */
static void assumed(struct cluster_cache *c, const char *name, const char *node, const char *idx,
                    const char *limits, int64_t t, int64_t now)
{
    char ann[512];
    fmt(ann, sizeof(ann), "'gpu-admission.io/gpu-idx-0':'%s','gpu-admission.io/node':'%s',"
                          "'gpu-admission.io/time':'%" PRId64 "'", idx, node, t);
    pod(c, name, NULL, ann, limits, "Pending", now);
}

#define VC(cores, mem) "{'tencent.com/vcuda-core':'" #cores "','tencent.com/vcuda-memory':'" #mem "'}"
#define VCW(cores) "{'tencent.com/vcuda-core':'" #cores "'}"

static const struct node_state *node_of(struct cluster_cache *c, const char *name)
{
    const struct node_state *n = cache_find_node(c, name);
    if (!n)
        fail_msg("node %s is not in the cache", name);
    return n;
}

static void expect_gpu(struct cluster_cache *c, const char *node, int slot, int64_t cores, int64_t vmem, int pods)
{
    const struct node_state *n = node_of(c, node);
    assert_true(slot < n->gpu_count);
    const struct gpu_state *g = &n->gpus[slot];
    if (g->core_used != cores || g->mem_used[POOL_VCUDA] != vmem || g->pods != pods)
        fail_msg("%s GPU %d: cores %" PRId64 " vmem %" PRId64 " pods %d, expected %" PRId64 " %" PRId64 " %d", node,
                 slot, g->core_used, g->mem_used[POOL_VCUDA], g->pods, cores, vmem, pods);
}

/* Every GPU of the node: cores[i]/vmem[i]/pods[i]. */
static void expect_gpus(struct cluster_cache *c, const char *node, int count, const int64_t *cores,
                        const int64_t *vmem, const int *pods)
{
    assert_int_equal(node_of(c, node)->gpu_count, count);
    for (int i = 0; i < count; i++)
        expect_gpu(c, node, i, cores[i], vmem[i], pods[i]);
}

static void expect_idle(struct cluster_cache *c, const char *node)
{
    const struct node_state *n = node_of(c, node);
    for (int i = 0; i < n->gpu_count; i++)
        expect_gpu(c, node, i, 0, 0, 0);
    assert_int_equal(n->unattributed.cores, 0);
    assert_int_equal(n->unattributed.mem[POOL_VCUDA], 0);
    assert_int_equal(n->unattributed.mem[POOL_MPS], 0);
    assert_int_equal(n->unattributed.pods, 0);
    assert_null(n->charged);
    assert_int_equal(n->charged_count, 0);
}

static void expect_unattributed(struct cluster_cache *c, const char *node, int64_t cores, int64_t vmem,
                                int64_t mmem, int pods)
{
    const struct node_state *n = node_of(c, node);
    if (n->unattributed.cores != cores || n->unattributed.mem[POOL_VCUDA] != vmem || n->unattributed.mem[POOL_MPS] != mmem ||
        n->unattributed.pods != pods)
        fail_msg("%s unattributed: %" PRId64 " %" PRId64 " %" PRId64 " %d, expected %" PRId64 " %" PRId64 " %" PRId64
                 " %d", node, n->unattributed.cores, n->unattributed.mem[POOL_VCUDA], n->unattributed.mem[POOL_MPS], n->unattributed.pods,
                 cores, vmem, mmem, pods);
}

/* ---- pods ----------------------------------------------------------------- */

static void test_pod_add_update_delete(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    uint64_t gen = c->generation;

    bound(c, "p1", "n", "1", VC(30, 10));
    assert_true(c->generation > gen);
    expect_gpus(c, "n", 4, (int64_t[]){0, 30, 0, 0}, (int64_t[]){0, 10, 0, 0}, (int[]){0, 1, 0, 0});
    const struct pod_entry *e = cache_find_pod(c, "t/p1");
    assert_non_null(e);
    assert_ptr_equal(e->node, node_of(c, "n"));
    assert_true(e->bound);
    assert_int_equal(e->expires_ns, 0);
    assert_int_equal(e->nslots, 1);
    assert_int_equal(e->slots[0].slot, 1);
    assert_int_equal(node_of(c, "n")->charged_count, 1);

    /* Moved to another GPU with another size: the old charge is gone exactly. */
    bound(c, "p1", "n", "2", VC(40, 5));
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 40, 0}, (int64_t[]){0, 0, 5, 0}, (int[]){0, 0, 1, 0});
    assert_int_equal(dict_size(&c->pods), 1);

    bound(c, "p2", "n", "2", VC(20, 5));
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 60, 0}, (int64_t[]){0, 0, 10, 0}, (int[]){0, 0, 2, 0});
    assert_int_equal(node_of(c, "n")->charged_count, 2);

    /* Whole GPUs take all of their memory. */
    bound(c, "p1", "n", "0,3", VCW(200));
    expect_gpus(c, "n", 4, (int64_t[]){100, 0, 20, 100}, (int64_t[]){40, 0, 5, 40}, (int[]){1, 0, 1, 1});
    e = cache_find_pod(c, "t/p1");
    assert_int_equal(e->nslots, 2);

    assert_int_equal(cache_delete_pod(c, "t/p1"), 0);
    assert_null(cache_find_pod(c, "t/p1"));
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 20, 0}, (int64_t[]){0, 0, 5, 0}, (int[]){0, 0, 1, 0});
    assert_int_equal(node_of(c, "n")->charged_count, 1);

    gen = c->generation;
    assert_int_equal(cache_delete_pod(c, "t/nope"), 0);
    assert_int_equal(c->generation, gen);

    assert_int_equal(cache_delete_pod(c, "t/p2"), 0);
    expect_idle(c, "n");
    assert_int_equal(dict_size(&c->pods), 0);
}

static void test_pod_families(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'metadata':{'name':'m'},'status':{'allocatable':{'nvidia.com/mps-core':'200',"
                       "'nvidia.com/mps-memory':'30'}}}");
    add_node(c, "{'metadata':{'name':'v'},'status':{'allocatable':{'nvidia.com/gpu':'4'}}}");
    bound(c, "mps", "m", "1", "{'nvidia.com/mps-core':'25','nvidia.com/mps-memory':'6'}");
    bound(c, "mpsfull", "m", "0", "{'nvidia.com/mps-core':'100'}");
    const struct node_state *m = node_of(c, "m");
    assert_int_equal(m->gpus[1].core_used, 25);
    assert_int_equal(m->gpus[1].mem_used[POOL_MPS], 6);
    assert_int_equal(m->gpus[1].mem_total[POOL_MPS], 15);
    assert_int_equal(m->gpus[1].mem_used[POOL_VCUDA], 0);
    /* mps-core 100 is a share: no memory asked, none charged. */
    assert_int_equal(m->gpus[0].core_used, 100);
    assert_int_equal(m->gpus[0].mem_used[POOL_MPS], 0);

    bound(c, "whole", "v", "1,2", "{'nvidia.com/gpu':'2'}");
    expect_gpus(c, "v", 4, (int64_t[]){0, 100, 100, 0}, (int64_t[]){0, 0, 0, 0}, (int[]){0, 1, 1, 0});

    /* Without indices: whole GPUs count 100 each, MPS memory as asked. */
    bound(c, "legacy", "v", NULL, "{'nvidia.com/gpu':'3'}");
    expect_unattributed(c, "v", 300, 0, 0, 1);
    bound(c, "legacy-mps", "m", NULL, "{'nvidia.com/mps-core':'10','nvidia.com/mps-memory':'2'}");
    expect_unattributed(c, "m", 10, 0, 2, 1);
}

static void test_pods_not_charged(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    /* Not a GPU pod. */
    pod(c, "cpu", "n", "", "{'cpu':'1'}", "Running", clock_realtime_ns());
    /* An invalid request (shared without memory). */
    bound(c, "bad", "n", "0", VCW(50));
    /* Unbound and never decided. */
    pod(c, "pending", NULL, "", VC(10, 1), "Pending", clock_realtime_ns());
    /* Assumed, but the decision is older than the TTL. */
    int64_t now = clock_realtime_ns();
    assumed(c, "stale", "n", "0", VC(10, 1), now - 61 * SEC, now);
    /* Assumed without a time. */
    pod(c, "notime", NULL, "'gpu-admission.io/node':'n','gpu-admission.io/gpu-idx-0':'0'", VC(10, 1), "Pending", now);
    assert_int_equal(dict_size(&c->pods), 5);
    for (size_t i = 0; i < 5; i++) {
        const char *keys[] = {"t/cpu", "t/bad", "t/pending", "t/stale", "t/notime"};
        const struct pod_entry *e = cache_find_pod(c, keys[i]);
        assert_non_null(e);
        assert_null(e->node);
    }
    expect_idle(c, "n");
    assert_int_equal(c->assumed_pods, 0);
}

static void test_assumed_then_bound(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    int64_t now = clock_realtime_ns();
    assumed(c, "p", "n", "1", VC(30, 10), now, now);
    const struct pod_entry *e = cache_find_pod(c, "t/p");
    assert_non_null(e->node);
    assert_false(e->bound);
    assert_int_equal(e->expires_ns, now + 60 * SEC);
    assert_int_equal(c->assumed_pods, 1);
    assert_ptr_equal(c->assumed, e);
    assert_int_equal(c->next_expiry_ns, now + 60 * SEC);
    expect_gpus(c, "n", 2, (int64_t[]){0, 30}, (int64_t[]){0, 10}, (int[]){0, 1});

    /* The binding arrives with the same annotations: charged once, now bound. */
    char ann[256];
    fmt(ann, sizeof(ann),
        "'gpu-admission.io/gpu-idx-0':'1','gpu-admission.io/node':'n','gpu-admission.io/time':'%" PRId64 "'", now);
    pod(c, "p", "n", ann, VC(30, 10), "Running", now);
    e = cache_find_pod(c, "t/p");
    assert_true(e->bound);
    assert_int_equal(e->expires_ns, 0);
    assert_int_equal(c->assumed_pods, 0);
    assert_null(c->assumed);
    expect_gpus(c, "n", 2, (int64_t[]){0, 30}, (int64_t[]){0, 10}, (int[]){0, 1});
    assert_int_equal(node_of(c, "n")->charged_count, 1);

    /* A bound pod never expires. */
    cache_expire(c, now + 3600 * SEC);
    expect_gpus(c, "n", 2, (int64_t[]){0, 30}, (int64_t[]){0, 10}, (int[]){0, 1});
}

static void test_bound_elsewhere_than_decided(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    add_vcuda_node(c, "m", 2, 40);
    /* Decided for m, but bound to n (by something else): the binding wins
     * and m's indices say nothing about n's GPUs. */
    int64_t now = clock_realtime_ns();
    char ann[256];
    fmt(ann, sizeof(ann),
        "'gpu-admission.io/gpu-idx-0':'1','gpu-admission.io/node':'m','gpu-admission.io/time':'%" PRId64 "'", now);
    pod(c, "p", "n", ann, VC(30, 10), "Running", now);
    expect_idle(c, "m");
    expect_gpus(c, "n", 2, (int64_t[]){0, 0}, (int64_t[]){0, 0}, (int[]){0, 0});
    expect_unattributed(c, "n", 30, 10, 0, 1);
}

static void test_terminal_releases(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    const char *ann = "'tencent.com/predicate-gpu-idx-0':'0','tencent.com/predicate-node':'n'";
    pod(c, "a", "n", ann, VC(30, 10), "Running", clock_realtime_ns());
    pod(c, "b", "n", ann, VC(20, 10), "Running", clock_realtime_ns());
    expect_gpu(c, "n", 0, 50, 20, 2);
    pod(c, "a", "n", ann, VC(30, 10), "Succeeded", clock_realtime_ns());
    expect_gpu(c, "n", 0, 20, 10, 1);
    assert_non_null(cache_find_pod(c, "t/a"));
    assert_null(cache_find_pod(c, "t/a")->node);
    pod(c, "b", "n", ann, VC(20, 10), "Failed", clock_realtime_ns());
    expect_idle(c, "n");
    /* Deleting a released pod changes nothing. */
    assert_int_equal(cache_delete_pod(c, "t/a"), 0);
    expect_idle(c, "n");
}

/* ---- nodes ---------------------------------------------------------------- */

static void test_node_after_its_pods(void **state)
{
    struct cluster_cache *c = *state;
    bound(c, "a", "late", "1", VC(30, 10));
    bound(c, "b", "late", "0,1", VCW(200));   /* not possible with a, but the cache only counts */
    const struct node_state *n = node_of(c, "late");
    assert_false(n->present);
    assert_null(n->spec);
    assert_int_equal(n->gpu_count, 0);
    assert_int_equal(c->present_nodes, 0);
    /* Without the node's GPUs nothing can be attributed. */
    expect_unattributed(c, "late", 230, 10, 0, 2);

    add_vcuda_node(c, "late", 2, 40);
    n = node_of(c, "late");
    assert_true(n->present);
    assert_non_null(n->spec);
    assert_int_equal(c->present_nodes, 1);
    expect_gpus(c, "late", 2, (int64_t[]){100, 130}, (int64_t[]){40, 50}, (int[]){1, 2});
    expect_unattributed(c, "late", 0, 0, 0, 0);
    assert_int_equal(n->charged_count, 2);

    /* The same node applied again: nothing counted twice. */
    add_vcuda_node(c, "late", 2, 40);
    expect_gpus(c, "late", 2, (int64_t[]){100, 130}, (int64_t[]){40, 50}, (int[]){1, 2});
    assert_int_equal(c->present_nodes, 1);
}

static void test_placeholder_dropped(void **state)
{
    struct cluster_cache *c = *state;
    bound(c, "a", "ghost", "0", VC(30, 10));
    assert_non_null(cache_find_node(c, "ghost"));
    /* The pod moves away: the placeholder goes. */
    bound(c, "a", "ghost2", "0", VC(30, 10));
    assert_null(cache_find_node(c, "ghost"));
    assert_non_null(cache_find_node(c, "ghost2"));
    assert_int_equal(cache_delete_pod(c, "t/a"), 0);
    assert_null(cache_find_node(c, "ghost2"));
    assert_int_equal(dict_size(&c->nodes), 0);
}

static void test_node_update_recharges(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    bound(c, "a", "n", "1", VC(30, 10));
    bound(c, "b", "n", "3", VC(20, 5));   /* no minor 3 on a 2-GPU node */
    expect_gpus(c, "n", 2, (int64_t[]){0, 30}, (int64_t[]){0, 10}, (int[]){0, 1});
    expect_unattributed(c, "n", 20, 5, 0, 1);

    /* Grown to 4 GPUs (with more memory each): b lands on GPU 3. */
    add_vcuda_node(c, "n", 4, 64);
    expect_gpus(c, "n", 4, (int64_t[]){0, 30, 0, 20}, (int64_t[]){0, 10, 0, 5}, (int[]){0, 1, 0, 1});
    expect_unattributed(c, "n", 0, 0, 0, 0);
    assert_int_equal(node_of(c, "n")->gpus[0].mem_total[POOL_VCUDA], 64);

    /* Shrunk to one GPU: both pods are held against the node. */
    add_vcuda_node(c, "n", 1, 40);
    expect_gpus(c, "n", 1, (int64_t[]){0}, (int64_t[]){0}, (int[]){0});
    expect_unattributed(c, "n", 50, 15, 0, 2);
    assert_int_equal(node_of(c, "n")->charged_count, 2);

    /* Minors from the topology annotation: minor 3 is now slot 0, minor 1 slot 1. */
    add_node(c, "{'metadata':{'name':'n','annotations':{'gpu-admission.io/topology':"
                       "'{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'minor\\':3},{\\'index\\':1,\\'minor\\':1}]}'}},"
                       "'status':{'allocatable':{'tencent.com/vcuda-core':'200','tencent.com/vcuda-memory':'80'}}}");
    const struct node_state *n = node_of(c, "n");
    assert_int_equal(n->gpus[0].minor, 3);
    assert_int_equal(n->gpus[1].minor, 1);
    expect_gpus(c, "n", 2, (int64_t[]){20, 30}, (int64_t[]){5, 10}, (int[]){1, 1});
    expect_unattributed(c, "n", 0, 0, 0, 0);
    assert_int_equal(c->present_nodes, 1);
}

static void test_node_delete(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "empty", 2, 40);
    add_vcuda_node(c, "busy", 2, 40);
    assert_int_equal(c->present_nodes, 2);
    bound(c, "a", "busy", "1", VC(30, 10));

    assert_int_equal(cache_delete_node(c, "empty"), 0);
    assert_null(cache_find_node(c, "empty"));
    assert_int_equal(c->present_nodes, 1);

    /* A node with pods becomes a placeholder holding their charge. */
    assert_int_equal(cache_delete_node(c, "busy"), 0);
    const struct node_state *n = node_of(c, "busy");
    assert_false(n->present);
    assert_null(n->spec);
    assert_int_equal(n->gpu_count, 0);
    assert_int_equal(c->present_nodes, 0);
    expect_unattributed(c, "busy", 30, 10, 0, 1);

    /* Deleting it again, or an unknown node, changes nothing. */
    uint64_t gen = c->generation;
    assert_int_equal(cache_delete_node(c, "busy"), 0);
    assert_int_equal(cache_delete_node(c, "never"), 0);
    assert_int_equal(c->generation, gen);
    assert_int_equal(c->present_nodes, 0);

    /* It comes back. */
    add_vcuda_node(c, "busy", 2, 40);
    expect_gpus(c, "busy", 2, (int64_t[]){0, 30}, (int64_t[]){0, 10}, (int[]){0, 1});
    expect_unattributed(c, "busy", 0, 0, 0, 0);
    assert_int_equal(c->present_nodes, 1);

    /* Deleted again, then its pod: nothing is left. */
    assert_int_equal(cache_delete_node(c, "busy"), 0);
    assert_int_equal(cache_delete_pod(c, "t/a"), 0);
    assert_null(cache_find_node(c, "busy"));
}

static void test_node_delete_with_expired_assumption(void **state)
{
    struct cluster_cache *c = *state;
    c->cfg.assume_ttl_ns = 5 * SEC;
    add_vcuda_node(c, "n", 2, 40);
    /* Applied "10 s ago", when the 5 s assumption was still live. */
    int64_t then = clock_realtime_ns() - 10 * SEC;
    assumed(c, "p", "n", "0", VC(30, 10), then, then);
    expect_gpu(c, "n", 0, 30, 10, 1);
    /* The node's deletion re-charges its pods now: the assumption is over,
     * and no placeholder stays behind for nothing. */
    assert_int_equal(cache_delete_node(c, "n"), 0);
    assert_null(cache_find_pod(c, "t/p")->node);
    assert_int_equal(c->assumed_pods, 0);
    assert_null(cache_find_node(c, "n"));
    assert_int_equal(c->present_nodes, 0);
}

/* ---- assumptions ---------------------------------------------------------- */

static void test_expiry(void **state)
{
    struct cluster_cache *c = *state;
    c->cfg.assume_ttl_ns = 1000;   /* 1 us */
    add_vcuda_node(c, "n", 2, 40);
    const int64_t t = 1800000000LL * SEC;
    assumed(c, "a", "n", "0", VC(30, 10), t, t);
    assumed(c, "b", "n", "1", VC(20, 5), t + 500, t + 500);
    expect_gpus(c, "n", 2, (int64_t[]){30, 20}, (int64_t[]){10, 5}, (int[]){1, 1});
    assert_int_equal(c->assumed_pods, 2);
    assert_int_equal(c->next_expiry_ns, t + 1000);

    cache_expire(c, t + 999);
    expect_gpus(c, "n", 2, (int64_t[]){30, 20}, (int64_t[]){10, 5}, (int[]){1, 1});

    uint64_t gen = c->generation;
    cache_expire(c, t + 1000);
    assert_true(c->generation > gen);
    expect_gpus(c, "n", 2, (int64_t[]){0, 20}, (int64_t[]){0, 5}, (int[]){0, 1});
    assert_int_equal(c->assumed_pods, 1);
    assert_int_equal(c->next_expiry_ns, t + 1500);
    assert_non_null(cache_find_pod(c, "t/a"));
    assert_null(cache_find_pod(c, "t/a")->node);

    cache_expire(c, t + 1500);
    expect_idle(c, "n");
    assert_int_equal(c->assumed_pods, 0);
    assert_null(c->assumed);
    assert_int_equal(c->next_expiry_ns, INT64_MAX);

    /* An assumption already over when applied is never charged. */
    assumed(c, "late", "n", "0", VC(30, 10), t, t + 1000);
    expect_idle(c, "n");
}

static void test_expiry_drops_placeholder(void **state)
{
    struct cluster_cache *c = *state;
    c->cfg.assume_ttl_ns = 1000;
    const int64_t t = 1800000000LL * SEC;
    assumed(c, "a", "nowhere", "0", VC(30, 10), t, t);
    assert_non_null(cache_find_node(c, "nowhere"));
    expect_unattributed(c, "nowhere", 30, 10, 0, 1);
    cache_expire(c, t + 1000);
    assert_null(cache_find_node(c, "nowhere"));
}

/* ---- annotations ---------------------------------------------------------- */

static void test_wrong_index_count(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    /* Two whole GPUs but one index. */
    bound(c, "a", "n", "1", VCW(200));
    expect_unattributed(c, "n", 200, 80, 0, 1);
    /* A share with two indices. */
    bound(c, "b", "n", "0,1", VC(30, 10));
    expect_unattributed(c, "n", 230, 90, 0, 2);
    /* A minor the node does not have. */
    bound(c, "d", "n", "7", VC(5, 1));
    expect_unattributed(c, "n", 235, 91, 0, 3);
    /* An empty or unreadable list. */
    bound(c, "e", "n", "", VC(5, 1));
    bound(c, "f", "n", "x", VC(5, 1));
    expect_unattributed(c, "n", 245, 93, 0, 5);
    /* The same GPU twice for two whole GPUs. */
    bound(c, "g", "n", "2,2", VCW(200));
    expect_unattributed(c, "n", 445, 173, 0, 6);
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, (int[]){0, 0, 0, 0});
    assert_int_equal(node_of(c, "n")->charged_count, 6);

    /* Fixing the annotation moves the charge onto the GPUs. */
    bound(c, "a", "n", "1,2", VCW(200));
    expect_unattributed(c, "n", 245, 93, 0, 5);
    expect_gpus(c, "n", 4, (int64_t[]){0, 100, 100, 0}, (int64_t[]){0, 40, 40, 0}, (int[]){0, 1, 1, 0});
}

static void test_multi_container_indices(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    /* Container 0 has no GPU (and no index), 1 and 2 do. */
    add_pod(c,
                   "{'metadata':{'name':'m','namespace':'t','annotations':{"
                   "'tencent.com/predicate-gpu-idx-1':'3','tencent.com/predicate-gpu-idx-2':'0,1',"
                   "'tencent.com/predicate-node':'n'}},"
                   "'spec':{'nodeName':'n','containers':[{'name':'side'},"
                   "{'name':'s','resources':{'limits':" VC(25, 4) "}},"
                   "{'name':'w','resources':{'limits':" VCW(200) "}}]}}",
                   clock_realtime_ns());
    expect_gpus(c, "n", 4, (int64_t[]){100, 100, 0, 25}, (int64_t[]){40, 40, 0, 4}, (int[]){1, 1, 0, 1});
    expect_unattributed(c, "n", 0, 0, 0, 0);
    assert_int_equal(cache_find_pod(c, "t/m")->nslots, 3);

    /* One GPU container without its index: the whole pod is unattributed. */
    add_pod(c,
                   "{'metadata':{'name':'m','namespace':'t','annotations':{"
                   "'tencent.com/predicate-gpu-idx-2':'0,1','tencent.com/predicate-node':'n'}},"
                   "'spec':{'nodeName':'n','containers':[{'name':'side'},"
                   "{'name':'s','resources':{'limits':" VC(25, 4) "}},"
                   "{'name':'w','resources':{'limits':" VCW(200) "}}]}}",
                   clock_realtime_ns());
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, (int[]){0, 0, 0, 0});
    expect_unattributed(c, "n", 225, 84, 0, 1);
}

/* A GPU taken whole by one container cannot also be named by another
 * container of the same pod; two shares on one GPU are fine. */
static void test_cross_container_duplicates(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    add_pod(c,
                   "{'metadata':{'name':'dup','namespace':'t','annotations':{"
                   "'tencent.com/predicate-gpu-idx-0':'1,2','tencent.com/predicate-gpu-idx-1':'2',"
                   "'tencent.com/predicate-node':'n'}},"
                   "'spec':{'nodeName':'n','containers':["
                   "{'name':'w','resources':{'limits':" VCW(200) "}},"
                   "{'name':'s','resources':{'limits':" VC(25, 4) "}}]}}",
                   clock_realtime_ns());
    expect_unattributed(c, "n", 225, 84, 0, 1);
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, (int[]){0, 0, 0, 0});
    add_pod(c,
                   "{'metadata':{'name':'dup','namespace':'t','annotations':{"
                   "'tencent.com/predicate-gpu-idx-0':'3','tencent.com/predicate-gpu-idx-1':'3',"
                   "'tencent.com/predicate-node':'n'}},"
                   "'spec':{'nodeName':'n','containers':["
                   "{'name':'a','resources':{'limits':" VC(25, 4) "}},"
                   "{'name':'b','resources':{'limits':" VC(30, 6) "}}]}}",
                   clock_realtime_ns());
    expect_unattributed(c, "n", 0, 0, 0, 0);
    expect_gpu(c, "n", 3, 55, 10, 2);
}

static void test_gqa_keys_when_tencent_absent(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    pod(c, "a", "n", "'gpu-admission.io/gpu-idx-0':'2','gpu-admission.io/node':'n'", VC(30, 10), "Running",
        clock_realtime_ns());
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 30, 0}, (int64_t[]){0, 0, 10, 0}, (int[]){0, 0, 1, 0});
    expect_unattributed(c, "n", 0, 0, 0, 0);
}

static void test_tencent_preferred(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    /* GPU-Manager rewrote the tencent.com key with what it really used. */
    pod(c, "a", "n",
        "'gpu-admission.io/gpu-idx-0':'1','gpu-admission.io/node':'n',"
        "'tencent.com/predicate-gpu-idx-0':'3','tencent.com/predicate-node':'n','tencent.com/gpu-assigned':'true'",
        VC(30, 10), "Running", clock_realtime_ns());
    expect_gpus(c, "n", 4, (int64_t[]){0, 0, 0, 30}, (int64_t[]){0, 0, 0, 10}, (int[]){0, 0, 0, 1});
    const struct pod_entry *e = cache_find_pod(c, "t/a");
    assert_true(e->info->decision.assigned);
}

static void test_node_slot_of_minor(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'metadata':{'name':'n','annotations':{'gpu-admission.io/topology':"
                       "'{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'minor\\':4},{\\'index\\':1,\\'minor\\':2}]}'}},"
                       "'status':{'allocatable':{'nvidia.com/gpu':'2'}}}");
    const struct node_state *n = node_of(c, "n");
    assert_int_equal(node_slot_of_minor(n, 4), 0);
    assert_int_equal(node_slot_of_minor(n, 2), 1);
    assert_int_equal(node_slot_of_minor(n, 0), -1);
    assert_int_equal(node_slot_of_minor(n, 1), -1);
    /* A topology that disagrees with the GPU count is dropped: minors 0..n-1. */
    add_node(c, "{'metadata':{'name':'x','annotations':{'gpu-admission.io/topology':"
                       "'{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'minor\\':4}]}'}},"
                       "'status':{'allocatable':{'nvidia.com/gpu':'2'}}}");
    n = node_of(c, "x");
    assert_null(n->spec->topology);
    assert_string_equal(n->spec->topology_error, "the annotation lists 1 GPUs but the node advertises 2");
    assert_int_equal(node_slot_of_minor(n, 0), 0);
    assert_int_equal(node_slot_of_minor(n, 1), 1);
    assert_int_equal(node_slot_of_minor(n, 4), -1);
}

/* ---- ConfigMaps and the generic loader ------------------------------------ */

static void test_configmaps(void **state)
{
    struct cluster_cache *c = *state;
    assert_int_equal(cache_apply_configmap(c, json_of("{'metadata':{'name':'q','namespace':'kube-system'},"
                                                      "'data':{'k':'1'}}")),
                     0);
    assert_int_equal(cache_apply_configmap(c, json_of("{'metadata':{'name':'q','namespace':'kube-system'},"
                                                      "'data':{'k':'2'}}")),
                     0);
    assert_int_equal(dict_size(&c->configmaps), 1);
    const cJSON *cm = dict_get(&c->configmaps, "kube-system/q");
    assert_non_null(cm);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "data"), "k");
    assert_string_equal(k->valuestring, "2");
    assert_int_equal(cache_apply_configmap(c, json_of("{'metadata':{}}")), -1);
    assert_int_equal(cache_delete_configmap(c, "kube-system", "q"), 0);
    assert_int_equal(dict_size(&c->configmaps), 0);
    assert_int_equal(cache_delete_configmap(c, "kube-system", "q"), 0);
}

static void test_apply_object(void **state)
{
    struct cluster_cache *c = *state;
    int64_t now = clock_realtime_ns();
    struct {
        const char *obj;
        int rc;
        const char *err;
    } cases[] = {
        {"{'kind':'Node','metadata':{'name':'n'},'status':{'capacity':{'nvidia.com/gpu':'2'}}}", 1, NULL},
        {"{'kind':'Pod','metadata':{'name':'p','namespace':'t'},'spec':{'nodeName':'n','containers':[{'name':'c',"
         "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}", 1, NULL},
        {"{'kind':'ConfigMap','metadata':{'name':'cm','namespace':'kube-public'}}", 1, NULL},
        {"{'kind':'Service','metadata':{'name':'s'}}", 0, NULL},
        {"{'metadata':{'name':'nokind'}}", 0, NULL},
        {"{'kind':'Node','metadata':{}}", -1, "node has no metadata.name"},
        {"{'kind':'Pod','metadata':{'namespace':'t'}}", -1, "pod has no metadata.name"},
        {"{'kind':'ConfigMap','metadata':{'namespace':'t'}}", -1, "configmap has no metadata.name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *obj = json_of(cases[i].obj);
        char *err = NULL;
        int rc = cache_apply_object(c, obj, now, &err);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d, expected %d", i, rc, cases[i].rc);
        if (cases[i].err)
            assert_string_equal(err, cases[i].err);
        else
            assert_null(err);
        free(err);
        cJSON_Delete(obj);
    }
    assert_int_equal(c->present_nodes, 1);
    assert_int_equal(dict_size(&c->pods), 1);
    assert_int_equal(dict_size(&c->configmaps), 1);
    assert_non_null(dict_get(&c->configmaps, "kube-public/cm"));
    expect_unattributed(c, "n", 100, 0, 0, 1);
}


/* ---- out-of-range values (issue 10, item 1) ------------------------------- */

static struct node_spec *spec_of(const char *fixture)
{
    cJSON *obj = json_of(fixture);
    char *err = NULL;
    struct node_spec *spec = node_spec_from_json(obj, &err);
    if (!spec)
        fail_msg("node_spec_from_json: %s", err ? err : "(null)");
    cJSON_Delete(obj);
    return spec;
}

/* Counts are checked in int64 before any narrowing or allocation: 2^31 GPUs
 * used to wrap negative (calloc overflow, a failed apply), 2^32 + 1 became 1. */
static void test_node_gpu_counts_clamp(void **state)
{
    struct cluster_cache *c = *state;
    struct {
        const char *resource, *value;
        int gpus;
    } cases[] = {
        {"nvidia.com/gpu", "2147483648", 64},
        {"nvidia.com/gpu", "4294967297", 64},
        {"nvidia.com/gpu", "9223372036854775807", 64},
        {"nvidia.com/gpu", "65", 64},
        {"nvidia.com/gpu", "64", 64},
        {"nvidia.com/gpu", "8", 8},
        {"tencent.com/vcuda-core", "214748364800", 64},
        {"tencent.com/vcuda-core", "429496729700", 64},
        {"nvidia.com/mps-core", "9223372036854775807", 64},
        {"nvidia.com/gpu", "1e30", 0}, /* past int64: refused, counted as 0 */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[256];
        fmt(buf, sizeof(buf), "{'metadata':{'name':'n%zu'},'status':{'capacity':{'%s':'%s'}}}", i,
            cases[i].resource, cases[i].value);
        struct node_spec *spec = spec_of(buf);
        if (spec->gpu_count != cases[i].gpus)
            fail_msg("%s %s: %d GPUs, expected %d", cases[i].resource, cases[i].value, spec->gpu_count,
                     cases[i].gpus);
        assert_int_equal(cache_apply_node(c, spec), 0);
        char name[16];
        fmt(name, sizeof(name), "n%zu", i);
        assert_int_equal(node_of(c, name)->gpu_count, cases[i].gpus);
    }
}

/* Memory past GPU_AMOUNT_MAX would overflow the per-GPU sums: refused per
 * field (0), the rest of the node kept. */
static void test_node_memory_range(void **state)
{
    struct cluster_cache *c = *state;
    struct node_spec *spec = spec_of("{'metadata':{'name':'m'},'status':{'capacity':{'tencent.com/vcuda-core':'400',"
                                     "'tencent.com/vcuda-memory':'4398046511104','nvidia.com/mps-memory':'1e30'}}}");
    assert_int_equal(spec->gpu_count, 4);
    assert_int_equal(spec->memory_offer[POOL_VCUDA], 0);
    assert_int_equal(spec->memory_offer[POOL_MPS], 0);
    node_spec_free(spec);
    spec = spec_of("{'metadata':{'name':'m'},'status':{'capacity':{'tencent.com/vcuda-core':'400',"
                   "'tencent.com/vcuda-memory':'1099511627776'}}}");
    assert_int_equal(spec->memory_offer[POOL_VCUDA], GPU_AMOUNT_MAX);
    assert_int_equal(spec->gpus[0].memory[POOL_VCUDA], GPU_AMOUNT_MAX / 4);
    assert_int_equal(cache_apply_node(c, spec), 0);
}

/* Pods: an amount past GPU_AMOUNT_MAX is an invalid request (with the
 * limit in the reason), never a charge. */
static void test_pod_amount_range(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 64);
    cJSON *obj = json_of("{'metadata':{'name':'big','namespace':'t'},'spec':{'nodeName':'n','containers':[{'name':'c',"
                         "'resources':{'limits':{'tencent.com/vcuda-core':'50',"
                         "'tencent.com/vcuda-memory':'9223372036854775807'}}}]}}");
    struct pod_info *p = pod_info_from_json(obj, NULL);
    cJSON_Delete(obj);
    assert_non_null(p);
    assert_non_null(p->request_error);
    assert_non_null(strstr(p->request_error, "out of range (at most 1099511627776)"));
    assert_int_equal(cache_apply_pod(c, p, clock_realtime_ns()), 0);
    expect_unattributed(c, "n", 0, 0, 0, 0);
}

/* A decision time near INT64_MAX neither overflows nor holds past the
 * ceiling: a time from the future counts from now. */
static void test_decision_time_saturates(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 64);
    int64_t now = clock_realtime_ns();
    pod(c, "far", NULL,
        "'tencent.com/predicate-node':'n','tencent.com/predicate-time':'9223372036854775807',"
        "'tencent.com/predicate-gpu-idx-0':'0'",
        "{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}", "Pending", now);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    assert_int_equal(cache_find_pod(c, "t/far")->expires_ns, now + c->cfg.assume_ttl_ns);
}

/* The proof of a decision of pod t/NAME (uid u-NAME) on node at t, GPU idx. */
static void proof_of(const struct decision_key *k, const char *name, const char *node, int idx, int64_t t, char *out)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','uid':'u-%s'},'spec':{'containers':[{'name':'c',"
        "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]}}",
        name, name);
    struct pod_info *p = pod_of(buf);
    int minor[] = {idx}, count[] = {1};
    int *minors[] = {minor};
    struct pod_info *d = pod_info_with_decision(p, node, t, minors, count);
    assert_non_null(d);
    assert_int_equal(decision_prove(k, d, out), 0);
    pod_info_free(d);
    pod_info_free(p);
}

/* A pending pod t/NAME (uid u-NAME) with a decision on n, GPU idx, at t, and
 * the given proof (NULL: none). */
static void decided(struct cluster_cache *c, const char *name, int idx, int64_t t, const char *proof)
{
    char buf[2048];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','uid':'u-%s','annotations':{'gpu-admission.io/node':'n',"
        "'gpu-admission.io/time':'%" PRId64 "','gpu-admission.io/gpu-idx-0':'%d'%s%s%s}},'spec':{'containers':"
        "[{'name':'c','resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]},'status':{'phase':'Pending'}}",
        name, name, t, idx, proof ? ",'gpu-admission.io/proof':'" : "", proof ? proof : "", proof ? "'" : "");
    add_pod(c, buf, clock_realtime_ns());
}

/* With a decision key, an unbound decision holds GPUs only with a proof
 * made with that key over exactly what it says (issue 22, items 2 and 3). */
static void test_unproven_decisions_hold_nothing(void **state)
{
    struct cluster_cache *c = *state;
    struct decision_key key, other;
    assert_int_equal(decision_key_random(&key), 0);
    assert_int_equal(decision_key_random(&other), 0);
    cache_set_decision_key(c, &key);
    add_vcuda_node(c, "n", 2, 64);
    int64_t now = clock_realtime_ns();
    char proof[DECISION_PROOF_LEN + 1], foreign[DECISION_PROOF_LEN + 1];
    proof_of(&key, "mine", "n", 0, now, proof);
    proof_of(&other, "theirs", "n", 1, now, foreign);

    decided(c, "forged", 0, now, NULL);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 0);
    decided(c, "theirs", 1, now, foreign);
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 0);
    decided(c, "squat", 1, INT64_MAX, NULL);
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 0);
    decided(c, "mine", 0, now, proof);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    /* The same proof on another GPU, another pod or another time proves
     * nothing: a new pod holds nothing with it, and the pod that holds GPU 0
     * keeps it over the unproven edits (test_proven_hold_kept). */
    decided(c, "copy", 1, now, proof);
    decided(c, "mine", 1, now, proof);
    decided(c, "mine", 0, now + 1, proof);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 0);
    /* Bound pods are charged whatever their annotations say. */
    bound(c, "bound", "n", "1", VC(30, 10));
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 30);
    cache_set_decision_key(c, NULL);
}

/* HAMi's own decision keys (hami.io/vgpu-node, vgpu-time in seconds) far
 * ahead: held at most the ceiling without a key, nothing with one. */
static void test_hami_time_far_ahead(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'metadata':{'name':'v'},'status':{'allocatable':{'nvidia.com/gpu':'2'}}}");
    int64_t now = clock_realtime_ns();
    const char *ann = "'hami.io/vgpu-node':'v','hami.io/vgpu-time':'9000000000'"; /* year 2255 */
    pod(c, "h", NULL, ann, "{'nvidia.com/gpu':'1'}", "Pending", now);
    const struct pod_entry *e = cache_find_pod(c, "t/h");
    assert_non_null(e->node);
    assert_int_equal(e->expires_ns, now + c->cfg.assume_ttl_ns);
    struct decision_key key;
    assert_int_equal(decision_key_random(&key), 0);
    cache_set_decision_key(c, &key);
    pod(c, "h", NULL, ann, "{'nvidia.com/gpu':'1'}", "Pending", now);
    assert_null(cache_find_pod(c, "t/h")->node);
    expect_idle(c, "v");
    cache_set_decision_key(c, NULL);
}

/* A proven hold outlives updates that drop or alter its decision without a
 * proof; this service's own release, a new proven decision and a binding
 * end it. */
static void test_proven_hold_kept(void **state)
{
    struct cluster_cache *c = *state;
    struct decision_key key;
    assert_int_equal(decision_key_random(&key), 0);
    cache_set_decision_key(c, &key);
    add_vcuda_node(c, "n", 2, 64);
    int64_t now = clock_realtime_ns();
    char proof[DECISION_PROOF_LEN + 1], moved[DECISION_PROOF_LEN + 1];
    proof_of(&key, "p", "n", 0, now, proof);
    proof_of(&key, "p", "n", 1, now + 1, moved);
    decided(c, "p", 0, now, proof);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    decided(c, "p", 1, now, proof); /* another GPU, the old proof */
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 0);
    const char *bare = "{'metadata':{'name':'p','namespace':'t','uid':'u-p'},'spec':{'containers':[{'name':'c',"
                       "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]},"
                       "'status':{'phase':'Pending'}}";
    add_pod(c, bare, now); /* no decision at all */
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    decided(c, "p", 1, now + 1, moved); /* a new proven decision moves it */
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 0);
    assert_int_equal(node_of(c, "n")->gpus[1].core_used, 50);
    cache_release_hold(c, "t/p"); /* this service takes it off */
    add_pod(c, bare, now);
    expect_idle(c, "n");
    cache_set_decision_key(c, NULL);
}

/* A reservation survives an update that carries an earlier decision (a
 * label, a condition, while the write is in flight) and ends with the
 * update that carries it (issue 22, item 4). */
static void test_reservation_kept_over_earlier_decision(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 64);
    int64_t old = clock_realtime_ns() - 3600 * SEC; /* long expired */
    decided(c, "p", 1, old, NULL);
    expect_idle(c, "n");
    int64_t t = clock_realtime_ns();
    struct pod_info *cur = pod_info_clone(cache_find_pod(c, "t/p")->info);
    int minor[] = {0}, count[] = {1};
    int *minors[] = {minor};
    cache_write_lock(c);
    uint64_t token = cache_reserve_pod_locked(c, pod_info_with_decision(cur, "n", t, minors, count), t);
    cache_unlock(c);
    pod_info_free(cur);
    assert_true(token != 0);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    decided(c, "p", 1, old, NULL); /* an unrelated update, the earlier decision still on it */
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
    assert_int_equal(cache_find_pod(c, "t/p")->reservation, token);
    decided(c, "p", 0, t, NULL); /* the write landed */
    assert_int_equal(cache_find_pod(c, "t/p")->reservation, 0);
    assert_int_equal(node_of(c, "n")->gpus[0].core_used, 50);
}

/* One item a relist cannot use (a ConfigMap without a name) is skipped and
 * counted; the others are applied and the relist stands. */
static void test_relist_skips_bad_items(void **state)
{
    struct cluster_cache *c = *state;
    cJSON *cms[3] = {json_of("{'metadata':{'name':'a','namespace':'kube-public'}}"),
                     json_of("{'metadata':{'namespace':'kube-public'}}"),
                     json_of("{'metadata':{'name':'b','namespace':'kube-public'}}")};
    assert_int_equal(cache_replace_configmaps(c, "kube-public", NULL, cms, 3), 1);
    assert_int_equal(dict_size(&c->configmaps), 2);
    assert_non_null(dict_get(&c->configmaps, "kube-public/a"));
    assert_non_null(dict_get(&c->configmaps, "kube-public/b"));
    /* Nodes whose counts once failed the whole relist. */
    struct node_spec *nodes[2] = {spec_of("{'metadata':{'name':'huge'},'status':{'capacity':{'nvidia.com/gpu':"
                                          "'2147483648'}}}"),
                                  spec_of("{'metadata':{'name':'ok'},'status':{'capacity':{'nvidia.com/gpu':'2'}}}")};
    assert_int_equal(cache_replace_nodes(c, nodes, 2), 0);
    assert_int_equal(c->present_nodes, 2);
    assert_int_equal(node_of(c, "huge")->gpu_count, 64);
    assert_int_equal(node_of(c, "ok")->gpu_count, 2);
}

#define T(f) cmocka_unit_test_setup_teardown(f, cache_setup, cache_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_pod_add_update_delete),
        T(test_pod_families),
        T(test_pods_not_charged),
        T(test_assumed_then_bound),
        T(test_bound_elsewhere_than_decided),
        T(test_terminal_releases),
        T(test_node_after_its_pods),
        T(test_placeholder_dropped),
        T(test_node_update_recharges),
        T(test_node_delete),
        T(test_node_delete_with_expired_assumption),
        T(test_expiry),
        T(test_expiry_drops_placeholder),
        T(test_wrong_index_count),
        T(test_multi_container_indices),
        T(test_cross_container_duplicates),
        T(test_gqa_keys_when_tencent_absent),
        T(test_tencent_preferred),
        T(test_node_slot_of_minor),
        T(test_configmaps),
        T(test_apply_object),
        T(test_node_gpu_counts_clamp),
        T(test_node_memory_range),
        T(test_pod_amount_range),
        T(test_decision_time_saturates),
        T(test_unproven_decisions_hold_nothing),
        T(test_reservation_kept_over_earlier_decision),
        T(test_hami_time_far_ahead),
        T(test_proven_hold_kept),
        T(test_relist_skips_bad_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

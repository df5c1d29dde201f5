/* test_allocator.c - unit tests for extender/decide/allocator.c, over node states
 * built through the real cache from small Node and Pod objects. */
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
#include "extender/decide/allocator.h"
#include "tests/unit/support.h"

/* A node with n GPUs offering `res` (core resource, n*100 of it) and
 * `memres` (n*mem_per_gpu of it), optionally with a topology annotation. */
static void add_gpu_node(struct cluster_cache *c, const char *name, const char *res, const char *memres, int n,
                         int mem_per_gpu, const char *topology)
{
    char buf[4096], ann[2048] = "";
    if (topology)
        fmt(ann, sizeof(ann), ",'annotations':{'gpu-admission.io/topology':'%s'}", topology);
    if (memres)
        fmt(buf, sizeof(buf),
            "{'kind':'Node','metadata':{'name':'%s'%s},'status':{'allocatable':{'cpu':'8','%s':'%d','%s':'%d'}}}",
            name, ann, res, n * 100, memres, n * mem_per_gpu);
    else
        fmt(buf, sizeof(buf), "{'kind':'Node','metadata':{'name':'%s'%s},'status':{'allocatable':{'%s':'%d'}}}",
            name, ann, res, n);
    add_node(c, buf);
}

/* A pod with the given containers (JSON array text). */
static struct pod_info *pod_with(const char *containers)
{
    char buf[4096];
    fmt(buf, sizeof(buf), "{'metadata':{'name':'new','namespace':'t'},'spec':{'containers':%s}}", containers);
    return pod_of(buf);
}

/* A one-container pod with the given limits. */
static struct pod_info *pod_limits(const char *limits)
{
    char buf[1024];
    fmt(buf, sizeof(buf), "[{'name':'main','resources':{'limits':%s}}]", limits);
    return pod_with(buf);
}

/* A running pod bound to `node` with one container of `limits`; with idx
 * non-NULL it carries the index annotation for its container. */
static void add_bound(struct cluster_cache *c, const char *name, const char *node, const char *idx,
                      const char *limits)
{
    char buf[2048], ann[512] = "";
    if (idx)
        fmt(ann, sizeof(ann),
            ",'annotations':{'tencent.com/predicate-gpu-idx-0':'%s','tencent.com/predicate-node':'%s',"
            "'tencent.com/gpu-assigned':'true','tencent.com/predicate-time':'1763700000000000000'}",
            idx, node);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t'%s},'spec':{'nodeName':'%s','containers':[{'name':'c',"
        "'resources':{'limits':%s}}]},'status':{'phase':'Running'}}",
        name, ann, node, limits);
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
}

struct fit_out {
    struct fit_result r;
    uint64_t masks[8];
};

static bool fit_on(struct cluster_cache *c, const char *node, const struct pod_info *p, const struct pod_entry *self,
                   enum pack_policy gpu, enum pack_policy nodep, struct fit_out *out)
{
    memset(out, 0, sizeof(*out));
    out->r.masks = out->masks;
    struct alloc_policy pol = {.gpu = gpu, .node = nodep};
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    bool fits = allocator_fit(n, p, self, &pol, &out->r);
    cache_unlock(c);
    assert_int_equal(fits, out->r.fits);
    if (fits)
        assert_string_equal(out->r.reason, "");
    else
        assert_int_equal(out->r.score, 0);
    return fits;
}

static bool binpack(struct cluster_cache *c, const char *node, const struct pod_info *p, struct fit_out *out)
{
    return fit_on(c, node, p, NULL, POLICY_BINPACK, POLICY_BINPACK, out);
}

static void expect_fit(struct cluster_cache *c, const char *node, const char *limits, uint64_t mask, int score)
{
    struct pod_info *p = pod_limits(limits);
    assert_null(p->request_error);
    struct fit_out out;
    if (!binpack(c, node, p, &out))
        fail_msg("%s does not fit on %s: %s", limits, node, out.r.reason);
    assert_int_equal(out.masks[0], mask);
    assert_int_equal(out.r.score, score);
    pod_info_free(p);
}

static void expect_misfit(struct cluster_cache *c, const char *node, const char *limits, bool unresolvable,
                          const char *reason)
{
    struct pod_info *p = pod_limits(limits);
    assert_null(p->request_error);
    struct fit_out out;
    if (binpack(c, node, p, &out))
        fail_msg("%s fits on %s (mask %" PRIx64 ")", limits, node, out.masks[0]);
    assert_string_equal(out.r.reason, reason);
    assert_int_equal(out.r.unresolvable, unresolvable);
    pod_info_free(p);
}

#define VC(cores, mem) "{'tencent.com/vcuda-core':'" #cores "','tencent.com/vcuda-memory':'" #mem "'}"
#define VCW(cores) "{'tencent.com/vcuda-core':'" #cores "'}"
#define MPS(cores, mem) "{'nvidia.com/mps-core':'" #cores "','nvidia.com/mps-memory':'" #mem "'}"

/* ---- shared requests ------------------------------------------------------ */

static void test_shared_fit_empty(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    /* All equal: lowest minor. Score: 50 of 400 cores used. */
    expect_fit(c, "n", VC(50, 10), 0x1, 125);
    /* Exactly the whole GPU as a share. */
    expect_fit(c, "n", VC(99, 40), 0x1, 247);

    struct pod_info *p = pod_limits(VC(50, 10));
    struct fit_out out;
    assert_true(fit_on(c, "n", p, NULL, POLICY_BINPACK, POLICY_SPREAD, &out));
    assert_int_equal(out.r.score, 875);
    pod_info_free(p);
}

static void test_shared_misfit_cores(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    add_bound(c, "a", "n", "0", VC(80, 1));
    add_bound(c, "b", "n", "1", VC(70, 1));
    add_bound(c, "c", "n", "2", VC(90, 1));
    add_bound(c, "d", "n", "3", VC(60, 1));
    expect_misfit(c, "n", VC(50, 10), false,
                  "container \"main\" needs 50 tencent.com/vcuda-core on one GPU; the freest, GPU 3, has 40 free");
    /* 40 is exactly what GPU 3 has. Used: 80+70+90+60+40 of 400. */
    expect_fit(c, "n", VC(40, 10), 0x8, 850);
}

static void test_shared_misfit_memory(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    add_bound(c, "a", "n", "0", VC(30, 35));   /* GPU 0: 70 cores, 5 memory free */
    add_bound(c, "b", "n", "1", VC(10, 30));   /* GPU 1: 90 cores, 10 memory free */
    expect_misfit(c, "n", VC(50, 20), false,
                  "container \"main\" needs 50 tencent.com/vcuda-core and 20 tencent.com/vcuda-memory on one GPU; "
                  "GPU 1 has 90 tencent.com/vcuda-core free but only 10 tencent.com/vcuda-memory, and no GPU has both");
    /* Exactly 10 fits on GPU 1 only. */
    expect_fit(c, "n", VC(50, 10), 0x2, 450);
}

static void test_shared_misfit_mps_memory(void **state)
{
    struct cluster_cache *c = *state;
    add_mps_node(c, "m", 2, 15);
    expect_misfit(c, "m", MPS(50, 20), false,
                  "container \"main\" needs 50 nvidia.com/mps-core and 20 nvidia.com/mps-memory on one GPU; "
                  "GPU 0 has 100 nvidia.com/mps-core free but only 15 nvidia.com/mps-memory, and no GPU has both");
    /* MPS memory is optional. */
    expect_fit(c, "m", "{'nvidia.com/mps-core':'100'}", 0x1, 500);
}

static void test_memory_from_topology(void **state)
{
    struct cluster_cache *c = *state;
    /* Capacity says 50 blocks per GPU, the GPUs' real size is 8 GiB = 32 blocks. */
    add_gpu_node(c, "t", RES_VCUDA_CORE, RES_VCUDA_MEMORY, 2, 50,
                 "{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'minor\\':0,\\'memoryMiB\\':8192},"
                 "{\\'index\\':1,\\'minor\\':1,\\'memoryMiB\\':8192}]}");
    expect_misfit(c, "t", VC(10, 33), false,
                  "container \"main\" needs 10 tencent.com/vcuda-core and 33 tencent.com/vcuda-memory on one GPU; "
                  "GPU 0 has 100 tencent.com/vcuda-core free but only 32 tencent.com/vcuda-memory, and no GPU has both");
    expect_fit(c, "t", VC(10, 32), 0x1, 50);
}

/* ---- exclusive requests --------------------------------------------------- */

static void test_exclusive_100_200(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    add_bound(c, "a", "n", "0", VC(10, 1));
    /* GPU 0 is not completely free; whole GPUs are taken in device order. */
    expect_fit(c, "n", VCW(100), 0x2, 275);
    expect_fit(c, "n", VCW(200), 0x6, 370);
    expect_fit(c, "n", VCW(300), 0xe, 395);
    expect_misfit(c, "n", VCW(400), false,
                  "container \"main\" needs 4 whole GPUs (tencent.com/vcuda-core 400); 3 are completely free "
                  "(GPUs 1,2,3)");
}

static void test_exclusive_800(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n8", 8, 320);
    expect_fit(c, "n8", VCW(800), 0xff, 418);
    expect_misfit(c, "n8", VCW(900), true,
                  "container \"main\" needs 9 whole GPUs (tencent.com/vcuda-core 900); 8 are completely free "
                  "(GPUs 0,1,2,3,4,5,6,7)");

    add_bound(c, "small", "n8", "5", VC(10, 1));
    expect_misfit(c, "n8", VCW(800), false,
                  "container \"main\" needs 8 whole GPUs (tencent.com/vcuda-core 800); 7 are completely free "
                  "(GPUs 0,1,2,3,4,6,7)");
    expect_fit(c, "n8", VCW(700), 0xdf, 406);

    assert_int_equal(cache_delete_pod(c, "t/small"), 0);
    expect_fit(c, "n8", VCW(800), 0xff, 418);
    add_bound(c, "w", "n8", "0,1,2,3,4,5,6", VCW(700));
    expect_misfit(c, "n8", VCW(200), false,
                  "container \"main\" needs 2 whole GPUs (tencent.com/vcuda-core 200); 1 is completely free (GPUs 7)");
    add_bound(c, "x", "n8", "7", VCW(100));
    expect_misfit(c, "n8", VCW(100), false,
                  "container \"main\" needs 1 whole GPUs (tencent.com/vcuda-core 100); 0 are completely free");
    expect_misfit(c, "n8", VC(1, 1), false,
                  "container \"main\" needs 1 tencent.com/vcuda-core on one GPU; the freest, GPU 0, has 0 free");
}

static void test_exclusive_pgpu(void **state)
{
    struct cluster_cache *c = *state;
    add_gpu_node(c, "v", RES_NVIDIA_GPU, NULL, 8, 0, NULL);
    add_bound(c, "r", "v", "0,3", "{'nvidia.com/gpu':'2'}");
    expect_fit(c, "v", "{'nvidia.com/gpu':'2'}", 0x6, 368);   /* 300 x set quality 1 + 600 x 10/340 + 0.1 x utilisation 500 */
    expect_misfit(c, "v", "{'nvidia.com/gpu':'7'}", false,
                  "container \"main\" needs 7 whole GPUs (nvidia.com/gpu 7); 6 are completely free (GPUs 1,2,4,5,6,7)");
    expect_misfit(c, "v", "{'nvidia.com/gpu':'9'}", true,
                  "container \"main\" needs 9 whole GPUs (nvidia.com/gpu 9); 6 are completely free (GPUs 1,2,4,5,6,7)");
}

/* ---- several containers --------------------------------------------------- */

static void test_multi_container_shares_add_up(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    struct pod_info *p = pod_with("[{'name':'a','resources':{'limits':" VC(30, 10) "}},{'name':'side'},"
                                  "{'name':'b','resources':{'limits':" VC(40, 10) "}}]");
    struct fit_out out;
    assert_true(binpack(c, "n", p, &out));
    /* Binpack puts the second share next to the first. */
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.masks[1], 0);
    assert_int_equal(out.masks[2], 0x1);
    assert_int_equal(out.r.score, 350);
    pod_info_free(p);

    /* The two shares together exceed one GPU. */
    add_node(c, "{'metadata':{'name':'one'},'status':{'capacity':{'tencent.com/vcuda-core':'100',"
                "'tencent.com/vcuda-memory':'40'}}}");
    p = pod_with("[{'name':'a','resources':{'limits':" VC(60, 10) "}},"
                 "{'name':'b','resources':{'limits':" VC(50, 10) "}}]");
    assert_false(binpack(c, "one", p, &out));
    assert_string_equal(out.r.reason,
                        "container \"b\" needs 50 tencent.com/vcuda-core on one GPU; the freest, GPU 0, has 40 free");
    assert_false(out.r.unresolvable);
    pod_info_free(p);

    /* ... and on memory. */
    p = pod_with("[{'name':'a','resources':{'limits':" VC(10, 30) "}},"
                 "{'name':'b','resources':{'limits':" VC(10, 20) "}}]");
    assert_false(binpack(c, "one", p, &out));
    assert_string_equal(out.r.reason,
                        "container \"b\" needs 10 tencent.com/vcuda-core and 20 tencent.com/vcuda-memory on one GPU; "
                        "GPU 0 has 90 tencent.com/vcuda-core free but only 10 tencent.com/vcuda-memory, and no GPU has "
                        "both");
    pod_info_free(p);
}

static void test_multi_container_exclusive(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 3, 40);
    struct pod_info *p = pod_with("[{'name':'a','resources':{'limits':" VCW(100) "}},"
                                  "{'name':'b','resources':{'limits':" VCW(200) "}}]");
    struct fit_out out;
    assert_true(binpack(c, "n", p, &out));
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.masks[1], 0x6);
    assert_int_equal(out.r.score, 418);   /* whole GPUs: 300 + 600 x 10/340 + 0.1 x 1000 */
    pod_info_free(p);

    /* A third container finds nothing left. */
    p = pod_with("[{'name':'a','resources':{'limits':" VCW(100) "}},"
                 "{'name':'b','resources':{'limits':" VCW(200) "}},"
                 "{'name':'c','resources':{'limits':" VCW(100) "}}]");
    assert_false(binpack(c, "n", p, &out));
    assert_string_equal(out.r.reason,
                        "container \"c\" needs 1 whole GPUs (tencent.com/vcuda-core 100); 0 are completely free");
    assert_false(out.r.unresolvable);
    pod_info_free(p);

    /* A share taken first makes its GPU unusable for a later exclusive container. */
    p = pod_with("[{'name':'s','resources':{'limits':" VC(10, 1) "}},"
                 "{'name':'x','resources':{'limits':" VCW(300) "}}]");
    assert_false(binpack(c, "n", p, &out));
    assert_string_equal(out.r.reason, "container \"x\" needs 3 whole GPUs (tencent.com/vcuda-core 300); 2 are "
                                      "completely free (GPUs 1,2)");
    pod_info_free(p);
    p = pod_with("[{'name':'s','resources':{'limits':" VC(10, 1) "}},"
                 "{'name':'x','resources':{'limits':" VCW(200) "}}]");
    assert_true(binpack(c, "n", p, &out));
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.masks[1], 0x6);
    pod_info_free(p);

    /* An exclusive container first: a later share cannot use its GPU. */
    add_node(c, "{'metadata':{'name':'two'},'status':{'capacity':{'tencent.com/vcuda-core':'200',"
                "'tencent.com/vcuda-memory':'80'}}}");
    p = pod_with("[{'name':'x','resources':{'limits':" VCW(100) "}},"
                 "{'name':'s','resources':{'limits':" VC(90, 40) "}}]");
    assert_true(binpack(c, "two", p, &out));
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.masks[1], 0x2);
    pod_info_free(p);
}

static void test_mixed_families_on_one_node(void **state)
{
    struct cluster_cache *c = *state;
    /* A node may offer several families; they share the GPUs. */
    add_node(c, "{'metadata':{'name':'both'},'status':{'allocatable':{'tencent.com/vcuda-core':'200',"
                "'tencent.com/vcuda-memory':'80','nvidia.com/gpu':'2'}}}");
    struct pod_info *p = pod_with("[{'name':'a','resources':{'limits':" VC(50, 10) "}},"
                                  "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'1'}}}]");
    struct fit_out out;
    assert_true(binpack(c, "both", p, &out));
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.masks[1], 0x2);
    pod_info_free(p);
}

/* ---- choice of GPU -------------------------------------------------------- */

static void test_binpack_order(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 4, 40);
    add_bound(c, "a", "n", "0", VC(50, 10));   /* 50 cores, 30 memory free */
    add_bound(c, "b", "n", "1", VC(20, 10));   /* 80 cores, 30 memory free */
    add_bound(c, "c", "n", "2", VC(50, 20));   /* 50 cores, 20 memory free */
    /* GPU 3: 100 cores, 40 memory free. */

    /* Fewest free cores (0 and 2 tie), then fewest free memory: GPU 2. */
    expect_fit(c, "n", VC(30, 10), 0x4, 375);
    /* GPU 2 lacks the memory: GPU 0. */
    expect_fit(c, "n", VC(30, 25), 0x1, 375);
    /* Neither has the cores: GPU 1 (fewer free than GPU 3). */
    expect_fit(c, "n", VC(60, 10), 0x2, 450);
    /* Only GPU 3 has 90. */
    expect_fit(c, "n", VC(90, 10), 0x8, 525);

    /* Spread: the most free cores, then the most free memory. */
    struct pod_info *p = pod_limits(VC(30, 10));
    struct fit_out out;
    assert_true(fit_on(c, "n", p, NULL, POLICY_SPREAD, POLICY_BINPACK, &out));
    assert_int_equal(out.masks[0], 0x8);
    pod_info_free(p);
}

static void test_binpack_memory_tie_then_minor(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 3, 40);
    add_bound(c, "a", "n", "0", VC(50, 20));
    add_bound(c, "b", "n", "1", VC(50, 10));
    add_bound(c, "c", "n", "2", VC(50, 20));
    /* Equal cores; GPUs 0 and 2 have less memory free than GPU 1; lowest minor wins. */
    expect_fit(c, "n", VC(10, 5), 0x1, 533);
}

/* GPU-Manager's third key is the number of processes on the GPU; the
 * extender's stand-in is the number of pods charged there. Equal free cores
 * and memory: the GPU with fewer pods wins although its minor is higher. */
static void test_binpack_fewer_pods_then_minor(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 3, 40);
    add_bound(c, "a1", "n", "0", VC(25, 10)); /* GPU 0: two pods, 50 cores, 20 memory used */
    add_bound(c, "a2", "n", "0", VC(25, 10));
    add_bound(c, "b", "n", "1", VC(50, 20)); /* GPU 1: one pod, the same amounts */
    add_bound(c, "c1", "n", "2", VC(25, 10)); /* GPU 2: two pods again */
    add_bound(c, "c2", "n", "2", VC(25, 10));
    expect_fit(c, "n", VC(10, 5), 0x2, 533);
    /* Free cores still come first: GPU 1 with more room loses to a fuller one. */
    add_bound(c, "d", "n", "0", VC(10, 1));
    struct pod_info *p = pod_limits(VC(10, 5));
    struct fit_out out;
    assert_true(binpack(c, "n", p, &out));
    assert_int_equal(out.masks[0], 0x1);
    pod_info_free(p);
}

static void test_spread_mps(void **state)
{
    struct cluster_cache *c = *state;
    add_mps_node(c, "m", 4, 16);
    add_bound(c, "a", "m", "0", MPS(50, 4));    /* 50 free, 12 memory */
    add_bound(c, "b", "m", "1", MPS(20, 2));    /* 80 free, 14 memory */
    add_bound(c, "c", "m", "2", MPS(20, 10));   /* 80 free, 6 memory */
    add_bound(c, "d", "m", "3", MPS(50, 14));   /* 50 free, 2 memory */

    struct pod_info *p = pod_limits(MPS(10, 2));
    struct fit_out out;
    /* Spread: most free cores (1 and 2), then most free memory: GPU 1. */
    assert_true(fit_on(c, "m", p, NULL, POLICY_SPREAD, POLICY_SPREAD, &out));
    assert_int_equal(out.masks[0], 0x2);
    assert_int_equal(out.r.score, FIT_SCORE_MAX - 375);
    /* Binpack: fewest free cores (0 and 3), then fewest free memory: GPU 3. */
    assert_true(fit_on(c, "m", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.masks[0], 0x8);
    assert_int_equal(out.r.score, 375);
    pod_info_free(p);

    /* Spread with a full tie: lowest minor. */
    add_mps_node(c, "e", 3, 16);
    p = pod_limits(MPS(10, 2));
    assert_true(fit_on(c, "e", p, NULL, POLICY_SPREAD, POLICY_BINPACK, &out));
    assert_int_equal(out.masks[0], 0x1);
    pod_info_free(p);
}

static const char minor_topology[] =
    "{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'minor\\':3,\\'memoryMiB\\':10240},"
    "{\\'index\\':1,\\'minor\\':5,\\'memoryMiB\\':10240},{\\'index\\':2,\\'minor\\':0,\\'memoryMiB\\':10240}]}";

/* design.md section 5 with real link tables: an empty DGX-1 gives 4 GPUs as a
 * fully NVLinked quad; with GPU 0 busy a pair takes an NV2 link; a node whose
 * quads are all broken scores below an intact one. */
static void test_topology_sets(void **state)
{
    struct cluster_cache *c = *state;
    add_gpu_node(c, "dgx", RES_NVIDIA_GPU, NULL, 8, 0, SUPPORT_DGX1_TOPOLOGY);
    struct pod_info *quad = pod_limits("{'nvidia.com/gpu':'4'}");
    struct fit_out out;
    assert_true(binpack(c, "dgx", quad, &out));
    assert_true(out.masks[0] == 0x0f || out.masks[0] == 0xf0);
    int intact = out.r.score;
    assert_int_equal(out.r.set_score, out.r.set_best);

    add_bound(c, "busy", "dgx", "0", "{'nvidia.com/gpu':'1'}");
    struct pod_info *pair = pod_limits("{'nvidia.com/gpu':'2'}");
    assert_true(binpack(c, "dgx", pair, &out));
    /* The NV2 pairs without GPU 0: 1-2, 1-5, 2-3, 4-7, 5-6, 6-7. */
    assert_true(out.masks[0] == 0x06 || out.masks[0] == 0x22 || out.masks[0] == 0x0c || out.masks[0] == 0x90 ||
                out.masks[0] == 0x60 || out.masks[0] == 0xc0);
    assert_int_equal(out.r.set_score, out.r.set_best);

    /* One busy GPU in each quad: no NVLinked quad is left. */
    add_gpu_node(c, "broken", RES_NVIDIA_GPU, NULL, 8, 0, SUPPORT_DGX1_TOPOLOGY);
    add_bound(c, "b1", "broken", "0", "{'nvidia.com/gpu':'1'}");
    add_bound(c, "b2", "broken", "4", "{'nvidia.com/gpu':'1'}");
    assert_true(binpack(c, "broken", quad, &out));
    assert_true(out.r.set_score < out.r.set_best);
    assert_true(out.r.score < intact);
    int broken = out.r.score;

    /* A full 4-GPU node without topology (all SYS) ranks below even the
     * broken DGX-1, though binpack alone would prefer it. */
    add_gpu_node(c, "plain", RES_NVIDIA_GPU, NULL, 4, 0, NULL);
    assert_true(binpack(c, "plain", quad, &out));
    assert_true(out.r.score < broken);

    /* One whole GPU has no locality to gain: the node policy alone. */
    struct pod_info *one = pod_limits("{'nvidia.com/gpu':'1'}");
    assert_true(binpack(c, "dgx", one, &out));
    assert_int_equal(out.r.score, 250);   /* binpack: 2 of 8 GPUs busy after placing it */
    pod_info_free(one);
    pod_info_free(pair);
    pod_info_free(quad);
}

static void test_minors_differ_from_indices(void **state)
{
    struct cluster_cache *c = *state;
    add_gpu_node(c, "mm", RES_VCUDA_CORE, RES_VCUDA_MEMORY, 3, 40, minor_topology);
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, "mm");
    assert_int_equal(n->gpu_count, 3);
    assert_int_equal(n->gpus[0].minor, 3);
    assert_int_equal(n->gpus[1].minor, 5);
    assert_int_equal(n->gpus[2].minor, 0);
    assert_int_equal(n->gpus[0].mem_total[POOL_VCUDA], 40);   /* 10240 MiB / 256 */
    assert_int_equal(node_slot_of_minor(n, 5), 1);
    assert_int_equal(node_slot_of_minor(n, 1), -1);
    cache_unlock(c);

    /* All idle: the lowest minor is slot 2 (/dev/nvidia0). */
    expect_fit(c, "mm", VC(10, 1), 0x4, 33);

    /* Annotations name minors: "5" is slot 1. */
    add_bound(c, "a", "mm", "5", VC(70, 10));
    cache_read_lock(c);
    n = cache_find_node(c, "mm");
    assert_int_equal(n->gpus[1].core_used, 70);
    assert_int_equal(n->gpus[0].core_used, 0);
    assert_int_equal(n->gpus[2].core_used, 0);
    cache_unlock(c);
    expect_fit(c, "mm", VC(30, 1), 0x2, 333);
    expect_misfit(c, "mm", VCW(300), false,
                  "container \"main\" needs 3 whole GPUs (tencent.com/vcuda-core 300); 2 are completely free "
                  "(GPUs 0,2)");
    add_bound(c, "b", "mm", "3", VC(80, 10));
    add_bound(c, "d", "mm", "0", VC(90, 10));
    expect_misfit(c, "mm", VC(40, 1), false,
                  "container \"main\" needs 40 tencent.com/vcuda-core on one GPU; the freest, GPU 1 (/dev/nvidia5), "
                  "has 30 free");
    expect_misfit(c, "mm", VC(5, 35), false,
                  "container \"main\" needs 5 tencent.com/vcuda-core and 35 tencent.com/vcuda-memory on one GPU; "
                  "GPU 0 (/dev/nvidia3) has 20 tencent.com/vcuda-core free but only 30 tencent.com/vcuda-memory, and "
                  "no GPU has both");
}

/* ---- usage without GPU assignment ----------------------------------------- */

static void test_unattributed_blocks_share(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 1, 40);
    add_bound(c, "legacy", "n", NULL, VC(60, 10));
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, "n");
    assert_int_equal(n->unattributed.cores, 60);
    assert_int_equal(n->unattributed.mem[POOL_VCUDA], 10);
    assert_int_equal(n->unattributed.pods, 1);
    assert_int_equal(n->gpus[0].core_used, 0);
    cache_unlock(c);

    /* Per GPU the share would fit; only the unattributed usage blocks it. */
    expect_misfit(c, "n", VC(50, 10), false,
                  "1 pod without GPU assignment uses 60 cores, 10 vcuda-memory and 0 mps-memory on this node; with "
                  "this pod placed only 50 cores, 30 vcuda-memory and 0 mps-memory would be left for them");
    expect_misfit(c, "n", VC(10, 31), false,
                  "1 pod without GPU assignment uses 60 cores, 10 vcuda-memory and 0 mps-memory on this node; with "
                  "this pod placed only 90 cores, 9 vcuda-memory and 0 mps-memory would be left for them");
    /* What is left is exactly enough. Score: 60 + 40 of 100. */
    expect_fit(c, "n", VC(40, 30), 0x1, 1000);

    add_bound(c, "legacy2", "n", NULL, VC(5, 1));
    expect_misfit(c, "n", VC(40, 10), false,
                  "2 pods without GPU assignment use 65 cores, 11 vcuda-memory and 0 mps-memory on this node; with "
                  "this pod placed only 60 cores, 30 vcuda-memory and 0 mps-memory would be left for them");
}

static void test_unattributed_blocks_exclusive(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    add_bound(c, "legacy", "n", NULL, VC(20, 5));
    expect_misfit(c, "n", VCW(200), false,
                  "container \"main\" needs 2 whole GPUs (tencent.com/vcuda-core 200); 2 are completely free (GPUs 0,1), "
                  "and 1 of them is held for 20 cores used by pods without GPU assignment");
    /* One GPU stays for the unattributed pod. Score: 100 + 20 of 200. */
    expect_fit(c, "n", VCW(100), 0x1, 600);

    /* No index annotations, or the wrong number of them, are unattributed too. */
    add_vcuda_node(c, "n3", 3, 40);
    add_bound(c, "elsewhere", "n3", NULL, VCW(100));
    expect_misfit(c, "n3", VCW(300), false,
                  "container \"main\" needs 3 whole GPUs (tencent.com/vcuda-core 300); 3 are completely free "
                  "(GPUs 0,1,2), and 1 of them is held for 100 cores used by pods without GPU assignment");
    add_bound(c, "wrong-count", "n3", "1", VCW(200));
    expect_misfit(c, "n3", VCW(100), false,
                  "container \"main\" needs 1 whole GPUs (tencent.com/vcuda-core 100); 3 are completely free "
                  "(GPUs 0,1,2), and 3 of them are held for 300 cores used by pods without GPU assignment");
}

/* ---- nodes that cannot take the pod at all -------------------------------- */

static void test_node_without_family(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "v", 2, 40);
    add_mps_node(c, "m", 2, 16);
    expect_misfit(c, "v", MPS(10, 1), true,
                  "node has no nvidia.com/mps-core capacity (container \"main\" asks for it)");
    expect_misfit(c, "v", "{'nvidia.com/gpu':'1'}", true,
                  "node has no nvidia.com/gpu capacity (container \"main\" asks for it)");
    expect_misfit(c, "m", VC(10, 1), true,
                  "node has no tencent.com/vcuda-core capacity (container \"main\" asks for it)");

    /* The second container names the missing family. */
    struct pod_info *p = pod_with("[{'name':'ok','resources':{'limits':" VC(10, 1) "}},"
                                  "{'name':'other','resources':{'limits':{'nvidia.com/gpu':'1'}}}]");
    struct fit_out out;
    assert_false(binpack(c, "v", p, &out));
    assert_true(out.r.unresolvable);
    assert_string_equal(out.r.reason, "node has no nvidia.com/gpu capacity (container \"other\" asks for it)");
    pod_info_free(p);
}

static void test_node_without_gpus(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'metadata':{'name':'cpu'},'status':{'allocatable':{'cpu':'32'}}}");
    expect_misfit(c, "cpu", VC(10, 1), true,
                  "node advertises no GPUs (no tencent.com/vcuda-core, nvidia.com/mps-core or nvidia.com/gpu capacity "
                  "and no gpu-admission.io/topology annotation)");
    /* 50 vcuda-core is less than one GPU: still none. */
    add_node(c, "{'metadata':{'name':'half'},'status':{'allocatable':{'tencent.com/vcuda-core':'50'}}}");
    expect_misfit(c, "half", VC(10, 1), true,
                  "node advertises no GPUs (no tencent.com/vcuda-core, nvidia.com/mps-core or nvidia.com/gpu capacity "
                  "and no gpu-admission.io/topology annotation)");
}

static void test_placeholder_node(void **state)
{
    struct cluster_cache *c = *state;
    /* A pod bound to a node the cache has not seen makes a placeholder. */
    add_bound(c, "early", "ghost", "0", VC(10, 1));
    expect_misfit(c, "ghost", VC(10, 1), false, "node is not in the extender's cache");
}

/* ---- the pod's own charge ------------------------------------------------- */

static void test_self_charge_excluded(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 1, 40);
    add_vcuda_node(c, "o", 1, 40);
    char buf[1024];
    int64_t now = clock_realtime_ns();
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'me','namespace':'t','annotations':{'gpu-admission.io/node':'n',"
        "'gpu-admission.io/time':'%" PRId64 "','gpu-admission.io/gpu-idx-0':'0'}},"
        "'spec':{'containers':[{'name':'main','resources':{'limits':" VC(60, 30) "}}]}}",
        now);
    assert_int_equal(cache_apply_pod(c, pod_of(buf), now), 0);
    cache_read_lock(c);
    const struct pod_entry *self = cache_find_pod(c, "t/me");
    assert_non_null(self);
    assert_non_null(self->node);
    assert_false(self->bound);
    assert_int_equal(cache_find_node(c, "n")->gpus[0].core_used, 60);
    cache_unlock(c);

    struct pod_info *p = pod_limits(VC(60, 30));
    struct fit_out out;
    /* Counted against itself it does not fit... */
    assert_false(fit_on(c, "n", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_string_equal(out.r.reason,
                        "container \"main\" needs 60 tencent.com/vcuda-core on one GPU; the freest, GPU 0, has 40 free");
    /* ...with its own charge excluded it does, and the score ignores the old charge. */
    assert_true(fit_on(c, "n", p, self, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.masks[0], 0x1);
    assert_int_equal(out.r.score, 600);
    /* A charge on another node is not subtracted there. */
    assert_true(fit_on(c, "o", p, self, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.r.score, 600);
    pod_info_free(p);

    /* Another pod (no entry of its own) is still blocked by it. */
    p = pod_limits(VC(50, 5));
    assert_false(fit_on(c, "n", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_string_equal(out.r.reason,
                        "container \"main\" needs 50 tencent.com/vcuda-core on one GPU; the freest, GPU 0, has 40 free");
    pod_info_free(p);
}

static void test_self_unattributed_excluded(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 1, 40);
    add_bound(c, "legacy", "n", NULL, VC(70, 10));
    struct pod_info *p = pod_limits(VC(70, 10));
    struct fit_out out;
    assert_false(fit_on(c, "n", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_string_equal(out.r.reason,
                        "1 pod without GPU assignment uses 70 cores, 10 vcuda-memory and 0 mps-memory on this node; with "
                        "this pod placed only 30 cores, 30 vcuda-memory and 0 mps-memory would be left for them");
    cache_read_lock(c);
    const struct pod_entry *self = cache_find_pod(c, "t/legacy");
    cache_unlock(c);
    assert_non_null(self);
    assert_true(fit_on(c, "n", p, self, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.r.score, 700);
    pod_info_free(p);
}

/* ---- node scores ---------------------------------------------------------- */

static void test_node_score_order(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "busy", 2, 40);
    add_vcuda_node(c, "idle", 2, 40);
    add_bound(c, "a", "busy", "0", VC(50, 10));
    struct pod_info *p = pod_limits(VC(10, 1));
    struct fit_out busy, idle;

    assert_true(fit_on(c, "busy", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &busy));
    assert_true(fit_on(c, "idle", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &idle));
    assert_int_equal(busy.r.score, 300);
    assert_int_equal(idle.r.score, 50);
    assert_true(busy.r.score > idle.r.score);

    assert_true(fit_on(c, "busy", p, NULL, POLICY_BINPACK, POLICY_SPREAD, &busy));
    assert_true(fit_on(c, "idle", p, NULL, POLICY_BINPACK, POLICY_SPREAD, &idle));
    assert_int_equal(busy.r.score, 700);
    assert_int_equal(idle.r.score, 950);
    assert_true(idle.r.score > busy.r.score);
    pod_info_free(p);

    /* Unattributed usage counts towards utilisation. */
    add_vcuda_node(c, "legacy", 2, 40);
    add_bound(c, "l", "legacy", NULL, VC(50, 10));
    p = pod_limits(VC(10, 1));
    assert_true(fit_on(c, "legacy", p, NULL, POLICY_BINPACK, POLICY_BINPACK, &busy));
    assert_int_equal(busy.r.score, 300);
    pod_info_free(p);
}

static void test_non_gpu_and_helpers(void **state)
{
    struct cluster_cache *c = *state;
    add_vcuda_node(c, "n", 2, 40);
    /* A pod without GPU containers fits with no GPUs chosen. */
    struct pod_info *p = pod_with("[{'name':'a','resources':{'limits':{'cpu':'1'}}}]");
    struct fit_out out;
    assert_true(binpack(c, "n", p, &out));
    assert_int_equal(out.masks[0], 0);
    assert_int_equal(out.r.score, 0);
    assert_false(pod_has_binpack_only_share(p));
    pod_info_free(p);

    p = pod_with("[{'name':'a','resources':{'limits':" VCW(100) "}},{'name':'b','resources':{'limits':"
                 MPS(10, 1) "}}]");
    assert_false(pod_has_binpack_only_share(p));
    pod_info_free(p);
    p = pod_with("[{'name':'a','resources':{'limits':" VCW(100) "}},{'name':'b','resources':{'limits':"
                 VC(10, 1) "}}]");
    assert_true(pod_has_binpack_only_share(p));
    pod_info_free(p);

    enum pack_policy pol = POLICY_BINPACK;
    assert_int_equal(pack_policy_parse("spread", &pol), 0);
    assert_int_equal(pol, POLICY_SPREAD);
    assert_int_equal(pack_policy_parse("binpack", &pol), 0);
    assert_int_equal(pol, POLICY_BINPACK);
    assert_int_equal(pack_policy_parse("Spread", &pol), -1);
    assert_int_equal(pack_policy_parse("", &pol), -1);
    assert_string_equal(pack_policy_name(POLICY_SPREAD), "spread");
    assert_string_equal(pack_policy_name(POLICY_BINPACK), "binpack");
}

#define T(f) cmocka_unit_test_setup_teardown(f, cache_setup, cache_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_shared_fit_empty),
        T(test_shared_misfit_cores),
        T(test_shared_misfit_memory),
        T(test_shared_misfit_mps_memory),
        T(test_memory_from_topology),
        T(test_exclusive_100_200),
        T(test_exclusive_800),
        T(test_exclusive_pgpu),
        T(test_multi_container_shares_add_up),
        T(test_multi_container_exclusive),
        T(test_mixed_families_on_one_node),
        T(test_binpack_order),
        T(test_binpack_memory_tie_then_minor),
        T(test_binpack_fewer_pods_then_minor),
        T(test_spread_mps),
        T(test_minors_differ_from_indices),
        T(test_unattributed_blocks_share),
        T(test_unattributed_blocks_exclusive),
        T(test_node_without_family),
        T(test_node_without_gpus),
        T(test_placeholder_node),
        T(test_self_charge_excluded),
        T(test_self_unattributed_excluded),
        T(test_node_score_order),
        T(test_topology_sets),
        T(test_non_gpu_and_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

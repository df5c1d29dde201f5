/*
 * test_hamiquota.c - unit tests for admission/hamiquota.c (docs/hami.md,
 * "ResourceQuota on gpumem and gpucores"): which ResourceQuotas are HAMi's
 * (limits.nvidia.com/gpumem and gpucores; scoped ones and others left
 * out), malformed ones refused with their reason, the set's add, replace
 * and remove, the fit rule (every quota of the namespace, so the smallest
 * counts; an explicit 0 admits no vGPU; memoryFactor; the exact reasons),
 * and what a namespace uses and a pod asks, read from the cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admission/hamiquota.h"
#include "lib/clock.h"
#include "tests/unit/support.h"

#define UUID0 "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
#define UUID1 "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
#define DEV(uuid, index, mem) uuid ",10," #mem ",100,NVIDIA-Tesla V100-PCIE-32GB,0,true," #index ",hami-core:"

/* Parse a ResourceQuota fixture (single quotes). */
static int parse(const char *fixture, struct hami_rq *out, char **err)
{
    cJSON *obj = json_of(fixture);
    int rc = hami_rq_parse(obj, out, err);
    cJSON_Delete(obj);
    return rc;
}

/* A parsed HAMi quota (must be HAMi's), on the heap's terms of the set. */
static struct hami_rq rq(const char *ns, const char *name, const char *hard)
{
    char buf[1024];
    fmt(buf, sizeof(buf), "{'metadata':{'name':'%s','namespace':'%s'},'spec':{'hard':%s}}", name, ns, hard);
    struct hami_rq q;
    char *err = NULL;
    assert_int_equal(parse(buf, &q, &err), 1);
    assert_null(err);
    return q;
}

static void put(struct hami_quota_set *s, const char *ns, const char *name, const char *hard)
{
    struct hami_rq q = rq(ns, name, hard);
    assert_int_equal(hami_quota_set_put(s, &q), 0);
}

/* ---- parsing ------------------------------------------------------------------ */

static void test_parse_hami_keys(void **state)
{
    (void)state;
    struct hami_rq q;
    char *err = NULL;
    assert_int_equal(parse("{'metadata':{'name':'gpu-quota','namespace':'team-a'},'spec':{'hard':{"
                           "'limits.nvidia.com/gpumem':'10Ki','limits.nvidia.com/gpucores':'300','limits.cpu':'4',"
                           "'requests.nvidia.com/gpumem':'1'}}}",
                           &q, &err),
                     1);
    assert_null(err);
    assert_string_equal(q.ns, "team-a");
    assert_string_equal(q.name, "gpu-quota");
    assert_true(q.has_memory && q.has_cores);
    assert_int_equal(q.memory, 10240);
    assert_int_equal(q.cores, 300);
    hami_rq_clear(&q);
    /* One key alone. */
    assert_int_equal(
        parse("{'metadata':{'name':'m','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpucores':'0'}}}", &q, &err),
        1);
    assert_true(q.has_cores && !q.has_memory);
    assert_int_equal(q.cores, 0);
    hami_rq_clear(&q);
}

static void test_parse_not_hamis(void **state)
{
    (void)state;
    struct hami_rq q;
    char *err = NULL;
    /* Neither key (requests.* is not what HAMi reads): not HAMi's, quietly. */
    assert_int_equal(parse("{'metadata':{'name':'c','namespace':'n'},'spec':{'hard':{'limits.cpu':'4',"
                           "'requests.nvidia.com/gpumem':'100'}}}",
                           &q, &err),
                     0);
    assert_null(err);
    assert_int_equal(parse("{'metadata':{'name':'c','namespace':'n'}}", &q, &err), 0);
    assert_null(err);
    /* Scoped, by scopes or by a selector: left to Kubernetes, with a reason. */
    assert_int_equal(parse("{'metadata':{'name':'s','namespace':'n'},'spec':{'scopes':['BestEffort'],"
                           "'hard':{'limits.nvidia.com/gpumem':'1'}}}",
                           &q, &err),
                     0);
    assert_non_null(err);
    assert_non_null(strstr(err, "n/s is scoped"));
    free(err);
    err = NULL;
    assert_int_equal(parse("{'metadata':{'name':'s','namespace':'n'},'spec':{'scopeSelector':{'matchExpressions':"
                           "[{'scopeName':'PriorityClass','operator':'In','values':['high']}]},"
                           "'hard':{'limits.nvidia.com/gpumem':'1'}}}",
                           &q, &err),
                     0);
    free(err);
    err = NULL;
    /* Empty scopes are no scope. */
    assert_int_equal(parse("{'metadata':{'name':'e','namespace':'n'},'spec':{'scopes':[],'scopeSelector':{},"
                           "'hard':{'limits.nvidia.com/gpumem':'1'}}}",
                           &q, &err),
                     1);
    hami_rq_clear(&q);
}

static void expect_malformed(const char *fixture, const char *words)
{
    struct hami_rq q;
    char *err = NULL;
    assert_int_equal(parse(fixture, &q, &err), -1);
    assert_non_null(err);
    if (!strstr(err, words))
        fail_msg("reason \"%s\" lacks \"%s\"", err, words);
    free(err);
    assert_null(q.ns);
}

static void test_parse_malformed(void **state)
{
    (void)state;
    expect_malformed("{'metadata':{'namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':'1'}}}",
                     "without metadata.name");
    expect_malformed("{'metadata':{'name':'x'},'spec':{'hard':{'limits.nvidia.com/gpumem':'1'}}}",
                     "metadata.namespace");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':'ten'}}}",
                     "ResourceQuota n/x: spec.hard[\"limits.nvidia.com/gpumem\"] = \"ten\"");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':'1.5'}}}",
                     "1.5");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpucores':'-1'}}}",
                     "gpucores");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':10}}}",
                     "is not a quantity string");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':'2Ei'}}}",
                     "gpumem");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpumem':'2Pi'}}}",
                     "is over 1099511627776");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':{'limits.nvidia.com/gpucores':'2G'}}}",
                     "is over 1000000000");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':{'hard':['a']}}", "spec.hard is not an object");
    expect_malformed("{'metadata':{'name':'x','namespace':'n'},'spec':3}", "spec is not an object");
}

/* ---- the set -------------------------------------------------------------------- */

static void test_set_put_replace_remove(void **state)
{
    (void)state;
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    put(&s, "a", "q1", "{'limits.nvidia.com/gpumem':'100'}");
    put(&s, "a", "q2", "{'limits.nvidia.com/gpumem':'200'}");
    put(&s, "b", "q1", "{'limits.nvidia.com/gpucores':'50'}");
    assert_int_equal(s.count, 3);
    put(&s, "a", "q1", "{'limits.nvidia.com/gpumem':'150'}"); /* same object, new limit */
    assert_int_equal(s.count, 3);
    assert_true(hami_quota_binds(&s, "a") && hami_quota_binds(&s, "b") && !hami_quota_binds(&s, "c"));
    hami_quota_set_remove(&s, "b", "q1");
    hami_quota_set_remove(&s, "b", "absent");
    assert_false(hami_quota_binds(&s, "b"));
    struct hami_rq items[2] = {rq("c", "x", "{'limits.nvidia.com/gpumem':'1'}"),
                               rq("c", "y", "{'limits.nvidia.com/gpumem':'2'}")};
    assert_int_equal(hami_quota_set_replace(&s, items, 2), 0);
    assert_int_equal(s.count, 2);
    assert_false(hami_quota_binds(&s, "a"));
    assert_true(hami_quota_binds(&s, "c"));
    hami_quota_set_free(&s);
    assert_false(hami_quota_binds(NULL, "c"));
}

/* A flood of quotas is held up to the bound, no further. */
static void test_set_bounded(void **state)
{
    (void)state;
    size_t n = HAMI_QUOTA_MAX_OBJECTS + 1;
    struct hami_rq *items = calloc(n, sizeof(*items));
    assert_non_null(items);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "q%zu", i);
        items[i] = rq("flood", name, "{'limits.nvidia.com/gpumem':'1'}");
    }
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    assert_int_equal(hami_quota_set_replace(&s, items, n), -1);
    assert_int_equal(s.count, HAMI_QUOTA_MAX_OBJECTS);
    struct hami_rq more = rq("flood", "more", "{'limits.nvidia.com/gpumem':'1'}");
    assert_int_equal(hami_quota_set_put(&s, &more), -1);
    assert_null(more.ns);
    struct hami_rq again = rq("flood", "q0", "{'limits.nvidia.com/gpumem':'2'}"); /* a change still applies */
    assert_int_equal(hami_quota_set_put(&s, &again), 0);
    free(items);
    hami_quota_set_free(&s);
}

/* ---- the rule -------------------------------------------------------------------- */

static bool check(const struct hami_quota_set *s, const char *ns, int factor, int64_t used_mem, int64_t used_cores,
                  int64_t mem, int64_t cores, char *reason)
{
    struct hami_quota_use used = {used_mem, used_cores}, asked = {mem, cores};
    return hami_quota_check(s, ns, factor, &used, &asked, reason, 512);
}

static void test_rule_smallest_counts(void **state)
{
    (void)state;
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    put(&s, "team-a", "roomy", "{'limits.nvidia.com/gpumem':'40960'}");
    put(&s, "team-a", "gpu-quota", "{'limits.nvidia.com/gpumem':'10240','limits.nvidia.com/gpucores':'200'}");
    char reason[512] = "";
    assert_true(check(&s, "team-a", 1, 8192, 0, 2048, 50, reason)); /* exactly at the limit */
    assert_false(check(&s, "team-a", 1, 8192, 0, 4096, 50, reason));
    assert_string_equal(reason, "namespace team-a quota \"gpu-quota\" limits.nvidia.com/gpumem: 8192 used + 4096 "
                                "asked > 10240");
    assert_false(check(&s, "team-a", 1, 0, 180, 1000, 30, reason));
    assert_string_equal(reason, "namespace team-a quota \"gpu-quota\" limits.nvidia.com/gpucores: 180 used + 30 "
                                "asked > 200");
    /* Another namespace, or nothing asked: no quota applies. */
    assert_true(check(&s, "team-b", 1, 0, 0, 1 << 30, 100, reason));
    assert_true(check(&s, "team-a", 1, 1 << 30, 1000, 0, 0, reason));
    /* Without the smaller one, the larger counts. */
    hami_quota_set_remove(&s, "team-a", "gpu-quota");
    assert_true(check(&s, "team-a", 1, 8192, 0, 4096, 50, reason));
    assert_false(check(&s, "team-a", 1, 40000, 0, 4096, 50, reason));
    assert_non_null(strstr(reason, "quota \"roomy\""));
    hami_quota_set_free(&s);
}

static void test_rule_explicit_zero_blocks(void **state)
{
    (void)state;
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    put(&s, "z", "none", "{'limits.nvidia.com/gpucores':'0'}");
    char reason[512] = "";
    /* Even a vGPU that asks 0 cores: the namespace may have none. */
    assert_false(check(&s, "z", 1, 0, 0, 1024, 0, reason));
    assert_string_equal(reason,
                        "namespace z quota \"none\" limits.nvidia.com/gpucores: 0 admits no HAMi vGPU (0 asked)");
    assert_true(check(&s, "z", 1, 0, 0, 0, 0, reason)); /* no vGPU asked: nothing to refuse */
    hami_quota_set_free(&s);
}

static void test_rule_memory_factor_and_saturation(void **state)
{
    (void)state;
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    put(&s, "f", "q", "{'limits.nvidia.com/gpumem':'10'}"); /* 10 units of 1024 MiB */
    char reason[512] = "";
    assert_true(check(&s, "f", 1024, 8192, 0, 2048, 0, reason));
    assert_false(check(&s, "f", 1024, 8192, 0, 2049, 0, reason));
    assert_string_equal(reason, "namespace f quota \"q\" limits.nvidia.com/gpumem: 8192 used + 2049 asked > 10240 "
                                "(MiB: 10 x memoryFactor 1024)");
    /* Sums that would overflow saturate and refuse. */
    assert_false(check(&s, "f", 1, INT64_MAX, 0, INT64_MAX, 0, reason));
    /* A short buffer is cut, not overrun. */
    struct hami_quota_use used = {0, 0}, asked = {1 << 20, 0};
    char tiny[8];
    assert_false(hami_quota_check(&s, "f", 1, &used, &asked, tiny, sizeof(tiny)));
    assert_string_equal(tiny, "namespa");
    hami_quota_set_free(&s);
}

/* ---- use and ask, from the cache ------------------------------------------------- */

static int setup(void **state)
{
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
    return cache_setup(state);
}

static void add_vgpu_pod(struct cluster_cache *c, const char *ns, const char *name, const char *allocated)
{
    char buf[2048];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'%s','annotations':{'hami.io/vgpu-devices-allocated':'%s',"
        "'hami.io/vgpu-node':'h'}},'spec':{'nodeName':'h','containers':[{'name':'c','resources':{'limits':"
        "{'nvidia.com/gpu':1,'nvidia.com/gpumem':1000,'nvidia.com/gpucores':10}}}]},'status':{'phase':'Running'}}",
        name, ns, allocated);
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
}

static void test_used_and_asked(void **state)
{
    struct cluster_cache *c = *state;
    add_node(
        c, "{'kind':'Node','metadata':{'name':'h','annotations':{'hami.io/node-nvidia-register':'" DEV(UUID0, 0, 16384)
               DEV(UUID1, 1, 32768) "'}},'status':{'allocatable':{'cpu':'8','nvidia.com/gpu':'20'}}}");
    add_vgpu_pod(c, "t", "a", UUID0 ",NVIDIA,1000,10:;");
    add_vgpu_pod(c, "t", "b", UUID1 ",NVIDIA,1000,10:;");
    add_vgpu_pod(c, "u", "other", UUID1 ",NVIDIA,1000,10:;");
    struct hami_quota_use used;
    hami_quota_used(c, "t", NULL, 0, &used);
    assert_int_equal(used.memory_mib, 2000);
    assert_int_equal(used.cores, 20);
    const struct pod_entry *self = cache_find_pod(c, "t/a");
    assert_non_null(self);
    hami_quota_used(c, "t", &self, 1, &used); /* the pod's own charge is not counted */
    assert_int_equal(used.memory_mib, 1000);
    hami_quota_used(c, "none", NULL, 0, &used);
    assert_int_equal(used.memory_mib, 0);

    /* Asked: per chosen device its share; a percentage takes that device's memory. */
    struct pod_info *p = pod_of("{'metadata':{'name':'new','namespace':'t'},'spec':{'containers':["
                                "{'name':'m','resources':{'limits':{'nvidia.com/gpu':2,'nvidia.com/gpumem-percentage':"
                                "50,'nvidia.com/gpucores':30}}}]}}");
    const struct node_state *n = cache_find_node(c, "h");
    uint64_t masks[1] = {3};
    struct hami_quota_use asked;
    hami_quota_asked(p, n, masks, &asked);
    assert_int_equal(asked.memory_mib, 8192 + 16384);
    assert_int_equal(asked.cores, 60);
    masks[0] = 2;
    hami_quota_asked(p, n, masks, &asked);
    assert_int_equal(asked.memory_mib, 16384);
    hami_quota_asked(p, n, NULL, &asked); /* no devices chosen */
    assert_int_equal(asked.memory_mib, 0);
    pod_info_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_hami_keys),
        cmocka_unit_test(test_parse_not_hamis),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_set_put_replace_remove),
        cmocka_unit_test(test_set_bounded),
        cmocka_unit_test(test_rule_smallest_counts),
        cmocka_unit_test(test_rule_explicit_zero_blocks),
        cmocka_unit_test(test_rule_memory_factor_and_saturation),
        cmocka_unit_test_setup_teardown(test_used_and_asked, setup, cache_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_hami_topology.c - unit tests for HAMi's GPU pair scores
 * (hami.io/node-nvidia-score, cluster/hami_topology.c): the parser on
 * hostile input, HAMi's topology-aware pick, and its use by the HAMi fit
 * (extender/decide/hami_fit.c through the allocator). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hami_topology.h"
#include "extender/decide/allocator.h"
#include "lib/clock.h"
#include "tests/unit/support.h"

#define UUID0 "GPU-00000000-0000-0000-0000-000000000000"
#define UUID1 "GPU-11111111-1111-1111-1111-111111111111"
#define UUID2 "GPU-22222222-2222-2222-2222-222222222222"
#define UUID3 "GPU-33333333-3333-3333-3333-333333333333"
#define V100 "NVIDIA-Tesla V100-PCIE-32GB"
#define CORE(uuid, index) uuid ",10,10000,100," V100 ",0,true," #index ",hami-core:"
#define FOUR CORE(UUID0, 0) CORE(UUID1, 1) CORE(UUID2, 2) CORE(UUID3, 3)

/* Scores of four GPUs as the plugin writes them (both directions): 0-2
 * NVLinked (200), 2-3 on one switch (50), 0-3 on one CPU (20), GPU 1
 * poorly connected to all (10). Single quotes: q() turns them into JSON. */
#define SCORE_FOUR                                                                                           \
    "[{'uuid':'" UUID0 "','score':{'" UUID1 "':10,'" UUID2 "':200,'" UUID3 "':20}},"                         \
    "{'uuid':'" UUID1 "','score':{'" UUID0 "':10,'" UUID2 "':10,'" UUID3 "':10}},"                           \
    "{'uuid':'" UUID2 "','score':{'" UUID0 "':200,'" UUID1 "':10,'" UUID3 "':50}},"                          \
    "{'uuid':'" UUID3 "','score':{'" UUID0 "':20,'" UUID1 "':10,'" UUID2 "':50}}]"

static int setup(void **state)
{
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
    return cache_setup(state);
}

/* ---- the parser ------------------------------------------------------------------- */

struct devs {
    struct hami_device *d;
    int count;
};

static struct devs four_devices(void)
{
    struct devs v = {0};
    char *err = NULL;
    assert_int_equal(hami_parse_register(FOUR, &v.d, &v.count, &err), 0);
    assert_int_equal(v.count, 4);
    return v;
}

static struct hami_pair_scores *parse_ok(const char *fixture, struct devs v)
{
    char *text = q(fixture), *err = NULL;
    struct hami_pair_scores *s = NULL;
    if (hami_pair_scores_parse(text, v.d, v.count, &s, &err) != 0)
        fail_msg("%s: %s", text, err ? err : "out of memory");
    free(text);
    assert_non_null(s);
    return s;
}

static void expect_bad(const char *text, struct devs v, const char *reason)
{
    char *err = NULL;
    struct hami_pair_scores *s = (struct hami_pair_scores *)1;
    assert_int_equal(hami_pair_scores_parse(text, v.d, v.count, &s, &err), -1);
    assert_null(s);
    assert_non_null(err);
    if (!strstr(err, reason))
        fail_msg("%s: reason \"%s\" does not say \"%s\"", text, err, reason);
    free(err);
}

static int64_t at(const struct hami_pair_scores *s, int i, int j)
{
    return s->score[i * s->count + j];
}

static void test_parse_plugin_format(void **state)
{
    (void)state;
    struct devs v = four_devices();
    struct hami_pair_scores *s = parse_ok(SCORE_FOUR, v);
    assert_int_equal(s->count, 4);
    assert_int_equal(at(s, 0, 2), 200);
    assert_int_equal(at(s, 3, 2), 50);
    assert_int_equal(at(s, 1, 0), 10);
    assert_int_equal(at(s, 0, 0), 0);
    hami_pair_scores_free(s);
    /* Go's reading: field names without regard to case, a later key wins,
     * the first entry of a device counts, unknown UUIDs and fields are
     * skipped, null entries and scores are empty, negative scores kept. */
    s = parse_ok("[null,{'UUID':'" UUID0 "','Score':{'" UUID1 "':1,'" UUID1 "':7,'GPU-gone':5},'x':[1]},"
                 "{'uuid':'" UUID0 "','score':{'" UUID1 "':99}},{'uuid':'GPU-gone','score':{'" UUID0 "':3}},"
                 "{'uuid':'" UUID2 "','score':null},{'uuid':'" UUID3 "','score':{'" UUID2 "':-4}}]",
                 v);
    assert_int_equal(at(s, 0, 1), 7);
    assert_int_equal(at(s, 2, 1), 0);
    assert_int_equal(at(s, 3, 2), -4);
    hami_pair_scores_free(s);
    /* null and [] read as no scores */
    s = parse_ok("null", v);
    assert_int_equal(at(s, 0, 1), 0);
    hami_pair_scores_free(s);
    s = parse_ok("[]", v);
    hami_pair_scores_free(s);
    hami_devices_free(v.d, v.count);
}

static void test_parse_hostile(void **state)
{
    (void)state;
    struct devs v = four_devices();
    expect_bad("", v, "not JSON");
    expect_bad("[{\"uuid\":\"a\",", v, "not JSON");
    expect_bad("{\"uuid\":\"a\"}", v, "not a JSON array");
    expect_bad("\"text\"", v, "not a JSON array");
    expect_bad("[1]", v, "entry 0 is not an object");
    expect_bad("[{}, []]", v, "entry 1 is not an object");
    expect_bad("[{\"uuid\":7}]", v, "\"uuid\" is not a string");
    expect_bad("[{\"uuid\":\"a\",\"score\":[1,2]}]", v, "\"score\" is not an object");
    expect_bad("[{\"uuid\":\"a\",\"score\":{\"b\":1.5}}]", v, "not an integer");
    expect_bad("[{\"uuid\":\"a\",\"score\":{\"b\":\"10\"}}]", v, "not an integer");
    expect_bad("[{\"uuid\":\"a\",\"score\":{\"b\":true}}]", v, "not an integer");
    expect_bad("[{\"uuid\":\"a\",\"score\":{\"b\":1e300}}]", v, "not an integer");
    expect_bad("[{\"uuid\":\"a\",\"score\":{\"b\":-1000000001}}]", v, "not an integer");
    /* sizes: the whole value, entries, scores per entry, a UUID */
    size_t big = HAMI_SCORE_MAX_BYTES + 2;
    char *text = malloc(big + 1);
    assert_non_null(text);
    memset(text, ' ', big);
    text[0] = '[';
    text[big - 1] = ']';
    text[big] = '\0';
    expect_bad(text, v, "bytes (at most");
    char *p = text;
    p += sprintf(p, "[");
    for (int i = 0; i <= HAMI_SCORE_MAX_ENTRIES; i++)
        p += sprintf(p, "%snull", i ? "," : "");
    sprintf(p, "]");
    expect_bad(text, v, "more than 1024 entries");
    p = text;
    p += sprintf(p, "[{\"uuid\":\"a\",\"score\":{");
    for (int i = 0; i <= HAMI_SCORE_MAX_ENTRIES; i++)
        p += sprintf(p, "%s\"k%d\":1", i ? "," : "", i);
    sprintf(p, "}}]");
    expect_bad(text, v, "more than 1024 scores");
    p = text;
    p += sprintf(p, "[{\"uuid\":\"");
    memset(p, 'u', HAMI_MAX_TEXT + 1);
    sprintf(p + HAMI_MAX_TEXT + 1, "\"}]");
    expect_bad(text, v, "uuid longer than");
    /* deep nesting is refused by the JSON reader, not a stack overflow */
    memset(text, '[', 100000);
    text[100000] = '\0';
    expect_bad(text, v, "not JSON");
    free(text);
    hami_devices_free(v.d, v.count);
}

/* A HAMi node of the four GPUs; score (a fixture in single quotes, or
 * NULL) becomes its hami.io/node-nvidia-score. */
static void add_scored_node(struct cluster_cache *c, const char *name, const char *score)
{
    cJSON *node = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(node, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON *status = cJSON_AddObjectToObject(node, "status");
    cJSON *alloc = cJSON_AddObjectToObject(status, "allocatable");
    cJSON_AddStringToObject(node, "kind", "Node");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(ann, "hami.io/node-nvidia-register", FOUR);
    cJSON_AddStringToObject(alloc, "nvidia.com/gpu", "40");
    if (score) {
        char *text = q(score);
        cJSON_AddStringToObject(ann, HAMI_SCORE_ANNOTATION, text);
        free(text);
    }
    char *json = cJSON_PrintUnformatted(node);
    assert_non_null(json);
    add_node(c, json);
    free(json);
    cJSON_Delete(node);
}

static const struct hami_node *hami_of(struct cluster_cache *c, const char *name)
{
    const struct node_state *n = cache_find_node(c, name);
    assert_non_null(n);
    assert_non_null(n->spec->hami);
    return n->spec->hami;
}

/* A bad annotation on a node leaves it without scores, never fails the node. */
static void test_node_ignores_bad_annotation(void **state)
{
    struct cluster_cache *c = *state;
    add_scored_node(c, "bad", "[{'uuid':1}]");
    const struct hami_node *h = hami_of(c, "bad");
    assert_int_equal(h->count, 4);
    assert_null(h->error);
    assert_null(h->pair_scores);
    add_node(c, "{'kind':'Node','metadata':{'name':'notstring','annotations':{'hami.io/node-nvidia-register':'" FOUR
                "','hami.io/node-nvidia-score':7}},'status':{'allocatable':{'nvidia.com/gpu':'40'}}}");
    h = hami_of(c, "notstring");
    assert_int_equal(h->count, 4);
    assert_null(h->pair_scores);
    /* the same bad value again (an update of the node) reads the same */
    add_scored_node(c, "bad", "[{'uuid':1}]");
    assert_null(hami_of(c, "bad")->pair_scores);
    add_scored_node(c, "good", SCORE_FOUR);
    h = hami_of(c, "good");
    assert_non_null(h->pair_scores);
    assert_int_equal(h->pair_scores->score[2 * 4 + 0], 200);
}

/* ---- the pick --------------------------------------------------------------------- */

static struct hami_pair_scores *matrix(int count, const int64_t *values)
{
    struct hami_pair_scores *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->count = count;
    s->score = calloc((size_t)count * (size_t)count, sizeof(*s->score));
    assert_non_null(s->score);
    if (values)
        memcpy(s->score, values, sizeof(*s->score) * (size_t)count * (size_t)count);
    return s;
}

static void test_choose(void **state)
{
    (void)state;
    struct devs v = four_devices();
    struct hami_pair_scores *s = parse_ok(SCORE_FOUR, v);
    const int order[] = {3, 2, 1, 0}; /* HAMi's walk on an idle node */
    assert_int_equal(hami_topology_choose(s, order, 4, 2), 0x5);  /* 0-2: 200 */
    assert_int_equal(hami_topology_choose(s, order, 4, 3), 0xd);  /* 0,2,3: 200+20+50 */
    assert_int_equal(hami_topology_choose(s, order, 4, 1), 0x2);  /* GPU 1: 30 in all */
    assert_int_equal(hami_topology_choose(s, order, 4, 4), 0xf);
    const int three[] = {3, 2, 1}; /* GPU 0 full */
    assert_int_equal(hami_topology_choose(s, three, 3, 2), 0xc);
    assert_int_equal(hami_topology_choose(s, three, 3, 1), 0x2);
    /* out of range */
    assert_int_equal(hami_topology_choose(s, order, 4, 0), 0);
    assert_int_equal(hami_topology_choose(s, order, 4, 5), 0);
    assert_int_equal(hami_topology_choose(NULL, order, 4, 2), 0);
    const int wrong[] = {0, 9};
    assert_int_equal(hami_topology_choose(s, wrong, 2, 1), 0);
    assert_int_equal(hami_topology_set_score(s, 0xd), 270);
    hami_pair_scores_free(s);
    hami_devices_free(v.d, v.count);
}

/* Ties go to the first in HAMi's order; a pair counts the earlier
 * candidate's entry only (HAMi reads one direction). */
static void test_choose_ties_and_direction(void **state)
{
    (void)state;
    struct hami_pair_scores *zero = matrix(4, NULL);
    const int order[] = {3, 1, 2, 0};
    assert_int_equal(hami_topology_choose(zero, order, 4, 2), 0xa);
    assert_int_equal(hami_topology_choose(zero, order, 4, 1), 0x8);
    hami_pair_scores_free(zero);
    const int64_t asym[9] = {0, 5, 10, 100, 0, 0, 0, 0, 0};
    struct hami_pair_scores *s = matrix(3, asym);
    const int fwd[] = {0, 1, 2};
    assert_int_equal(hami_topology_choose(s, fwd, 3, 2), 0x5); /* 0->2 is 10, 0->1 only 5 */
    const int rev[] = {1, 0, 2};
    assert_int_equal(hami_topology_choose(s, rev, 3, 2), 0x3); /* now 1->0 is read: 100 */
    /* one vGPU: its own row towards the others */
    assert_int_equal(hami_topology_choose(s, fwd, 3, 1), 0x4);
    hami_pair_scores_free(s);
}

/* Past HAMI_TOPOLOGY_MAX_COMBINATIONS the search is not tried. */
static void test_choose_bound(void **state)
{
    (void)state;
    struct hami_pair_scores *s = matrix(64, NULL);
    int order[64];
    for (int i = 0; i < 64; i++)
        order[i] = 63 - i;
    assert_int_equal(hami_topology_choose(s, order, 64, 32), 0);
    assert_int_equal(hami_topology_choose(s, order, 20, 8), 0);              /* C(20,8) = 125970 */
    assert_int_equal(__builtin_popcountll(hami_topology_choose(s, order, 16, 8)), 8); /* C(16,8) = 12870 */
    assert_int_equal(hami_topology_choose(s, order, 64, 63), ~1ULL); /* C(64,63) = 64: searched, first wins */
    assert_int_equal(hami_topology_choose(s, order, 64, 64), ~0ULL); /* the one combination */
    assert_int_equal(hami_topology_choose(s, order, 17, 2), 3ULL << 62);
    hami_pair_scores_free(s);
}

/* ---- the fit ------------------------------------------------------------------------ */

#define GPUMEM(n) "[{'name':'main','resources':{'limits':{'nvidia.com/gpu':" #n ",'nvidia.com/gpumem':1000}}}]"

/* The devices the allocator gives the pod's one container on node. */
static uint64_t fit_on(struct cluster_cache *c, const char *node, const char *policy, const char *containers)
{
    char buf[2048], ann[128] = "";
    if (policy)
        fmt(ann, sizeof(ann), "'hami.io/gpu-scheduler-policy':'%s'", policy);
    fmt(buf, sizeof(buf), "{'metadata':{'name':'new','namespace':'t','annotations':{%s}},'spec':{'containers':%s}}",
        ann, containers);
    struct pod_info *p = pod_of(buf);
    assert_null(p->request_error);
    uint64_t masks[4] = {0}, hami[4] = {0};
    struct fit_result r = {0};
    r.masks = masks;
    r.hami_masks = hami;
    struct alloc_policy pol = {.gpu = POLICY_BINPACK, .node = POLICY_BINPACK, .hami_gpu = POLICY_SPREAD};
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    bool fits = allocator_fit(n, p, NULL, &pol, &r);
    cache_unlock(c);
    pod_info_free(p);
    if (!fits)
        fail_msg("does not fit on %s: %s", node, r.reason);
    return hami[0];
}

static void test_fit_topology_aware(void **state)
{
    struct cluster_cache *c = *state;
    add_scored_node(c, "scored", SCORE_FOUR);
    add_scored_node(c, "plain", NULL);
    /* with the scores: the best pair, the best three, the worst single */
    assert_int_equal(fit_on(c, "scored", "topology-aware", GPUMEM(2)), 0x5);
    assert_int_equal(fit_on(c, "scored", "topology-aware", GPUMEM(3)), 0xd);
    assert_int_equal(fit_on(c, "scored", "topology-aware", GPUMEM(1)), 0x2);
    /* without them, or without the policy (a chain is not it): as before */
    assert_int_equal(fit_on(c, "plain", "topology-aware", GPUMEM(2)), 0xc);
    assert_int_equal(fit_on(c, "plain", "topology-aware", GPUMEM(1)), 0x8);
    assert_int_equal(fit_on(c, "scored", NULL, GPUMEM(2)), 0xc);
    assert_int_equal(fit_on(c, "scored", "spread", GPUMEM(2)), 0xc);
    assert_int_equal(fit_on(c, "scored", "topology-aware,numa", GPUMEM(2)), 0xc);
    /* an unreadable annotation: as without it */
    add_scored_node(c, "broken", "[{'uuid':'" UUID0 "','score':{'" UUID2 "':0.5}}]");
    assert_int_equal(fit_on(c, "broken", "topology-aware", GPUMEM(2)), 0xc);
    /* a GPU that cannot take the vGPU is no candidate */
    char pod[1024];
    fmt(pod, sizeof(pod),
        "{'metadata':{'name':'busy','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'" UUID0
        ",NVIDIA,9500,10:;','hami.io/vgpu-node':'scored'}},'spec':{'nodeName':'scored','containers':[{'name':'c',"
        "'resources':{'limits':{'nvidia.com/gpu':1,'nvidia.com/gpumem':9500,'nvidia.com/gpucores':10}}}]},"
        "'status':{'phase':'Running'}}");
    add_pod(c, pod, clock_realtime_ns());
    assert_int_equal(fit_on(c, "scored", "topology-aware", GPUMEM(2)), 0xc);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, cache_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_plugin_format),
        cmocka_unit_test(test_parse_hostile),
        T(test_node_ignores_bad_annotation),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_choose_ties_and_direction),
        cmocka_unit_test(test_choose_bound),
        T(test_fit_topology_aware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

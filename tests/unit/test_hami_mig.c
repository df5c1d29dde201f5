/* test_hami_mig.c - unit tests for HAMi dynamic MIG (issue 28 item 2): MIG-mode
 * devices kept with their migProfiles (cluster/hami_node.c), instances charged
 * from hami.io/vgpu-mig-allocations (cluster/hami_occupancy.c), the choice of
 * profile and placement in the fit (extender/decide/hami_fit.c through the
 * allocator) and the decision's annotation (extender/decide/hamibind.c,
 * cluster/hami_decision.c), against tests/fixtures/mig. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hami_decision.h"
#include "extender/decide/allocator.h"
#include "extender/decide/hamibind.h"
#include "lib/clock.h"
#include "lib/strbuf.h"
#include "tests/unit/support.h"

#define GPU_A "GPU-5b4c2b1a-8f3e-4d2c-9a7b-0e1f2a3b4c5d" /* the fixture node's GPU 0 */

/* One A100-40GB in MIG mode as HAMi v2.10 registers it, with devmem and
 * count large enough that only the MIG geometry limits it. */
#define PROFILES                                                                                                  \
    "[{'name':'1g.5gb','memoryMB':4864,'core':14,'sliceCount':1,'placements':[{'start':0,'size':1},{'start':1,"   \
    "'size':1},{'start':2,'size':1},{'start':3,'size':1},{'start':4,'size':1},{'start':5,'size':1},{'start':6,"   \
    "'size':1}]},{'name':'2g.10gb','memoryMB':9984,'core':28,'sliceCount':2,'placements':[{'start':0,'size':2},{" \
    "'start':2,'size':2},{'start':4,'size':2}]},{'name':'3g.20gb','memoryMB':19968,'core':42,'sliceCount':3,"     \
    "'placements':[{'start':0,'size':4},{'start':4,'size':4}]},{'name':'4g.20gb','memoryMB':19968,'core':56,"     \
    "'sliceCount':4,'placements':[{'start':0,'size':4}]},{'name':'7g.40gb','memoryMB':40192,'core':98,"           \
    "'sliceCount':7,'placements':[{'start':0,'size':8}]}]"
#define MIG_DEV(id, index)                                                                                      \
    "{'id':'" id "','index':" #index ",'count':16,'devmem':81920,'devcore':100,'type':'NVIDIA-A100-SXM4-40GB'," \
    "'mode':'mig','health':true,'migProfiles':" PROFILES "}"

static int setup(void **state)
{
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
    return cache_setup(state);
}

static char *read_fixture(const char *name)
{
    char rel[256];
    fmt(rel, sizeof(rel), "tests/fixtures/mig/%s", name);
    return source_text(rel);
}

static struct node_spec *spec_of(cJSON *obj)
{
    char *err = NULL;
    struct node_spec *spec = node_spec_from_json(obj, &err);
    if (!spec)
        fail_msg("node_spec_from_json: %s", err ? err : "(null)");
    cJSON_Delete(obj);
    return spec;
}

/* A HAMi node whose registration is `reg` (single quotes for double). */
static void add_mig_node(struct cluster_cache *c, const char *name, const char *reg)
{
    char buf[256];
    fmt(buf, sizeof(buf),
        "{'kind':'Node','metadata':{'name':'%s','annotations':{}},'status':{'allocatable':{'nvidia.com/gpu':'16'}}}",
        name);
    cJSON *node = json_of(buf);
    char *value = q(reg);
    cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "annotations"),
                            "hami.io/node-nvidia-register", value);
    free(value);
    assert_int_equal(cache_apply_node(c, spec_of(node)), 0);
}

/* A pod on node placed by HAMi: one container with `limits`, the
 * allocation `allocated` and the MIG allocations `mig` (single quotes; NULL:
 * no such annotation). */
static void add_hami_pod(struct cluster_cache *c, const char *name, const char *node, const char *limits,
                         const char *allocated, const char *mig)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'%s'}},"
        "'spec':{'nodeName':'%s','containers':[{'name':'c','resources':{'limits':%s}}]},'status':{'phase':"
        "'Running'}}",
        name, allocated, node, limits);
    cJSON *pod = json_of(buf);
    if (mig) {
        char *value = q(mig);
        cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"),
                                "hami.io/vgpu-mig-allocations", value);
        free(value);
    }
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(pod, &err);
    cJSON_Delete(pod);
    assert_non_null(p);
    assert_int_equal(cache_apply_pod(c, p, clock_realtime_ns()), 0);
}

/* "1g.5gb@6" for a one-entry MIG allocation of container 0, vGPU 0, on uuid. */
static void one_mig(char *buf, size_t size, const char *uuid, const char *profile, int start, int slots)
{
    fmt(buf, size,
        "[{'containerIndex':0,'deviceIndex':0,'gpuUUID':'%s','profile':'%s','placement':{'start':%d,'size':%d}}]", uuid,
        profile, start, slots);
}

/* The instances in use on device d of node, as "1g.5gb@6/1 ..." in order. */
static void instances(struct cluster_cache *c, const char *node, int d, char *buf, size_t size)
{
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    assert_non_null(n->hami);
    assert_non_null(n->hami->mig);
    buf[0] = '\0';
    const struct hami_mig_use *u = &n->hami->mig[d];
    size_t len = 0;
    for (int k = 0; k < u->n; k++) {
        const char *name = n->spec->hami->devices[d].mig->templates[u->inst[k].tmpl].name;
        len += (size_t)snprintf(buf + len, size - len, "%s%s@%d/%d", k ? " " : "", name, u->inst[k].start,
                                u->inst[k].size);
    }
    cache_unlock(c);
}

static int64_t memory_used(struct cluster_cache *c, const char *node, int d)
{
    cache_read_lock(c);
    int64_t v = cache_find_node(c, node)->hami->gpus[d].memory_used;
    cache_unlock(c);
    return v;
}

struct fit_out {
    struct fit_result r;
    uint64_t masks[4];
    uint64_t hami[4];
};

static bool fit(struct cluster_cache *c, const char *node, const struct pod_info *p, struct fit_out *out)
{
    memset(out, 0, sizeof(*out));
    out->r.masks = out->masks;
    out->r.hami_masks = out->hami;
    struct alloc_policy pol = {.gpu = POLICY_BINPACK, .node = POLICY_BINPACK, .hami_gpu = POLICY_SPREAD};
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    bool fits = allocator_fit(n, p, cache_find_pod(c, p->key), &pol, &out->r);
    cache_unlock(c);
    return fits;
}

static struct pod_info *vgpu_pod(const char *annotations, const char *limits)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'new','namespace':'t','annotations':{%s}},'spec':{'containers':[{'name':'main',"
        "'resources':{'limits':%s}}]}}",
        annotations, limits);
    return pod_of(buf);
}

/* ---- the node ------------------------------------------------------------------------ */

static void test_node_keeps_mig_devices(void **state)
{
    struct cluster_cache *c = *state;
    char *text = read_fixture("node-hami-mig.json");
    add_node(c, text);
    free(text);
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, "hami-a100-mig");
    const struct hami_node *h = n->spec->hami;
    assert_int_equal(h->count, 2);
    assert_int_equal(h->usable, 0x3); /* before: 0, MIG mode was never used */
    assert_int_equal(h->devices[0].mode, HAMI_MODE_MIG);
    assert_non_null(h->devices[0].mig);
    assert_int_equal(h->devices[0].mig->ntemplates, 7);
    assert_string_equal(h->devices[0].mig->templates[6].name, "7g.40gb");
    assert_non_null(n->hami->mig);
    assert_int_equal(n->hami->mig[0].n, 0);
    cache_unlock(c);
}

/* Unusable profiles sideline that device only, with the reason; a MIG
 * entry without profiles (older HAMi) is not used either. */
static void test_node_bad_profiles(void **state)
{
    struct cluster_cache *c = *state;
    add_mig_node(c, "m",
                 "[" MIG_DEV("GPU-M0", 0) ",{'id':'GPU-M1','index':1,'count':4,'devmem':40960,'mode':'mig','health':"
                                          "true,'migProfiles':[{'name':'1g.5gb','memoryMB':4864,'core':14,"
                                          "'sliceCount':1,'placements':[{'start':20,'size':1}]}]},{'id':'GPU-M2',"
                                          "'index':2,'count':4,'devmem':40960,'mode':'mig','health':true}]");
    cache_read_lock(c);
    const struct hami_node *h = cache_find_node(c, "m")->spec->hami;
    assert_int_equal(h->count, 3);
    assert_null(h->error);
    assert_int_equal(h->usable, 0x1);
    assert_null(h->devices[1].mig);
    assert_non_null(h->devices[1].mig_error);
    assert_null(h->devices[2].mig);
    assert_null(h->devices[2].mig_error);
    cache_unlock(c);
    struct pod_info *p = vgpu_pod("'nvidia.com/use-gpuuuid':'GPU-M1,GPU-M2'", "{'nvidia.com/gpu':1}");
    struct fit_out out;
    assert_false(fit(c, "m", p, &out));
    assert_non_null(strstr(out.r.reason, "not considered: 2 in MIG mode without usable migProfiles"));
    pod_info_free(p);
}

/* ---- occupancy ------------------------------------------------------------------------- */

/* HAMi's own decision (the fixture pod): both instances charged, with the
 * profile's memory HAMi wrote; gone with the pod. */
static void test_occupancy_hami_pod(void **state)
{
    struct cluster_cache *c = *state;
    char *text = read_fixture("node-hami-mig.json");
    add_node(c, text);
    free(text);
    text = read_fixture("pod-hami-mig.json");
    add_pod(c, text, clock_realtime_ns());
    free(text);
    char buf[256];
    instances(c, "hami-a100-mig", 0, buf, sizeof(buf));
    assert_string_equal(buf, "1g.10gb@6/2 1g.5gb@5/1");
    instances(c, "hami-a100-mig", 1, buf, sizeof(buf));
    assert_string_equal(buf, "");
    assert_int_equal(memory_used(c, "hami-a100-mig", 0), 9856 + 4864);
    assert_int_equal(cache_delete_pod(c, "team-b/vgpu-mig"), 0);
    instances(c, "hami-a100-mig", 0, buf, sizeof(buf));
    assert_string_equal(buf, "");
    assert_int_equal(memory_used(c, "hami-a100-mig", 0), 0);
}

/* An instance that overlaps one in use, names no profile of the device or
 * a placement the profile does not have is not charged as an instance
 * (its memory and task still are). */
static void test_occupancy_refuses_bad_instances(void **state)
{
    struct cluster_cache *c = *state;
    add_mig_node(c, "m", "[" MIG_DEV("GPU-M0", 0) "]");
    char mig[512];
    one_mig(mig, sizeof(mig), "GPU-M0", "1g.5gb", 6, 1);
    add_hami_pod(c, "a", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}", "GPU-M0,NVIDIA,4864,14:;", mig);
    one_mig(mig, sizeof(mig), "GPU-M0", "2g.10gb", 4, 2); /* slots 4..5: free */
    add_hami_pod(c, "b", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':9000}", "GPU-M0,NVIDIA,9984,28:;", mig);
    one_mig(mig, sizeof(mig), "GPU-M0", "1g.5gb", 5, 1); /* overlaps b's 2g.10gb */
    add_hami_pod(c, "c", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}", "GPU-M0,NVIDIA,4864,14:;", mig);
    one_mig(mig, sizeof(mig), "GPU-M0", "1g.20gb", 0, 2); /* no such profile */
    add_hami_pod(c, "d", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}", "GPU-M0,NVIDIA,4864,14:;", mig);
    one_mig(mig, sizeof(mig), "GPU-M0", "2g.10gb", 1, 2); /* not one of its placements */
    add_hami_pod(c, "e", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}", "GPU-M0,NVIDIA,9984,28:;", mig);
    char buf[256];
    instances(c, "m", 0, buf, sizeof(buf));
    assert_string_equal(buf, "1g.5gb@6/1 2g.10gb@4/2");
    assert_int_equal(memory_used(c, "m", 0), 4864 + 9984 + 4864 + 4864 + 9984);
    assert_int_equal(cache_delete_pod(c, "t/b"), 0);
    instances(c, "m", 0, buf, sizeof(buf));
    assert_string_equal(buf, "1g.5gb@6/1");
}

/* ---- the fit ---------------------------------------------------------------------------- */

/* HAMi would put the 2g.10gb at slice 0 next to a 1g.5gb at 6; the fit
 * takes slice 4, which keeps 3g.20gb and 4g.20gb possible, and says so. */
static void test_fit_keeps_largest(void **state)
{
    struct cluster_cache *c = *state;
    add_mig_node(c, "m", "[" MIG_DEV("GPU-M0", 0) "]");
    char mig[512];
    one_mig(mig, sizeof(mig), "GPU-M0", "1g.5gb", 6, 1);
    add_hami_pod(c, "a", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}", "GPU-M0,NVIDIA,4864,14:;", mig);
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':9900}");
    struct fit_out out;
    if (!fit(c, "m", p, &out))
        fail_msg("does not fit: %s", out.r.reason);
    assert_int_equal(out.hami[0], 0x1);
    assert_int_equal(out.r.reason_len, strlen(out.r.reason));
    assert_non_null(strstr(out.r.reason, "container \"main\" on GPU 0 (GPU-M0): placed 2g.10gb at slice 4"));
    assert_non_null(strstr(out.r.reason, "(slice 0 would keep"));
    pod_info_free(p);
}

/* Memory and tasks are free, but no placement of the profile is: refused
 * with mig_choose's reason, and preemption could help. */
static void test_fit_full_gpu_refuses(void **state)
{
    struct cluster_cache *c = *state;
    add_mig_node(c, "m", "[" MIG_DEV("GPU-M0", 0) "]");
    char mig[512];
    one_mig(mig, sizeof(mig), "GPU-M0", "4g.20gb", 0, 4);
    add_hami_pod(c, "a", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':19000}", "GPU-M0,NVIDIA,19968,56:;", mig);
    one_mig(mig, sizeof(mig), "GPU-M0", "3g.20gb", 4, 4);
    add_hami_pod(c, "b", "m", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':19000}", "GPU-M0,NVIDIA,19968,42:;", mig);
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}");
    struct fit_out out;
    assert_false(fit(c, "m", p, &out));
    assert_false(out.r.unresolvable);
    assert_non_null(strstr(out.r.reason, "GPU 0 (GPU-M0) (MIG mode): "));
    /* without the 3g.20gb the 1g.5gb fits again */
    assert_int_equal(cache_delete_pod(c, "t/b"), 0);
    assert_true(fit(c, "m", p, &out));
    assert_non_null(strstr(out.r.reason, "placed 1g.5gb at slice"));
    pod_info_free(p);
}

/* ---- the decision --------------------------------------------------------------------------- */

/* An init container and an app container on one MIG GPU: the decision's
 * hami.io/vgpu-mig-allocations counts the init container first (HAMi's
 * device plugin does), the allocation carries the profile's memory and
 * cores, and a reservation of it is charged as those instances. */
static void test_decision_annotation(void **state)
{
    struct cluster_cache *c = *state;
    add_mig_node(c, "m", "[" MIG_DEV("GPU-M0", 0) "]");
    struct pod_info *p = pod_of(
        "{'metadata':{'name':'new','namespace':'t','uid':'u1'},'spec':{'initContainers':[{'name':'init','restartPolicy'"
        ":'Always','resources':{"
        "'limits':{'nvidia.com/gpu':1,'nvidia.com/gpumem':4000}}}],'containers':[{'name':'main','resources':{'limits'"
        ":{'nvidia.com/gpu':1,'nvidia.com/gpumem':9900}}}]}}");
    struct fit_out out;
    if (!fit(c, "m", p, &out))
        fail_msg("does not fit: %s", out.r.reason);
    int zero[2] = {0, 0};
    int *none[2] = {NULL, NULL};
    struct pod_info *d = pod_info_with_decision(p, "m", clock_realtime_ns(), none, zero);
    assert_non_null(d);
    pod_info_free(p);
    cache_write_lock(c);
    char *err = NULL;
    const struct node_state *n = cache_find_node(c, "m");
    assert_int_equal(hamibind_attach(n, d, out.hami, &err), 0);
    assert_null(err);
    assert_true(d->hami->has_alloc);
    char *alloc = hami_alloc_encode(&d->hami->alloc);
    assert_string_equal(alloc, "GPU-M0,NVIDIA,4864,14:;GPU-M0,NVIDIA,9984,28:;");
    free(alloc);
    cJSON *ann = cJSON_CreateObject();
    assert_int_equal(hami_decision_mig_annotation(ann, d->hami), 0);
    const cJSON *v = cJSON_GetObjectItem(ann, "hami.io/vgpu-mig-allocations");
    assert_true(cJSON_IsString(v));
    assert_string_equal(v->valuestring,
                        "[{\"containerIndex\":0,\"deviceIndex\":0,\"gpuUUID\":\"GPU-M0\",\"profile\":\"1g.5gb\","
                        "\"placement\":{\"start\":6,\"size\":1}},{\"containerIndex\":1,\"deviceIndex\":0,"
                        "\"gpuUUID\":\"GPU-M0\",\"profile\":\"2g.10gb\",\"placement\":{\"start\":4,\"size\":2}}]");
    cJSON_Delete(ann);
    /* the reservation of the decision holds exactly those instances */
    assert_true(cache_reserve_pod_locked(c, d, clock_realtime_ns()) != 0);
    cache_unlock(c);
    char buf[256];
    instances(c, "m", 0, buf, sizeof(buf));
    assert_string_equal(buf, "1g.5gb@6/1 2g.10gb@4/2");
    assert_int_equal(memory_used(c, "m", 0), 9984 + 4864);
    /* no MIG instance: the key is removed (null in a merge patch) */
    struct pod_info *plain = vgpu_pod("", "{'nvidia.com/gpu':1}");
    ann = cJSON_CreateObject();
    assert_int_equal(hami_decision_mig_annotation(ann, plain->hami), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(ann, "hami.io/vgpu-mig-allocations")));
    cJSON_Delete(ann);
    pod_info_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_node_keeps_mig_devices, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_node_bad_profiles, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_occupancy_hami_pod, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_occupancy_refuses_bad_instances, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_fit_keeps_largest, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_fit_full_gpu_refuses, setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_decision_annotation, setup, cache_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

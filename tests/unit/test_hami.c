/* test_hami.c - unit tests for HAMi vGPUs: registration and handshake
 * (cluster/hami_node.c), requests, pod annotations and the allocation format
 * (cluster/hami_pod.c), occupancy (cluster/hami_occupancy.c), the fit
 * (extender/decide/hami_fit.c through the allocator), the decision helpers and the
 * node lock (cluster/hami_decision.c), and CRL defaults on HAMi resources. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "family_names.h"
#include "admission/policy.h"
#include "cluster/hami_decision.h"
#include "extender/decide/allocator.h"
#include "lib/clock.h"
#include "tests/unit/support.h"

/* Device entries (9 fields) of the V100s of HAMi's protocol example. */
#define UUID0 "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
#define UUID1 "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
#define UUID2 "GPU-2a2b2c2d-0000-0000-0000-000000000002"
#define UUID3 "GPU-3a3b3c3d-0000-0000-0000-000000000003"
#define V100 "NVIDIA-Tesla V100-PCIE-32GB"
#define DEV(uuid, split, mem, cores, type, healthy, index, mode) \
    uuid "," #split "," #mem "," #cores "," type ",0," healthy "," #index "," mode ":"
#define CORE(uuid, index, mem) DEV(uuid, 10, mem, 100, V100, "true", index, "hami-core")

static int hami_setup(void **state)
{
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
    setenv("TZ", "UTC", 1);
    tzset();
    return cache_setup(state);
}

static int hami_teardown(void **state)
{
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
    return cache_teardown(state);
}

/* A HAMi node: registration `reg`, nvidia.com/gpu allocatable, more
 * annotations (",'k':'v'..." or ""). */
static void add_hami_node(struct cluster_cache *c, const char *name, const char *reg, int allocatable,
                          const char *more)
{
    char buf[8192];
    fmt(buf, sizeof(buf),
        "{'kind':'Node','metadata':{'name':'%s','annotations':{'hami.io/node-nvidia-register':'%s'%s}},"
        "'status':{'allocatable':{'cpu':'8','nvidia.com/gpu':'%d'}}}",
        name, reg, more, allocatable);
    add_node(c, buf);
}

static struct pod_info *pod_ann(const char *annotations, const char *containers)
{
    char buf[4096];
    fmt(buf, sizeof(buf), "{'metadata':{'name':'new','namespace':'t','annotations':{%s}},'spec':{'containers':%s}}",
        annotations, containers);
    return pod_of(buf);
}

/* A one-container pod with these limits and annotations. */
static struct pod_info *vgpu_pod(const char *annotations, const char *limits)
{
    char buf[1024];
    fmt(buf, sizeof(buf), "[{'name':'main','resources':{'limits':%s}}]", limits);
    return pod_ann(annotations, buf);
}

/* A pod bound to node whose one container holds `limits` and carries the
 * allocation annotation `allocated` (NULL: none). */
static void add_vgpu_pod(struct cluster_cache *c, const char *name, const char *node, const char *limits,
                         const char *allocated)
{
    char buf[2048], ann[512] = "";
    if (allocated)
        fmt(ann, sizeof(ann), "'hami.io/vgpu-devices-allocated':'%s','hami.io/vgpu-node':'%s'", allocated, node);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'%s','namespace':'t','annotations':{%s}},'spec':{'nodeName':'%s','containers':[{'name':"
        "'c','resources':{'limits':%s}}]},'status':{'phase':'Running'}}",
        name, ann, node, limits);
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
}

struct fit_out {
    struct fit_result r;
    uint64_t masks[4];
    uint64_t hami[4];
};

static bool fit(struct cluster_cache *c, const char *node, const struct pod_info *p, enum pack_policy hami_gpu,
                enum pack_policy nodep, struct fit_out *out)
{
    memset(out, 0, sizeof(*out));
    out->r.masks = out->masks;
    out->r.hami_masks = out->hami;
    struct alloc_policy pol = {.gpu = POLICY_BINPACK, .node = nodep, .hami_gpu = hami_gpu};
    cache_read_lock(c);
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    const struct pod_entry *self = cache_find_pod(c, p->key);
    bool fits = allocator_fit(n, p, self, &pol, &out->r);
    cache_unlock(c);
    if (fits)
        assert_string_equal(out->r.reason, "");
    return fits;
}

static uint64_t expect_fit(struct cluster_cache *c, const char *node, struct pod_info *p, enum pack_policy gpu)
{
    assert_null(p->request_error);
    struct fit_out out;
    if (!fit(c, node, p, gpu, POLICY_BINPACK, &out))
        fail_msg("the pod does not fit on %s: %s", node, out.r.reason);
    assert_int_equal(out.masks[0], 0); /* nothing of gpus[] */
    pod_info_free(p);
    return out.hami[0];
}

static void expect_misfit(struct cluster_cache *c, const char *node, struct pod_info *p, bool unresolvable,
                          const char *reason)
{
    assert_null(p->request_error);
    struct fit_out out;
    if (fit(c, node, p, POLICY_SPREAD, POLICY_BINPACK, &out))
        fail_msg("the pod fits on %s (devices %" PRIx64 ")", node, out.hami[0]);
    assert_string_equal(out.r.reason, reason);
    assert_int_equal(out.r.unresolvable, unresolvable);
    pod_info_free(p);
}

static const struct hami_gpu_state *gpu_state(struct cluster_cache *c, const char *node, int dev)
{
    const struct node_state *n = cache_find_node(c, node);
    assert_non_null(n);
    assert_non_null(n->hami);
    assert_true(dev < n->hami->count);
    return &n->hami->gpus[dev];
}

/* ---- registration -------------------------------------------------------------- */

static void test_register_seven_fields(void **state)
{
    (void)state;
    struct hami_device *d;
    int n;
    char *err;
    /* The example of HAMi's docs/develop/protocol.md, trailing ':' included. */
    assert_int_equal(hami_parse_register(UUID0 ",10,32768,100," V100 ",0,true:" UUID1 ",10,32768,100," V100 ",1,true:",
                                         &d, &n, &err),
                     0);
    assert_null(err);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].uuid, UUID0);
    assert_string_equal(d[1].type, V100);
    assert_string_equal(d[1].type_upper, "NVIDIA-TESLA V100-PCIE-32GB");
    assert_int_equal(d[0].split, 10);
    assert_int_equal(d[0].memory_mib, 32768);
    assert_int_equal(d[0].cores, 100);
    assert_int_equal(d[1].numa, 1);
    assert_true(d[0].healthy);
    /* Seven fields: the index is the position and the mode hami-core (never MIG). */
    assert_int_equal(d[0].index, 0);
    assert_int_equal(d[1].index, 1);
    assert_int_equal(d[1].mode, HAMI_MODE_HAMI_CORE);
    hami_devices_free(d, n);
    /* No trailing ':' is accepted too. */
    assert_int_equal(hami_parse_register(UUID0 ",4,1024,100,T4,-1,false", &d, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_false(d[0].healthy);
    assert_int_equal(d[0].numa, -1);
    hami_devices_free(d, n);
}

static void test_register_nine_fields_and_modes(void **state)
{
    (void)state;
    struct hami_device *d;
    int n;
    char *err;
    assert_int_equal(hami_parse_register(DEV(UUID0, 10, 81920, 100, "NVIDIA-A100", "True", 3, "hami-core")
                                             DEV(UUID1, 7, 40960, 100, "NVIDIA-A100", "1", 1, "mig")
                                                 DEV(UUID2, 4, 16384, 200, "NVIDIA-T4", "F", 2, "mps"),
                                         &d, &n, &err),
                     0);
    assert_int_equal(n, 3);
    assert_int_equal(d[0].index, 3);
    assert_int_equal(d[0].mode, HAMI_MODE_HAMI_CORE);
    assert_int_equal(d[1].mode, HAMI_MODE_MIG);
    assert_int_equal(d[1].split, 7);
    assert_int_equal(d[2].mode, HAMI_MODE_MPS);
    assert_int_equal(d[2].cores, 200);
    assert_true(d[0].healthy && d[1].healthy);
    assert_false(d[2].healthy);
    assert_string_equal(hami_mode_name(d[2].mode), "mps");
    hami_devices_free(d, n);
}

static void test_register_json(void **state)
{
    (void)state;
    struct hami_device *d;
    int n;
    char *err;
    /* Newer plugins register a JSON array of HAMi's DeviceInfo. */
    const char *json = "[{\"id\":\"" UUID0 "\",\"index\":3,\"count\":5,\"devmem\":24576,\"devcore\":100,"
                       "\"type\":\"NVIDIA-A10\",\"numa\":1,\"mode\":\"hami-core\",\"health\":true,"
                       "\"devicevendor\":\"NVIDIA\",\"custominfo\":null},"
                       "{\"id\":\"" UUID1 "\",\"devmem\":24576,\"devcore\":100,\"type\":\"NVIDIA-A10\"}]";
    assert_int_equal(hami_parse_register(json, &d, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(d[0].index, 3);
    assert_int_equal(d[0].split, 5);
    assert_int_equal(d[0].numa, 1);
    assert_true(d[0].healthy);
    /* HAMi's DeviceInfo is all omitempty and read with json.Unmarshal: a
     * missing key is Go's zero value. count 0 (no task fits: HAMi's Fit
     * checks Count <= Used), health false, index 0, numa 0. */
    assert_int_equal(d[1].split, 0);
    assert_false(d[1].healthy);
    assert_int_equal(d[1].index, 0);
    assert_int_equal(d[1].numa, 0);
    hami_devices_free(d, n);
    /* devcore, type and mode left out: 0 cores, no type, hami-core. */
    assert_int_equal(hami_parse_register("[{\"id\":\"" UUID0 "\",\"count\":4,\"devmem\":1000,\"health\":true}]", &d,
                                         &n, &err),
                     0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].cores, 0);
    assert_string_equal(d[0].type, "");
    assert_string_equal(hami_mode_name(d[0].mode), "hami-core");
    assert_int_equal(d[0].split, 4);
    hami_devices_free(d, n);
}

static void expect_bad_register(const char *text, const char *message)
{
    struct hami_device *d = (struct hami_device *)1;
    int n = -1;
    char *err = NULL;
    assert_int_equal(hami_parse_register(text, &d, &n, &err), -1);
    assert_null(d);
    assert_int_equal(n, 0);
    assert_non_null(err);
    if (!strstr(err, message))
        fail_msg("\"%s\": error \"%s\" does not contain \"%s\"", text, err, message);
    free(err);
}

static void test_register_malformed(void **state)
{
    (void)state;
    expect_bad_register(UUID0 ",10,32768,100," V100 ",0,true,0:", "entry 0 has 8 fields; expected 7");
    expect_bad_register(CORE(UUID0, 0, 32768) UUID1 ",10,32768,100:", "entry 1 has 4 fields");
    expect_bad_register(UUID0 ",10,32GB,100," V100 ",0,true:", "entry 0: memory \"32GB\" is not a MiB count");
    expect_bad_register(UUID0 ",10,0,100," V100 ",0,true:", "memory \"0\"");
    expect_bad_register(UUID0 ",-1,32768,100," V100 ",0,true:", "split count \"-1\"");
    expect_bad_register(UUID0 ",2000,32768,100," V100 ",0,true:", "split count \"2000\"");
    expect_bad_register(UUID0 ",10,32768,100," V100 ",0,yes:", "health \"yes\" is not true or false");
    expect_bad_register(UUID0 ",10,32768,100," V100 ",x,true:", "NUMA node \"x\"");
    expect_bad_register(DEV(UUID0, 10, 32768, 100, V100, "true", 0, "vgpu"), "mode \"vgpu\" is not hami-core");
    expect_bad_register(DEV(UUID0, 10, 32768, 100, V100, "true", -2, "mig"), "index \"-2\"");
    expect_bad_register(",10,32768,100," V100 ",0,true:", "UUID \"\"");
    expect_bad_register(CORE(UUID0, 0, 32768) CORE(UUID0, 1, 32768), "entries 0 and 1 register the same UUID");
    expect_bad_register(CORE(UUID0, 1, 32768) CORE(UUID1, 1, 32768), "the same index 1");
    expect_bad_register("", "it lists no device");
    expect_bad_register(":::", "it lists no device");
    expect_bad_register("[1,2", "not valid JSON");
    expect_bad_register("[]", "it lists no device");
    expect_bad_register("[{\"id\":\"" UUID0 "\",\"devcore\":100,\"type\":\"T4\"}]", "entry 0: devmem must be");
    expect_bad_register("[{\"id\":\"" UUID0 "\",\"devmem\":1.5,\"devcore\":100,\"type\":\"T4\"}]", "devmem must be");
    expect_bad_register("[{\"id\":\"a,b\",\"devmem\":1,\"devcore\":100,\"type\":\"T4\"}]", "id must be");
    expect_bad_register("[{\"id\":\"" UUID0 "\",\"devmem\":1,\"devcore\":100,\"type\":\"T4\",\"mode\":\"x\"}]",
                        "mode must be");
    char many[16384] = "";
    for (int i = 0; i < 65; i++) {
        char e[96];
        fmt(e, sizeof(e), "GPU-%04d,10,1024,100,T4,0,true:", i);
        strcat(many, e);
    }
    expect_bad_register(many, "it lists 65 devices; at most 64");
    /* A value that would end the error line is quoted. */
    expect_bad_register(UUID0 ",10,3\n2,100," V100 ",0,true:", "memory \"3\\n2\"");
}

static void test_register_split_default_and_scaling(void **state)
{
    (void)state;
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    cfg.default_split = 4;
    cfg.memory_scaling = 1.5;
    hami_set_config(&cfg);
    struct hami_device *d;
    int n;
    char *err;
    assert_int_equal(hami_parse_register(UUID0 ",,1000,100,T4,0,true:" UUID1 ",0,1000,100,T4,0,true:" DEV(
                                             UUID2, 3, 1000, 100, "T4", "true", 2, "mig"),
                                         &d, &n, &err),
                     0);
    assert_int_equal(d[0].split, 4);
    assert_int_equal(d[1].split, 4);
    assert_int_equal(d[2].split, 3);
    assert_int_equal(d[0].memory_mib, 1500); /* scaled */
    assert_int_equal(d[2].memory_mib, 1000); /* MIG instances never are */
    hami_devices_free(d, n);
}

/* ---- handshake ---------------------------------------------------------------------- */

static struct hami_node *node_with(const char *more_annotations, int64_t allocatable)
{
    char buf[2048];
    fmt(buf, sizeof(buf), "{'hami.io/node-nvidia-register':'%s'%s}", CORE(UUID0, 0, 1024), more_annotations);
    cJSON *ann = json_of(buf);
    struct hami_node *h = NULL;
    assert_int_equal(hami_node_from_annotations(ann, allocatable, "n", &h), 0);
    assert_non_null(h);
    cJSON_Delete(ann);
    return h;
}

static void test_handshake_states(void **state)
{
    (void)state;
    int64_t t0 = hami_parse_handshake_time("2024-05-14 07:07:33");
    assert_int_equal(t0, 1715670453LL * SEC);
    /* Older plugins and schedulers write dots. */
    assert_int_equal(hami_parse_handshake_time("2024.05.14 07:07:33"), t0);
    assert_int_equal(hami_parse_handshake_time("2024-05.14 07:07:33"), -1);
    assert_int_equal(hami_parse_handshake_time("2024-05-14 07:07:33 UTC"), -1);
    /* Past 2262 nanoseconds overflow int64 (issue 22 item 8): unreadable. */
    assert_int_equal(hami_parse_handshake_time("5111-05-14 07:07:33"), -1);
    assert_int_equal(hami_parse_handshake_time("9999-12-31 23:59:59"), -1);
    assert_true(hami_parse_handshake_time("2262-01-01 00:00:00") > 0);
    char buf[512];

    struct hami_node *h = node_with(",'hami.io/node-handshake':'Requesting_2024-05-14 07:07:33'", 0);
    assert_int_equal(h->handshake, HAMI_HS_REQUESTING);
    assert_null(hami_node_unusable(h, t0 + 60 * SEC, buf, sizeof(buf)));
    assert_string_equal(hami_node_unusable(h, t0 + 61 * SEC, buf, sizeof(buf)),
                        "HAMi's device plugin has not answered the handshake for 61s (timeout 60s): the handshake is "
                        "\"Requesting_2024-05-14 07:07:33\" and the node advertises no nvidia.com/gpu");
    assert_false(hami_handshake_due(h));
    hami_node_free(h);

    /* The kubelet still advertising the count resource keeps the devices. */
    h = node_with(",'hami.io/node-handshake':'Requesting_2024-05-14 07:07:33'", 20);
    assert_null(hami_node_unusable(h, t0 + 3600 * SEC, buf, sizeof(buf)));
    hami_node_free(h);

    /* An answer on either key keeps them; the newest request counts. */
    h = node_with(",'hami.io/node-handshake':'Requesting_2024-05-14 07:07:33',"
                  "'hami.io/node-handshake-nvidia':'Reported 2024-05-14 07:07:40'",
                  0);
    assert_int_equal(h->handshake, HAMI_HS_REPORTED);
    assert_null(hami_node_unusable(h, t0 + 3600 * SEC, buf, sizeof(buf)));
    assert_true(hami_handshake_due(h));
    hami_node_free(h);
    h = node_with(",'hami.io/node-handshake':'Requesting_2024-05-14 07:07:33',"
                  "'hami.io/node-handshake-nvidia':'Requesting_2024-05-14 07:09:33'",
                  0);
    assert_int_equal(h->handshake_ns, t0 + 120 * SEC);
    assert_null(hami_node_unusable(h, t0 + 150 * SEC, buf, sizeof(buf)));
    hami_node_free(h);

    /* Deleted_ by a HAMi scheduler: gone until the plugin reports again. */
    h = node_with(",'hami.io/node-handshake':'Deleted_2024-05-14 07:08:33'", 0);
    assert_int_equal(h->handshake, HAMI_HS_DELETED);
    assert_non_null(strstr(hami_node_unusable(h, t0, buf, sizeof(buf)), "a HAMi scheduler dropped"));
    hami_node_free(h);

    /* An unreadable request time never expires (HAMi documents the same). */
    h = node_with(",'hami.io/node-handshake':'Requesting_yesterday'", 0);
    assert_null(hami_node_unusable(h, t0 + 3600 * SEC, buf, sizeof(buf)));
    hami_node_free(h);

    /* --hami-handshake off ignores it all. */
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    cfg.handshake = HAMI_HANDSHAKE_OFF;
    hami_set_config(&cfg);
    h = node_with(",'hami.io/node-handshake':'Deleted_2024-05-14 07:08:33'", 0);
    assert_null(hami_node_unusable(h, t0, buf, sizeof(buf)));
    hami_node_free(h);

    hami_handshake_request_value(t0, buf, sizeof(buf));
    assert_string_equal(buf, "Requesting_2024-05-14 07:07:33");
    enum hami_handshake_mode m;
    assert_int_equal(hami_handshake_mode_parse("observe", &m), 0);
    assert_int_equal(m, HAMI_HANDSHAKE_OBSERVE);
    assert_int_equal(hami_handshake_mode_parse("on", &m), -1);
}

/* ---- nodes in the cache -------------------------------------------------------------- */

static void test_node_malformed_keeps_other_resources(void **state)
{
    struct cluster_cache *c = *state;
    add_node(c, "{'kind':'Node','metadata':{'name':'mixed','annotations':{'hami.io/node-nvidia-register':"
                "'GPU-x,10,lots,100,T4,0,true:'}},'status':{'allocatable':{'tencent.com/vcuda-core':'200',"
                "'tencent.com/vcuda-memory':'20','nvidia.com/gpu':'10'}}}");
    const struct node_state *n = cache_find_node(c, "mixed");
    assert_non_null(n->spec->hami);
    assert_string_equal(n->spec->hami->error, "entry 0: memory \"lots\" is not a MiB count in 1..16777216");
    assert_int_equal(n->gpu_count, 2); /* the vcuda GPUs stay */
    struct pod_info *p = pod_of("{'metadata':{'name':'v','namespace':'t'},'spec':{'containers':[{'name':'c',"
                                "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'5'}}}"
                                "]}}");
    struct fit_out out;
    assert_true(fit(c, "mixed", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    pod_info_free(p);
    expect_misfit(c, "mixed", vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':1000}"), true,
                  "the HAMi registration (hami.io/node-nvidia-register) is unusable: entry 0: memory \"lots\" is not a "
                  "MiB count in 1..16777216");
}

static void test_hami_node_counts_vgpus(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "hami", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768), 20, "");
    add_node(c, "{'kind':'Node','metadata':{'name':'whole'},'status':{'allocatable':{'nvidia.com/gpu':'4'}}}");
    const struct node_state *n = cache_find_node(c, "hami");
    assert_int_equal(n->gpu_count, 0); /* nvidia.com/gpu: 20 are vGPUs, not GPUs */
    assert_int_equal(n->hami->count, 2);
    /* Quota model: the device type, without a model label. */
    assert_string_equal(n->spec->model, V100);
    assert_int_equal(cache_find_node(c, "whole")->gpu_count, 4);
    /* nvidia.com/gpu: 2 alone: two vGPUs with the whole memory on a HAMi
     * node, two whole GPUs elsewhere. */
    assert_int_equal(expect_fit(c, "hami", vgpu_pod("", "{'nvidia.com/gpu':2}"), POLICY_SPREAD), 0x3);
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':2}");
    struct fit_out out;
    assert_true(fit(c, "whole", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    assert_int_equal(out.masks[0], 0x3);
    assert_int_equal(out.hami[0], 0);
    pod_info_free(p);
    expect_misfit(c, "whole", vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpucores':20}"), true,
                  "node is not a HAMi node (no hami.io/node-nvidia-register annotation); container \"main\" asks for "
                  "HAMi vGPUs (nvidia.com/gpumem, nvidia.com/gpumem-percentage or nvidia.com/gpucores)");
}

/* ---- requests ---------------------------------------------------------------------------- */

static void test_request_defaults(void **state)
{
    (void)state;
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':'1'}");
    const struct container_request *r = &p->containers[0];
    assert_ptr_equal(r->family, GPU_FAMILY_PGPU);
    assert_int_equal(r->whole_gpus, 1);
    assert_int_equal(r->hami.nums, 1);
    assert_int_equal(r->hami.memory_mib, 0);
    assert_int_equal(r->hami.memory_percent, 100); /* the whole GPU's memory */
    assert_int_equal(r->hami.cores, 0);
    assert_non_null(p->hami);
    pod_info_free(p);

    struct hami_config cfg;
    hami_config_defaults(&cfg);
    cfg.default_memory_mib = 4000;
    cfg.default_cores = 20;
    hami_set_config(&cfg);
    p = vgpu_pod("", "{'nvidia.com/gpu':'2','nvidia.com/gpumem-percentage':'25'}");
    r = &p->containers[0];
    assert_ptr_equal(r->family, GPU_FAMILY_HAMI);
    assert_int_equal(r->hami.nums, 2);
    assert_int_equal(r->hami.memory_percent, 25);
    assert_int_equal(r->hami.cores, 20);
    assert_int_equal(r->cores, 40);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':'1','nvidia.com/gpucores':'0'}");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI); /* gpucores: 0 is still a HAMi request */
    assert_int_equal(p->containers[0].hami.memory_mib, 4000);
    assert_int_equal(p->containers[0].hami.cores, 0);
    pod_info_free(p);
    /* Pods without nvidia.com/gpu carry no HAMi state. */
    p = vgpu_pod("", "{'tencent.com/vcuda-core':'100'}");
    assert_null(p->hami);
    assert_int_equal(p->containers[0].hami.nums, 0);
    pod_info_free(p);
}

/* HAMi's memoryFactor: gpumem counts units of the factor (its
 * GenerateResourceRequests multiplies before the fit reads it); percentages
 * and the default memory are not multiplied. */
static void test_request_memory_factor(void **state)
{
    (void)state;
    struct hami_config cfg;
    hami_config_defaults(&cfg);
    assert_int_equal(cfg.memory_factor, 1);
    cfg.memory_factor = 1024;
    cfg.default_memory_mib = 500;
    hami_set_config(&cfg);
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':3}");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI);
    assert_int_equal(p->containers[0].hami.memory_mib, 3072);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':30}");
    assert_int_equal(p->containers[0].hami.memory_percent, 30);
    assert_int_equal(p->containers[0].hami.memory_mib, 0);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpucores':20}");
    assert_int_equal(p->containers[0].hami.memory_mib, 500);
    pod_info_free(p);
    /* The product is range-checked: 16385 x 1024 MiB is past 16 TiB. */
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':16385}");
    assert_non_null(p->request_error);
    assert_non_null(strstr(p->request_error, "memory factor 1024"));
    pod_info_free(p);
    hami_config_defaults(&cfg);
    hami_set_config(&cfg);
}

static void test_request_explicit(void **state)
{
    (void)state;
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':3000,'nvidia.com/gpucores':30}");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI);
    assert_int_equal(p->containers[0].hami.memory_mib, 3000);
    assert_int_equal(p->containers[0].hami.cores, 30);
    assert_string_equal(GPU_FAMILY_HAMI->memory_resource, RES_HAMI_MEMORY);
    pod_info_free(p);
    /* gpumem wins over a percentage, as in HAMi. */
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':'3k','nvidia.com/gpumem-percentage':50}");
    assert_int_equal(p->containers[0].hami.memory_mib, 3000);
    assert_int_equal(p->containers[0].hami.memory_percent, 0);
    pod_info_free(p);
    /* Requests count when limits name nothing. */
    p = pod_ann("", "[{'name':'r','resources':{'requests':{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':10}}}]");
    assert_int_equal(p->containers[0].hami.memory_percent, 10);
    pod_info_free(p);
}

/* Requests as HAMi reads them (issue 25 items 6 and 7): gpucores above 100
 * is 100, gpumem-percentage 0 is not given, and nvidia.com/gpu with
 * gpucores 100 and no memory (what HAMi's webhook makes of a plain
 * whole-GPU container) is whole GPUs anywhere, an exclusive vGPU on HAMi. */
static void test_requests_as_hami_reads_them(void **state)
{
    (void)state;
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':2000,'nvidia.com/gpucores':150}");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI);
    assert_int_equal(p->containers[0].hami.cores, 100);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':0,'nvidia.com/gpucores':30}");
    assert_null(p->request_error);
    assert_int_equal(p->containers[0].hami.memory_percent, 100);
    assert_int_equal(p->containers[0].hami.cores, 30);
    pod_info_free(p);
    /* Percentage 0 alone names no HAMi-only request: plain whole GPUs. */
    p = vgpu_pod("", "{'nvidia.com/gpu':2,'nvidia.com/gpumem-percentage':0}");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_PGPU);
    assert_int_equal(p->containers[0].whole_gpus, 2);
    pod_info_free(p);
    static const char *const marked[] = {"{'nvidia.com/gpu':2,'nvidia.com/gpucores':100}",
                                         "{'nvidia.com/gpu':2,'nvidia.com/gpucores':'120'}"};
    for (size_t k = 0; k < sizeof(marked) / sizeof(marked[0]); k++) {
        p = vgpu_pod("", marked[k]);
        assert_null(p->request_error);
        assert_ptr_equal(p->containers[0].family, GPU_FAMILY_PGPU);
        assert_int_equal(p->containers[0].whole_gpus, 2);
        assert_int_equal(p->containers[0].hami.nums, 2);
        assert_int_equal(p->containers[0].hami.cores, 100);
        assert_int_equal(p->containers[0].hami.memory_percent, 100);
        pod_info_free(p);
    }
    /* With memory it stays a HAMi vGPU request. */
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':1000,'nvidia.com/gpucores':100}");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI);
    pod_info_free(p);
}

/* HAMi v2.10's GPU policies mutex and numa, and comma chains of policies,
 * are read (issue 25 item 8): the first binpack or spread orders the GPUs,
 * the others take the default order. They made pods unschedulable. */
static void test_gpu_policy_chains(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        enum hami_pack want;
    } cases[] = {{"mutex", HAMI_PACK_DEFAULT},
                 {"numa", HAMI_PACK_DEFAULT},
                 {"numa,spread", HAMI_PACK_SPREAD},
                 {" mutex , binpack,spread", HAMI_PACK_BINPACK},
                 {"topology-aware,numa", HAMI_PACK_DEFAULT}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char ann[128];
        snprintf(ann, sizeof(ann), "'hami.io/gpu-scheduler-policy':'%s'", cases[k].value);
        struct pod_info *p = vgpu_pod(ann, "{'nvidia.com/gpu':1,'nvidia.com/gpumem':1000}");
        if (p->request_error)
            fail_msg("%s: %s", cases[k].value, p->request_error);
        assert_int_equal(p->hami->gpu_policy, cases[k].want);
        pod_info_free(p);
    }
}

static void expect_request_error(const char *annotations, const char *limits, const char *message)
{
    struct pod_info *p = vgpu_pod(annotations, limits);
    if (!p->request_error || strcmp(p->request_error, message) != 0)
        fail_msg("%s: request error \"%s\", expected \"%s\"", limits, p->request_error ? p->request_error : "(none)",
                 message);
    pod_info_free(p);
}

static void test_request_errors(void **state)
{
    (void)state;
    expect_request_error("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':101}",
                         "container \"main\": nvidia.com/gpumem-percentage 101 is not a percentage in 1..100");
    expect_request_error("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem':'3Gi'}",
                         "container \"main\": nvidia.com/gpumem 3221225472 is above 16777216; it counts MiB per vGPU "
                         "(\"3Gi\" is bytes, write 3072)");
    expect_request_error("", "{'nvidia.com/gpumem':1000}",
                         "container \"main\" asks for nvidia.com/gpumem, nvidia.com/gpumem-percentage or "
                         "nvidia.com/gpucores without nvidia.com/gpu; HAMi's admission webhook adds nvidia.com/gpu: 1 "
                         "to such containers (is it installed?)");
    expect_request_error("", "{'nvidia.com/gpu':65,'nvidia.com/gpucores':10}",
                         "container \"main\" asks for 65 vGPUs; at most 64, each on its own GPU");
    expect_request_error("", "{'nvidia.com/gpu':1,'nvidia.com/gpucores':'-5'}",
                         "container \"main\": nvidia.com/gpucores \"-5\" is invalid: quantity is negative");
    expect_request_error("", "{'tencent.com/vcuda-core':10,'tencent.com/vcuda-memory':1,'nvidia.com/gpumem':10}",
                         "container \"main\" mixes GPU resources of different kinds (tencent.com/vcuda-core and "
                         "nvidia.com/gpu); a container uses one kind");
    expect_request_error("'hami.io/gpu-scheduler-policy':'fastest'", "{'nvidia.com/gpu':1}",
                         "annotation hami.io/gpu-scheduler-policy \"fastest\" is not binpack, spread, mutex, numa "
                         "or topology-aware (or a comma chain of them)");
    expect_request_error("'hami.io/gpu-scheduler-policy':'binpack,,numa'", "{'nvidia.com/gpu':1}",
                         "annotation hami.io/gpu-scheduler-policy \"binpack,,numa\" is not binpack, spread, mutex, "
                         "numa or topology-aware (or a comma chain of them)");
    expect_request_error("'hami.io/node-scheduler-policy':'Spread'", "{'nvidia.com/gpu':1}",
                         "annotation hami.io/node-scheduler-policy \"Spread\" is not binpack or spread");
}

static void test_pod_annotations(void **state)
{
    (void)state;
    struct pod_info *p = vgpu_pod("'nvidia.com/use-gputype':'Tesla V100-PCIE-32GB, nvidia a10,,',"
                                  "'nvidia.com/nouse-gpuuuid':' " UUID1 " ','nvidia.com/vgpu-mode':'hami-core',"
                                  "'hami.io/gpu-scheduler-policy':'binpack','hami.io/node-scheduler-policy':"
                                  "'topology-aware'",
                                  "{'nvidia.com/gpu':1}");
    const struct hami_pod *h = p->hami;
    assert_non_null(h);
    assert_int_equal(h->use_types.count, 2);
    /* Sorted by length, shortest first (matching stops at the first entry
     * longer than the device type). */
    assert_string_equal(h->use_types.items[0], "NVIDIA A10");
    assert_string_equal(h->use_types.items[1], "TESLA V100-PCIE-32GB");
    assert_int_equal(h->nouse_uuids.count, 1);
    assert_string_equal(h->nouse_uuids.items[0], UUID1);
    assert_int_equal(h->gpu_policy, HAMI_PACK_BINPACK);
    assert_int_equal(h->node_policy, HAMI_PACK_DEFAULT);
    struct hami_device v100 = {.uuid = (char *)UUID0, .type_upper = (char *)"NVIDIA-TESLA V100-PCIE-32GB"};
    struct hami_device a10 = {.uuid = (char *)UUID1, .type_upper = (char *)"NVIDIA-NVIDIA A10"};
    struct hami_device t4 = {.uuid = (char *)UUID2, .type_upper = (char *)"NVIDIA-T4", .mode = HAMI_MODE_MPS};
    assert_true(hami_pod_type_ok(h, &v100) && hami_pod_uuid_ok(h, &v100) && hami_pod_mode_ok(h, &v100));
    assert_true(hami_pod_type_ok(h, &a10));
    assert_false(hami_pod_uuid_ok(h, &a10));
    assert_false(hami_pod_type_ok(h, &t4));
    assert_false(hami_pod_mode_ok(h, &t4));
    /* A clone keeps everything. */
    struct hami_pod *copy = hami_pod_clone(h);
    assert_int_equal(copy->use_types.count, 2);
    assert_string_equal(copy->vgpu_mode, "hami-core");
    assert_false(hami_pod_uuid_ok(copy, &a10));
    hami_pod_free(copy);
    pod_info_free(p);
}

/* ---- allocation annotation ----------------------------------------------------------------- */

static void expect_roundtrip(const char *text, int ncontainers, const char *encoded)
{
    struct hami_alloc a;
    char *err = NULL;
    assert_int_equal(hami_alloc_decode(text, &a, &err), 0);
    assert_null(err);
    assert_int_equal(a.ncontainers, ncontainers);
    char *back = hami_alloc_encode(&a);
    assert_string_equal(back, encoded);
    free(back);
    hami_alloc_free(&a);
}

static void test_alloc_format(void **state)
{
    (void)state;
    struct hami_alloc a;
    char *err;
    const char *two = "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;;";
    assert_int_equal(hami_alloc_decode(two, &a, &err), 0);
    assert_int_equal(a.ncontainers, 2);
    assert_int_equal(a.containers[0].count, 2);
    assert_string_equal(a.containers[0].devices[1].uuid, "GPU-b");
    assert_string_equal(a.containers[0].devices[1].vendor, "NVIDIA");
    assert_int_equal(a.containers[0].devices[1].memory_mib, 3000);
    assert_int_equal(a.containers[0].devices[1].cores, 30);
    assert_int_equal(a.containers[1].count, 0); /* a container without vGPUs: an empty entry */
    hami_alloc_free(&a);
    expect_roundtrip(two, 2, two);
    /* HAMi's protocol example: two containers sharing one GPU. */
    expect_roundtrip(UUID1 ",NVIDIA,3000,0:;" UUID1 ",NVIDIA,5000,0:;", 2, UUID1 ",NVIDIA,3000,0:;" UUID1
                                                                            ",NVIDIA,5000,0:;");
    expect_roundtrip("", 0, "");
    expect_roundtrip(";", 1, ";");
    expect_roundtrip("GPU-a,NVIDIA,1,2:", 1, "GPU-a,NVIDIA,1,2:;");   /* no final ';' */
    expect_roundtrip("GPU-a,NVIDIA,1,2,9:;", 1, "GPU-a,NVIDIA,1,2:;"); /* later fields ignored */
    expect_roundtrip("GPU-a[1-0],NVIDIA,1,2:;", 1, "GPU-a[1-0],NVIDIA,1,2:;");

    const char *bad[][2] = {{"GPU-a,NVIDIA,3000:;", "container 0: a device has 3 fields"},
                            {";GPU-a,NVIDIA,x,30:;", "container 1: a device's memory or cores is not a number"},
                            {"GPU-a,NVIDIA,1,-1:;", "not a number"},
                            {",NVIDIA,1,1:;", "empty or unprintable UUID"},
                            {"GPU-a,NVIDIA,99999999999,1:;", "not a number in range"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(hami_alloc_decode(bad[i][0], &a, &err), -1);
        assert_non_null(err);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad[i][0], err, bad[i][1]);
        free(err);
        assert_int_equal(a.ncontainers, 0);
    }
}

/* ---- fit -------------------------------------------------------------------------------------- */

#define GPUMEM(n, mem, cores) "{'nvidia.com/gpu':" #n ",'nvidia.com/gpumem':" #mem ",'nvidia.com/gpucores':" #cores "}"

static void test_fit_memory(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "v", CORE(UUID0, 0, 32768) CORE(UUID1, 2, 32768), 20, "");
    add_vgpu_pod(c, "a", "v", GPUMEM(1, 30000, 0), UUID0 ",NVIDIA,30000,0:;");
    add_vgpu_pod(c, "b", "v", GPUMEM(1, 28768, 0), UUID1 ",NVIDIA,28768,0:;");
    assert_int_equal(gpu_state(c, "v", 0)->memory_used, 30000);
    expect_misfit(c, "v", vgpu_pod("", GPUMEM(1, 6000, 0)), false,
                  "container \"main\" needs 6000 MiB and 0% cores on one GPU: GPU 2 (GPU-0fc3\xe2\x80\xa6) has 4000 "
                  "MiB free, container needs 6000; GPU 0 (GPU-0055\xe2\x80\xa6) has 2768 MiB free, container needs "
                  "6000");
    assert_int_equal(expect_fit(c, "v", vgpu_pod("", GPUMEM(1, 4000, 0)), POLICY_SPREAD), 0x2);
    /* Percentages take that share of the chosen GPU. */
    assert_int_equal(expect_fit(c, "v", vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':12}"),
                                POLICY_SPREAD),
                     0x2);
    expect_misfit(c, "v", vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':13}"), false,
                  "container \"main\" needs 13% of the GPU's memory and 0% cores on one GPU: GPU 2 (GPU-0fc3\xe2\x80"
                  "\xa6) has 4000 MiB free, container needs 4259; GPU 0 (GPU-0055\xe2\x80\xa6) has 2768 MiB free, "
                  "container needs 4259");
    /* More than any GPU has: preemption cannot help. */
    expect_misfit(c, "v", vgpu_pod("", GPUMEM(1, 40000, 0)), true,
                  "container \"main\" needs 40000 MiB and 0% cores on one GPU: GPU 2 (GPU-0fc3\xe2\x80\xa6) has 32768 "
                  "MiB and 100% cores in all, container needs 40000 and 0; GPU 0 (GPU-0055\xe2\x80\xa6) has 32768 MiB "
                  "and 100% cores in all, container needs 40000 and 0");
}

static void test_fit_split_count(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "s", DEV(UUID0, 2, 32768, 100, V100, "true", 0, "hami-core"), 2, "");
    add_vgpu_pod(c, "a", "s", GPUMEM(1, 1000, 10), UUID0 ",NVIDIA,1000,10:;");
    assert_int_equal(expect_fit(c, "s", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_SPREAD), 0x1);
    add_vgpu_pod(c, "b", "s", GPUMEM(1, 1000, 10), UUID0 ",NVIDIA,1000,10:;");
    assert_int_equal(gpu_state(c, "s", 0)->tasks, 2);
    expect_misfit(c, "s", vgpu_pod("", GPUMEM(1, 1000, 10)), false,
                  "container \"main\" needs 1000 MiB and 10% cores on one GPU: GPU 0 (GPU-0055\xe2\x80\xa6) already "
                  "holds 2 of its 2 tasks");
}

static void test_fit_cores_and_exclusive(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "x", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768), 20, "");
    add_vgpu_pod(c, "light", "x", GPUMEM(1, 1000, 0), UUID0 ",NVIDIA,1000,0:;");
    add_vgpu_pod(c, "heavy", "x", GPUMEM(1, 1000, 80), UUID1 ",NVIDIA,1000,80:;");
    /* gpucores 100 needs a GPU nobody uses, even one whose cores are free. */
    expect_misfit(c, "x", vgpu_pod("", GPUMEM(1, 1000, 100)), false,
                  "container \"main\" needs 1000 MiB and 100% cores on one GPU: GPU 1 (GPU-0fc3\xe2\x80\xa6) has 20% "
                  "cores free, container needs 100; GPU 0 (GPU-0055\xe2\x80\xa6) is in use by 1 task, container "
                  "needs it alone (gpucores 100)");
    assert_int_equal(expect_fit(c, "x", vgpu_pod("", GPUMEM(1, 1000, 30)), POLICY_SPREAD), 0x1);
    /* An exclusive task leaves no cores, and a cores-less task may not join it. */
    add_vgpu_pod(c, "rest", "x", GPUMEM(1, 1000, 20), UUID1 ",NVIDIA,1000,20:;");
    add_vgpu_pod(c, "solo", "x", GPUMEM(1, 1000, 100), NULL); /* unattributed: held against the node */
    const struct node_state *n = cache_find_node(c, "x");
    assert_int_equal(n->hami->unattributed.vgpus, 1);
    assert_int_equal(n->hami->unattributed.cores, 100);
    expect_misfit(c, "x", vgpu_pod("", GPUMEM(1, 1000, 10)), false,
                  "1 pod without a usable hami.io/vgpu-devices-allocated annotation holds 1 vGPUs, 1000 MiB and 100% "
                  "cores on this node; with this pod placed the node would need 5 of 20 tasks, 5000 of 65536 MiB and "
                  "210% of 200% cores");
    cache_delete_pod(c, "t/solo");
    expect_misfit(c, "x", vgpu_pod("'nvidia.com/use-gpuuuid':'" UUID1 "'", GPUMEM(1, 1000, 0)), false,
                  "container \"main\" needs 1000 MiB and 0% cores on one GPU: GPU 1 (GPU-0fc3\xe2\x80\xa6) has no cores "
                  "left, and a container reserving none may not join it (not considered: 1 excluded by "
                  "nvidia.com/use-gpuuuid/nouse-gpuuuid)");
}

static void test_fit_unhealthy_mig_never_used(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "u",
                  DEV(UUID0, 10, 32768, 100, V100, "false", 0, "hami-core")
                      DEV(UUID1, 10, 32768, 100, V100, "true", 1, "mig")
                          DEV(UUID2, 10, 16384, 100, "NVIDIA-T4", "true", 2, "mps"),
                  30, "");
    /* MPS-mode devices take vGPUs like hami-core ones. */
    assert_int_equal(expect_fit(c, "u", vgpu_pod("", "{'nvidia.com/gpu':1}"), POLICY_SPREAD), 0x4);
    expect_misfit(c, "u", vgpu_pod("", "{'nvidia.com/gpu':2}"), true,
                  "container \"main\" needs 2 vGPUs on different GPUs, each with 100% of the GPU's memory and 0% "
                  "cores; only 1 GPU can take one (not considered: 1 unhealthy, 1 in MIG mode without usable migProfiles)");
    expect_misfit(c, "u", vgpu_pod("'nvidia.com/vgpu-mode':'hami-core'", "{'nvidia.com/gpu':1}"), true,
                  "container \"main\" needs 100% of the GPU's memory and 0% cores on one GPU: no GPU of this node may "
                  "be used (not considered: 1 unhealthy, 1 in MIG mode without usable migProfiles, 1 of another mode "
                  "than nvidia.com/vgpu-mode)");
}

/* HAMi v2.10's hami.io/device-cordon: listed devices (trimmed, empty
 * entries skipped) take no new vGPU; the others still do. */
static void test_fit_device_cordon(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "k", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768) CORE(UUID2, 2, 32768), 30,
                  ",'hami.io/device-cordon':' " UUID1 " ,, " UUID2 ",GPU-none'");
    assert_int_equal(expect_fit(c, "k", vgpu_pod("", "{'nvidia.com/gpu':1}"), POLICY_SPREAD), 0x1);
    expect_misfit(c, "k", vgpu_pod("", "{'nvidia.com/gpu':2}"), true,
                  "container \"main\" needs 2 vGPUs on different GPUs, each with 100% of the GPU's memory and 0% "
                  "cores; only 1 GPU can take one (not considered: 2 cordoned by hami.io/device-cordon)");
}

static void test_fit_type_and_uuid(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "m",
                  CORE(UUID0, 0, 32768) DEV(UUID1, 10, 24576, 100, "NVIDIA-A10", "true", 1, "hami-core")
                      DEV(UUID2, 10, 16384, 100, "NVIDIA-Tesla T4", "true", 2, "hami-core"),
                  30, "");
    assert_int_equal(expect_fit(c, "m", vgpu_pod("'nvidia.com/use-gputype':'a10'", "{'nvidia.com/gpu':1}"),
                                POLICY_SPREAD),
                     0x2);
    assert_int_equal(
        expect_fit(c, "m", vgpu_pod("'nvidia.com/nouse-gputype':'V100,A10'", "{'nvidia.com/gpu':1}"), POLICY_SPREAD),
        0x4);
    assert_int_equal(expect_fit(c, "m", vgpu_pod("'nvidia.com/use-gpuuuid':'" UUID0 "," UUID2 "'",
                                                 "{'nvidia.com/gpu':2}"),
                                POLICY_SPREAD),
                     0x5);
    assert_int_equal(expect_fit(c, "m", vgpu_pod("'nvidia.com/nouse-gpuuuid':'" UUID0 "," UUID2 "'",
                                                 "{'nvidia.com/gpu':1}"),
                                POLICY_SPREAD),
                     0x2);
    expect_misfit(c, "m", vgpu_pod("'nvidia.com/use-gputype':'H100'", "{'nvidia.com/gpu':1}"), true,
                  "container \"main\" needs 100% of the GPU's memory and 0% cores on one GPU: no GPU of this node may "
                  "be used (not considered: 3 excluded by nvidia.com/use-gputype/nouse-gputype)");
    expect_misfit(c, "m", vgpu_pod("'nvidia.com/use-gpuuuid':'GPU-elsewhere'", "{'nvidia.com/gpu':1}"), true,
                  "container \"main\" needs 100% of the GPU's memory and 0% cores on one GPU: no GPU of this node may "
                  "be used (not considered: 3 excluded by nvidia.com/use-gpuuuid/nouse-gpuuuid)");
}

static void test_fit_binpack_and_spread(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "p", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 10000) CORE(UUID2, 2, 10000), 30, "");
    add_vgpu_pod(c, "a", "p", GPUMEM(1, 2000, 20), UUID1 ",NVIDIA,2000,20:;");
    add_vgpu_pod(c, "b", "p", GPUMEM(1, 5000, 50), UUID2 ",NVIDIA,5000,50:;");
    /* Spread (HAMi's default): the emptiest GPU; binpack: the fullest that fits. */
    assert_int_equal(expect_fit(c, "p", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_SPREAD), 0x1);
    assert_int_equal(expect_fit(c, "p", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_BINPACK), 0x4);
    /* The pod's annotation wins over the flag. */
    assert_int_equal(expect_fit(c, "p", vgpu_pod("'hami.io/gpu-scheduler-policy':'binpack'", GPUMEM(1, 1000, 10)),
                                POLICY_SPREAD),
                     0x4);
    assert_int_equal(expect_fit(c, "p", vgpu_pod("'hami.io/gpu-scheduler-policy':'spread'", GPUMEM(1, 1000, 10)),
                                POLICY_BINPACK),
                     0x1);
    /* Binpack skips a GPU that cannot take it. */
    assert_int_equal(expect_fit(c, "p", vgpu_pod("", GPUMEM(1, 6000, 10)), POLICY_BINPACK), 0x2);
    /* Several vGPUs: distinct GPUs, chosen in policy order. */
    assert_int_equal(expect_fit(c, "p", vgpu_pod("", GPUMEM(2, 1000, 10)), POLICY_SPREAD), 0x3);
    assert_int_equal(expect_fit(c, "p", vgpu_pod("", GPUMEM(2, 1000, 10)), POLICY_BINPACK), 0x6);
    expect_misfit(c, "p", vgpu_pod("", GPUMEM(4, 1000, 10)), true,
                  "container \"main\" needs 4 vGPUs on different GPUs; the node has 3 HAMi GPUs");
    /* Two containers may share a GPU; the second sees the first's use. */
    struct pod_info *p = pod_ann("", "[{'name':'a','resources':{'limits':" GPUMEM(1, 3000, 10) "}},"
                                     "{'name':'b','resources':{'limits':" GPUMEM(1, 3000, 10) "}}]");
    struct fit_out out;
    assert_true(fit(c, "p", p, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.hami[0], 0x4);
    assert_int_equal(out.hami[1], 0x2); /* GPU 2 has 2000 MiB left after the first */
    pod_info_free(p);
}

/* Four GPUs, NVLinked in pairs {0,3} and {1,2}; the topology lists them by
 * UUID in another order than the registration. */
static const char pair_topology[] =
    "{\\'version\\':1,\\'gpus\\':[{\\'index\\':0,\\'uuid\\':\\'" UUID0 "\\'},{\\'index\\':1,\\'uuid\\':\\'" UUID3
    "\\'},{\\'index\\':2,\\'uuid\\':\\'" UUID2 "\\'},{\\'index\\':3,\\'uuid\\':\\'" UUID1 "\\'}],\\'links\\':["
    "[\\'X\\',\\'SYS\\',\\'SYS\\',\\'NV4\\'],[\\'SYS\\',\\'X\\',\\'NV4\\',\\'SYS\\'],"
    "[\\'SYS\\',\\'NV4\\',\\'X\\',\\'SYS\\'],[\\'NV4\\',\\'SYS\\',\\'SYS\\',\\'X\\']]}";

static void test_fit_topology(void **state)
{
    struct cluster_cache *c = *state;
    char ann[2048];
    fmt(ann, sizeof(ann), ",'gpu-admission.io/topology':'%s'", pair_topology);
    add_hami_node(c, "t", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 10000) CORE(UUID2, 2, 10000) CORE(UUID3, 3, 10000), 40,
                  ann);
    const struct node_state *n = cache_find_node(c, "t");
    assert_null(n->spec->topology_error);
    assert_int_equal(n->spec->hami->devices[1].topo, 3); /* by UUID */
    /* The policy's pick (equal scores go to the later devices, as HAMi's
     * Fit walks its sorted list from the end: devices 3 and 2, topology
     * GPUs 1 and 2, NV4) is already the best connected: it stays. */
    struct pod_info *p = vgpu_pod("", GPUMEM(2, 1000, 10));
    struct fit_out out;
    assert_true(fit(c, "t", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    assert_int_equal(out.hami[0], 0xc);
    assert_true(out.r.set_score > 0);
    assert_int_equal(out.r.set_score, out.r.set_best);
    pod_info_free(p);
    /* With device 1 in use, binpack picks it and, of the three equal others,
     * the last, device 3 (topology GPUs 3 and 1: SYS); the topology offers a
     * linked pair instead. Without the annotation the pick stays. */
    add_vgpu_pod(c, "busy", "t", GPUMEM(1, 9500, 10), UUID1 ",NVIDIA,9500,10:;");
    add_hami_node(c, "plain", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 10000) CORE(UUID2, 2, 10000) CORE(UUID3, 3, 10000),
                  40, "");
    add_vgpu_pod(c, "busy2", "plain", GPUMEM(1, 9500, 10), UUID1 ",NVIDIA,9500,10:;");
    p = vgpu_pod("", GPUMEM(2, 500, 10));
    assert_true(fit(c, "plain", p, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_int_equal(out.hami[0], 0xa);
    assert_true(fit(c, "t", p, POLICY_BINPACK, POLICY_BINPACK, &out));
    assert_true(out.hami[0] == 0x3 || out.hami[0] == 0xc);
    assert_int_equal(out.r.set_score, out.r.set_best);
    pod_info_free(p);
}

/* HAMi's order: equal device scores go to the later device (its Fit walks
 * the sorted list from the end), and hami.io/device-scoring-weights weighs
 * the three shares of the device score. */
static void test_fit_hami_order_and_weights(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "eq", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 10000) CORE(UUID2, 2, 10000), 30, "");
    assert_int_equal(expect_fit(c, "eq", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_SPREAD), 0x4);
    assert_int_equal(expect_fit(c, "eq", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_BINPACK), 0x4);
    assert_int_equal(expect_fit(c, "eq", vgpu_pod("", GPUMEM(2, 1000, 10)), POLICY_SPREAD), 0x6);

    /* Device 0 holds little memory and half the cores, device 1 most memory
     * and no cores: equal weights make device 1 the fuller (binpack takes
     * it), cores weighted 3 make it device 0. */
    add_hami_node(c, "w", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 10000), 20, "");
    add_vgpu_pod(c, "w0", "w", GPUMEM(1, 1000, 50), UUID0 ",NVIDIA,1000,50:;");
    add_vgpu_pod(c, "w1", "w", GPUMEM(1, 8000, 0), UUID1 ",NVIDIA,8000,0:;");
    assert_int_equal(expect_fit(c, "w", vgpu_pod("", GPUMEM(1, 1000, 10)), POLICY_BINPACK), 0x2);
    assert_int_equal(expect_fit(c, "w",
                                vgpu_pod("'hami.io/device-scoring-weights':' slot=1, core=3 ,memory=1'",
                                         GPUMEM(1, 1000, 10)),
                                POLICY_BINPACK),
                     0x1);
    /* HAMi's ParseDeviceScoringWeights: all three keys, each once,
     * non-negative integers, one above 0. */
    static const char *const bad[] = {"slot=1,core=1", "slot=1,core=1,memory=1,slot=1", "slot=1,core=1,core=1",
                                      "slot=0,core=0,memory=0", "slot=-1,core=1,memory=1", "slot=1,core=x,memory=1",
                                      "slot=1,core=1,mem=1", "slot=1,core=1,memory"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char ann[256];
        fmt(ann, sizeof(ann), "'hami.io/device-scoring-weights':'%s'", bad[i]);
        struct pod_info *p = vgpu_pod(ann, GPUMEM(1, 1000, 10));
        if (!p->request_error || !strstr(p->request_error, "hami.io/device-scoring-weights"))
            fail_msg("\"%s\" was accepted", bad[i]);
        pod_info_free(p);
    }
}

static void test_node_scores(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "full", CORE(UUID0, 0, 10000), 10, "");
    add_hami_node(c, "empty", CORE(UUID1, 0, 10000), 10, "");
    add_vgpu_pod(c, "a", "full", GPUMEM(1, 5000, 50), UUID0 ",NVIDIA,5000,50:;");
    struct pod_info *p = vgpu_pod("", GPUMEM(1, 1000, 10));
    struct fit_out full, empty;
    assert_true(fit(c, "full", p, POLICY_SPREAD, POLICY_BINPACK, &full));
    assert_true(fit(c, "empty", p, POLICY_SPREAD, POLICY_BINPACK, &empty));
    /* HAMi's node score: (tasks 2/10 + memory 6000/10000 + cores 60/100) / 3. */
    assert_int_equal(full.r.score, 467);
    assert_int_equal(empty.r.score, 100);
    assert_true(fit(c, "full", p, POLICY_SPREAD, POLICY_SPREAD, &full));
    assert_int_equal(full.r.score, 533);
    pod_info_free(p);
    /* hami.io/node-scheduler-policy overrides --node-policy. */
    p = vgpu_pod("'hami.io/node-scheduler-policy':'spread'", GPUMEM(1, 1000, 10));
    assert_true(fit(c, "full", p, POLICY_SPREAD, POLICY_BINPACK, &full));
    assert_int_equal(full.r.score, 533);
    pod_info_free(p);
}

static void test_fit_excludes_self_and_handshake(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "h", DEV(UUID0, 1, 10000, 100, V100, "true", 0, "hami-core"), 1,
                  ",'hami.io/node-handshake':'Reported_2024-05-14 07:07:33'");
    add_vgpu_pod(c, "new", "h", GPUMEM(1, 5000, 50), UUID0 ",NVIDIA,5000,50:;");
    /* The pod's own charge does not count against it (a re-filter). */
    struct pod_info *p = vgpu_pod("", GPUMEM(1, 5000, 50));
    struct fit_out out;
    assert_true(fit(c, "h", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    pod_info_free(p);
    /* An unanswered handshake and no nvidia.com/gpu: the devices are gone. */
    add_hami_node(c, "gone", CORE(UUID0, 0, 10000), 0, ",'hami.io/node-handshake':'Requesting_2020-01-01 00:00:00'");
    p = vgpu_pod("", GPUMEM(1, 5000, 50));
    assert_false(fit(c, "gone", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    assert_true(out.r.unresolvable);
    assert_non_null(strstr(out.r.reason, "HAMi's device plugin has not answered the handshake"));
    pod_info_free(p);
}

/* ---- charges ------------------------------------------------------------------------------------ */

static void test_charges_from_annotations(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "c", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768), 20, "");
    /* -allocated wins; -to-allocate is what the plugin empties as it goes. */
    add_node(c, "{'kind':'Node','metadata':{'name':'other'},'status':{'allocatable':{'cpu':'1'}}}");
    char buf[2048];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'p','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'%s',"
        "'hami.io/vgpu-devices-to-allocate':';;','hami.io/vgpu-node':'c','hami.io/vgpu-time':'1705054796'}},"
        "'spec':{'nodeName':'c','containers':[{'name':'a','resources':{'limits':" GPUMEM(2, 3000, 30) "}},"
        "{'name':'b','resources':{'limits':{'cpu':'1'}}}]},'status':{'phase':'Running'}}",
        UUID1 ",NVIDIA,3000,30:" UUID0 ",NVIDIA,3000,30:;;");
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
    for (int d = 0; d < 2; d++) {
        assert_int_equal(gpu_state(c, "c", d)->tasks, 1);
        assert_int_equal(gpu_state(c, "c", d)->memory_used, 3000);
        assert_int_equal(gpu_state(c, "c", d)->cores_used, 30);
    }
    /* Only -to-allocate (HAMi's scheduler decided, the plugin has not run). */
    add_vgpu_pod(c, "q", "c", GPUMEM(1, 1000, 10), NULL);
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'q','namespace':'t','annotations':{'hami.io/vgpu-devices-to-allocate':'" UUID0
        ",NVIDIA,1000,10:;'}},'spec':{'nodeName':'c','containers':[{'name':'c','resources':{'limits':" GPUMEM(
            1, 1000, 10) "}}]},'status':{'phase':'Running'}}");
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
    assert_int_equal(gpu_state(c, "c", 0)->memory_used, 4000);
    /* Unknown UUID, wrong count, another node: held against the node. */
    add_vgpu_pod(c, "x1", "c", GPUMEM(1, 500, 5), "GPU-unknown,NVIDIA,500,5:;");
    add_vgpu_pod(c, "x2", "c", GPUMEM(2, 500, 5), UUID0 ",NVIDIA,500,5:;");
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'x3','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'" UUID0
        ",NVIDIA,500,5:;','hami.io/vgpu-node':'other'}},'spec':{'nodeName':'c','containers':[{'name':'c',"
        "'resources':{'limits':" GPUMEM(1, 500, 5) "}}]},'status':{'phase':'Running'}}");
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
    const struct node_state *n = cache_find_node(c, "c");
    assert_int_equal(n->hami->unattributed.pods, 3);
    assert_int_equal(n->hami->unattributed.vgpus, 4);
    assert_int_equal(n->hami->unattributed.memory_mib, 2000);
    assert_int_equal(n->hami->unattributed.cores, 20);
    /* Deletions take back exactly what was charged. */
    cache_delete_pod(c, "t/x1");
    cache_delete_pod(c, "t/x2");
    cache_delete_pod(c, "t/x3");
    cache_delete_pod(c, "t/q");
    assert_int_equal(n->hami->unattributed.pods, 0);
    assert_int_equal(gpu_state(c, "c", 0)->memory_used, 3000);
    /* A node update re-registering the GPUs in another order: charges follow the UUIDs. */
    add_hami_node(c, "c", CORE(UUID1, 0, 32768) CORE(UUID2, 1, 32768), 20, "");
    n = cache_find_node(c, "c");
    assert_int_equal(gpu_state(c, "c", 0)->tasks, 0);
    assert_int_equal(n->hami->unattributed.pods, 1); /* GPU 0 is gone: the pod's allocation no longer matches */
    add_hami_node(c, "c", CORE(UUID1, 0, 32768) CORE(UUID0, 1, 32768), 20, "");
    assert_int_equal(gpu_state(c, "c", 0)->tasks, 1);
    assert_int_equal(gpu_state(c, "c", 1)->tasks, 1);
    assert_int_equal(cache_find_node(c, "c")->hami->unattributed.pods, 0);
    cache_delete_pod(c, "t/p");
    assert_int_equal(gpu_state(c, "c", 0)->tasks, 0);
}

static void test_assumed_by_hami_scheduler(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "c", CORE(UUID0, 0, 32768), 10, "");
    int64_t now = clock_realtime_ns();
    char buf[2048];
    /* HAMi's own scheduler decided 10 s ago (vgpu-time in seconds); not bound yet. */
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'a','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'" UUID0
        ",NVIDIA,2000,20:;','hami.io/vgpu-node':'c','hami.io/vgpu-time':'%" PRId64 "'}},'spec':{'containers':"
        "[{'name':'c','resources':{'limits':" GPUMEM(1, 2000, 20) "}}]},'status':{'phase':'Pending'}}",
        (int64_t)(now / SEC - 10));
    assert_int_equal(cache_apply_pod(c, pod_of(buf), now), 0);
    assert_int_equal(gpu_state(c, "c", 0)->memory_used, 2000);
    assert_int_equal(c->assumed_pods, 1);
    cache_expire(c, now + 51 * SEC);
    assert_int_equal(gpu_state(c, "c", 0)->memory_used, 0);
}

static void test_quota_cores(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "q", CORE(UUID0, 0, 10000) CORE(UUID1, 1, 30000), 20, "");
    const struct node_state *n = cache_find_node(c, "q");
    struct pod_info *p = vgpu_pod("", GPUMEM(2, 5000, 10)); /* 5000 of 20000 average MiB: 25% */
    assert_int_equal(pod_quota_cores(p, n), 50);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':10,'nvidia.com/gpucores':60}");
    assert_int_equal(pod_quota_cores(p, n), 60);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':3}"); /* whole memory by default: a GPU each */
    assert_int_equal(pod_quota_cores(p, n), 300);
    pod_info_free(p);
    /* Usage lands under the device type. */
    add_vgpu_pod(c, "a", "q", GPUMEM(1, 5000, 10), UUID0 ",NVIDIA,5000,10:;");
    assert_int_equal(cache_usage(c, "t", V100), 25);
}

static void test_quota_check(void **state)
{
    (void)state;
    struct admission_policy pol;
    assert_int_equal(policy_init(&pol, "kube-public", "kube-system/gpu-quota"), 0);
    struct cluster_cache cache;
    struct cache_config cfg = {.assume_ttl_ns = 60 * SEC, .configmaps_changed = policy_rebuild, .ctx = &pol};
    assert_int_equal(cache_init(&cache, &cfg), 0);
    /* Namespace t may use one GPU of the V100s (the device type, no model label). */
    assert_int_equal(cache_apply_configmap(&cache, json_of("{'kind':'ConfigMap','metadata':{'name':'gpu-quota',"
                                                           "'namespace':'kube-system'},'data':{'gpu_quota':"
                                                           "'{\\'t\\':{\\'quota\\':{\\'" V100 "\\':1}}}'}}")),
                     0);
    assert_non_null(pol.quota);
    add_hami_node(&cache, "q", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768), 20, "");
    add_vgpu_pod(&cache, "a", "q", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':60}",
                 UUID0 ",NVIDIA,19660,0:;");
    assert_int_equal(cache_usage(&cache, "t", V100), 60);
    cache_read_lock(&cache);
    const struct node_state *n = cache_find_node(&cache, "q");
    struct pod_info *p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':40}");
    char *why = policy_check_quota(&pol, &cache, p, NULL, n, NULL);
    assert_null(why);
    pod_info_free(p);
    p = vgpu_pod("", "{'nvidia.com/gpu':1,'nvidia.com/gpumem-percentage':50,'nvidia.com/gpucores':10}");
    why = policy_check_quota(&pol, &cache, p, NULL, n, NULL);
    cache_unlock(&cache);
    assert_non_null(why);
    assert_non_null(strstr(why, "namespace t uses 0.60 of its 1 " V100 " GPUs; the pod needs 0.50 more"));
    free(why);
    pod_info_free(p);
    cache_destroy(&cache);
    policy_destroy(&pol);
}

/* ---- decisions and the node lock -------------------------------------------------------------------- */

static void test_decision_annotations(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "d", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 16000), 20, "");
    struct pod_info *p = pod_ann("", "[{'name':'init','resources':{'limits':{'cpu':'1'}}},"
                                     "{'name':'a','resources':{'limits':{'nvidia.com/gpu':2,"
                                     "'nvidia.com/gpumem-percentage':50,'nvidia.com/gpucores':30}}}]");
    struct fit_out out;
    assert_true(fit(c, "d", p, POLICY_SPREAD, POLICY_BINPACK, &out));
    const struct hami_node *h = cache_find_node(c, "d")->spec->hami;
    struct hami_alloc a;
    char *err;
    assert_int_equal(hami_alloc_from_fit(h, p, out.hami, &a, &err), 0);
    char *text = hami_alloc_encode(&a);
    /* Every container has an entry; the percentage is per GPU. */
    assert_string_equal(text, ";" UUID0 ",NVIDIA,16384,30:" UUID1 ",NVIDIA,8000,30:;");
    /* The decided pod, holding that allocation, is charged on its devices. */
    struct pod_info *decided = pod_info_with_decision(p, "d", clock_realtime_ns(), NULL, NULL);
    hami_pod_set_alloc(decided->hami, &a);
    assert_int_equal(a.ncontainers, 0);
    assert_int_equal(cache_apply_pod(c, decided, clock_realtime_ns()), 0);
    assert_int_equal(gpu_state(c, "d", 0)->memory_used, 16384);
    assert_int_equal(gpu_state(c, "d", 1)->memory_used, 8000);
    assert_int_equal(gpu_state(c, "d", 1)->cores_used, 30);
    assert_int_equal(cache_find_node(c, "d")->hami->unattributed.pods, 0);
    assert_int_equal(c->assumed_pods, 1);
    cJSON *ann = cJSON_CreateObject();
    assert_int_equal(hami_decision_annotations(ann, "d", 1705054796LL * SEC + 5, text), 0);
    assert_int_equal(hami_bind_annotations(ann, 1705054800LL * SEC), 0);
    char *json = cJSON_PrintUnformatted(ann);
    assert_string_equal(json, "{\"hami.io/vgpu-devices-to-allocate\":\";" UUID0 ",NVIDIA,16384,30:" UUID1
                              ",NVIDIA,8000,30:;\",\"hami.io/vgpu-devices-allocated\":\";" UUID0
                              ",NVIDIA,16384,30:" UUID1 ",NVIDIA,8000,30:;\",\"hami.io/vgpu-node\":\"d\","
                              "\"hami.io/vgpu-time\":\"1705054796\",\"hami.io/bind-phase\":\"allocating\","
                              "\"hami.io/bind-time\":\"1705054800\"}");
    free(json);
    assert_int_equal(hami_bind_failed_annotation(ann), 0);
    assert_string_equal(cJSON_GetObjectItem(ann, HAMI_BIND_PHASE_ANNOTATION)->valuestring, "failed");
    cJSON_Delete(ann);
    free(text);
    /* A mask that does not match the request is refused. */
    uint64_t wrong[2] = {0, 0x1};
    assert_int_equal(hami_alloc_from_fit(h, p, wrong, &a, &err), -1);
    assert_string_equal(err, "container \"a\": 1 devices chosen for 2 vGPUs");
    free(err);
    pod_info_free(p);
}

/* HAMi v2.9 and later list init containers first: entry j is
 * spec.initContainers[j], then the app containers (issue 25 item 4). The
 * decision writes that layout; an allocation HAMi wrote so is charged on
 * its devices (it was held against the node), the older layout still is. */
static void test_init_containers_first(void **state)
{
    struct cluster_cache *c = *state;
    add_hami_node(c, "i", CORE(UUID0, 0, 32768) CORE(UUID1, 1, 32768), 20, "");
    char buf[2048];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'w','namespace':'t'},'spec':{'initContainers':[{'name':'fetch'}],'containers':["
        "{'name':'a','resources':{'limits':" GPUMEM(1, 2000, 20) "}}]}}");
    struct pod_info *p = pod_of(buf);
    assert_int_equal(p->ninit, 1);
    struct fit_out out;
    assert_true(fit(c, "i", p, POLICY_BINPACK, POLICY_BINPACK, &out));
    struct hami_alloc a;
    char *err = NULL;
    assert_int_equal(hami_alloc_from_fit(cache_find_node(c, "i")->spec->hami, p, out.hami, &a, &err), 0);
    char *text = hami_alloc_encode(&a);
    assert_int_equal(a.ncontainers, 2);
    assert_int_equal(a.containers[0].count, 0);
    assert_int_equal(a.containers[1].count, 1);
    assert_int_equal(text[0], ';');
    free(text);
    hami_alloc_free(&a);
    pod_info_free(p);

    /* Written by HAMi v2.9+: the init container's empty entry first. */
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'h','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':';" UUID1
        ",NVIDIA,3000,30:;','hami.io/vgpu-node':'i'}},'spec':{'nodeName':'i','initContainers':[{'name':'fetch'}],"
        "'containers':[{'name':'a','resources':{'limits':" GPUMEM(1, 3000, 30) "}}]},'status':{'phase':'Running'}}");
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
    assert_int_equal(gpu_state(c, "i", 1)->memory_used, 3000);
    assert_int_equal(cache_find_node(c, "i")->hami->unattributed.pods, 0);
    /* The older layout (app containers only) still reads. */
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'o','namespace':'t','annotations':{'hami.io/vgpu-devices-allocated':'" UUID0
        ",NVIDIA,1000,10:;','hami.io/vgpu-node':'i'}},'spec':{'nodeName':'i','initContainers':[{'name':'fetch'}],"
        "'containers':[{'name':'a','resources':{'limits':" GPUMEM(1, 1000, 10) "}}]},'status':{'phase':'Running'}}");
    assert_int_equal(cache_apply_pod(c, pod_of(buf), clock_realtime_ns()), 0);
    assert_int_equal(gpu_state(c, "i", 0)->memory_used, 1000);
    assert_int_equal(cache_find_node(c, "i")->hami->unattributed.pods, 0);
}

static void test_node_lock(void **state)
{
    (void)state;
    char buf[128];
    int64_t t = 1781449503LL * SEC; /* 2026-06-14T15:05:03Z */
    assert_int_equal(hami_lock_value(buf, sizeof(buf), t, "default", "gang-pod-1"), 0);
    assert_string_equal(buf, "2026-06-14T15:05:03Z,default,gang-pod-1");
    assert_int_equal(hami_lock_value(buf, 10, t, "default", "gang-pod-1"), -1);
    struct hami_lock l;
    assert_int_equal(hami_lock_parse("2026-06-14T15:05:03Z,default,gang-pod-1", &l), 0);
    assert_int_equal(l.time_ns, t);
    assert_true(l.has_owner);
    assert_string_equal(l.ns, "default");
    assert_string_equal(l.name, "gang-pod-1");
    /* Older holders wrote the time alone; Go's layout also allows fractions and offsets. */
    assert_int_equal(hami_lock_parse("2026-06-14T15:05:03Z", &l), 0);
    assert_false(l.has_owner);
    assert_int_equal(hami_parse_rfc3339("2026-06-14T23:05:03.123+08:00"), t);
    assert_int_equal(hami_parse_rfc3339("2026-06-14T10:05:03-05:00"), t);
    assert_int_equal(hami_parse_rfc3339("2026-06-14 15:05:03Z"), -1);
    assert_int_equal(hami_parse_rfc3339("2026-06-14T15:05:03"), -1);
    /* Past 2262 nanoseconds overflow: unreadable, never a wrapped time. */
    assert_int_equal(hami_parse_rfc3339("9999-12-31T23:59:59Z"), -1);
    assert_true(hami_parse_rfc3339("2262-01-01T00:00:00Z") > 0);
    assert_int_equal(hami_lock_parse("2026-06-14T15:05:03Z,default", &l), -1);
    assert_int_equal(hami_lock_parse("2026-06-14T15:05:03Z,a,b,c", &l), -1);
    assert_int_equal(hami_lock_parse("soon,default,p", &l), -1);
    int64_t five = 300 * SEC;
    const char *v = "2026-06-14T15:05:03Z,default,gang-pod-1";
    assert_int_equal(hami_lock_check(NULL, t, five, "default", "p"), HAMI_LOCK_FREE);
    assert_int_equal(hami_lock_check(v, t + SEC, five, "default", "gang-pod-1"), HAMI_LOCK_OURS);
    assert_int_equal(hami_lock_check(v, t + five, five, "default", "p"), HAMI_LOCK_HELD);
    assert_int_equal(hami_lock_check(v, t + five + SEC, five, "default", "p"), HAMI_LOCK_EXPIRED);
    assert_int_equal(hami_lock_check("2026-06-14T15:05:03Z", t + SEC, five, "default", "p"), HAMI_LOCK_HELD);
    assert_int_equal(hami_lock_check("locked", t, five, "default", "p"), HAMI_LOCK_UNREADABLE);
    assert_int_equal(hami_lock_check("9999-12-31T23:59:59Z,default,p", t, five, "default", "q"), HAMI_LOCK_UNREADABLE);
}

/* ---- CRL defaults on HAMi resources -------------------------------------------------------------------- */

static void test_crl_default_for_hami(void **state)
{
    (void)state;
    struct admission_policy pol;
    assert_int_equal(policy_init(&pol, "kube-public", "kube-system/gpu-quota"), 0);
    struct cluster_cache cache;
    struct cache_config cfg = {.assume_ttl_ns = 60 * SEC, .configmaps_changed = policy_rebuild, .ctx = &pol};
    assert_int_equal(cache_init(&cache, &cfg), 0);
    /* A group of gpumem and gpucores: a container naming gpumem gets gpucores 25. */
    const char *crls[] = {
        "{'kind':'ConfigMap','metadata':{'name':'cf-crl-hami-gpumem','namespace':'kube-public','labels':{"
        "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'hami',"
        "'features.alauda.io/enabled':'true'}},'data':{'key':'nvidia.com/gpumem','dataType':'integer',"
        "'defaultValue':'','group':'hami','limits':'required','requests':'disabled'}}",
        "{'kind':'ConfigMap','metadata':{'name':'cf-crl-hami-gpucores','namespace':'kube-public','labels':{"
        "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'hami',"
        "'features.alauda.io/enabled':'true'}},'data':{'key':'nvidia.com/gpucores','dataType':'integer',"
        "'defaultValue':'25','group':'hami','limits':'optional','requests':'disabled'}}"};
    for (int i = 0; i < 2; i++)
        assert_int_equal(cache_apply_configmap(&cache, json_of(crls[i])), 0);
    cJSON *pod = json_of("{'metadata':{'name':'p','namespace':'t'},'spec':{'containers':[{'name':'c','resources':"
                         "{'limits':{'nvidia.com/gpu':1,'nvidia.com/gpumem':2000}}}]}}");
    cache_read_lock(&cache);
    char *violation = policy_prepare_pod(&pol, pod);
    cache_unlock(&cache);
    assert_null(violation);
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(pod, &err);
    assert_non_null(p);
    assert_int_equal(p->containers[0].hami.cores, 25);
    assert_int_equal(p->containers[0].hami.memory_mib, 2000);
    pod_info_free(p);
    cJSON_Delete(pod);
    /* gpucores alone breaks the required gpumem rule of the group. */
    pod = json_of("{'metadata':{'name':'p','namespace':'t'},'spec':{'containers':[{'name':'c','resources':"
                  "{'limits':{'nvidia.com/gpu':1,'nvidia.com/gpucores':30}}}]}}");
    cache_read_lock(&cache);
    violation = policy_prepare_pod(&pol, pod);
    cache_unlock(&cache);
    assert_non_null(violation);
    assert_non_null(strstr(violation, "nvidia.com/gpumem"));
    free(violation);
    cJSON_Delete(pod);
    cache_destroy(&cache);
    policy_destroy(&pol);
}

#define T(f) cmocka_unit_test_setup_teardown(f, hami_setup, hami_teardown)

/* ---- list bounds (issue 22) ------------------------------------------------- */

/* A comma list of `count` distinct entries, each padded to `width` bytes. */
static char *make_list(int count, int width, const char *prefix)
{
    size_t size = (size_t)count * (size_t)(width + 1) + 1;
    char *s = malloc(size), *w = s;
    assert_non_null(s);
    for (int i = 0; i < count; i++) {
        int n = snprintf(w, size - (size_t)(w - s), "%s%0*d", prefix, width - (int)strlen(prefix), i);
        w += n;
        if (i + 1 < count)
            *w++ = ',';
    }
    *w = '\0';
    return s;
}

static struct hami_pod *pod_with_list(const char *key, const char *list, char **problem)
{
    cJSON *ann = cJSON_CreateObject();
    assert_non_null(cJSON_AddStringToObject(ann, key, list));
    struct hami_pod *p = NULL;
    *problem = NULL;
    assert_int_equal(hami_pod_from_annotations(ann, &p, problem), 0);
    cJSON_Delete(ann);
    return p;
}

/* The largest lists allowed are read whole and matched; one entry or one
 * byte more and the pod is refused with a reason naming the annotation. */
static void test_list_bounds(void **state)
{
    (void)state;
    char *problem;
    /* 64 entries of 63 bytes: 64 * 64 - 1 = 4095 bytes. */
    char *types = make_list(HAMI_TYPE_LIST_MAX_ITEMS, 63, "T");
    assert_true(strlen(types) <= HAMI_TYPE_LIST_MAX_BYTES);
    struct hami_pod *p = pod_with_list(HAMI_NOUSE_TYPE_ANNOTATION, types, &problem);
    assert_null(problem);
    assert_int_equal(p->nouse_types.count, HAMI_TYPE_LIST_MAX_ITEMS);
    struct hami_device ok = {.uuid = (char *)UUID0, .type_upper = (char *)"NVIDIA-A100"};
    char hit[80];
    snprintf(hit, sizeof(hit), "NVIDIA-%s", p->nouse_types.items[HAMI_TYPE_LIST_MAX_ITEMS - 1]);
    struct hami_device excluded = {.uuid = (char *)UUID0, .type_upper = hit};
    assert_true(hami_pod_type_ok(p, &ok));
    assert_false(hami_pod_type_ok(p, &excluded));
    hami_pod_free(p);
    free(types);

    types = make_list(HAMI_TYPE_LIST_MAX_ITEMS + 1, 4, "T");
    p = pod_with_list(HAMI_NOUSE_TYPE_ANNOTATION, types, &problem);
    assert_string_equal(problem, "annotation nvidia.com/nouse-gputype has 65 entries (at most 64)");
    assert_int_equal(p->nouse_types.count, 0);
    hami_pod_free(p);
    free(problem);
    free(types);

    /* Duplicates count once: HAMi's matching is the same either way. */
    types = make_list(1, 4, "T");
    char *dup = malloc(HAMI_TYPE_LIST_MAX_BYTES);
    assert_non_null(dup);
    snprintf(dup, HAMI_TYPE_LIST_MAX_BYTES, "%s", types);
    for (int i = 1; i < 500; i++)
        strcat(strcat(dup, ","), types);
    p = pod_with_list(HAMI_USE_TYPE_ANNOTATION, dup, &problem);
    assert_null(problem);
    assert_int_equal(p->use_types.count, 1);
    hami_pod_free(p);
    free(dup);
    free(types);

    /* 252 kB, as in the issue: refused before it is split. */
    types = make_list(252 * 1024 / 10, 9, "A");
    p = pod_with_list(HAMI_NOUSE_TYPE_ANNOTATION, types, &problem);
    char want[128];
    snprintf(want, sizeof(want), "annotation nvidia.com/nouse-gputype is %zu bytes long (at most 4096)", strlen(types));
    assert_string_equal(problem, want);
    hami_pod_free(p);
    free(problem);
    free(types);

    /* UUID lists: 1024 entries, matched exactly (binary search). */
    char *uuids = make_list(HAMI_UUID_LIST_MAX_ITEMS, 40, "GPU-");
    p = pod_with_list(HAMI_NOUSE_UUID_ANNOTATION, uuids, &problem);
    assert_null(problem);
    assert_int_equal(p->nouse_uuids.count, HAMI_UUID_LIST_MAX_ITEMS);
    char one[48];
    snprintf(one, sizeof(one), "GPU-%036d", 517);
    struct hami_device listed = {.uuid = one, .type_upper = (char *)"X"};
    assert_false(hami_pod_uuid_ok(p, &listed));
    assert_true(hami_pod_uuid_ok(p, &ok));
    hami_pod_free(p);
    free(uuids);
    uuids = make_list(HAMI_UUID_LIST_MAX_ITEMS + 1, 40, "GPU-");
    p = pod_with_list(HAMI_USE_UUID_ANNOTATION, uuids, &problem);
    assert_string_equal(problem, "annotation nvidia.com/use-gpuuuid has 1025 entries (at most 1024)");
    hami_pod_free(p);
    free(problem);
    free(uuids);

    char mode[HAMI_VGPU_MODE_MAX_BYTES + 2];
    memset(mode, 'm', sizeof(mode) - 1);
    mode[sizeof(mode) - 1] = '\0';
    p = pod_with_list(HAMI_VGPU_MODE_ANNOTATION, mode, &problem);
    assert_string_equal(problem, "annotation nvidia.com/vgpu-mode is 65 bytes long (at most 64)");
    hami_pod_free(p);
    free(problem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_register_seven_fields),
        T(test_register_nine_fields_and_modes),
        T(test_register_json),
        T(test_register_malformed),
        T(test_register_split_default_and_scaling),
        T(test_handshake_states),
        T(test_node_malformed_keeps_other_resources),
        T(test_hami_node_counts_vgpus),
        T(test_request_defaults),
        T(test_request_explicit),
        T(test_request_memory_factor),
        T(test_request_errors),
        T(test_requests_as_hami_reads_them),
        T(test_gpu_policy_chains),
        T(test_init_containers_first),
        T(test_pod_annotations),
        T(test_list_bounds),
        T(test_alloc_format),
        T(test_fit_memory),
        T(test_fit_split_count),
        T(test_fit_cores_and_exclusive),
        T(test_fit_unhealthy_mig_never_used),
        T(test_fit_device_cordon),
        T(test_fit_hami_order_and_weights),
        T(test_fit_type_and_uuid),
        T(test_fit_binpack_and_spread),
        T(test_fit_topology),
        T(test_node_scores),
        T(test_fit_excludes_self_and_handshake),
        T(test_charges_from_annotations),
        T(test_assumed_by_hami_scheduler),
        T(test_quota_cores),
        T(test_quota_check),
        T(test_decision_annotations),
        T(test_node_lock),
        T(test_crl_default_for_hami),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

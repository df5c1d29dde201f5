/* test_podspec.c - unit tests for cluster/podspec.c: GPU requests, decision
 * annotations, index lists and the deep copy used for assumptions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_names.h"
#include "cluster/podparts.h"
#include "cluster/podspec.h"
#include "tests/unit/support.h"

/* A pod named ns/p whose containers are the given JSON array text. */
static struct pod_info *pod_with_containers(const char *containers)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "{'metadata':{'name':'p','namespace':'ns'},'spec':{'containers':%s}}", containers);
    return pod_of(buf);
}

/* The request error of a one-container pod with the given limits. */
static void expect_limits_error(const char *limits, const char *message)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "[{'name':'main','resources':{'limits':%s}}]", limits);
    struct pod_info *p = pod_with_containers(buf);
    if (!p->request_error)
        fail_msg("no request_error for limits %s", limits);
    assert_string_equal(p->request_error, message);
    pod_info_free(p);
}

/* ---- basic pod facts ------------------------------------------------------ */

static void test_pod_identity(void **state)
{
    (void)state;
    struct pod_info *p = pod_of("{'metadata':{'name':'web','namespace':'team-a','uid':'u-1'},"
                                "'spec':{'nodeName':'n1','containers':[{'name':'c'}]},"
                                "'status':{'phase':'Running'}}");
    assert_string_equal(p->key, "team-a/web");
    assert_string_equal(p->ns, "team-a");
    assert_string_equal(p->name, "web");
    assert_string_equal(p->uid, "u-1");
    assert_string_equal(p->node_name, "n1");
    assert_false(p->terminal);
    assert_int_equal(p->ncontainers, 1);
    assert_string_equal(p->containers[0].name, "c");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_NONE);
    assert_false(p->uses_gpu);
    assert_null(p->request_error);
    assert_null(p->decision.node);
    pod_info_free(p);

    /* Namespace defaults, empty nodeName is unbound, terminal phases. */
    p = pod_of("{'metadata':{'name':'x'},'spec':{'nodeName':'','containers':[]},'status':{'phase':'Succeeded'}}");
    assert_string_equal(p->key, "default/x");
    assert_null(p->uid);
    assert_null(p->node_name);
    assert_true(p->terminal);
    assert_int_equal(p->ncontainers, 0);
    pod_info_free(p);
    p = pod_of("{'metadata':{'name':'x'},'status':{'phase':'Failed'}}");
    assert_true(p->terminal);
    pod_info_free(p);
    p = pod_of("{'metadata':{'name':'x'},'status':{'phase':'Pending'}}");
    assert_false(p->terminal);
    assert_false(p->terminating);
    /* The key is kept for every cached pod: it holds its length, not a
     * formatting buffer (256 bytes each took 75 MB at 160,000 pods). */
    assert_true(malloc_usable_size(p->key) < 64);
    pod_info_free(p);
    /* A deletionTimestamp marks a pod being deleted, and a copy keeps it. */
    p = pod_of("{'metadata':{'name':'x','deletionTimestamp':'2026-11-25T09:00:00Z'},'status':{'phase':'Pending'}}");
    assert_true(p->terminating);
    struct pod_info *copy = pod_info_clone(p);
    assert_true(copy->terminating);
    pod_info_free(copy);
    pod_info_free(p);
}

static void test_pod_unusable(void **state)
{
    (void)state;
    const char *bad[] = {"{'metadata':{}}", "{'metadata':{'name':''}}", "{'metadata':{'name':5}}", "{}", "[]", "'pod'"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *obj = json_of(bad[i]);
        char *err = NULL;
        assert_null(pod_info_from_json(obj, &err));
        assert_non_null(err);
        assert_string_equal(err, "pod has no metadata.name");
        free(err);
        cJSON_Delete(obj);
    }
    /* err may be NULL. */
    cJSON *obj = json_of("{}");
    assert_null(pod_info_from_json(obj, NULL));
    cJSON_Delete(obj);
}

/* Wrong JSON types where GPU requests live must not make a pod look GPU-free. */
static void test_wrong_shapes(void **state)
{
    (void)state;

    static const struct {
        const char *containers;
        const char *error;
    } cases[] = {
        {"{}", "spec.containers must be an array"},
        {"'x'", "spec.containers must be an array"},
        {"[5]", "spec.containers[] entries must be objects"},
        {"[{'name':'a','resources':'x'}]", "spec.containers[].resources must be an object"},
        {"[{'name':'a','resources':{'limits':['x']}}]",
         "spec.containers[].resources.limits and .requests must be objects"},
        {"[{'name':'a','resources':{'requests':7}}]",
         "spec.containers[].resources.limits and .requests must be objects"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pod_info *p = pod_with_containers(cases[i].containers);
        if (!p->request_error)
            fail_msg("no request_error for containers %s", cases[i].containers);
        assert_string_equal(p->request_error, cases[i].error);
        pod_info_free(p);
    }
    struct pod_info *p = pod_of("{'metadata':{'name':'p'},'spec':[1]}");
    assert_string_equal(p->request_error, "spec must be an object");
    pod_info_free(p);
    p = pod_with_containers("[{'name':'a','resources':null},{'name':'b','resources':{'limits':null}}]");
    assert_null(p->request_error);
    assert_false(p->uses_gpu);
    pod_info_free(p);
    /* Init containers are read too: the same shapes are refused there. */
    p = pod_of("{'metadata':{'name':'p'},'spec':{'containers':[],'initContainers':{}}}");
    assert_string_equal(p->request_error, "spec.initContainers must be an array");
    pod_info_free(p);
    p = pod_of("{'metadata':{'name':'p'},'spec':{'initContainers':[{'name':'i','resources':{'limits':3}}]}}");
    assert_string_equal(p->request_error, "spec.initContainers[].resources.limits and .requests must be objects");
    pod_info_free(p);
    /* An invalid request in an init container is the pod's. */
    p = pod_of("{'metadata':{'name':'p'},'spec':{'initContainers':[{'name':'i','resources':{'limits':"
               "{'tencent.com/vcuda-core':'150'}}}]}}");
    assert_non_null(strstr(p->request_error, "container \"i\""));
    pod_info_free(p);
}

/* Cloning a pod that never had decision annotations (bind of a fresh pod). */
static void test_clone_without_decision(void **state)
{
    (void)state;
    struct pod_info *p = pod_with_containers("[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}]");
    assert_null(p->decision.idx);
    struct pod_info *c = pod_info_clone(p);
    assert_non_null(c);
    assert_string_equal(c->key, "ns/p");
    assert_null(c->decision.node);
    assert_int_equal(c->ncontainers, 1);
    assert_int_equal(c->containers[0].whole_gpus, 1);
    pod_info_free(c);
    pod_info_free(p);
}

/* The slim form from text keeps exactly what pod_info reads. */
/* Annotations and resources are built while scanned when plain, and
 * parsed by cJSON otherwise (an escape, a number, an array, deep nesting):
 * either way the tree is cJSON's own parse of the same text. */
static void test_slim_plain_values_as_cjson_reads_them(void **state)
{
    (void)state;
    static const char *const annotations[] = {
        "{}",
        "{'a':'x','b':'','a':'dup','c':{'d':{'e':'f'}}}",
        "{'esc':'a\\nb','k\\u0041':'v'}",
        "{'n':1,'t':true,'z':null,'l':['x']}",
        "{'deep':{'a':{'b':{'c':{'d':{'e':{'f':'g'}}}}}}}",
        "{'utf8':'\xc3\xa9','\xc3\xa9':'k'}",
        "'not an object'",
    };
    for (size_t i = 0; i < sizeof(annotations) / sizeof(annotations[0]); i++) {
        char fixture[1024];
        fmt(fixture, sizeof(fixture),
            "{'metadata':{'name':'p','annotations':%s},'spec':{'containers':[{'name':'c','resources':%s}]}}",
            annotations[i], annotations[i]);
        char *text = q(fixture);
        cJSON *full = cJSON_Parse(text), *slim = pod_slim_from_text(text, strlen(text));
        assert_non_null(full);
        assert_non_null(slim);
        const char *const paths[][2] = {{"metadata", "annotations"}, {"spec", "containers"}};
        for (int k = 0; k < 2; k++) {
            const cJSON *a =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(full, paths[k][0]), paths[k][1]);
            const cJSON *b =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(slim, paths[k][0]), paths[k][1]);
            if (k == 1) {
                a = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 0), "resources");
                b = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(b, 0), "resources");
            }
            char *pa = cJSON_PrintUnformatted(a), *pb = cJSON_PrintUnformatted(b);
            if (!pa || !pb || strcmp(pa, pb) != 0)
                fail_msg("%s of %s: slim %s, cJSON %s", paths[k][1], annotations[i], pb ? pb : "(none)",
                         pa ? pa : "(none)");
            cJSON_free(pa);
            cJSON_free(pb);
        }
        cJSON_Delete(full);
        cJSON_Delete(slim);
        free(text);
    }
}

/* The slim tree's member names are constant keys and its plain strings
 * live in their item's block; it must still be edited, duplicated and
 * freed as any cJSON tree (CRL defaults edit it, the recorder copies
 * parts): valgrind and ASan check that nothing is freed twice or lost. */
static void test_slim_tree_edits_like_any(void **state)
{
    (void)state;
    char *text = q("{'kind':'Pod','metadata':{'name':'p','namespace':'t','annotations':{'a':'1','b':'2'}},"
                   "'spec':{'nodeName':'n','containers':[{'name':'c','resources':{'limits':{'x':'3'}}}]},"
                   "'status':{'phase':'Running'}}");
    cJSON *slim = pod_slim_from_text(text, strlen(text));
    assert_non_null(slim);
    cJSON *copy = cJSON_Duplicate(slim, 1);
    assert_non_null(copy);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(slim, "metadata");
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    assert_true(cJSON_ReplaceItemInObjectCaseSensitive(ann, "a", cJSON_CreateString("one")));
    cJSON_DeleteItemFromObjectCaseSensitive(ann, "b");
    assert_non_null(cJSON_AddStringToObject(ann, "c", "3"));
    assert_true(cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString("q")));
    cJSON *spec = cJSON_DetachItemFromObjectCaseSensitive(slim, "spec");
    assert_non_null(spec);
    char *edited = cJSON_PrintUnformatted(slim), *kept = cJSON_PrintUnformatted(copy);
    assert_string_equal(edited, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"q\",\"namespace\":\"t\","
                                "\"annotations\":{\"a\":\"one\",\"c\":\"3\"}},\"status\":{\"phase\":\"Running\"}}");
    cJSON_Delete(slim); /* the copy and the detached part outlive the tree they came from */
    char *spec_text = cJSON_PrintUnformatted(spec);
    assert_string_equal(spec_text, "{\"nodeName\":\"n\",\"containers\":[{\"name\":\"c\",\"resources\":"
                                   "{\"limits\":{\"x\":\"3\"}}}]}");
    char *again = cJSON_PrintUnformatted(copy);
    assert_string_equal(again, kept);
    assert_non_null(strstr(kept, "\"annotations\":{\"a\":\"1\",\"b\":\"2\"}"));
    cJSON_free(edited);
    cJSON_free(kept);
    cJSON_free(spec_text);
    cJSON_free(again);
    cJSON_Delete(spec);
    cJSON_Delete(copy);
    free(text);
}

static void test_slim_from_text(void **state)
{
    (void)state;
    char *text = q("{'kind':'Pod','apiVersion':'v1','metadata':{'name':'p\\u0031','namespace':'ns','uid':'u',"
                   "'resourceVersion':'7','deletionTimestamp':'2026-11-25T09:00:00Z','labels':{'a':'b'},'managedFields'"
                   ":[{'manager':'x','fieldsV1':{'f:a':{}}}],"
                   "'annotations':{'tencent.com/predicate-gpu-idx-0':'1','tencent.com/predicate-node':'n'}},"
                   "'spec':{'nodeName':'n','volumes':[{'name':'v'}],'containers':[{'name':'a','image':'i',"
                   "'env':[{'name':'X','value':'1'}],'resources':{'limits':{'tencent.com/vcuda-core':'30',"
                   "'tencent.com/vcuda-memory':'4'}}},{'name':'b','resources':{}}]},"
                   "'status':{'phase':'Running','conditions':[{'type':'Ready'}]}}");
    cJSON *full = cJSON_Parse(text);
    cJSON *slim = pod_slim_from_text(text, strlen(text));
    assert_non_null(full);
    assert_non_null(slim);
    char *printed = cJSON_PrintUnformatted(slim);
    assert_string_equal(printed, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns\",\"uid\":\"u\","
                                 "\"resourceVersion\":\"7\",\"deletionTimestamp\":\"2026-11-25T09:00:00Z\","
                                 "\"annotations\":{\"tencent.com/predicate-gpu-idx-0\":\"1\","
                                 "\"tencent.com/predicate-node\":\"n\"}},\"spec\":{\"nodeName\":\"n\",\"containers\":["
                                 "{\"name\":\"a\",\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"30\","
                                 "\"tencent.com/vcuda-memory\":\"4\"}}},{\"name\":\"b\",\"resources\":{}}]},"
                                 "\"status\":{\"phase\":\"Running\"}}");
    struct pod_info *a = pod_info_from_json(full, NULL), *b = pod_info_from_json(slim, NULL);
    assert_string_equal(a->key, b->key);
    assert_string_equal(b->node_name, "n");
    assert_true(b->terminating);
    assert_int_equal(b->containers[0].cores, a->containers[0].cores);
    assert_int_equal(b->containers[0].memory, 4);
    assert_int_equal(b->decision.idx[0][0], 1);
    pod_info_free(a);
    pod_info_free(b);
    free(printed);
    cJSON_Delete(full);
    cJSON_Delete(slim);
    /* Malformed text is refused, never half-read. */
    assert_null(pod_slim_from_text(text, strlen(text) - 1));
    assert_null(pod_slim_from_text("[1]", 3));
    free(text);
}

static void test_unnamed_container(void **state)
{
    (void)state;
    struct pod_info *p = pod_with_containers("[{'resources':{}},{'name':5,'resources':{'limits':"
                                             "{'tencent.com/vcuda-core':'250'}}}]");
    assert_string_equal(p->containers[0].name, "#0");
    assert_string_equal(p->containers[1].name, "#1");
    assert_string_equal(p->request_error,
                        "container \"#1\": tencent.com/vcuda-core 250 is neither below 100 (a share of one GPU) "
                        "nor a multiple of 100 (whole GPUs)");
    pod_info_free(p);
}

/* ---- requests ------------------------------------------------------------- */

static void test_vcuda_shared(void **state)
{
    (void)state;
    struct pod_info *p =
        pod_with_containers("[{'name':'main','resources':{'limits':{'cpu':'1','tencent.com/vcuda-core':'50',"
                            "'tencent.com/vcuda-memory':'10'}}}]");
    assert_null(p->request_error);
    assert_true(p->uses_gpu);
    const struct container_request *r = &p->containers[0];
    assert_ptr_equal(r->family, GPU_FAMILY_VCUDA);
    assert_int_equal(r->cores, 50);
    assert_int_equal(r->memory, 10);
    assert_true(r->memory_given);
    assert_int_equal(r->whole_gpus, 0);
    pod_info_free(p);
}

static void test_vcuda_whole(void **state)
{
    (void)state;
    /* Whole GPUs do not need vcuda-memory. */
    struct pod_info *p = pod_with_containers("[{'name':'t','resources':{'limits':{'tencent.com/vcuda-core':'200'}}}]");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_VCUDA);
    assert_int_equal(p->containers[0].cores, 200);
    assert_int_equal(p->containers[0].whole_gpus, 2);
    assert_false(p->containers[0].memory_given);
    assert_int_equal(p->containers[0].memory, 0);
    pod_info_free(p);

    p = pod_with_containers("[{'name':'t','resources':{'limits':{'tencent.com/vcuda-core':'1k'}}}]");
    assert_null(p->request_error);
    assert_int_equal(p->containers[0].whole_gpus, 10);
    pod_info_free(p);
}

static void test_requests_fallback(void **state)
{
    (void)state;
    /* No limits at all: requests are read. */
    struct pod_info *p = pod_with_containers(
        "[{'name':'a','resources':{'requests':{'tencent.com/vcuda-core':'30','tencent.com/vcuda-memory':'4'}}}]");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_VCUDA);
    assert_int_equal(p->containers[0].cores, 30);
    assert_int_equal(p->containers[0].memory, 4);
    pod_info_free(p);

    /* An empty limits object also falls back. */
    p = pod_with_containers("[{'name':'a','resources':{'limits':{},'requests':{'nvidia.com/gpu':'1'}}}]");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_PGPU);
    assert_int_equal(p->containers[0].whole_gpus, 1);
    pod_info_free(p);

    /* Limits are the source of truth when present. */
    p = pod_with_containers("[{'name':'a','resources':{"
                            "'limits':{'tencent.com/vcuda-core':'40','tencent.com/vcuda-memory':'8'},"
                            "'requests':{'tencent.com/vcuda-core':'10','tencent.com/vcuda-memory':'2'}}}]");
    assert_int_equal(p->containers[0].cores, 40);
    assert_int_equal(p->containers[0].memory, 8);
    pod_info_free(p);

    /* No resources at all: not a GPU container. */
    p = pod_with_containers("[{'name':'a'},{'name':'b','resources':{'limits':{'cpu':'2'}}}]");
    assert_false(p->uses_gpu);
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_NONE);
    assert_ptr_equal(p->containers[1].family, GPU_FAMILY_NONE);
    pod_info_free(p);
}

static void test_quantity_forms(void **state)
{
    (void)state;
    /* Numbers as well as strings; suffixes and exponents. */
    struct pod_info *p = pod_with_containers(
        "[{'name':'a','resources':{'limits':{'tencent.com/vcuda-core':25,'tencent.com/vcuda-memory':'1k'}}},"
        "{'name':'b','resources':{'limits':{'nvidia.com/mps-core':'1e1','nvidia.com/mps-memory':3}}},"
        "{'name':'c','resources':{'limits':{'nvidia.com/gpu':2}}}]");
    assert_null(p->request_error);
    assert_int_equal(p->containers[0].cores, 25);
    assert_int_equal(p->containers[0].memory, 1000);
    assert_ptr_equal(p->containers[1].family, GPU_FAMILY_MPS);
    assert_int_equal(p->containers[1].cores, 10);
    assert_int_equal(p->containers[1].memory, 3);
    assert_true(p->containers[1].memory_given);
    assert_ptr_equal(p->containers[2].family, GPU_FAMILY_PGPU);
    assert_int_equal(p->containers[2].whole_gpus, 2);
    assert_int_equal(p->containers[2].cores, 200);
    pod_info_free(p);

    /* Zero amounts are "not asked". */
    p = pod_with_containers("[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'0','tencent.com/vcuda-core':0}}}]");
    assert_null(p->request_error);
    assert_false(p->uses_gpu);
    pod_info_free(p);
}

static void test_invalid_quantities(void **state)
{
    (void)state;
    expect_limits_error(
        "{'tencent.com/vcuda-core':'0.5','tencent.com/vcuda-memory':'1'}",
        "container \"main\": tencent.com/vcuda-core \"0.5\" is invalid: quantity is not a whole number");
    expect_limits_error(
        "{'tencent.com/vcuda-core':'500m'}",
        "container \"main\": tencent.com/vcuda-core \"500m\" is invalid: quantity is not a whole number");
    expect_limits_error("{'tencent.com/vcuda-core':'10','tencent.com/vcuda-memory':'lots'}",
                        "container \"main\": tencent.com/vcuda-memory \"lots\" is invalid: not a valid quantity");
    expect_limits_error("{'nvidia.com/gpu':'-1'}",
                        "container \"main\": nvidia.com/gpu \"-1\" is invalid: quantity is negative");
    expect_limits_error("{'nvidia.com/mps-core':'99999999999999999999'}",
                        "container \"main\": nvidia.com/mps-core \"99999999999999999999\" is invalid: "
                        "quantity out of range");
    expect_limits_error("{'tencent.com/vcuda-core':0.5}",
                        "container \"main\": tencent.com/vcuda-core value is invalid: quantity is not a whole number");
    expect_limits_error("{'nvidia.com/gpu':-2}",
                        "container \"main\": nvidia.com/gpu value is invalid: quantity is negative");
    expect_limits_error("{'nvidia.com/gpu':true}",
                        "container \"main\": nvidia.com/gpu value is invalid: not a valid quantity");
    /* The message quotes the text as JSON. */
    expect_limits_error("{'nvidia.com/gpu':'1\\\"x'}",
                        "container \"main\": nvidia.com/gpu \"1\\\"x\" is invalid: not a valid quantity");
}

static void test_vcuda_rules(void **state)
{
    (void)state;
    expect_limits_error("{'tencent.com/vcuda-core':'50'}",
                        "container \"main\" asks for tencent.com/vcuda-core 50 (a share of one GPU) without "
                        "tencent.com/vcuda-memory; GPU-Manager needs both (or a CustomResourceLimitation default)");
    expect_limits_error("{'tencent.com/vcuda-core':'150','tencent.com/vcuda-memory':'10'}",
                        "container \"main\": tencent.com/vcuda-core 150 is neither below 100 (a share of one GPU) "
                        "nor a multiple of 100 (whole GPUs)");
    expect_limits_error("{'tencent.com/vcuda-memory':'10'}",
                        "container \"main\" asks for tencent.com/vcuda-memory without tencent.com/vcuda-core");
    expect_limits_error("{'tencent.com/vcuda-core':'6600'}", "container \"main\" asks for more than 64 whole GPUs");
    expect_limits_error("{'nvidia.com/gpu':'65'}", "container \"main\" asks for more than 64 whole GPUs");

    /* A request error does not hide that the pod uses GPUs. */
    struct pod_info *p =
        pod_with_containers("[{'name':'main','resources':{'limits':{'tencent.com/vcuda-core':'50'}}}]");
    assert_true(p->uses_gpu);
    pod_info_free(p);
}

static void test_mps_rules(void **state)
{
    (void)state;
    expect_limits_error("{'nvidia.com/mps-core':'150'}",
                        "container \"main\": nvidia.com/mps-core 150 is above 100 (MPS shares one GPU, 1..100)");
    expect_limits_error("{'nvidia.com/mps-memory':'4'}",
                        "container \"main\" asks for nvidia.com/mps-memory without nvidia.com/mps-core");
    /* 100 is still one (whole) share; memory is optional for MPS. */
    struct pod_info *p = pod_with_containers("[{'name':'m','resources':{'limits':{'nvidia.com/mps-core':'100'}}}]");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_MPS);
    assert_int_equal(p->containers[0].cores, 100);
    assert_int_equal(p->containers[0].whole_gpus, 0);
    assert_false(p->containers[0].memory_given);
    pod_info_free(p);
}

static void test_mixed_families(void **state)
{
    (void)state;
    const char *mixed = "container \"main\" mixes GPU resources of different kinds (%s); a container uses one kind";
    char want[256];
    snprintf(want, sizeof(want), mixed, "tencent.com/vcuda-core and nvidia.com/gpu");
    expect_limits_error("{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'1','nvidia.com/gpu':'1'}", want);
    snprintf(want, sizeof(want), mixed, "tencent.com/vcuda-core and nvidia.com/mps-core");
    expect_limits_error("{'nvidia.com/mps-core':'50','tencent.com/vcuda-memory':'1'}", want);
    snprintf(want, sizeof(want), mixed, "nvidia.com/mps-core and nvidia.com/gpu");
    expect_limits_error("{'nvidia.com/mps-memory':'5','nvidia.com/gpu':'1'}", want);
    snprintf(want, sizeof(want), mixed, "tencent.com/vcuda-core, nvidia.com/mps-core and nvidia.com/mig-<profile>");
    expect_limits_error("{'nvidia.com/mps-memory':'5','tencent.com/vcuda-core':'10','nvidia.com/mig-1g.5gb':'1'}",
                        want);

    /* Different families in different containers are fine. */
    struct pod_info *p = pod_with_containers(
        "[{'name':'a','resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'1'}}},"
        "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'1'}}}]");
    assert_null(p->request_error);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_VCUDA);
    assert_ptr_equal(p->containers[1].family, GPU_FAMILY_PGPU);
    pod_info_free(p);
}

static void test_first_error_kept(void **state)
{
    (void)state;
    struct pod_info *p = pod_with_containers("[{'name':'ok','resources':{'limits':{'nvidia.com/gpu':'1'}}},"
                                             "{'name':'bad1','resources':{'limits':{'nvidia.com/mps-core':'101'}}},"
                                             "{'name':'bad2','resources':{'limits':{'tencent.com/vcuda-core':'x'}}}]");
    assert_string_equal(p->request_error,
                        "container \"bad1\": nvidia.com/mps-core 101 is above 100 (MPS shares one GPU, 1..100)");
    assert_true(p->uses_gpu);
    pod_info_free(p);
}

static void test_family_names(void **state)
{
    (void)state;
    assert_string_equal(GPU_FAMILY_VCUDA->core_resource, "tencent.com/vcuda-core");
    assert_string_equal(GPU_FAMILY_MPS->core_resource, "nvidia.com/mps-core");
    assert_string_equal(GPU_FAMILY_PGPU->core_resource, "nvidia.com/gpu");
    assert_string_equal(GPU_FAMILY_VCUDA->memory_resource, "tencent.com/vcuda-memory");
    assert_string_equal(GPU_FAMILY_MPS->memory_resource, "nvidia.com/mps-memory");
}

/* ---- decision annotations ------------------------------------------------- */

static void test_decision_tencent(void **state)
{
    (void)state;
    struct pod_info *p = pod_of("{'metadata':{'name':'p','annotations':{"
                                "'tencent.com/predicate-gpu-idx-0':'2,3','tencent.com/predicate-gpu-idx-2':'5',"
                                "'tencent.com/predicate-node':'n1','tencent.com/gpu-assigned':'true',"
                                "'tencent.com/predicate-time':'1763700000000000000'}},"
                                "'spec':{'containers':[{'name':'a'},{'name':'b'},{'name':'c'}]}}");
    const struct pod_decision *d = &p->decision;
    assert_string_equal(d->node, "n1");
    assert_true(d->assigned);
    assert_int_equal(d->time_ns, 1763700000000000000LL);
    assert_int_equal(d->nidx, 3);
    assert_int_equal(d->idx_count[0], 2);
    assert_int_equal(d->idx[0][0], 2);
    assert_int_equal(d->idx[0][1], 3);
    assert_null(d->idx[1]);
    assert_int_equal(d->idx_count[1], 0);
    assert_int_equal(d->idx_count[2], 1);
    assert_int_equal(d->idx[2][0], 5);
    pod_info_free(p);
}

static void test_decision_gqa_and_preference(void **state)
{
    (void)state;
    /* Only gpu-admission.io keys. */
    struct pod_info *p = pod_of("{'metadata':{'name':'p','annotations':{"
                                "'gpu-admission.io/gpu-idx-0':'1','gpu-admission.io/node':'n2',"
                                "'gpu-admission.io/time':'42','tencent.com/gpu-assigned':'false'}},"
                                "'spec':{'containers':[{'name':'a'}]}}");
    assert_string_equal(p->decision.node, "n2");
    assert_int_equal(p->decision.time_ns, 42);
    assert_false(p->decision.assigned);
    assert_int_equal(p->decision.idx_count[0], 1);
    assert_int_equal(p->decision.idx[0][0], 1);
    pod_info_free(p);

    /* Both: tencent.com wins (GPU-Manager rewrites it with what it used). */
    p = pod_of("{'metadata':{'name':'p','annotations':{"
               "'gpu-admission.io/gpu-idx-0':'1','gpu-admission.io/node':'n2','gpu-admission.io/time':'42',"
               "'tencent.com/predicate-gpu-idx-0':'6','tencent.com/predicate-node':'n3',"
               "'tencent.com/predicate-time':'43'}},"
               "'spec':{'containers':[{'name':'a'}]}}");
    assert_string_equal(p->decision.node, "n3");
    assert_int_equal(p->decision.time_ns, 43);
    assert_int_equal(p->decision.idx[0][0], 6);
    pod_info_free(p);

    /* An unreadable tencent.com index is treated as absent (no fallback to the
     * gpu-admission.io key), and a bad time is 0. */
    p = pod_of("{'metadata':{'name':'p','annotations':{"
               "'tencent.com/predicate-gpu-idx-0':'x','gpu-admission.io/gpu-idx-0':'1',"
               "'tencent.com/predicate-time':'soon'}},'spec':{'containers':[{'name':'a'}]}}");
    assert_null(p->decision.node);
    assert_null(p->decision.idx[0]);
    assert_int_equal(p->decision.time_ns, 0);
    pod_info_free(p);

    /* No annotations: nothing, nidx 0. */
    p = pod_of("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a'}]}}");
    assert_null(p->decision.node);
    assert_int_equal(p->decision.nidx, 0);
    assert_null(p->decision.idx);
    pod_info_free(p);

    /* Negative and trailing-garbage times are 0. */
    p = pod_of("{'metadata':{'name':'p','annotations':{'gpu-admission.io/time':'-5'}}}");
    assert_int_equal(p->decision.time_ns, 0);
    pod_info_free(p);
    p = pod_of("{'metadata':{'name':'p','annotations':{'gpu-admission.io/time':'12s'}}}");
    assert_int_equal(p->decision.time_ns, 0);
    pod_info_free(p);
}

static void test_parse_gpu_index_list(void **state)
{
    (void)state;
    int out[8];
    assert_int_equal(parse_gpu_index_list("", out, 8), 0);
    assert_int_equal(parse_gpu_index_list("0", out, 8), 1);
    assert_int_equal(out[0], 0);
    assert_int_equal(parse_gpu_index_list("0,1,3", out, 8), 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 3);
    assert_int_equal(parse_gpu_index_list("12,7", out, 8), 2);
    assert_int_equal(out[0], 12);
    assert_int_equal(out[1], 7);
    assert_int_equal(parse_gpu_index_list("4096", out, 8), 1);
    assert_int_equal(out[0], 4096);

    const char *bad[] = {
        ",", "0,", ",0", "0,,1", " 1", "1 ", "1, 2", "-1", "+1", "a", "1a", "4097", "99999999999999999999", "0;1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse_gpu_index_list(bad[i], out, 8) != -1)
            fail_msg("\"%s\" was accepted", bad[i]);

    /* max is enforced. */
    assert_int_equal(parse_gpu_index_list("0,1", out, 2), 2);
    assert_int_equal(parse_gpu_index_list("0,1,2", out, 2), -1);
}

static const char *ann_string(const cJSON *ann, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_decision_annotations_vcuda(void **state)
{
    (void)state;
    cJSON *ann = json_of("{'tencent.com/predicate-node':'old','other':'keep'}");
    int c0[] = {2, 3}, c2[] = {5};
    int *idx[] = {c0, NULL, c2};
    int count[] = {2, 0, 1};
    assert_int_equal(decision_annotations(ann, "n1", 1763700000123456789LL, 3, idx, count, true), 0);
    assert_string_equal(ann_string(ann, "tencent.com/predicate-node"), "n1");
    assert_string_equal(ann_string(ann, "tencent.com/gpu-assigned"), "false");
    assert_string_equal(ann_string(ann, "tencent.com/predicate-time"), "1763700000123456789");
    assert_string_equal(ann_string(ann, "tencent.com/predicate-gpu-idx-0"), "2,3");
    assert_null(ann_string(ann, "tencent.com/predicate-gpu-idx-1"));
    assert_string_equal(ann_string(ann, "tencent.com/predicate-gpu-idx-2"), "5");
    assert_string_equal(ann_string(ann, "gpu-admission.io/node"), "n1");
    assert_string_equal(ann_string(ann, "gpu-admission.io/time"), "1763700000123456789");
    assert_string_equal(ann_string(ann, "gpu-admission.io/gpu-idx-0"), "2,3");
    assert_null(ann_string(ann, "gpu-admission.io/gpu-idx-1"));
    assert_string_equal(ann_string(ann, "gpu-admission.io/gpu-idx-2"), "5");
    assert_string_equal(ann_string(ann, "other"), "keep");
    assert_int_equal(cJSON_GetArraySize(ann), 10);
    cJSON_Delete(ann);
}

static void test_decision_annotations_other(void **state)
{
    (void)state;
    cJSON *ann = cJSON_CreateObject();
    int c0[] = {1};
    int *idx[] = {c0};
    int count[] = {1};
    assert_int_equal(decision_annotations(ann, "t4", 7, 1, idx, count, false), 0);
    assert_string_equal(ann_string(ann, "gpu-admission.io/node"), "t4");
    assert_string_equal(ann_string(ann, "gpu-admission.io/time"), "7");
    assert_string_equal(ann_string(ann, "gpu-admission.io/gpu-idx-0"), "1");
    assert_int_equal(cJSON_GetArraySize(ann), 3);
    for (const cJSON *it = ann->child; it; it = it->next)
        assert_null(strstr(it->string, "tencent.com"));

    /* Written again: keys are replaced, not duplicated. */
    int c1[] = {0, 2};
    idx[0] = c1;
    count[0] = 2;
    assert_int_equal(decision_annotations(ann, "t5", 8, 1, idx, count, false), 0);
    assert_int_equal(cJSON_GetArraySize(ann), 3);
    assert_string_equal(ann_string(ann, "gpu-admission.io/node"), "t5");
    assert_string_equal(ann_string(ann, "gpu-admission.io/gpu-idx-0"), "0,2");
    cJSON_Delete(ann);
}

/* An init container placed with the pod: its minors under its own key
 * (gpu-admission.io/gpu-idx-init-<j>, never a tencent.com one, which
 * GPU-Manager would read as an app container's), read back from there. */
static void test_init_container_decision_round_trip(void **state)
{
    (void)state;
    cJSON *pod = json_of("{'metadata':{'name':'p','annotations':{}},'spec':{'containers':[{'name':'a'}],"
                         "'initContainers':[{'name':'cpu'},{'name':'w','resources':{'limits':"
                         "{'tencent.com/vcuda-core':'100'}}}]}}");
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(pod, &err);
    assert_non_null(p);
    assert_true(p->uses_gpu);
    assert_int_equal(p->ncontainers, 2);
    assert_int_equal(p->containers[1].init_slot, 2);
    int c1[] = {2};
    int *idx[] = {NULL, c1};
    int count[] = {0, 1};
    struct pod_info *d = pod_info_with_decision(p, "n1", 5, idx, count);
    assert_non_null(d);
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
    assert_int_equal(pod_decision_annotations(ann, d, true), 0);
    assert_string_equal(ann_string(ann, "gpu-admission.io/gpu-idx-init-1"), "2");
    assert_string_equal(ann_string(ann, "tencent.com/predicate-node"), "n1");
    assert_null(ann_string(ann, "tencent.com/predicate-gpu-idx-1"));
    assert_null(ann_string(ann, "gpu-admission.io/gpu-idx-1"));
    struct pod_info *back = pod_info_from_json(pod, &err);
    assert_non_null(back);
    assert_int_equal(back->decision.idx_count[1], 1);
    assert_int_equal(back->decision.idx[1][0], 2);
    pod_info_free(back);
    pod_info_free(d);
    pod_info_free(p);
    cJSON_Delete(pod);
}

static void test_annotations_round_trip(void **state)
{
    (void)state;
    /* What decision_annotations writes, pod_info_from_json reads back. */
    cJSON *pod =
        json_of("{'metadata':{'name':'p','annotations':{}},'spec':{'containers':[{'name':'a'},{'name':'b'}]}}");
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
    int c1[] = {4, 6};
    int *idx[] = {NULL, c1};
    int count[] = {0, 2};
    assert_int_equal(decision_annotations(ann, "node-9", 99, 2, idx, count, true), 0);
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(pod, &err);
    assert_non_null(p);
    assert_string_equal(p->decision.node, "node-9");
    assert_int_equal(p->decision.time_ns, 99);
    assert_false(p->decision.assigned);
    assert_null(p->decision.idx[0]);
    assert_int_equal(p->decision.idx_count[1], 2);
    assert_int_equal(p->decision.idx[1][0], 4);
    assert_int_equal(p->decision.idx[1][1], 6);
    pod_info_free(p);
    cJSON_Delete(pod);
}

static void test_with_decision_deep_copy(void **state)
{
    (void)state;
    struct pod_info *src = pod_of(
        "{'metadata':{'name':'p','namespace':'ns','uid':'u','annotations':{'tencent.com/predicate-node':'old',"
        "'tencent.com/predicate-gpu-idx-0':'0','tencent.com/gpu-assigned':'true'}},"
        "'spec':{'nodeName':'n0','containers':[{'name':'gpu','resources':{'limits':{'tencent.com/vcuda-core':'20',"
        "'tencent.com/vcuda-memory':'3'}}},{'name':'side'}]}}");
    int minors[] = {7};
    int *idx[] = {minors, NULL};
    int count[] = {1, 0};
    struct pod_info *copy = pod_info_with_decision(src, "n1", 1234, idx, count);
    assert_non_null(copy);
    minors[0] = 99; /* the copy does not point at the caller's arrays */
    pod_info_free(src);

    assert_string_equal(copy->key, "ns/p");
    assert_string_equal(copy->ns, "ns");
    assert_string_equal(copy->name, "p");
    assert_string_equal(copy->uid, "u");
    assert_string_equal(copy->node_name, "n0");
    assert_true(copy->uses_gpu);
    assert_false(copy->terminal);
    assert_null(copy->request_error);
    assert_int_equal(copy->ncontainers, 2);
    assert_string_equal(copy->containers[0].name, "gpu");
    assert_ptr_equal(copy->containers[0].family, GPU_FAMILY_VCUDA);
    assert_int_equal(copy->containers[0].cores, 20);
    assert_int_equal(copy->containers[0].memory, 3);
    assert_string_equal(copy->containers[1].name, "side");
    assert_string_equal(copy->decision.node, "n1");
    assert_int_equal(copy->decision.time_ns, 1234);
    assert_false(copy->decision.assigned);
    assert_int_equal(copy->decision.nidx, 2);
    assert_int_equal(copy->decision.idx_count[0], 1);
    assert_int_equal(copy->decision.idx[0][0], 7);
    assert_null(copy->decision.idx[1]);
    assert_int_equal(copy->decision.idx_count[1], 0);
    pod_info_free(copy);

    /* request_error and a missing uid survive the copy. */
    src = pod_with_containers("[{'name':'x','resources':{'limits':{'nvidia.com/mps-core':'120'}}}]");
    int *none[] = {NULL};
    int zero[] = {0};
    copy = pod_info_with_decision(src, "n", 1, none, zero);
    assert_non_null(copy);
    assert_null(copy->uid);
    assert_null(copy->node_name);
    assert_string_equal(copy->request_error, src->request_error);
    assert_ptr_not_equal(copy->request_error, src->request_error);
    pod_info_free(src);
    pod_info_free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_identity),
        cmocka_unit_test(test_pod_unusable),
        cmocka_unit_test(test_wrong_shapes),
        cmocka_unit_test(test_clone_without_decision),
        cmocka_unit_test(test_slim_from_text),
        cmocka_unit_test(test_slim_plain_values_as_cjson_reads_them),
        cmocka_unit_test(test_slim_tree_edits_like_any),
        cmocka_unit_test(test_unnamed_container),
        cmocka_unit_test(test_vcuda_shared),
        cmocka_unit_test(test_vcuda_whole),
        cmocka_unit_test(test_requests_fallback),
        cmocka_unit_test(test_quantity_forms),
        cmocka_unit_test(test_invalid_quantities),
        cmocka_unit_test(test_vcuda_rules),
        cmocka_unit_test(test_mps_rules),
        cmocka_unit_test(test_mixed_families),
        cmocka_unit_test(test_first_error_kept),
        cmocka_unit_test(test_family_names),
        cmocka_unit_test(test_decision_tencent),
        cmocka_unit_test(test_decision_gqa_and_preference),
        cmocka_unit_test(test_parse_gpu_index_list),
        cmocka_unit_test(test_decision_annotations_vcuda),
        cmocka_unit_test(test_decision_annotations_other),
        cmocka_unit_test(test_annotations_round_trip),
        cmocka_unit_test(test_init_container_decision_round_trip),
        cmocka_unit_test(test_with_decision_deep_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

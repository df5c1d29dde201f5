/* test_podtext.c - unit tests for cluster/podtext.c: the watch's pod reader
 * gives the pod_info of the cJSON way (pod_slim_from_prefix, then
 * pod_info_from_json) for the pods the API server writes, and declines
 * every shape where the two could differ. fuzz_podtext holds it to the
 * same rule on random input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_names.h"
#include "cluster/podspec.h"
#include "cluster/podtext.h"
#include "tests/unit/podcompare.h"
#include "tests/unit/support.h"

/* Read a fixture both ways; the fast reader must answer, and equally. */
static struct pod_info *read_same(const char *fixture, const char *after)
{
    char *pod = q(fixture);
    size_t len = strlen(pod), fast_used = 0, slow_used = 0;
    char *text = malloc(len + strlen(after) + 1);
    assert_non_null(text);
    memcpy(text, pod, len);
    strcpy(text + len, after);
    struct pod_info *fast = pod_info_from_text_prefix(text, strlen(text), &fast_used);
    if (!fast)
        fail_msg("the reader declined %s", pod);
    cJSON *slim = pod_slim_from_prefix(text, strlen(text), &slow_used);
    assert_non_null(slim);
    struct pod_info *slow = pod_info_from_json(slim, NULL);
    assert_non_null(slow);
    const char *diff = pod_info_difference(fast, slow);
    if (diff)
        fail_msg("the readers differ in %s for %s", diff, pod);
    assert_int_equal(fast_used, len);
    assert_int_equal(slow_used, len);
    pod_info_free(slow);
    cJSON_Delete(slim);
    free(text);
    free(pod);
    return fast;
}

static void expect_declined(const char *fixture)
{
    char *text = q(fixture);
    size_t used = 7;
    struct pod_info *fast = pod_info_from_text_prefix(text, strlen(text), &used);
    if (fast)
        fail_msg("the reader took %s", text);
    assert_int_equal(used, 0);
    free(text);
}

/* ---- pods it reads ------------------------------------------------------- */

static void test_watched_vcuda_pod(void **state)
{
    (void)state;
    struct pod_info *p = read_same(
        "{'kind':'Pod','apiVersion':'v1','metadata':{'name':'trainer-1','namespace':'team-1','uid':'u-1',"
        "'resourceVersion':'2001','labels':{'app':'trainer'},'annotations':{'tencent.com/predicate-gpu-idx-0':'1,3',"
        "'tencent.com/predicate-node':'node-1','tencent.com/gpu-assigned':'true','tencent.com/predicate-time':'17',"
        "'team.example.com/owner':'ml'},'ownerReferences':[{'kind':'ReplicaSet','name':'r','controller':true}]},"
        "'spec':{'nodeName':'node-1','containers':[{'name':'trainer','image':'i','env':[{'name':'A','value':'1'}],"
        "'resources':{'limits':{'cpu':'8','tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'40'},"
        "'requests':{'cpu':'8'}}}],'tolerations':[{'key':'k','tolerationSeconds':300}]},"
        "'status':{'phase':'Running','conditions':[{'type':'Ready','status':'True'}]}}",
        " \n");
    assert_string_equal(p->key, "team-1/trainer-1");
    assert_string_equal(p->uid, "u-1");
    assert_string_equal(p->resource_version, "2001");
    assert_string_equal(p->node_name, "node-1");
    assert_int_equal(p->ncontainers, 1);
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_VCUDA);
    assert_int_equal(p->containers[0].cores, 50);
    assert_int_equal(p->containers[0].memory, 40);
    assert_string_equal(p->decision.node, "node-1");
    assert_int_equal(p->decision.time_ns, 17);
    assert_true(p->decision.assigned);
    assert_int_equal(p->decision.idx_count[0], 2);
    assert_int_equal(p->decision.idx[0][1], 3);
    assert_false(p->terminal);
    pod_info_free(p);
}

static void test_hami_pod(void **state)
{
    (void)state;
    struct pod_info *p = read_same(
        "{'metadata':{'name':'vgpu-1','namespace':'ml','deletionTimestamp':'2026-11-21T10:00:00Z','annotations':{"
        "'hami.io/vgpu-node':'gpu-3','hami.io/vgpu-time':'1795291063',"
        "'hami.io/vgpu-devices-allocated':'GPU-aaaa,NVIDIA,4000,30:;','nvidia.com/use-gputype':'a100,H100',"
        "'hami.io/gpu-scheduler-policy':'spread'}},'spec':{'nodeName':'gpu-3','containers':["
        "{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1','nvidia.com/gpumem':'4000','nvidia.com/"
        "gpucores':'30'}}},"
        "{'name':'b','resources':{'limits':{},'requests':{'nvidia.com/gpu':'2'}}}]}}",
        "");
    assert_true(p->terminating);
    assert_non_null(p->hami);
    assert_int_equal(p->hami->use_types.count, 2);
    assert_int_equal(p->hami->gpu_policy, HAMI_PACK_SPREAD);
    assert_true(p->hami->has_alloc);
    assert_string_equal(p->decision.node, "gpu-3");
    assert_ptr_equal(p->containers[0].family, GPU_FAMILY_HAMI);
    assert_ptr_equal(p->containers[1].family, GPU_FAMILY_PGPU); /* empty limits: the requests count */
    assert_int_equal(p->containers[1].whole_gpus, 2);
    pod_info_free(p);

    /* A whole-GPU pod without annotations reads HAMi's defaults; with an
     * annotations object without HAMi's keys, the same. */
    p = read_same("{'metadata':{'name':'w'},'spec':{'containers':[{'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
                  "");
    assert_non_null(p->hami);
    pod_info_free(p);
    p = read_same("{'metadata':{'name':'w','annotations':{'a':'b'}},'spec':{'containers':[{'resources':{'limits':{"
                  "'nvidia.com/gpu':'1'}}}]}}",
                  "");
    assert_non_null(p->hami);
    pod_info_free(p);
}

static void test_requests_and_errors(void **state)
{
    (void)state;
    /* MPS, then a vcuda share that is not one, then a container past the
     * whole-GPU limit that is never classified; a bad index list. */
    struct pod_info *p =
        read_same("{'metadata':{'name':'m','annotations':{'gpu-admission.io/node':'t4-0','gpu-admission.io/time':'9',"
                  "'gpu-admission.io/gpu-idx-1':'01,','tencent.com/predicate-gpu-idx-0':'x'}},'spec':{'containers':["
                  "{'resources':{'limits':{'nvidia.com/mps-core':'30','nvidia.com/mps-memory':'2k'}}},"
                  "{'name':'side','resources':{'limits':{'tencent.com/vcuda-core':'150'}}},"
                  "{'name':'c','resources':{'limits':{'nvidia.com/gpu':'99'}}}]},'status':{'phase':'Succeeded'}}",
                  "]}");
    assert_string_equal(p->key, "default/m");
    assert_true(p->terminal);
    assert_string_equal(p->containers[0].name, "#0");
    assert_int_equal(p->containers[0].memory, 2000);
    assert_non_null(p->request_error);
    assert_non_null(strstr(p->request_error, "\"side\""));
    assert_ptr_equal(p->containers[2].family, GPU_FAMILY_NONE);
    assert_null(p->decision.idx[0]);
    assert_null(p->decision.idx[1]);
    pod_info_free(p);

    p = read_same("{'metadata':{'name':'big'},'spec':{'containers':[{'name':'c','resources':{'limits':{"
                  "'nvidia.com/gpu':'99'}}}]},'status':{'phase':'Failed'}}",
                  "");
    assert_non_null(strstr(p->request_error, "more than 64 whole GPUs"));
    pod_info_free(p);

    /* Nothing but a name: no containers, no decision tables. */
    p = read_same("{'metadata':{'name':'bare'}}", "");
    assert_int_equal(p->ncontainers, 0);
    assert_null(p->decision.idx);
    assert_false(p->uses_gpu);
    pod_info_free(p);
}

/* kube-scheduler's interest: a managed resource named at 0, in requests or
 * an init container, is noted; init containers are placed as Kubernetes
 * counts a pod's effective request (sidecars beside the app containers, a
 * plain one only when nothing else asks for GPUs); decisions are read back
 * from each container's own key. */
static void test_init_containers_and_interest(void **state)
{
    (void)state;
    struct pod_info *p = read_same("{'metadata':{'name':'z'},'spec':{'containers':[{'name':'c','resources':"
                                   "{'requests':{'nvidia.com/gpu':'0'}}}]}}",
                                   "");
    assert_true(p->names_gpu);
    assert_false(p->uses_gpu);
    pod_info_free(p);
    p = read_same("{'metadata':{'name':'c'},'spec':{'containers':[{'name':'c','resources':{'limits':{'cpu':'1'}}}]}}",
                  "");
    assert_false(p->names_gpu);
    pod_info_free(p);

    /* An init container alone asks for a GPU: it is placed, under its own key. */
    p = read_same("{'metadata':{'name':'i','annotations':{'gpu-admission.io/node':'n','gpu-admission.io/time':'9',"
                  "'gpu-admission.io/gpu-idx-init-1':'3','gpu-admission.io/gpu-idx-1':'5'}},'spec':{"
                  "'containers':[{'name':'app'}],'initContainers':[{'name':'cpu'},"
                  "{'name':'warm','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
                  "");
    assert_true(p->uses_gpu);
    assert_int_equal(p->ncontainers, 2);
    assert_string_equal(p->containers[1].name, "warm");
    assert_int_equal(p->containers[1].init_slot, 2);
    assert_int_equal(p->containers[1].whole_gpus, 1);
    assert_int_equal(p->decision.idx_count[1], 1);
    assert_int_equal(p->decision.idx[1][0], 3);
    pod_info_free(p);

    /* A sidecar runs beside the app containers: placed with them; a plain
     * init container then is not (its GPUs are the app containers' later). */
    p = read_same("{'metadata':{'name':'s'},'spec':{'initContainers':[{'name':'side','restartPolicy':'Always',"
                  "'resources':{'limits':{'nvidia.com/mps-core':'20'}}},{'name':'once','resources':{'limits':"
                  "{'nvidia.com/mps-core':'90'}}}],'containers':[{'name':'app','resources':{'limits':"
                  "{'nvidia.com/mps-core':'30'}}}]}}",
                  "");
    assert_int_equal(p->ncontainers, 2);
    assert_string_equal(p->containers[1].name, "side");
    assert_true(p->containers[1].sidecar);
    assert_int_equal(p->containers[1].init_slot, 1);
    assert_int_equal(p->containers[1].cores, 20);
    pod_info_free(p);
}

/* ---- shapes it declines -------------------------------------------------- */

static void test_declines(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{'metadata':{'namespace':'ns'}}",                      /* no name */
        "{'metadata':{'name':''}}",                             /* empty name */
        "{'metadata':{'name':'p','namespace':''}}",             /* empty namespace */
        "{'spec':{}}",                                          /* no metadata */
        "{'metadata':{'name':'p'},'metadata':{'name':'q'}}",    /* a field twice */
        "{'metadata':{'name':'p','name':'q'}}",                 /* a field twice */
        "{'metadata':{'name':'p\\u0041'}}",                     /* an escape in a value */
        "{'meta\\u0064ata':{'name':'p'}}",                      /* an escape in a key */
        "{'metadata':{'name':'p','uid':null}}",                 /* a type the reader does not take */
        "{'metadata':{'name':'p'},'spec':null}",                /* the same */
        "{'metadata':{'name':'p'},'spec':{'containers':null}}", /* the same */
        "{'metadata':{'name':'p'},'spec':{'containers':[1]}}",  /* the same */
        "{'metadata':{'name':'p','annotations':{'tencent.com/predicate-node':1}}}", /* a noted annotation not a string */
        "{'metadata':{'name':'p','annotations':{'gpu-admission.io/node':'a','gpu-admission.io/node':'b'}}}",
        "{'metadata':{'name':'p','annotations':{'other':'\\ud800'}}}", /* cJSON refuses a lone surrogate */
        "{'metadata':{'name':'p'},'spec':{'containers':[{'resources':{'limits':{'tencent.com/vcuda-core':50}}}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'resources':{'limits':{'tencent.com/vcuda-core':'0.5'}}}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'resources':{'limits':{'nvidia.com/gpu':'2000000000000'}}}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'resources':{'limits':{'x':'\\n'}}}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'resources':{'limits':{},'limits':{}}}]}}",
        "{'metadata':{'name':'p'}",           /* not ended */
        "[{'metadata':{'name':'p'}}]",        /* not an object */
        "{'metadata':{'name':'p','x':[1,]}}", /* not JSON, in a skipped part */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_declined(cases[i]);

    /* Seventeen containers: past what the reader holds. */
    char buf[2048] = "{'metadata':{'name':'p'},'spec':{'containers':[";
    for (int i = 0; i < 17; i++)
        strcat(buf, i ? ",{}" : "{}");
    strcat(buf, "]}}");
    expect_declined(buf);
    buf[strlen(buf) - 6] = '\0'; /* sixteen */
    strcat(buf, "]}}");
    pod_info_free(read_same(buf, ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watched_vcuda_pod),
        cmocka_unit_test(test_hami_pod),
        cmocka_unit_test(test_requests_and_errors),
        cmocka_unit_test(test_declines),
        cmocka_unit_test(test_init_containers_and_interest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_topology_annotation.c - unit tests for topology/annotation.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/support.h"
#include "topology/annotation.h"

static struct gpu_topology *parse_ok(const char *fixture)
{
    char *json = q(fixture);
    char *err = (char *)"untouched";
    struct gpu_topology *t = topology_parse(json, &err);
    if (!t)
        fail_msg("unexpected error: %s", err ? err : "(null)");
    assert_null(err);
    free(json);
    return t;
}

static void expect_error(const char *fixture, const char *message)
{
    char *json = q(fixture);
    char *err = NULL;
    struct gpu_topology *t = topology_parse(json, &err);
    assert_null(t);
    assert_non_null(err);
    assert_string_equal(err, message);
    free(err);
    free(json);
}

struct error_case {
    const char *fixture;
    const char *message;
};

static void expect_errors(const struct error_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expect_error(cases[i].fixture, cases[i].message);
}

#define EXPECT_ERRORS(cases) expect_errors(cases, sizeof(cases) / sizeof(cases[0]))

static void assert_link(const struct gpu_topology *t, int i, int j, int cls, int nvlinks)
{
    struct topo_link l = topology_link(t, i, j);
    assert_int_equal(l.cls, cls);
    assert_int_equal(l.nvlinks, nvlinks);
}

/* ------------------------------------------------------------ fixtures */

#define A100(i, numa, uuid)                                                              \
    "{'index':" #i ",'minor':" #i ",'uuid':'GPU-" uuid "','model':'NVIDIA A100-SXM4-80GB'," \
    "'memoryMiB':81920,'numa':" #numa "}"

/* DGX A100: eight SXM4 GPUs, every pair bonded by 12 NVLinks through the
 * NVSwitches; NUMA affinity as on an NPS4 EPYC host. */
static const char DGX_A100[] =
    "{'version':1,'gpus':["
    A100(0, 3, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e50") ","
    A100(1, 3, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e51") ","
    A100(2, 1, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e52") ","
    A100(3, 1, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e53") ","
    A100(4, 7, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e54") ","
    A100(5, 7, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e55") ","
    A100(6, 5, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e56") ","
    A100(7, 5, "d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e57") "],"
    "'links':["
    "['X','NV12','NV12','NV12','NV12','NV12','NV12','NV12'],"
    "['NV12','X','NV12','NV12','NV12','NV12','NV12','NV12'],"
    "['NV12','NV12','X','NV12','NV12','NV12','NV12','NV12'],"
    "['NV12','NV12','NV12','X','NV12','NV12','NV12','NV12'],"
    "['NV12','NV12','NV12','NV12','X','NV12','NV12','NV12'],"
    "['NV12','NV12','NV12','NV12','NV12','X','NV12','NV12'],"
    "['NV12','NV12','NV12','NV12','NV12','NV12','X','NV12'],"
    "['NV12','NV12','NV12','NV12','NV12','NV12','NV12','X']]}";

#define T4(i, numa)                                                                     \
    "{'index':" #i ",'minor':" #i ",'uuid':'GPU-7f3e2a10-5b6c-4d8e-9f01-23456789ab0" #i "'," \
    "'model':'Tesla T4','memoryMiB':15360,'numa':" #numa "}"

/* Four T4s on a dual-socket host: pairs share a host bridge, and anything
 * across sockets goes over the inter-socket link. Written exactly as
 * topology_serialize writes it, so it doubles as the round-trip reference. */
static const char T4_DUAL_SOCKET[] =
    "{'version':1,'gpus':[" T4(0, 0) "," T4(1, 0) "," T4(2, 1) "," T4(3, 1) "],"
    "'links':[['X','PHB','SYS','SYS'],['PHB','X','SYS','SYS'],"
    "['SYS','SYS','X','PHB'],['SYS','SYS','PHB','X']]}";

/* Every link token once, for round trips. */
static const char MIXED[] =
    "{'version':1,'gpus':[{'index':0,'minor':7,'memoryMiB':0,'numa':-1},"
    "{'index':1,'minor':3,'model':'NVIDIA H100 80GB HBM3','memoryMiB':81559,'numa':0},"
    "{'index':2,'minor':0,'uuid':'','memoryMiB':2147483647,'numa':2147483647},"
    "{'index':3,'minor':2147483647,'memoryMiB':1,'numa':1}],"
    "'links':[['X','NV18','PIX','PXB'],['NV18','X','NV1','NODE'],"
    "['PIX','NV1','X','SYS'],['PXB','NODE','SYS','X']]}";

#define G2 "{'version':1,'gpus':[{'index':0},{'index':1}]"
#define G4 "{'version':1,'gpus':[{'index':0},{'index':1},{'index':2},{'index':3}]"

/* --------------------------------------------------------- good input */

static void test_dgx_a100(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok(DGX_A100);
    assert_int_equal(t->version, 1);
    assert_int_equal(t->count, 8);
    static const int numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(t->gpus[i].index, i);
        assert_int_equal(t->gpus[i].minor, i);
        assert_string_equal(t->gpus[i].model, "NVIDIA A100-SXM4-80GB");
        assert_int_equal(t->gpus[i].memory_mib, 81920);
        assert_int_equal(t->gpus[i].numa, numa[i]);
        for (int j = 0; j < 8; j++)
            assert_link(t, i, j, i == j ? TOPO_LINK_SELF : TOPO_LINK_NV, i == j ? 0 : 12);
    }
    assert_string_equal(t->gpus[0].uuid, "GPU-d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e50");
    assert_string_equal(t->gpus[5].uuid, "GPU-d1c0a6f2-3b9e-4c1a-8e55-0a1b2c3d4e55");
    topology_free(t);
}

static void test_t4_dual_socket(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok(T4_DUAL_SOCKET);
    assert_int_equal(t->count, 4);
    static const int numa[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t->gpus[i].minor, i);
        assert_int_equal(t->gpus[i].numa, numa[i]);
        assert_int_equal(t->gpus[i].memory_mib, 15360);
        assert_string_equal(t->gpus[i].model, "Tesla T4");
    }
    assert_string_equal(t->gpus[3].uuid, "GPU-7f3e2a10-5b6c-4d8e-9f01-23456789ab03");
    assert_link(t, 0, 0, TOPO_LINK_SELF, 0);
    assert_link(t, 0, 1, TOPO_LINK_PHB, 0);
    assert_link(t, 1, 0, TOPO_LINK_PHB, 0);
    assert_link(t, 2, 3, TOPO_LINK_PHB, 0);
    assert_link(t, 3, 2, TOPO_LINK_PHB, 0);
    assert_link(t, 0, 2, TOPO_LINK_SYS, 0);
    assert_link(t, 1, 3, TOPO_LINK_SYS, 0);
    assert_link(t, 3, 0, TOPO_LINK_SYS, 0);
    topology_free(t);
}

static void test_minors_and_defaults(void **state)
{
    (void)state;
    /* A container that sees only some devices: minors are not the indices.
     * The third GPU leaves minor out, which defaults to its index. */
    struct gpu_topology *t = parse_ok(
        "{'version':1,'gpus':[{'index':0,'minor':5,'numa':1},{'index':1,'minor':3},"
        "{'index':2,'uuid':null}],'futureField':{'x':[1,2]}}");
    assert_int_equal(t->count, 3);
    assert_int_equal(t->gpus[0].minor, 5);
    assert_int_equal(t->gpus[1].minor, 3);
    assert_int_equal(t->gpus[2].minor, 2);
    assert_int_equal(t->gpus[0].numa, 1);
    assert_int_equal(t->gpus[1].numa, -1);
    for (int i = 0; i < 3; i++) {
        assert_null(t->gpus[i].uuid);
        assert_null(t->gpus[i].model);
        assert_int_equal(t->gpus[i].memory_mib, 0);
    }
    topology_free(t);
}

static void assert_all_sys(const struct gpu_topology *t)
{
    for (int i = 0; i < t->count; i++)
        for (int j = 0; j < t->count; j++)
            assert_link(t, i, j, i == j ? TOPO_LINK_SELF : TOPO_LINK_SYS, 0);
}

static void test_missing_links_are_sys(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok("{'version':1,'gpus':[{'index':0},{'index':1},{'index':2}]}");
    assert_int_equal(t->count, 3);
    assert_all_sys(t);
    topology_free(t);
    t = parse_ok("{'version':1,'gpus':[{'index':0},{'index':1}],'links':null}");
    assert_all_sys(t);
    topology_free(t);
}

/* {"version":1,"gpus":[{"index":0},...]} with n GPUs. */
static char *gpus_text(int n)
{
    size_t cap = 64 + (size_t)n * 16;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = (size_t)snprintf(text, cap, "{\"version\":1,\"gpus\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s{\"index\":%d}", i ? "," : "", i);
    snprintf(text + len, cap - len, "]}");
    return text;
}

static void test_gpu_count_limit(void **state)
{
    (void)state;
    char *text = gpus_text(TOPOLOGY_MAX_GPUS);
    struct gpu_topology *t = parse_ok(text);
    assert_int_equal(t->count, 64);
    assert_int_equal(t->gpus[63].minor, 63);
    assert_link(t, 63, 0, TOPO_LINK_SYS, 0);
    topology_free(t);
    free(text);
    text = gpus_text(TOPOLOGY_MAX_GPUS + 1);
    expect_error(text, "gpus: 65 entries, at most 64 are supported");
    free(text);
}

static void test_integral_numbers_accepted(void **state)
{
    (void)state;
    /* 1.0 and 2e0 are integral values; only fractions are rejected. */
    struct gpu_topology *t = parse_ok(
        "{'version':1.0,'gpus':[{'index':0,'minor':2e0,'memoryMiB':2147483647,'numa':-1}]}");
    assert_int_equal(t->version, 1);
    assert_int_equal(t->gpus[0].minor, 2);
    assert_int_equal(t->gpus[0].memory_mib, 2147483647);
    topology_free(t);
}

/* -------------------------------------------------------- validation */

static void test_errors_document(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{", "annotation: not valid JSON (at byte 1)"},
        {"", "annotation: not valid JSON (at byte 0)"},
        {G2 "} x", "annotation: not valid JSON (at byte 47)"},
        {"[1]", "annotation: must be a JSON object"},
        {"'gpus'", "annotation: must be a JSON object"},
    };
    EXPECT_ERRORS(cases);
    char *err = NULL;
    assert_null(topology_parse(NULL, &err));
    assert_string_equal(err, "annotation: missing");
    free(err);
}

static void test_errors_version(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{'gpus':[{'index':0}]}", "version: required"},
        {"{'version':null,'gpus':[{'index':0}]}", "version: required"},
        {"{'version':'1','gpus':[{'index':0}]}", "version: must be an integer"},
        {"{'version':1.5,'gpus':[{'index':0}]}", "version: must be an integer"},
        {"{'version':4294967297,'gpus':[{'index':0}]}", "version: must be an integer"},
        {"{'version':2,'gpus':[{'index':0}]}", "version: unsupported version 2 (expected 1)"},
        {"{'version':0,'gpus':[{'index':0}]}", "version: unsupported version 0 (expected 1)"},
        {"{'version':1,'version':2,'gpus':[{'index':0}]}", "version: duplicate key"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_gpus(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{'version':1}", "gpus: required"},
        {"{'version':1,'gpus':{'index':0}}", "gpus: must be an array"},
        {"{'version':1,'gpus':[]}", "gpus: must not be empty"},
        {"{'version':1,'gpus':[{'index':0},7]}", "gpus[1]: must be an object"},
        {"{'version':1,'gpus':[{'index':0},{'minor':1}]}", "gpus[1].index: required"},
        {"{'version':1,'gpus':[{'index':0},{'index':'1'}]}", "gpus[1].index: must be an integer"},
        {"{'version':1,'gpus':[{'index':0},{'index':0}]}",
         "gpus[1].index: must be 1 (its position in gpus), got 0"},
        {"{'version':1,'gpus':[{'index':1},{'index':0}]}",
         "gpus[0].index: must be 0 (its position in gpus), got 1"},
        {"{'version':1,'gpus':[{'index':0,'index':0}]}", "gpus[0].index: duplicate key"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_gpu_fields(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{'version':1,'gpus':[{'index':0,'minor':-1}]}",
         "gpus[0].minor: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0},{'index':1},{'index':2},{'index':3,'minor':'3'}]}",
         "gpus[3].minor: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'minor':4},{'index':1},{'index':2,'minor':4}]}",
         "gpus[2].minor: 4 is already used by gpus[0]"},
        /* gpus[1] defaults to minor 1, which gpus[0] claims explicitly. */
        {"{'version':1,'gpus':[{'index':0,'minor':1},{'index':1}]}",
         "gpus[1].minor: 1 is already used by gpus[0]"},
        {"{'version':1,'gpus':[{'index':0,'uuid':42}]}", "gpus[0].uuid: must be a string"},
        {"{'version':1,'gpus':[{'index':0,'model':true}]}", "gpus[0].model: must be a string"},
        {"{'version':1,'gpus':[{'index':0,'memoryMiB':-1}]}",
         "gpus[0].memoryMiB: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'memoryMiB':'80Gi'}]}",
         "gpus[0].memoryMiB: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'numa':-2}]}", "gpus[0].numa: must be an integer >= -1"},
        {"{'version':1,'gpus':[{'index':0,'numa':[0]}]}", "gpus[0].numa: must be an integer >= -1"},
        {"{'version':1,'gpus':[{'index':0,'uuid':'a','uuid':'b'}]}", "gpus[0].uuid: duplicate key"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_numbers(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{'version':1,'gpus':[{'index':0.5}]}", "gpus[0].index: must be an integer"},
        {"{'version':1,'gpus':[{'index':0,'minor':1.5}]}",
         "gpus[0].minor: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'minor':2147483648}]}",
         "gpus[0].minor: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'memoryMiB':81920.5}]}",
         "gpus[0].memoryMiB: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'memoryMiB':1e12}]}",
         "gpus[0].memoryMiB: must be a non-negative integer"},
        {"{'version':1,'gpus':[{'index':0,'numa':0.25}]}", "gpus[0].numa: must be an integer >= -1"},
        {"{'version':1,'gpus':[{'index':0,'numa':-2147483649}]}",
         "gpus[0].numa: must be an integer >= -1"},
        {"{'version':1,'gpus':[{'index':0,'numa':1e400}]}", "gpus[0].numa: must be an integer >= -1"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_links_shape(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {G4 ",'links':'SYS'}", "links: must be an array"},
        {G4 ",'links':[['X','SYS','SYS','SYS'],['SYS','X','SYS','SYS'],['SYS','SYS','X','SYS']]}",
         "links: 3 rows for 4 GPUs"},
        {"{'version':1,'gpus':[{'index':0}],'links':[]}", "links: 0 rows for 1 GPU"},
        {G2 ",'links':[['X','SYS']]}", "links: 1 row for 2 GPUs"},
        {G2 ",'links':[['X','SYS'],'SYS']}", "links[1]: must be an array"},
        {G4 ",'links':[['X','SYS','SYS','SYS'],['SYS','X','SYS'],['SYS','SYS','X','SYS'],"
            "['SYS','SYS','SYS','X']]}",
         "links[1]: 3 entries for 4 GPUs"},
        {G2 ",'links':[['X','SYS'],['SYS']]}", "links[1]: 1 entry for 2 GPUs"},
        {G2 ",'links':[['X',12],['NV12','X']]}", "links[0][1]: must be a string"},
        {G2 ",'links':[['X','SYS'],['SYS','X']],'links':null}", "links: duplicate key"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_links_tokens(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {G4 ",'links':[['X','SYS','SYS','SYS'],['SYS','X','SYS','SYS'],['SYS','SYS','X','NVX'],"
            "['SYS','SYS','SYS','X']]}",
         "links[2][3]: unknown link \"NVX\""},
        {G2 ",'links':[['X','NV0'],['NV0','X']]}", "links[0][1]: unknown link \"NV0\""},
        {G2 ",'links':[['X','nv2'],['NV2','X']]}", "links[0][1]: unknown link \"nv2\""},
        /* Untrusted tokens are echoed only up to 32 characters. */
        {G2 ",'links':[['X','SYSSYSSYSSYSSYSSYSSYSSYSSYSSYSSYSSYS'],['SYS','X']]}",
         "links[0][1]: unknown link \"SYSSYSSYSSYSSYSSYSSYSSYSSYSSYSSY\""},
        {G4 ",'links':[['X','SYS','SYS','SYS'],['SYS','NV2','SYS','SYS'],['SYS','SYS','X','SYS'],"
            "['SYS','SYS','SYS','X']]}",
         "links[1][1]: must be \"X\" on the diagonal"},
        {G2 ",'links':[['X','X'],['X','X']]}", "links[0][1]: \"X\" is only allowed on the diagonal"},
    };
    EXPECT_ERRORS(cases);
}

static void test_errors_links_symmetry(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {G4 ",'links':[['X','SYS','SYS','NV2'],['SYS','X','SYS','SYS'],['SYS','SYS','X','SYS'],"
            "['SYS','SYS','SYS','X']]}",
         "links[0][3] is NV2 but links[3][0] is SYS: the matrix must be symmetric"},
        /* Same class, different bond count. */
        {G2 ",'links':[['X','NV2'],['NV4','X']]}",
         "links[0][1] is NV2 but links[1][0] is NV4: the matrix must be symmetric"},
        {G4 ",'links':[['X','PIX','SYS','SYS'],['PIX','X','PXB','SYS'],['SYS','PHB','X','SYS'],"
            "['SYS','SYS','SYS','X']]}",
         "links[1][2] is PXB but links[2][1] is PHB: the matrix must be symmetric"},
    };
    EXPECT_ERRORS(cases);
}

static void test_null_err_pointer(void **state)
{
    (void)state;
    assert_null(topology_parse("{\"version\":2,\"gpus\":[{\"index\":0}]}", NULL));
    assert_null(topology_parse("not json", NULL));
    struct gpu_topology *t = topology_parse("{\"version\":1,\"gpus\":[{\"index\":0}]}", NULL);
    assert_non_null(t);
    assert_int_equal(t->count, 1);
    assert_link(t, 0, 0, TOPO_LINK_SELF, 0);
    topology_free(t);
}

static void test_from_json(void **state)
{
    (void)state;
    char *err = NULL;
    assert_null(topology_from_json(NULL, &err));
    assert_string_equal(err, "annotation: missing");
    free(err);
    cJSON *number = cJSON_CreateNumber(1);
    assert_null(topology_from_json(number, &err));
    assert_string_equal(err, "annotation: must be a JSON object");
    free(err);
    cJSON_Delete(number);

    char *json = q(T4_DUAL_SOCKET);
    cJSON *root = cJSON_Parse(json);
    struct gpu_topology *t = topology_from_json(root, &err);
    assert_non_null(t);
    assert_null(err);
    assert_int_equal(t->gpus[2].numa, 1);
    assert_link(t, 2, 3, TOPO_LINK_PHB, 0);
    topology_free(t);
    cJSON_Delete(root);
    free(json);
}

/* -------------------------------------------------------- link tokens */

static void test_parse_link_table(void **state)
{
    (void)state;
    static const struct {
        const char *token;
        int cls, nvlinks;
    } good[] = {
        {"X", TOPO_LINK_SELF, 0},   {"SYS", TOPO_LINK_SYS, 0}, {"NODE", TOPO_LINK_NODE, 0},
        {"PHB", TOPO_LINK_PHB, 0},  {"PXB", TOPO_LINK_PXB, 0}, {"PIX", TOPO_LINK_PIX, 0},
        {"NV1", TOPO_LINK_NV, 1},   {"NV2", TOPO_LINK_NV, 2},  {"NV12", TOPO_LINK_NV, 12},
        {"NV18", TOPO_LINK_NV, 18}, {"NV64", TOPO_LINK_NV, 64},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct topo_link l = {.cls = 99, .nvlinks = 99};
        assert_int_equal(topology_parse_link(good[i].token, &l), 0);
        assert_int_equal(l.cls, good[i].cls);
        assert_int_equal(l.nvlinks, good[i].nvlinks);
        char buf[8];
        topology_format_link(l, buf, sizeof buf);
        assert_string_equal(buf, good[i].token);
    }
    static const char *const bad[] = {
        "NV0", "NV", "nv2", "NV65", "NV100", "NV012", "NV+2", "NV-1", "NV 2", "NV2 ", "NV1a",
        "", "x", "sys", "SYS ", " PIX", "PIXX", "NVLINK", "XX",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct topo_link l = {.cls = 99, .nvlinks = 98};
        if (topology_parse_link(bad[i], &l) != -1)
            fail_msg("token \"%s\" was accepted", bad[i]);
        assert_int_equal(l.cls, 99);  /* untouched on failure */
        assert_int_equal(l.nvlinks, 98);
    }
    struct topo_link l;
    assert_int_equal(topology_parse_link(NULL, &l), -1);
    assert_int_equal(topology_parse_link("SYS", NULL), -1);
}

static void test_format_link_edges(void **state)
{
    (void)state;
    char buf[8];
    topology_format_link((struct topo_link){.cls = TOPO_LINK_NV, .nvlinks = 255}, buf, sizeof buf);
    assert_string_equal(buf, "NV255");
    topology_format_link((struct topo_link){.cls = 42, .nvlinks = 0}, buf, sizeof buf);
    assert_string_equal(buf, "?");
    char small[3] = "zz";
    topology_format_link((struct topo_link){.cls = TOPO_LINK_NODE, .nvlinks = 0}, small,
                         sizeof small);
    assert_string_equal(small, "NO");  /* truncated, but terminated */
    topology_format_link((struct topo_link){.cls = TOPO_LINK_SYS, .nvlinks = 0}, small, 0);
    assert_string_equal(small, "NO");  /* size 0: nothing written */
}

/* ---------------------------------------------------------- round trip */

static void assert_same_string(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_topology_equal(const struct gpu_topology *a, const struct gpu_topology *b)
{
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->count, b->count);
    for (int i = 0; i < a->count; i++) {
        assert_int_equal(a->gpus[i].index, b->gpus[i].index);
        assert_int_equal(a->gpus[i].minor, b->gpus[i].minor);
        assert_same_string(a->gpus[i].uuid, b->gpus[i].uuid);
        assert_same_string(a->gpus[i].model, b->gpus[i].model);
        assert_int_equal(a->gpus[i].memory_mib, b->gpus[i].memory_mib);
        assert_int_equal(a->gpus[i].numa, b->gpus[i].numa);
    }
    for (int i = 0; i < a->count * a->count; i++) {
        assert_int_equal(a->links[i].cls, b->links[i].cls);
        assert_int_equal(a->links[i].nvlinks, b->links[i].nvlinks);
    }
}

static void round_trip(const char *fixture)
{
    struct gpu_topology *t = parse_ok(fixture);
    char *text = topology_serialize(t);
    assert_non_null(text);
    char *err = NULL;
    struct gpu_topology *back = topology_parse(text, &err);
    assert_null(err);
    assert_non_null(back);
    assert_topology_equal(t, back);
    /* A second pass must not drift. */
    char *again = topology_serialize(back);
    assert_string_equal(text, again);
    free(again);
    free(text);
    topology_free(back);
    topology_free(t);
}

static void test_serialize_exact_format(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok(T4_DUAL_SOCKET);
    char *text = topology_serialize(t);
    char *expected = q(T4_DUAL_SOCKET);
    assert_string_equal(text, expected);
    free(expected);
    free(text);
    topology_free(t);

    /* Defaults are written out; uuid/model are omitted when NULL. */
    t = parse_ok("{'version':1,'gpus':[{'index':0,'model':'Tesla \\'V100\\''}]}");
    text = topology_serialize(t);
    assert_string_equal(text, "{\"version\":1,\"gpus\":[{\"index\":0,\"minor\":0,"
                              "\"model\":\"Tesla \\\"V100\\\"\",\"memoryMiB\":0,\"numa\":-1}],"
                              "\"links\":[[\"X\"]]}");
    free(text);
    topology_free(t);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(DGX_A100);
    round_trip(T4_DUAL_SOCKET);
    round_trip(MIXED);
    round_trip("{'version':1,'gpus':[{'index':0,'minor':9},{'index':1,'minor':4}]}");
}

static void test_round_trip_built(void **state)
{
    (void)state;
    /* A structure assembled by hand, as the node agent side would. */
    struct topo_gpu gpus[2] = {
        {.index = 0, .minor = 6, .uuid = (char *)"GPU-x", .model = NULL, .memory_mib = 24576, .numa = 1},
        {.index = 1, .minor = 2, .uuid = NULL, .model = (char *)"NVIDIA L4", .memory_mib = 0, .numa = -1},
    };
    struct topo_link links[4] = {
        {TOPO_LINK_SELF, 0}, {TOPO_LINK_NV, 4}, {TOPO_LINK_NV, 4}, {TOPO_LINK_SELF, 0}};
    struct gpu_topology t = {.version = 1, .count = 2, .gpus = gpus, .links = links};
    char *text = topology_serialize(&t);
    assert_string_equal(text,
                        "{\"version\":1,\"gpus\":[{\"index\":0,\"minor\":6,\"uuid\":\"GPU-x\","
                        "\"memoryMiB\":24576,\"numa\":1},{\"index\":1,\"minor\":2,"
                        "\"model\":\"NVIDIA L4\",\"memoryMiB\":0,\"numa\":-1}],"
                        "\"links\":[[\"X\",\"NV4\"],[\"NV4\",\"X\"]]}");
    char *err = NULL;
    struct gpu_topology *back = topology_parse(text, &err);
    assert_non_null(back);
    assert_topology_equal(&t, back);
    topology_free(back);
    free(text);
}

static void test_to_json_matches_serialize(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok(MIXED);
    cJSON *tree = topology_to_json(t);
    assert_non_null(tree);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(tree, "version")->valueint, 1);
    cJSON *gpus = cJSON_GetObjectItemCaseSensitive(tree, "gpus");
    assert_int_equal(cJSON_GetArraySize(gpus), 4);
    cJSON *g1 = cJSON_GetArrayItem(gpus, 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(g1, "model")->valuestring,
                        "NVIDIA H100 80GB HBM3");
    assert_null(cJSON_GetObjectItemCaseSensitive(g1, "uuid"));
    cJSON *links = cJSON_GetObjectItemCaseSensitive(tree, "links");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(links, 1), 2)->valuestring, "NV1");
    char *printed = cJSON_PrintUnformatted(tree);
    char *text = topology_serialize(t);
    assert_string_equal(printed, text);
    free(printed);
    free(text);
    cJSON_Delete(tree);
    topology_free(t);
}

static void test_null_and_empty(void **state)
{
    (void)state;
    topology_free(NULL);
    assert_null(topology_to_json(NULL));
    assert_null(topology_serialize(NULL));
    struct gpu_topology empty = {.version = 1, .count = 0};
    assert_null(topology_serialize(&empty));
}

/* ----------------------------------------------------- out of memory */

/* cJSON allocates through hooks; failing the n-th allocation walks every
 * error path in tree building. Leaks show up under ASan and valgrind. */
static int alloc_budget = -1;

static void *limited_malloc(size_t size)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(size);
}

static void set_budget(int budget)
{
    alloc_budget = budget;
    cJSON_Hooks hooks = {.malloc_fn = limited_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}

static void test_cjson_allocation_failures(void **state)
{
    (void)state;
    struct gpu_topology *t = parse_ok(MIXED);
    char *reference = topology_serialize(t);
    int failures = 0;
    for (int budget = 0;; budget++) {
        set_budget(budget);
        char *text = topology_serialize(t);
        set_budget(-1);
        if (text) {
            assert_string_equal(text, reference);
            free(text);
            break;
        }
        failures++;
    }
    assert_true(failures > 20);  /* one per node of the tree, at least */

    char *json = q(MIXED);
    for (int budget = 0;; budget++) {
        char *err = NULL;
        set_budget(budget);
        struct gpu_topology *back = topology_parse(json, &err);
        set_budget(-1);
        if (back) {
            assert_null(err);
            assert_topology_equal(t, back);
            topology_free(back);
            break;
        }
        /* cJSON cannot tell "out of memory" from a syntax error. */
        assert_non_null(err);
        assert_memory_equal(err, "annotation: not valid JSON", 26);
        free(err);
    }
    cJSON_InitHooks(NULL);
    free(json);
    free(reference);
    topology_free(t);
}

/* A node writer may not put terminal escapes in the strings kubectl gpu,
 * metrics and logs show (issue 22): the annotation is refused, the escape
 * shown escaped in the reason. */
static void test_control_characters_refused(void **state)
{
    (void)state;
    expect_error("{'version':1,'gpus':[{'index':0,'minor':0,'model':'A100\\u001b[2J'}],'links':[['X']]}",
                 "gpus[0].model: control characters or invalid UTF-8 in \"A100\\x1b[2J\"");
    expect_error("{'version':1,'gpus':[{'index':0,'minor':0,'uuid':'GPU-\\u009b31m'}],'links':[['X']]}",
                 "gpus[0].uuid: control characters or invalid UTF-8 in \"GPU-\\u009b31m\"");
    expect_error("{'version':1,'gpus':[{'index':0,'minor':0,'model':'del\\u007f'}],'links':[['X']]}",
                 "gpus[0].model: control characters or invalid UTF-8 in \"del\\x7f\"");
    struct gpu_topology *t =
        parse_ok("{'version':1,'gpus':[{'index':0,'minor':0,'model':'NVIDIA A100 \u00e9'}],'links':[['X']]}");
    assert_string_equal(t->gpus[0].model, "NVIDIA A100 \u00e9");
    topology_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_a100),
        cmocka_unit_test(test_t4_dual_socket),
        cmocka_unit_test(test_minors_and_defaults),
        cmocka_unit_test(test_missing_links_are_sys),
        cmocka_unit_test(test_gpu_count_limit),
        cmocka_unit_test(test_control_characters_refused),
        cmocka_unit_test(test_integral_numbers_accepted),
        cmocka_unit_test(test_errors_document),
        cmocka_unit_test(test_errors_version),
        cmocka_unit_test(test_errors_gpus),
        cmocka_unit_test(test_errors_gpu_fields),
        cmocka_unit_test(test_errors_numbers),
        cmocka_unit_test(test_errors_links_shape),
        cmocka_unit_test(test_errors_links_tokens),
        cmocka_unit_test(test_errors_links_symmetry),
        cmocka_unit_test(test_null_err_pointer),
        cmocka_unit_test(test_from_json),
        cmocka_unit_test(test_parse_link_table),
        cmocka_unit_test(test_format_link_edges),
        cmocka_unit_test(test_serialize_exact_format),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_built),
        cmocka_unit_test(test_to_json_matches_serialize),
        cmocka_unit_test(test_null_and_empty),
        cmocka_unit_test(test_cjson_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_mig.c - unit tests for MIG: profile names, the NVIDIA device
 * plugin/GFD inventory and container requests (cluster/mig.c), placement
 * and fragmentation (cluster/mig_place.c), HAMi's registration profiles and
 * allocation annotation (cluster/mig_hami.c), against the fixtures in
 * tests/fixtures/mig. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/mig.h"
#include "cluster/mig_hami.h"
#include "cluster/mig_place.h"
#include "lib/strbuf.h"
#include "tests/unit/support.h"

/* ---- helpers ------------------------------------------------------------------- */

static cJSON *fixture(const char *name)
{
    char rel[256];
    fmt(rel, sizeof(rel), "tests/fixtures/mig/%s", name);
    char *text = source_text(rel);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j)
        fail_msg("%s is not JSON", rel);
    return j;
}

static const cJSON *at(const cJSON *j, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

static void read_node_fixture(const char *name, struct mig_node *out)
{
    cJSON *node = fixture(name);
    mig_node_read(at(at(node, "metadata", NULL), "labels", NULL), at(node, "status", "capacity"),
                  at(node, "status", "allocatable"), out);
    cJSON_Delete(node);
}

static int parse_ok(const char *text, struct mig_profile_name *p)
{
    char why[128];
    int rc = mig_profile_parse(text, strlen(text), p, why, sizeof(why));
    if (rc != 0)
        print_error("%s: %s\n", text, why);
    return rc;
}

/* An A100-40GB geometry as HAMi registers it (tests/fixtures/mig/node-hami-mig.json). */
static void a100_40(struct mig_gpu *g)
{
    assert_int_equal(mig_builtin_geometry("NVIDIA A100-SXM4-40GB", g), 0);
}

static void use(struct mig_gpu *g, const char *profile, int start, int size)
{
    char why[128];
    assert_int_equal(mig_gpu_add_inuse(g, profile, (struct mig_placement){start, size}, why, sizeof(why)), 0);
}

static const char *chosen(const struct mig_gpu *g, const struct mig_choice *c)
{
    return g->templates[c->template_index].name;
}

/* ---- profile names ---------------------------------------------------------------- */

static void test_profile_names(void **state)
{
    (void)state;
    struct mig_profile_name p;
    assert_int_equal(parse_ok("1g.10gb", &p), 0);
    assert_int_equal(p.slices, 1);
    assert_int_equal(p.compute, 1);
    assert_int_equal(p.memory_gb, 10);
    assert_int_equal(p.attrs, 0);
    assert_string_equal(p.canonical, "1g.10gb");
    assert_int_equal(parse_ok("7g.80gb", &p), 0);
    assert_int_equal(p.slices, 7);
    assert_int_equal(p.memory_gb, 80);
    assert_int_equal(parse_ok("1g.10gb+me", &p), 0);
    assert_int_equal(p.attrs, MIG_ATTR_ME);
    assert_string_equal(p.canonical, "1g.10gb+me");
    assert_string_equal(p.resource, "1g.10gb.me");
    assert_int_equal(parse_ok("1c.3g.20gb", &p), 0);
    assert_int_equal(p.compute, 1);
    assert_int_equal(p.slices, 3);
    assert_string_equal(p.canonical, "1c.3g.20gb");
    /* go-nvlib writes "<g>g" alone when c equals g */
    assert_int_equal(parse_ok("3c.3g.20gb", &p), 0);
    assert_string_equal(p.canonical, "3g.20gb");
    assert_int_equal(parse_ok("1g.24gb+me,gfx", &p), 0);
    assert_int_equal(p.nattrs, 2);
    assert_int_equal(p.attrs, MIG_ATTR_ME);
    assert_string_equal(p.resource, "1g.24gb.me,gfx");
}

static void test_profile_names_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "g.10gb",
        "1g",
        "1g.",
        "1g.10",
        "1g.10g",
        "1g.10gbx",
        "0g.10gb",
        "9g.80gb",
        "1g.0gb",
        "1g.5000gb",
        "01g.10gb",
        "4c.3g.20gb",
        "0c.1g.10gb",
        "1c.1c.10gb",
        "1g.10gb+",
        "1g.10gb+me,",
        "1g.10gb+me,me",
        "1g.10gb+1x",
        "1g.10gb+m-e",
        "-1g.10gb",
        "1g.10gb.me",
        " 1g.10gb",
        "1g.10gb ",
        "99999g.1gb",
        "1g.10gb+a,b,c,d,e",
        "1g.10gb+abcdefghijklmnop",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mig_profile_name p;
        char why[128] = "";
        if (mig_profile_parse(bad[i], strlen(bad[i]), &p, why, sizeof(why)) == 0)
            fail_msg("\"%s\" parsed", bad[i]);
        assert_true(why[0] != '\0');
    }
    char longname[200];
    memset(longname, '1', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    struct mig_profile_name p;
    char why[128];
    assert_int_equal(mig_profile_parse(longname, strlen(longname), &p, why, sizeof(why)), -1);
    assert_int_equal(mig_profile_parse(NULL, 0, &p, why, sizeof(why)), -1);
    /* a reason names what is wrong */
    assert_int_equal(mig_profile_parse("9g.80gb", 7, &p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "1..8"));
}

static void test_profile_resource_form(void **state)
{
    (void)state;
    struct mig_profile_name p;
    char why[128];
    assert_int_equal(mig_profile_parse_resource("1g.5gb.me", 9, &p, why, sizeof(why)), 0);
    assert_string_equal(p.canonical, "1g.5gb+me");
    assert_int_equal(p.attrs, MIG_ATTR_ME);
    assert_int_equal(mig_profile_parse_resource("1g.5gb+me", 9, &p, why, sizeof(why)), 0);
    assert_string_equal(p.resource, "1g.5gb.me");
    assert_int_equal(mig_profile_parse_resource("1g.5gb.", 7, &p, why, sizeof(why)), -1);
    assert_int_equal(mig_profile_parse_resource("1g.5gb..me", 10, &p, why, sizeof(why)), -1);
}

/* ---- the NVIDIA device plugin + GFD ---------------------------------------------- */

static void test_node_mixed_fixture(void **state)
{
    (void)state;
    struct mig_node n;
    read_node_fixture("node-a100-mixed.json", &n);
    assert_int_equal(n.strategy, MIG_STRATEGY_MIXED);
    assert_string_equal(mig_strategy_name(n.strategy), "mixed");
    assert_string_equal(mig_strategy_name((enum mig_strategy)99), "other");
    assert_false(n.single);
    assert_string_equal(n.product, "NVIDIA-A100-SXM4-40GB");
    assert_int_equal(n.gpu_count, 8);
    assert_int_equal(n.nskipped, 0);
    assert_int_equal(n.nprofiles, 4); /* 1g.5gb, 2g.10gb, 3g.20gb, and 1g.5gb+me counted 0 */
    const struct mig_node_profile *p = mig_node_find(&n, "1g.5gb");
    assert_non_null(p);
    assert_int_equal(p->capacity, 16);
    assert_int_equal(p->allocatable, 14);
    assert_int_equal(p->label_count, 16);
    assert_int_equal(p->memory_mib, 4864);
    assert_int_equal(p->multiprocessors, 14);
    assert_int_equal(p->slices_gi, 1);
    assert_int_equal(p->slices_ci, 1);
    assert_int_equal(p->engines_copy, 1);
    assert_int_equal(p->engines_ofa, 0);
    assert_string_equal(p->product, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
    p = mig_node_find(&n, "3g.20gb");
    assert_non_null(p);
    assert_int_equal(p->allocatable, 8);
    assert_int_equal(p->engines_decoder, 2);
    p = mig_node_find(&n, "1g.5gb.me");
    assert_non_null(p);
    assert_int_equal(p->label_count, 0);
    assert_int_equal(p->capacity, -1);
    assert_int_equal(p->allocatable, -1);
    assert_null(mig_node_find(&n, "7g.40gb"));
}

static void test_node_single_fixture(void **state)
{
    (void)state;
    struct mig_node n;
    read_node_fixture("node-a100-single.json", &n);
    assert_int_equal(n.strategy, MIG_STRATEGY_SINGLE);
    assert_true(n.single);
    assert_string_equal(n.product, "NVIDIA-A100-SXM4-40GB");
    assert_int_equal(n.nprofiles, 1);
    const struct mig_node_profile *p = &n.profiles[0];
    assert_true(p->single);
    assert_string_equal(p->profile.canonical, "1g.5gb");
    assert_int_equal(p->allocatable, 56);
    assert_int_equal(p->capacity, 56);
    assert_int_equal(p->label_count, 56);
    assert_int_equal(p->memory_mib, 4864);
    assert_int_equal(p->slices_gi, 1);
    assert_string_equal(p->product, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
}

static void read_node_text(const char *fixture_text, struct mig_node *n)
{
    cJSON *node = json_of(fixture_text);
    mig_node_read(at(node, "labels", NULL), at(node, "capacity", NULL), at(node, "allocatable", NULL), n);
    cJSON_Delete(node);
}

static void test_node_single_variants(void **state)
{
    (void)state;
    struct mig_node n;
    /* GFD's refusal of the single strategy */
    read_node_text("{'labels':{'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':'NVIDIA-A100-SXM4-40GB-MIG-"
                   "INVALID','nvidia.com/gpu.count':'0'},'allocatable':{'nvidia.com/gpu':'0'}}",
                   &n);
    assert_true(n.single_invalid);
    assert_false(n.single);
    assert_int_equal(n.nprofiles, 0);
    assert_int_equal(n.nskipped, 1);
    /* time-sliced MIG instances: -SHARED suffix; no strategy label (older GFD) */
    read_node_text("{'labels':{'nvidia.com/gpu.product':'NVIDIA-H100-80GB-HBM3-MIG-1g.10gb+me-SHARED'},"
                   "'allocatable':{'nvidia.com/gpu':'28'}}",
                   &n);
    assert_true(n.single);
    assert_string_equal(n.profiles[0].profile.canonical, "1g.10gb+me");
    assert_int_equal(n.profiles[0].allocatable, 28);
    assert_string_equal(n.product, "NVIDIA-H100-80GB-HBM3");
    /* a product naming a MIG profile under the mixed strategy is not single */
    read_node_text("{'labels':{'nvidia.com/mig.strategy':'mixed','nvidia.com/gpu.product':'X-MIG-1g.5gb'}}", &n);
    assert_false(n.single);
    assert_int_equal(n.nskipped, 1);
    /* a plain GPU */
    read_node_text("{'labels':{'nvidia.com/gpu.product':'Tesla-T4','nvidia.com/mig.strategy':'none'}}", &n);
    assert_false(n.single);
    assert_int_equal(n.nprofiles, 0);
    assert_int_equal(n.nskipped, 0);
    assert_string_equal(n.product, "Tesla-T4");
}

static void test_node_hostile(void **state)
{
    (void)state;
    struct mig_node n;
    read_node_text(
        "{'labels':{'nvidia.com/mig-1g.5gb.count':'99999999999999999999','nvidia.com/mig-1g.5gb.memory':'-1',"
        "'nvidia.com/mig-zz.count':'1','nvidia.com/mig-1g.5gb.multiprocessors':'1e3',"
        "'nvidia.com/mig-1g.5gb.unrelated':'x','nvidia.com/gpu.count':'lots','nvidia.com/mig.strategy':7},"
        "'capacity':{'nvidia.com/mig-1g.5gb':'5000','nvidia.com/mig-2g.10gb':'1.5',"
        "'nvidia.com/mig-9g.1gb':'1','nvidia.com/mig-3g.20gb':4},"
        "'allocatable':{'nvidia.com/mig-1g.5gb':'1k','nvidia.com/mig-2g.10gb':'-1'}}",
        &n);
    assert_int_equal(n.strategy, MIG_STRATEGY_OTHER);
    assert_int_equal(n.gpu_count, -1);
    const struct mig_node_profile *p = mig_node_find(&n, "1g.5gb");
    assert_non_null(p);
    assert_int_equal(p->label_count, -1);
    assert_int_equal(p->memory_mib, -1);
    assert_int_equal(p->multiprocessors, -1);
    assert_int_equal(p->capacity, -1);      /* 5000 > MIG_MAX_INSTANCES */
    assert_int_equal(p->allocatable, 1000); /* "1k" is a quantity */
    p = mig_node_find(&n, "2g.10gb");
    assert_non_null(p);
    assert_int_equal(p->capacity, -1);
    assert_int_equal(p->allocatable, -1);
    assert_null(mig_node_find(&n, "9g.1gb"));
    /* count, memory, multiprocessors, zz, gpu.count, 5000, 1.5, 9g, 3g (a number), -1 */
    assert_int_equal(n.nskipped, 10);
    for (int i = 0; i < MIG_MAX_REASONS; i++)
        assert_true(strlen(n.skipped[i]) > 0);
    /* reasons quote input as printable text */
    read_node_text("{'capacity':{'nvidia.com/mig-1g\\u001b[2J.5gb':'1'}}", &n);
    assert_int_equal(n.nskipped, 1);
    assert_null(strchr(n.skipped[0], 0x1b));
    assert_non_null(strchr(n.skipped[0], '?'));
    /* NULL everywhere */
    mig_node_read(NULL, NULL, NULL, &n);
    assert_int_equal(n.nprofiles, 0);
    assert_int_equal(n.strategy, MIG_STRATEGY_ABSENT);
}

static void test_node_too_many_profiles(void **state)
{
    (void)state;
    cJSON *cap = cJSON_CreateObject();
    for (int g = 1; g <= 8; g++)
        for (int gb = 1; gb <= 6; gb++) {
            char key[64];
            snprintf(key, sizeof(key), "nvidia.com/mig-%dg.%dgb", g, gb);
            cJSON_AddStringToObject(cap, key, "1");
        }
    struct mig_node n;
    mig_node_read(NULL, cap, NULL, &n);
    assert_int_equal(n.nprofiles, MIG_MAX_NODE_PROFILES);
    assert_int_equal(n.nskipped, 48 - MIG_MAX_NODE_PROFILES);
    assert_non_null(strstr(n.skipped[0], "more than"));
    cJSON_Delete(cap);
}

/* ---- requests --------------------------------------------------------------------- */

static void test_requests_fixture(void **state)
{
    (void)state;
    cJSON *pod = fixture("pod-mixed.json");
    const cJSON *containers = at(pod, "spec", "containers");
    struct mig_request req[2];
    int k = 0;
    for (const cJSON *c = containers->child; c; c = c->next, k++) {
        memset(&req[k], 0, sizeof(req[k]));
        const cJSON *limits = at(at(c, "resources", NULL), "limits", NULL);
        for (const cJSON *r = limits->child; r; r = r->next) {
            char why[128];
            int rc = mig_request_add(&req[k], r->string, r->valuestring, why, sizeof(why));
            assert_int_equal(rc, strncmp(r->string, "nvidia.com/mig-", 15) == 0 ? 1 : 0);
        }
    }
    cJSON_Delete(pod);
    assert_int_equal(req[0].n, 1);
    assert_string_equal(req[0].items[0].profile.canonical, "3g.20gb");
    assert_int_equal(req[0].items[0].count, 1);
    assert_int_equal(req[1].n, 1);
    assert_string_equal(req[1].items[0].profile.canonical, "1g.5gb");
    assert_int_equal(req[1].items[0].count, 2);
}

static void test_requests_hostile(void **state)
{
    (void)state;
    struct mig_request r = {0};
    char why[128];
    assert_int_equal(mig_request_add(&r, "nvidia.com/gpu", "1", why, sizeof(why)), 0);
    assert_int_equal(mig_request_add(&r, NULL, "1", why, sizeof(why)), 0);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb", "1000000000000", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "more than"));
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb", "0.5", why, sizeof(why)), -1);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb", "-1", why, sizeof(why)), -1);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb", "abc", why, sizeof(why)), -1);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb", NULL, why, sizeof(why)), -1);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-bogus", "1", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "nvidia.com/mig-bogus"));
    assert_int_equal(r.n, 0);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb.me", "2", why, sizeof(why)), 1);
    assert_string_equal(r.items[0].profile.canonical, "1g.5gb+me");
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb.me", "3", why, sizeof(why)), 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.items[0].count, 3);
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-1g.5gb.me", "0", why, sizeof(why)), 1);
    assert_int_equal(r.n, 0);
    for (int gb = 1; gb <= MIG_MAX_REQ_PROFILES; gb++) {
        char name[64];
        snprintf(name, sizeof(name), "nvidia.com/mig-1g.%dgb", gb);
        assert_int_equal(mig_request_add(&r, name, "1", why, sizeof(why)), 1);
    }
    assert_int_equal(mig_request_add(&r, "nvidia.com/mig-7g.80gb", "1", why, sizeof(why)), -1);
    assert_int_equal(r.n, MIG_MAX_REQ_PROFILES);
}

/* ---- placement -------------------------------------------------------------------- */

static void test_builtin_geometry(void **state)
{
    (void)state;
    struct mig_gpu g;
    a100_40(&g);
    assert_int_equal(g.ntemplates, 7);
    char why[128];
    assert_int_equal(mig_gpu_check(&g, why, sizeof(why)), 0);
    /* NVIDIA's A100 placements: 3g at 0 or 4, 4g and 7g at 0, 2g at 0,2,4, 1g at 0..6 */
    for (int t = 0; t < g.ntemplates; t++) {
        const struct mig_template *tp = &g.templates[t];
        if (strcmp(tp->name, "3g.20gb") == 0) {
            assert_int_equal(tp->nplacements, 2);
            assert_int_equal(tp->placements[0].start, 0);
            assert_int_equal(tp->placements[1].start, 4);
            assert_int_equal(tp->placements[1].size, 4);
        } else if (strcmp(tp->name, "4g.20gb") == 0 || strcmp(tp->name, "7g.40gb") == 0) {
            assert_int_equal(tp->nplacements, 1);
            assert_int_equal(tp->placements[0].start, 0);
        } else if (strcmp(tp->name, "2g.10gb") == 0) {
            assert_int_equal(tp->nplacements, 3);
            assert_int_equal(tp->placements[2].start, 4);
        } else if (strcmp(tp->name, "1g.5gb") == 0) {
            assert_int_equal(tp->nplacements, 7);
            assert_int_equal(tp->placements[6].start, 6);
        }
    }
    assert_int_equal(mig_builtin_geometry("NVIDIA H100 80GB HBM3", &g), 0);
    assert_string_equal(g.templates[0].name, "1g.10gb");
    assert_string_equal(g.templates[6].name, "7g.80gb");
    assert_int_equal(mig_builtin_geometry("NVIDIA A100-SXM4-80GB", &g), 0);
    assert_string_equal(g.templates[2].name, "1g.20gb");
    assert_int_equal(mig_builtin_geometry("Tesla T4", &g), -1);
    assert_int_equal(mig_builtin_geometry(NULL, &g), -1);
}

static void test_choose_like_hami(void **state)
{
    (void)state;
    struct mig_gpu g;
    a100_40(&g);
    struct mig_choice c;
    /* smallest memory that covers the request: 1g.5gb, from the top (HAMi's preferHighMigPlacement) */
    assert_int_equal(mig_choose(&g, 4000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(&g, &c), "1g.5gb");
    assert_int_equal(c.at.start, 6);
    /* 2g from the bottom; 1g.10gb (10240) before 2g.10gb (10240, more slices) */
    assert_int_equal(mig_choose(&g, 10000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(&g, &c), "1g.10gb");
    assert_int_equal(c.at.start, 6);
    assert_int_equal(mig_choose(&g, 15000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(&g, &c), "3g.20gb"); /* 3g before 4g: same memory, fewer slices */
    assert_int_equal(c.at.start, 4);
    assert_int_equal(mig_choose(&g, 30000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(&g, &c), "7g.40gb");
    /* too large for any profile */
    assert_int_equal(mig_choose(&g, 50000, 0, MIG_POLICY_HAMI, &c), -1);
    assert_non_null(strstr(c.reason, "no MIG profile"));
    /* a larger profile when the small ones have no room */
    use(&g, "3g.20gb", 4, 4);
    use(&g, "2g.10gb", 0, 2);
    use(&g, "2g.10gb", 2, 2);
    assert_int_equal(mig_choose(&g, 1000, 0, MIG_POLICY_HAMI, &c), -1);
    assert_non_null(strstr(c.reason, "no free placement"));
    assert_int_equal(mig_choose(&g, -1, 0, MIG_POLICY_HAMI, &c), -1);
}

/* The fixture pod was placed by HAMi's rules; the same choices come out. */
static void test_choose_matches_hami_fixture(void **state)
{
    (void)state;
    cJSON *node = fixture("node-hami-mig.json");
    const cJSON *reg = at(at(node, "metadata", NULL), "annotations", NULL);
    reg = cJSON_GetObjectItemCaseSensitive(reg, "hami.io/node-nvidia-register");
    struct mig_hami_device *devs = NULL;
    int n = 0;
    char *err = NULL;
    assert_int_equal(mig_hami_parse_register(reg->valuestring, &devs, &n, &err), 0);
    assert_null(err);
    cJSON_Delete(node);
    assert_int_equal(n, 2);
    struct mig_gpu *g = &devs[0].gpu;
    struct mig_choice c;
    char why[128];
    assert_int_equal(mig_choose(g, 8000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(g, &c), "1g.10gb");
    assert_int_equal(c.at.start, 6);
    assert_int_equal(c.at.size, 2);
    assert_int_equal(g->templates[c.template_index].memory_mib, 9856);
    assert_int_equal(mig_gpu_add_inuse(g, "1g.10gb", c.at, why, sizeof(why)), 0);
    assert_int_equal(mig_choose(g, 4000, 0, MIG_POLICY_HAMI, &c), 0);
    assert_string_equal(chosen(g, &c), "1g.5gb");
    assert_int_equal(c.at.start, 5);

    cJSON *pod = fixture("pod-hami-mig.json");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(at(at(pod, "metadata", NULL), "annotations", NULL),
                                                        MIG_HAMI_ALLOCATIONS_ANNOTATION);
    struct mig_hami_allocation *a = NULL;
    int na = 0;
    assert_int_equal(mig_hami_decode_allocations(ann->valuestring, &a, &na, &err), 0);
    assert_int_equal(na, 2);
    assert_string_equal(a[0].profile, "1g.10gb");
    assert_int_equal(a[0].placement.start, 6);
    assert_string_equal(a[1].profile, "1g.5gb");
    assert_int_equal(a[1].placement.start, c.at.start);
    assert_string_equal(a[0].gpu_uuid, devs[0].uuid);
    /* and encoding them again gives the annotation byte for byte */
    char *text = mig_hami_encode_allocations(a, na, &err);
    assert_non_null(text);
    assert_string_equal(text, ann->valuestring);
    free(text);
    free(a);
    cJSON_Delete(pod);
    free(devs);
}

/* The fragmentation choice: with 1g.5gb in use at slice 6, HAMi puts a 2g at
 * slice 0 (first fit from the bottom), which leaves no 3g possible; the
 * fragmentation-aware choice puts it at slice 4 and keeps 3g/4g at 0. */
static void test_choose_keeps_largest(void **state)
{
    (void)state;
    /* an A100-40GB without 1g.10gb (older drivers): a 10000 MiB vGPU is a 2g.10gb */
    struct mig_gpu g, g2;
    a100_40(&g);
    memset(&g2, 0, sizeof(g2));
    for (int t = 0; t < g.ntemplates; t++)
        if (strcmp(g.templates[t].name, "1g.10gb") != 0)
            g2.templates[g2.ntemplates++] = g.templates[t];
    struct mig_choice hami, keep;
    use(&g2, "1g.5gb", 6, 1);
    assert_int_equal(mig_choose(&g2, 10000, 0, MIG_POLICY_HAMI, &hami), 0);
    assert_string_equal(chosen(&g2, &hami), "2g.10gb");
    assert_int_equal(hami.at.start, 0);
    assert_false(hami.differs_from_hami);
    /* after HAMi's choice no 3g fits */
    struct mig_gpu after = g2;
    use(&after, "2g.10gb", hami.at.start, hami.at.size);
    const char *largest = NULL;
    assert_int_equal(mig_largest_placeable(&after, &largest), 2);

    assert_int_equal(mig_choose(&g2, 10000, 0, MIG_POLICY_KEEP_LARGEST, &keep), 0);
    assert_string_equal(chosen(&g2, &keep), "2g.10gb"); /* the same profile as HAMi */
    assert_int_equal(keep.at.start, 4);
    assert_true(keep.differs_from_hami);
    assert_int_equal(keep.hami_at.start, 0);
    after = g2;
    use(&after, "2g.10gb", keep.at.start, keep.at.size);
    assert_int_equal(mig_largest_placeable(&after, &largest), 4);
    assert_string_equal(keep.reason, "placed 2g.10gb at slice 4: keeps 3g.20gb and 4g.20gb possible "
                                     "(slice 0 would keep at most 2g.10gb)");
}

static void test_choose_keep_largest_agrees(void **state)
{
    (void)state;
    struct mig_gpu g;
    a100_40(&g);
    struct mig_choice c;
    /* an empty GPU: the top slot for a 1g keeps 4g and 3g at 0 (HAMi's choice too) */
    assert_int_equal(mig_choose(&g, 4000, 0, MIG_POLICY_KEEP_LARGEST, &c), 0);
    assert_int_equal(c.at.start, 6);
    assert_false(c.differs_from_hami);
    assert_string_equal(c.reason, "placed 1g.5gb at slice 6: keeps 3g.20gb and 4g.20gb possible");
    /* the last slot */
    use(&g, "3g.20gb", 0, 4);
    use(&g, "2g.10gb", 4, 2);
    use(&g, "1g.5gb", 6, 1);
    assert_int_equal(mig_choose(&g, 100, 0, MIG_POLICY_KEEP_LARGEST, &c), -1);
    struct mig_gpu h;
    a100_40(&h);
    use(&h, "3g.20gb", 0, 4);
    use(&h, "2g.10gb", 4, 2);
    assert_int_equal(mig_choose(&h, 100, 0, MIG_POLICY_KEEP_LARGEST, &c), 0);
    assert_int_equal(c.at.start, 6);
    assert_non_null(strstr(c.reason, "no other profile fits"));
}

static void test_fragmentation(void **state)
{
    (void)state;
    struct mig_gpu g;
    a100_40(&g);
    assert_true(mig_fragmentation(&g) == 0.0); /* 7g fits all 8 free slots */
    use(&g, "1g.5gb", 6, 1);
    /* free 0..5 and 7 (7 slots); largest: 4 (3g/4g at 0) */
    assert_true(mig_fragmentation(&g) > 0.428 && mig_fragmentation(&g) < 0.429);
    use(&g, "1g.5gb", 0, 1);
    /* free 1..5, 7 (6 slots); largest 2 (2g at 2, 1g.10gb at 2/4) -> 1 - 2/6 */
    assert_true(mig_fragmentation(&g) > 0.666 && mig_fragmentation(&g) < 0.667);
    struct mig_gpu full;
    a100_40(&full);
    use(&full, "7g.40gb", 0, 8);
    assert_true(mig_fragmentation(&full) == 0.0);
    struct mig_gpu none = {0};
    assert_true(mig_fragmentation(&none) == 0.0);
    assert_int_equal(mig_largest_placeable(&none, NULL), 0);
}

static void test_gpu_check_and_inuse(void **state)
{
    (void)state;
    struct mig_gpu g;
    a100_40(&g);
    char why[128];
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){7, 2}, why, sizeof(why)), 0);
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){8, 1}, why, sizeof(why)), -1);
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){15, 2}, why, sizeof(why)), -1);
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){-1, 1}, why, sizeof(why)), -1);
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){0, 0}, why, sizeof(why)), -1);
    assert_int_equal(mig_gpu_add_inuse(&g, "x", (struct mig_placement){0, 2147483647}, why, sizeof(why)), -1);
    struct mig_gpu h = {0};
    for (int i = 0; i < MIG_MAX_INUSE; i++)
        assert_int_equal(mig_gpu_add_inuse(&h, "1g", (struct mig_placement){i, 1}, why, sizeof(why)), 0);
    assert_int_equal(mig_gpu_add_inuse(&h, "1g", (struct mig_placement){0, 1}, why, sizeof(why)), -1);
    /* overlapping instances written into the struct directly */
    struct mig_gpu bad;
    a100_40(&bad);
    bad.inuse[0] = (struct mig_instance){"a", {0, 4}};
    bad.inuse[1] = (struct mig_instance){"b", {2, 2}};
    bad.ninuse = 2;
    assert_int_equal(mig_gpu_check(&bad, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "overlaps"));
    struct mig_choice c;
    assert_int_equal(mig_choose(&bad, 100, 0, MIG_POLICY_HAMI, &c), -1);
    assert_non_null(strstr(c.reason, "unusable"));
    a100_40(&bad);
    bad.templates[1] = bad.templates[0];
    assert_int_equal(mig_gpu_check(&bad, why, sizeof(why)), -1);
    a100_40(&bad);
    bad.ntemplates = MIG_MAX_TEMPLATES + 1;
    assert_int_equal(mig_gpu_check(&bad, why, sizeof(why)), -1);
}

/* ---- HAMi ------------------------------------------------------------------------- */

static int parse_profiles_text(const char *fixture_text, struct mig_gpu *g, char **err)
{
    cJSON *j = json_of(fixture_text);
    memset(g, 0, sizeof(*g));
    int rc = mig_hami_parse_profiles(j, g, err);
    cJSON_Delete(j);
    return rc;
}

static void test_hami_profiles(void **state)
{
    (void)state;
    struct mig_gpu g;
    char *err = NULL;
    assert_int_equal(parse_profiles_text("[{'name':'1g.10gb','memoryMB':9856,'core':14,'sliceCount':1,"
                                         "'placements':[{'start':0,'size':2},{'start':6,'size':2}]},"
                                         "{'name':'7g.80gb','memoryMB':80000,'core':100,'sliceCount':7,"
                                         "'placements':[{'start':0,'size':8}]},"
                                         "{'NAME':'2g.20gb','memorymb':20000,'placements':null}]",
                                         &g, &err),
                     0);
    assert_int_equal(g.ntemplates, 3);
    assert_int_equal(g.templates[0].memory_mib, 9856);
    assert_int_equal(g.templates[0].cores, 14);
    assert_int_equal(g.templates[0].nplacements, 2);
    assert_int_equal(g.templates[0].placements[1].start, 6);
    assert_int_equal(g.templates[1].placements[0].size, 8);
    /* Go matches keys without case; a missing sliceCount falls back on the name */
    assert_string_equal(g.templates[2].name, "2g.20gb");
    assert_int_equal(g.templates[2].slices, 2);
    assert_int_equal(g.templates[2].nplacements, 0);
    /* null and absent give no template */
    assert_int_equal(parse_profiles_text("null", &g, &err), 0);
    assert_int_equal(g.ntemplates, 0);
    assert_int_equal(mig_hami_parse_profiles(NULL, &g, &err), 0);
}

static void test_hami_profiles_hostile(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{'name':'x'}",
        "[1]",
        "[{'memoryMB':1}]",
        "[{'name':''}]",
        "[{'name':'1g.10gb','memoryMB':1.5}]",
        "[{'name':'1g.10gb','memoryMB':-1}]",
        "[{'name':'1g.10gb','memoryMB':1e12}]",
        "[{'name':'1g.10gb','memoryMB':'10'}]",
        "[{'name':'1g.10gb','core':10001}]",
        "[{'name':'1g.10gb','sliceCount':99}]",
        "[{'name':'1g.10gb','placements':{}}]",
        "[{'name':'1g.10gb','placements':[{'start':0,'size':0}]}]",
        "[{'name':'1g.10gb','placements':[{'start':15,'size':2}]}]",
        "[{'name':'1g.10gb','placements':[{'start':4294967295,'size':4294967295}]}]",
        "[{'name':'1g.10gb','placements':[{'start':-1,'size':1}]}]",
        "[{'name':'1g.10gb','placements':[7]}]",
        "[{'name':'a'},{'name':'a'}]",
        "[{'name':'bad\\u0001name'}]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mig_gpu g;
        char *err = NULL;
        if (parse_profiles_text(bad[i], &g, &err) == 0)
            fail_msg("%s parsed", bad[i]);
        assert_non_null(err);
        free(err);
    }
    /* too many profiles, too many placements */
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "[");
    for (int i = 0; i <= MIG_MAX_TEMPLATES; i++)
        strbuf_printf(&sb, "%s{'name':'p%d'}", i ? "," : "", i);
    strbuf_puts(&sb, "]");
    struct mig_gpu g;
    char *err = NULL;
    assert_int_equal(parse_profiles_text(sb.data, &g, &err), -1);
    free(err);
    strbuf_reset(&sb);
    strbuf_puts(&sb, "[{'name':'1g','placements':[");
    for (int i = 0; i <= MIG_MAX_PLACEMENTS; i++)
        strbuf_printf(&sb, "%s{'start':0,'size':1}", i ? "," : "");
    strbuf_puts(&sb, "]}]");
    assert_int_equal(parse_profiles_text(sb.data, &g, &err), -1);
    free(err);
    strbuf_free(&sb);
}

static void test_hami_register(void **state)
{
    (void)state;
    struct mig_hami_device *d = NULL;
    int n = -1;
    char *err = NULL;
    /* the colon forms and a register without MIG devices: none */
    assert_int_equal(mig_hami_parse_register("GPU-a,10,32768,100,NVIDIA-T4,0,true:", &d, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_null(d);
    assert_int_equal(mig_hami_parse_register("[{\"id\":\"GPU-a\",\"devmem\":1,\"mode\":\"hami-core\"}]", &d, &n, &err),
                     0);
    assert_int_equal(n, 0);
    assert_int_equal(mig_hami_parse_register(NULL, &d, &n, &err), 0);
    /* one MIG device among others */
    assert_int_equal(mig_hami_parse_register("[{\"id\":\"GPU-a\",\"devmem\":1},{\"id\":\"GPU-b\",\"index\":3,"
                                             "\"mode\":\"mig\",\"migProfiles\":[{\"name\":\"1g.5gb\",\"memoryMB\":4864,"
                                             "\"sliceCount\":1,\"placements\":[{\"start\":6,\"size\":1}]}]}]",
                                             &d, &n, &err),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(d[0].uuid, "GPU-b");
    assert_int_equal(d[0].index, 3);
    assert_int_equal(d[0].gpu.ntemplates, 1);
    free(d);
    static const char *const bad[] = {
        "[",                                                              /* truncated */
        "[{\"id\":\"GPU-b\",\"mode\":\"mig\",\"migProfiles\":[{\"name\"", /* truncated */
        "[1]",
        "[{\"id\":\"GPU-b\",\"mode\":7}]",
        "[{\"mode\":\"mig\"}]",
        "[{\"id\":\"GPU-b\",\"index\":-1,\"mode\":\"mig\"}]",
        "[{\"id\":\"GPU-b\",\"mode\":\"mig\",\"migProfiles\":[{\"name\":\"a\",\"core\":-5}]}]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        if (mig_hami_parse_register(bad[i], &d, &n, &err) == 0)
            fail_msg("%s parsed", bad[i]);
        assert_non_null(err);
        assert_null(d);
        free(err);
    }
}

static void test_hami_allocations_realised(void **state)
{
    (void)state;
    cJSON *pod = fixture("pod-hami-mig-realised.json");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(at(at(pod, "metadata", NULL), "annotations", NULL),
                                                        MIG_HAMI_ALLOCATIONS_ANNOTATION);
    struct mig_hami_allocation *a = NULL;
    int n = 0;
    char *err = NULL;
    assert_int_equal(mig_hami_decode_allocations(ann->valuestring, &a, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_true(a[0].runtime);
    assert_string_equal(a[0].mig_uuid, "MIG-0b1c2d3e-4f50-5a6b-8c7d-9e0f1a2b3c4d");
    assert_int_equal(a[0].gpu_instance_id, 5);
    assert_int_equal(a[0].compute_instance_id, 0);
    assert_int_equal(a[1].container_index, 1);
    /* encoding leaves the runtime identity out, as the scheduler writes it */
    char *text = mig_hami_encode_allocations(a, n, &err);
    assert_non_null(text);
    assert_null(strstr(text, "migUUID"));
    free(text);
    free(a);
    cJSON_Delete(pod);
}

static void test_hami_allocations_hostile(void **state)
{
    (void)state;
    struct mig_hami_allocation *a = NULL;
    int n = -1;
    char *err = NULL;
    assert_int_equal(mig_hami_decode_allocations("", &a, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(mig_hami_decode_allocations("null", &a, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(mig_hami_decode_allocations("[]", &a, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_null(a);
#define OK_ENTRY "\"gpuUUID\":\"GPU-a\",\"profile\":\"1g.5gb\",\"placement\":{\"start\":0,\"size\":1}"
    static const char *const bad[] = {
        "[{\"containerIndex\":0",                                      /* truncated */
        "{\"containerIndex\":0}",                                      /* not an array */
        "[{\"containerIndex\":-1,\"deviceIndex\":0," OK_ENTRY "}]",    /* negative */
        "[{\"containerIndex\":0.5,\"deviceIndex\":0," OK_ENTRY "}]",   /* fraction */
        "[{\"containerIndex\":\"0\",\"deviceIndex\":0," OK_ENTRY "}]", /* a string */
        "[{\"containerIndex\":5000,\"deviceIndex\":0," OK_ENTRY "}]",  /* above 4095 */
        "[{\"gpuUUID\":\"\",\"profile\":\"1g.5gb\",\"placement\":{\"start\":0,\"size\":1}}]",
        "[{\"gpuUUID\":\"GPU-a\",\"placement\":{\"start\":0,\"size\":1}}]", /* no profile */
        "[{\"gpuUUID\":\"GPU-a\",\"profile\":\"1g.5gb\"}]",                 /* no placement: size 0 */
        "[{\"gpuUUID\":\"GPU-a\",\"profile\":\"1g.5gb\",\"placement\":{\"start\":0,\"size\":-1}}]",
        "[{\"gpuUUID\":\"GPU-a\",\"profile\":\"1g.5gb\",\"placement\":{\"start\":16,\"size\":1}}]",
        "[{\"gpuUUID\":\"GPU-a\",\"profile\":\"1g.5gb\",\"placement\":[0,1]}]",
        "[{" OK_ENTRY ",\"migUUID\":\"MIG-x\"}]",                     /* partial runtime */
        "[{" OK_ENTRY ",\"migUUID\":\"MIG-x\",\"gpuInstanceID\":1}]", /* partial runtime */
        "[{" OK_ENTRY ",\"gpuInstanceID\":4294967296,\"computeInstanceID\":0,\"migUUID\":\"M\"}]",
        "[{" OK_ENTRY "},{" OK_ENTRY "}]", /* duplicate (0,0) */
        "[{\"gpuUUID\":\"GPU-\\u0007\",\"profile\":\"1g.5gb\",\"placement\":{\"start\":0,\"size\":1}}]",
        "[7]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        if (mig_hami_decode_allocations(bad[i], &a, &n, &err) == 0)
            fail_msg("%s decoded", bad[i]);
        assert_non_null(err);
        assert_null(a);
        free(err);
    }
    /* more than MIG_HAMI_MAX_ALLOCATIONS entries */
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "[");
    for (int i = 0; i <= MIG_HAMI_MAX_ALLOCATIONS; i++)
        strbuf_printf(&sb, "%s{\"deviceIndex\":%d," OK_ENTRY "}", i ? "," : "", i);
    strbuf_puts(&sb, "]");
    assert_int_equal(mig_hami_decode_allocations(sb.data, &a, &n, &err), -1);
    free(err);
    strbuf_free(&sb);
    /* the same device twice in different containers is fine; unknown keys are ignored */
    assert_int_equal(
        mig_hami_decode_allocations("[{\"containerIndex\":1," OK_ENTRY ",\"x\":1},{" OK_ENTRY "}]", &a, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(a[0].container_index, 1);
    free(a);
#undef OK_ENTRY
}

/* Pods HAMi placed are read back as instances in use on their GPUs. */
static void test_hami_charge(void **state)
{
    (void)state;
    cJSON *node = fixture("node-hami-mig.json");
    const cJSON *reg = cJSON_GetObjectItemCaseSensitive(at(at(node, "metadata", NULL), "annotations", NULL),
                                                        "hami.io/node-nvidia-register");
    struct mig_hami_device *devs = NULL;
    int n = 0;
    char *err = NULL;
    assert_int_equal(mig_hami_parse_register(reg->valuestring, &devs, &n, &err), 0);
    cJSON_Delete(node);
    cJSON *pod = fixture("pod-hami-mig-realised.json");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(at(at(pod, "metadata", NULL), "annotations", NULL),
                                                        MIG_HAMI_ALLOCATIONS_ANNOTATION);
    struct mig_hami_allocation *a = NULL;
    int na = 0;
    assert_int_equal(mig_hami_decode_allocations(ann->valuestring, &a, &na, &err), 0);
    cJSON_Delete(pod);
    char why[256];
    assert_int_equal(mig_hami_charge(devs, n, a, na, why, sizeof(why)), 2);
    assert_string_equal(why, "");
    assert_int_equal(devs[0].gpu.ninuse, 2);
    assert_int_equal(devs[1].gpu.ninuse, 0);
    assert_int_equal(mig_gpu_used_slots(&devs[0].gpu), 0xe0); /* slots 5, 6, 7 */
    /* charged twice (the same pod seen again): the overlap is reported, nothing is charged */
    assert_int_equal(mig_hami_charge(devs, n, a, na, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "overlaps"));
    /* an allocation on a GPU of another node is skipped */
    snprintf(a[0].gpu_uuid, sizeof(a[0].gpu_uuid), "GPU-elsewhere");
    assert_int_equal(mig_hami_charge(devs, n, a, 1, why, sizeof(why)), 0);
    assert_string_equal(why, "");
    free(a);
    free(devs);
}

static void test_hami_encode(void **state)
{
    (void)state;
    char *err = NULL;
    assert_null(mig_hami_encode_allocations(NULL, 0, &err));
    assert_null(err);
    struct mig_hami_allocation a[2] = {0};
    a[0].container_index = 2;
    a[0].device_index = 1;
    snprintf(a[0].gpu_uuid, sizeof(a[0].gpu_uuid), "GPU-<a&b>\"\\");
    snprintf(a[0].profile, sizeof(a[0].profile), "3g.40gb");
    a[0].placement = (struct mig_placement){4, 4};
    char *text = mig_hami_encode_allocations(a, 1, &err);
    assert_string_equal(text,
                        "[{\"containerIndex\":2,\"deviceIndex\":1,\"gpuUUID\":\"GPU-\\u003ca\\u0026b\\u003e\\\"\\\\\","
                        "\"profile\":\"3g.40gb\",\"placement\":{\"start\":4,\"size\":4}}]");
    /* and it decodes back */
    struct mig_hami_allocation *back = NULL;
    int n = 0;
    assert_int_equal(mig_hami_decode_allocations(text, &back, &n, &err), 0);
    assert_string_equal(back[0].gpu_uuid, a[0].gpu_uuid);
    free(back);
    free(text);
    /* incomplete entries are refused */
    assert_null(mig_hami_encode_allocations(a, 2, &err));
    assert_non_null(err);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_names),
        cmocka_unit_test(test_profile_names_rejected),
        cmocka_unit_test(test_profile_resource_form),
        cmocka_unit_test(test_node_mixed_fixture),
        cmocka_unit_test(test_node_single_fixture),
        cmocka_unit_test(test_node_single_variants),
        cmocka_unit_test(test_node_hostile),
        cmocka_unit_test(test_node_too_many_profiles),
        cmocka_unit_test(test_requests_fixture),
        cmocka_unit_test(test_requests_hostile),
        cmocka_unit_test(test_builtin_geometry),
        cmocka_unit_test(test_choose_like_hami),
        cmocka_unit_test(test_choose_matches_hami_fixture),
        cmocka_unit_test(test_choose_keeps_largest),
        cmocka_unit_test(test_choose_keep_largest_agrees),
        cmocka_unit_test(test_fragmentation),
        cmocka_unit_test(test_gpu_check_and_inuse),
        cmocka_unit_test(test_hami_profiles),
        cmocka_unit_test(test_hami_profiles_hostile),
        cmocka_unit_test(test_hami_register),
        cmocka_unit_test(test_hami_allocations_realised),
        cmocka_unit_test(test_hami_allocations_hostile),
        cmocka_unit_test(test_hami_charge),
        cmocka_unit_test(test_hami_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_router.c - unit tests for extender/serve/router.c: every endpoint of design.md
 * section 2 reaches its handler and is counted under its verb, the aliases,
 * HEAD on GET routes, 405 with Allow, 404, and the NAME route's shape. Driven
 * on an offline app over a one-node state, without a server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/app.h"
#include "extender/serve/router.h"
#include "tests/unit/support.h"

struct fixture {
    struct options opts;
    struct app app;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char *argv[] = {(char *)"--state-file", (char *)"unused"};
    if (!f || options_parse(&f->opts, CMD_SERVE, 2, argv, stderr) != 0 || app_init(&f->app, &f->opts) != 0)
        return -1;
    add_vcuda_node(&f->app.cache, "n1", 2, 40);
    atomic_store(&f->app.ready, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    app_destroy(&f->app);
    options_free(&f->opts);
    free(f);
    return 0;
}

struct answer {
    enum metric_verb verb;
    int status;
    char *body;
    const char *allow;
};

static struct answer dispatch(struct fixture *f, const char *method, const char *path, const char *body)
{
    struct http_request req = {.method = method, .path = path, .body = body, .body_len = body ? strlen(body) : 0};
    struct http_response resp = {0};
    struct answer a;
    a.verb = router_dispatch(&f->app, &req, &resp);
    a.status = resp.status;
    a.body = resp.body;
    a.allow = resp.allow;
    return a;
}

static const char args[] = "{'Pod':{'metadata':{'name':'p','namespace':'d'},'spec':{'containers':[{'name':'c',"
                           "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]}},"
                           "'NodeNames':['n1']}";

/* Each route: its verb, and an answer that only its handler gives. */
static void test_every_route(void **state)
{
    struct fixture *f = *state;
    char *json = q(args);
    static const struct {
        const char *method, *path;
        int with_args;
        enum metric_verb verb;
        int status;
        const char *needle;
    } cases[] = {
        {"POST", "/scheduler/filter", 1, VERB_FILTER, 200, "\"NodeNames\":[\"n1\"]"},
        {"POST", "/scheduler/predicates", 1, VERB_FILTER, 200, "\"NodeNames\":[\"n1\"]"},
        /* One node sent: it is the request's lowest score, left out (wire.h). */
        {"POST", "/scheduler/prioritize", 1, VERB_PRIORITIZE, 200, "[]"},
        {"POST", "/scheduler/priorities", 1, VERB_PRIORITIZE, 200, "[]"},
        {"POST", "/scheduler/bind", 0, VERB_BIND, 200, "\"Error\""},
        {"POST", "/scheduler/preemption", 0, VERB_PREEMPTION, 0, NULL},
        {"POST", "/admission/validate", 0, VERB_ADMISSION, 400, "error"},
        {"POST", "/admission/mutate", 0, VERB_ADMISSION, 400, "error"},
        {"POST", "/inspect/explain", 0, VERB_EXPLAIN, 400, "body must be a Pod"},
        {"GET", "/inspect/nodes", 0, VERB_INSPECT, 200, "\"node\":\"n1\""},
        {"GET", "/inspect/nodes/n1", 0, VERB_INSPECT, 200, "\"node\":\"n1\""},
        {"GET", "/inspect/quota", 0, VERB_INSPECT, 200, "namespaces"},
        {"GET", "/inspect/crl", 0, VERB_INSPECT, 200, NULL},
        {"GET", "/healthz", 0, VERB_HEALTH, 200, "ok"},
        {"GET", "/livez", 0, VERB_HEALTH, 200, "ok"},
        {"GET", "/readyz", 0, VERB_HEALTH, 200, NULL},
        {"GET", "/version", 0, VERB_VERSION, 200, "\"version\""},
        {"GET", "/metrics", 0, VERB_METRICS, 200, "gqa_"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct answer a = dispatch(f, cases[i].method, cases[i].path, cases[i].with_args ? json : "{");
        if (a.verb != cases[i].verb)
            fail_msg("%s %s counted as verb %d, want %d", cases[i].method, cases[i].path, a.verb, cases[i].verb);
        if (cases[i].status && a.status != cases[i].status)
            fail_msg("%s %s: status %d, want %d: %s", cases[i].method, cases[i].path, a.status, cases[i].status,
                     a.body ? a.body : "");
        if (cases[i].needle && (!a.body || !strstr(a.body, cases[i].needle)))
            fail_msg("%s %s: answer lacks %s: %s", cases[i].method, cases[i].path, cases[i].needle,
                     a.body ? a.body : "(none)");
        free(a.body);
    }
    free(json);
}

static void test_head_on_get_routes(void **state)
{
    struct fixture *f = *state;
    struct answer a = dispatch(f, "HEAD", "/healthz", NULL);
    assert_int_equal(a.verb, VERB_HEALTH);
    assert_int_equal(a.status, 200);
    free(a.body);
}

static void test_wrong_method(void **state)
{
    struct fixture *f = *state;
    struct answer a = dispatch(f, "GET", "/scheduler/filter", NULL);
    assert_int_equal(a.status, 405);
    assert_int_equal(a.verb, VERB_FILTER);
    assert_string_equal(a.allow, "POST");
    assert_non_null(strstr(a.body, "method GET is not allowed on /scheduler/filter; use POST"));
    free(a.body);
    a = dispatch(f, "POST", "/metrics", "x");
    assert_int_equal(a.status, 405);
    assert_string_equal(a.allow, "GET, HEAD");
    free(a.body);
}

static void test_unknown_paths(void **state)
{
    struct fixture *f = *state;
    static const char *const paths[] = {"/", "/scheduler", "/scheduler/filter/", "/inspect/nodes/", "/inspect/nodes/a/b",
                                        "/healthz/x", "/HEALTHZ"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct answer a = dispatch(f, "GET", paths[i], NULL);
        if (a.status != 404 || a.verb != VERB_OTHER)
            fail_msg("%s: status %d verb %d, want 404 and VERB_OTHER", paths[i], a.status, a.verb);
        assert_non_null(strstr(a.body, "{\"error\":\"no endpoint "));
        free(a.body);
    }
}

/* The probe listener (--listen-probes): health and metrics only; the
 * extender verbs and the inspection pages are 404 there, whatever the
 * method. */
static void test_probe_routes(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *method, *path;
        int status;
        enum metric_verb verb;
    } cases[] = {
        {"GET", "/livez", 200, VERB_HEALTH},
        {"GET", "/healthz", 200, VERB_HEALTH},
        {"HEAD", "/readyz", 200, VERB_HEALTH},
        {"GET", "/metrics", 200, VERB_METRICS},
        {"POST", "/livez", 405, VERB_HEALTH},
        {"POST", "/scheduler/filter", 404, VERB_OTHER},
        {"POST", "/scheduler/bind", 404, VERB_OTHER},
        {"GET", "/inspect/nodes", 404, VERB_OTHER},
        {"GET", "/inspect/nodes/n1", 404, VERB_OTHER},
        {"GET", "/version", 404, VERB_OTHER},
        {"GET", "/ui", 404, VERB_OTHER},
        {"GET", "/", 404, VERB_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_request req = {.method = cases[i].method, .path = cases[i].path};
        struct http_response resp = {0};
        enum metric_verb verb = router_dispatch_probe(&f->app, &req, &resp);
        if (resp.status != cases[i].status || verb != cases[i].verb)
            fail_msg("%s %s: status %d verb %d, want %d and %d", cases[i].method, cases[i].path, resp.status, verb,
                     cases[i].status, cases[i].verb);
        if (resp.status == 404)
            assert_non_null(strstr(resp.body, "on the probe listener"));
        free(resp.body);
    }
}

static void test_unknown_node(void **state)
{
    struct fixture *f = *state;
    struct answer a = dispatch(f, "GET", "/inspect/nodes/nope", NULL);
    assert_int_equal(a.status, 404);
    assert_int_equal(a.verb, VERB_INSPECT);
    free(a.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_on_get_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_routes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

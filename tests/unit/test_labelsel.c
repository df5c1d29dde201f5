/*
 * test_labelsel.c - lib/labelsel.c: kubectl's -l grammar, errors that name
 * the position, and matching as Kubernetes does (!= and notin also match a
 * node without the label).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/labelsel.h"

/* Labels as "k=v" strings, NULL-terminated. */
static const char *lookup(const void *ctx, const char *key)
{
    for (const char *const *l = ctx; *l; l++) {
        size_t n = strlen(key);
        if (strncmp(*l, key, n) == 0 && (*l)[n] == '=')
            return *l + n + 1;
    }
    return NULL;
}

static const char *const node_a[] = {"tkestack.io/gpu-model=A100", "tkestack.io/gpu-pool=public", "zone=z1", NULL};
static const char *const node_b[] = {"tkestack.io/gpu-model=T4", "zone=z2", NULL};

static int matches(const char *sel, const char *const *labels)
{
    char *err = NULL;
    struct label_selector *s = label_selector_parse(sel, &err);
    if (!s) {
        fail_msg("%s: %s", sel, err ? err : "out of memory");
        free(err);
        return -1;
    }
    int m = label_selector_matches(s, lookup, labels);
    label_selector_free(s);
    return m;
}

static void test_grammar_and_matching(void **state)
{
    (void)state;
    assert_int_equal(matches("", node_a), 1);
    assert_int_equal(matches("tkestack.io/gpu-model=A100", node_a), 1);
    assert_int_equal(matches("tkestack.io/gpu-model==A100", node_b), 0);
    assert_int_equal(matches("tkestack.io/gpu-model!=A100", node_b), 1);
    assert_int_equal(matches("tkestack.io/gpu-pool!=public", node_b), 1); /* missing label matches != */
    assert_int_equal(matches("tkestack.io/gpu-pool", node_a), 1);
    assert_int_equal(matches("tkestack.io/gpu-pool", node_b), 0);
    assert_int_equal(matches("!tkestack.io/gpu-pool", node_b), 1);
    assert_int_equal(matches(" zone in (z2, z3) ", node_b), 1);
    assert_int_equal(matches("zone in (z2,z3)", node_a), 0);
    assert_int_equal(matches("zone notin (z2)", node_a), 1);
    assert_int_equal(matches("tkestack.io/gpu-pool notin (public)", node_b), 1);
    assert_int_equal(matches("zone=z1,tkestack.io/gpu-model=A100", node_a), 1);
    assert_int_equal(matches("zone=z1,tkestack.io/gpu-model=T4", node_a), 0);
    assert_int_equal(matches("zone=", node_a), 0); /* the empty value */
    assert_int_equal(matches("in=x", node_a), 0);  /* a key that looks like the keyword */
    assert_int_equal(matches("zone in (z9,)", node_b), 0); /* "a," is a and the empty value, as in Kubernetes */
}

static void test_errors_name_the_position(void **state)
{
    (void)state;
    static const char *const bad[] = {"zone=(",      "a b",         "zone in z1",  "zone in (z1",  "zone in ()",
                                      ",zone",       "zone,",       "-bad=x",      "zone=a b",     "Upper/x=1",
                                      "a/b/c=1",     "zone=bad!",   "!",           "zone notin ()", "x=" "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *err = NULL;
        struct label_selector *s = label_selector_parse(bad[i], &err);
        if (s)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(err);
        assert_non_null(strstr(err, "position"));
        free(err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar_and_matching),
        cmocka_unit_test(test_errors_name_the_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

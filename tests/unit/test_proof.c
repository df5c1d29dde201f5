/* test_proof.c - unit tests for cluster/proof.c: the decision key file, and
 * that a proof covers exactly what a decision says (issue 22, item 2). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/proof.h"
#include "tests/unit/support.h"

static char *key_file(const char *content, size_t len)
{
    char *path = strdup("/tmp/gqa-proof-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static void expect_load(const char *content, size_t len, int rc, size_t key_len)
{
    char *path = key_file(content, len), *err = NULL;
    struct decision_key k;
    assert_int_equal(decision_key_load(&k, path, &err), rc);
    if (rc == 0) {
        assert_null(err);
        assert_int_equal(k.len, key_len);
        assert_false(k.random);
    } else {
        assert_non_null(err);
    }
    free(err);
    unlink(path);
    free(path);
}

static void test_key_file(void **state)
{
    (void)state;
    expect_load("0123456789abcdef0123456789abcdef\n", 33, 0, 32); /* a Secret's trailing newline is not key */
    expect_load("0123456789abcdef", 16, 0, 16);
    expect_load("short\n", 6, -1, 0);
    expect_load("\n\n\n", 3, -1, 0);
    char *big = malloc(DECISION_KEY_MAX + 1);
    memset(big, 'k', DECISION_KEY_MAX + 1);
    expect_load(big, DECISION_KEY_MAX, 0, DECISION_KEY_MAX);
    expect_load(big, DECISION_KEY_MAX + 1, -1, 0);
    free(big);
    struct decision_key k;
    char *err = NULL;
    assert_int_equal(decision_key_load(&k, "/nonexistent/gqa/key", &err), -1);
    assert_non_null(strstr(err, "/nonexistent/gqa/key"));
    free(err);
}

static struct pod_info *decided_pod(const char *uid, const char *node, int64_t t, int minor)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'metadata':{'name':'p','namespace':'t','uid':'%s'},'spec':{'containers':[{'name':'a','resources':{"
        "'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'4'}}},{'name':'b'}]}}",
        uid);
    struct pod_info *p = pod_of(buf);
    int m[] = {minor}, count[] = {1, 0};
    int *idx[] = {m, NULL};
    struct pod_info *d = pod_info_with_decision(p, node, t, idx, count);
    pod_info_free(p);
    assert_non_null(d);
    return d;
}

/* A proof verifies for its own decision only: any other UID, node, time,
 * GPU or key fails, as does a missing or mangled proof. */
static void test_proof_covers_the_decision(void **state)
{
    (void)state;
    struct decision_key k, other;
    assert_int_equal(decision_key_random(&k), 0);
    assert_int_equal(decision_key_random(&other), 0);
    assert_true(k.random);
    struct pod_info *d = decided_pod("u1", "n1", 1000, 3);
    assert_false(decision_proven(&k, d)); /* no proof yet */
    assert_int_equal(decision_sign(&k, d), 0);
    assert_int_equal(strlen(d->decision.proof), DECISION_PROOF_LEN);
    assert_true(decision_proven(&k, d));
    assert_false(decision_proven(&other, d));
    struct pod_info *copy = pod_info_clone(d);
    assert_true(decision_proven(&k, copy)); /* the clone carries the proof */
    pod_info_free(copy);

    struct pod_info *variants[] = {decided_pod("u2", "n1", 1000, 3), decided_pod("u1", "n2", 1000, 3),
                                   decided_pod("u1", "n1", 1001, 3), decided_pod("u1", "n1", 1000, 4)};
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        variants[i]->decision.proof = strdup(d->decision.proof);
        assert_false(decision_proven(&k, variants[i]));
        pod_info_free(variants[i]);
    }
    d->decision.proof[10] ^= 1;
    assert_false(decision_proven(&k, d));
    d->decision.proof[DECISION_PROOF_LEN - 1] = '\0';
    assert_false(decision_proven(&k, d));
    pod_info_free(d);
}

/* Field boundaries are length-prefixed: "n1" + "2" is not "n" + "12". */
static void test_fields_do_not_run_together(void **state)
{
    (void)state;
    struct decision_key k;
    assert_int_equal(decision_key_random(&k), 0);
    struct pod_info *a = decided_pod("u1", "n1", 21, 0), *b = decided_pod("u1", "n12", 1, 0);
    char pa[DECISION_PROOF_LEN + 1], pb[DECISION_PROOF_LEN + 1];
    assert_int_equal(decision_prove(&k, a, pa), 0);
    assert_int_equal(decision_prove(&k, b, pb), 0);
    assert_string_not_equal(pa, pb);
    pod_info_free(a);
    pod_info_free(b);
    /* No decision, nothing to prove. */
    struct pod_info *none = decided_pod("u1", NULL, 0, 0);
    assert_int_equal(decision_prove(&k, none, pa), -1);
    assert_false(decision_proven(&k, none));
    pod_info_free(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_proof_covers_the_decision),
        cmocka_unit_test(test_fields_do_not_run_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

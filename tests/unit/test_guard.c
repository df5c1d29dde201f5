/*
 * test_guard.c - extender/serve/guard.c without a network: the request-path check
 * and the body budget (issue 10, items 3 and 7).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "extender/serve/guard.h"

#define KiB 1024

static void test_path_check(void **state)
{
    (void)state;
    const char *bad[] = {"/scheduler/filter%00junk", "/a%0a", "/a%0D", "/a%1b[31m", "/a%7f", "/a%7F", "/a\x01",
                         "/x\x7f", "/%09"};
    const char *good[] = {"/scheduler/filter", "/inspect/nodes/a%20b", "/a%2Fb", "/a%", "/a%0", "/a%zz",
                          "/healthz?x=%00", "/a?%0a", "/%C2%85", "/%80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (!guard_path_has_control(bad[i]))
            fail_msg("%s should be refused", bad[i]);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (guard_path_has_control(good[i]))
            fail_msg("%s should pass", good[i]);
}

static struct guard *start(int64_t budget, int64_t max_body)
{
    struct guard_config cfg = {.max_connections = 16,
                               .max_connections_per_ip = 0,
                               .read_timeout_ns = 1000000000LL,
                               .body_budget = budget,
                               .max_body = max_body,
                               .listeners = 1};
    char *err = NULL;
    struct guard *g = guard_start(&cfg, &err);
    if (!g)
        fail_msg("guard_start: %s", err ? err : "(null)");
    return g;
}

/* The gauge of memory held by bodies, read from the metrics text. */
static long long in_flight(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    guard_render_metrics(&sb);
    const char *at = strstr(sb.data, "\ngqa_request_body_bytes ");
    long long v = at ? strtoll(at + strlen("\ngqa_request_body_bytes "), NULL, 10) : -1;
    strbuf_free(&sb);
    return v;
}

/* Append `total` bytes in `chunk`-byte pieces; returns the verdict of the
 * last append and counts how often the buffer moved. */
static enum guard_take feed(struct guard *g, struct strbuf *b, int64_t *charged, uint64_t announced, size_t total,
                            size_t chunk, int *grows)
{
    static char data[64 * KiB];
    enum guard_take r = GUARD_TAKEN;
    for (size_t done = 0; done < total && r == GUARD_TAKEN; done += chunk) {
        size_t cap = b->cap;
        r = guard_body_append(g, b, charged, announced, data, chunk < total - done ? chunk : total - done);
        if (grows && b->cap != cap)
            (*grows)++;
        if (r == GUARD_TAKEN && *charged != (int64_t)b->cap - 1)
            fail_msg("charged %lld for a buffer of %zu", (long long)*charged, b->cap);
    }
    return r;
}

static void test_bodies_grow_by_what_arrives(void **state)
{
    (void)state;
    struct guard *g = start(1024 * KiB, 768 * KiB);
    struct strbuf a;
    int64_t ca = 0;
    strbuf_init(&a);
    /* Announced 700 KiB, one byte sent: a small buffer, nothing reserved. */
    assert_int_equal(guard_body_admit(g, 700 * KiB), GUARD_TAKEN);
    assert_int_equal(feed(g, &a, &ca, 700 * KiB, 1, 1, NULL), GUARD_TAKEN);
    assert_true(a.cap <= 4096);
    assert_int_equal(in_flight(), ca);
    /* Byte by byte up to the announced length: doubling (few moves), and
     * never past the announced length. */
    int grows = 0;
    assert_int_equal(feed(g, &a, &ca, 700 * KiB, 700 * KiB - 1, 1000, &grows), GUARD_TAKEN);
    assert_int_equal(a.len, 700 * KiB);
    assert_int_equal(a.cap, 700 * KiB + 1);
    assert_true(grows <= 10);
    guard_body_release(&a, &ca);
    assert_int_equal(ca, 0);
    assert_int_equal(in_flight(), 0);
    guard_stop(g);
}

static void test_budget_is_shared(void **state)
{
    (void)state;
    struct guard *g = start(1024 * KiB, 768 * KiB);
    struct strbuf a, b, c;
    int64_t ca = 0, cb = 0, cc = 0;
    strbuf_init(&a);
    strbuf_init(&b);
    strbuf_init(&c);
    /* Announced: its buffer ends exactly at 600 KiB (doubling stops there). */
    assert_int_equal(feed(g, &a, &ca, 600 * KiB, 600 * KiB, 64 * KiB, NULL), GUARD_TAKEN);
    assert_int_equal(ca, 600 * KiB);
    /* The second body grows into what is left, in few steps even when the
     * budget cannot double it (each move copies the buffer). */
    int grows = 0;
    enum guard_take r = feed(g, &b, &cb, 0, 768 * KiB, 1 * KiB, &grows);
    assert_int_equal(r, GUARD_OVER_BUDGET);
    assert_true(grows <= 12);
    assert_true(ca + cb <= 1024 * KiB);
    assert_int_equal(in_flight(), ca + cb);
    /* Nothing left: a small body is refused too, and so is an announced one. */
    assert_int_equal(guard_body_admit(g, 600 * KiB), GUARD_OVER_BUDGET);
    guard_body_release(&b, &cb);
    assert_int_equal(guard_body_admit(g, 300 * KiB), GUARD_TAKEN);
    assert_int_equal(feed(g, &c, &cc, 300 * KiB, 300 * KiB, 4 * KiB, NULL), GUARD_TAKEN);
    /* Past --max-body-bytes: too large, whatever the budget. */
    assert_int_equal(guard_body_admit(g, 768 * KiB + 1), GUARD_TOO_LARGE);
    char *big = calloc(1, 468 * KiB + 1);
    assert_non_null(big);
    assert_int_equal(guard_body_append(g, &c, &cc, 0, big, 468 * KiB + 1), GUARD_TOO_LARGE);
    assert_int_equal(c.len, 300 * KiB);
    free(big);
    guard_body_release(&a, &ca);
    guard_body_release(&c, &cc);
    assert_int_equal(in_flight(), 0);
    guard_stop(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_check),
        cmocka_unit_test(test_bodies_grow_by_what_arrives),
        cmocka_unit_test(test_budget_is_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_leader.c - unit tests for the pure parts of extender/leader.c:
 * MicroTime formatting and parsing, the "may I take this lease" rule, and
 * leader_start's refusal of unsafe timings. One elector runs against an
 * address where nothing listens, to check it reports the error, never
 * claims leadership and stops at once. The election against an API server
 * is tested end to end with the simulator. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/leader.h"
#include "fakeapi.h"

#include <pthread.h>

#define SEC 1000000000LL
#define US 1000000LL

static void check_format(int64_t us, const char *want)
{
    char buf[64];
    assert_int_equal(leader_format_microtime(us, buf, sizeof buf), 0);
    assert_string_equal(buf, want);
    int64_t back = 0;
    assert_int_equal(leader_parse_microtime(buf, &back), 0);
    assert_true(back == us);
}

static void test_format_microtime(void **state)
{
    (void)state;
    check_format(0, "1970-01-01T00:00:00.000000Z");
    check_format(1795290652LL * US + 123456, "2026-11-21T19:50:52.123456Z");
    check_format(1709208000LL * US + 7, "2024-02-29T12:00:00.000007Z");
    check_format(-1, "1969-12-31T23:59:59.999999Z");   /* floor, not truncation */
    check_format(951868800LL * US, "2000-03-01T00:00:00.000000Z");
    check_format(253402300799LL * US + 999999, "9999-12-31T23:59:59.999999Z");
    check_format(-62135596800LL * US, "0001-01-01T00:00:00.000000Z");
}

static void test_format_limits(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(leader_format_microtime(0, buf, 28), 0);      /* 27 characters + NUL */
    assert_int_equal(leader_format_microtime(0, buf, 27), -1);
    assert_int_equal(leader_format_microtime(253402300800LL * US, buf, sizeof buf), -1);   /* year 10000 */
}

static void check_parse(const char *text, int64_t want)
{
    int64_t got = 0;
    assert_int_equal(leader_parse_microtime(text, &got), 0);
    assert_true(got == want);
}

static void test_parse_forms(void **state)
{
    (void)state;
    const int64_t t = 1795290652LL * US;
    check_parse("2026-11-21T19:50:52Z", t);                     /* metav1.Time: no fraction */
    check_parse("2026-11-21T19:50:52.1Z", t + 100000);
    check_parse("2026-11-21T19:50:52.123456789Z", t + 123456);  /* nanoseconds truncated */
    check_parse("2026-11-21t19:50:52.5z", t + 500000);
    check_parse("2026-11-21T21:50:52+02:00", t);
    check_parse("2026-11-21T14:20:52.000001-05:30", t + 1);
    check_parse("2024-02-29T12:00:00Z", 1709208000LL * US);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    static const char *bad[] = {
        "", "2026", "2026-11-21", "2026-11-21 19:50:52Z", "2026-11-21T19:50:52",
        "2026-11-21T19:50:52.Z", "2026-11-21T19:50:52ZZ", "2026-11-21T19:50:52Z ",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T23:60:00Z",
        "2026-11-21T23:59:60Z", "2026-11-21T19:50:52+0200", "2026-11-21T19:50:52+24:00",
        "2026-1-21T19:50:52Z", "+026-11-21T19:50:52Z", "2026-11-21T19:50:5xZ",
    };
    int64_t out = 42;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (leader_parse_microtime(bad[i], &out) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    }
    assert_int_equal(leader_parse_microtime(NULL, &out), -1);
    assert_true(out == 42);
}

static void test_may_acquire(void **state)
{
    (void)state;
    const int64_t seen = 1000 * SEC;
    /* free or ours: at once */
    assert_true(leader_may_acquire("", "me", seen, 15, seen));
    assert_true(leader_may_acquire(NULL, "me", seen, 15, seen));
    assert_true(leader_may_acquire("me", "me", seen, 15, seen));
    /* someone else's: only after a whole unchanged duration on our clock */
    assert_false(leader_may_acquire("other", "me", seen, 15, seen));
    assert_false(leader_may_acquire("other", "me", seen, 15, seen + 15 * SEC - 1));
    assert_true(leader_may_acquire("other", "me", seen, 15, seen + 15 * SEC));
    /* a released lease (1 s) from a holder that did not clear its name */
    assert_true(leader_may_acquire("other", "me", seen, 1, seen + SEC));
    /* holder names are compared whole */
    assert_false(leader_may_acquire("me2", "me", seen, 15, seen));
    assert_false(leader_may_acquire("m", "me", seen, 15, seen));
    /* nonsense durations neither overflow nor wrap */
    assert_true(leader_may_acquire("other", "me", seen, -5, seen));
    assert_false(leader_may_acquire("other", "me", seen, INT64_MAX, seen + 3600 * SEC));
}

static void check_refused(const struct leader_config *cfg, const char *why)
{
    static struct kube_config kube = {.server = "http://127.0.0.1:1"};
    atomic_int is_leader = 1;
    char *err = NULL;
    assert_null(leader_start(&kube, cfg, &is_leader, &err));
    assert_non_null(err);
    if (!strstr(err, why))
        fail_msg("\"%s\" does not say \"%s\"", err, why);
    free(err);
}

static const struct leader_config good = {"kube-system", "gpu-quota-admission", "host_abc", 15000, 10000, 2000};

static void test_start_refuses_bad_config(void **state)
{
    (void)state;
    struct leader_config c = good;
    c.renew_deadline_ms = 15000;
    check_refused(&c, "renew deadline");
    c = good;
    c.lease_duration_ms = 10500;    /* stored as 10 s: no longer above the deadline */
    check_refused(&c, "renew deadline");
    c = good;
    c.lease_duration_ms = 999;
    check_refused(&c, "lease duration");
    c = good;
    c.retry_period_ms = 9000;       /* 9 s * 1.2 > 10 s */
    check_refused(&c, "retry period");
    c = good;
    c.retry_period_ms = 0;
    check_refused(&c, "retry period");
    c = good;
    c.name = "Bad/Name";
    check_refused(&c, "lease name");
    c = good;
    c.namespace_ = "";
    check_refused(&c, "namespace");
    c = good;
    c.identity = "";
    check_refused(&c, "identity");

    atomic_int is_leader = 0;
    char *err = NULL;
    assert_null(leader_start(NULL, &good, &is_leader, &err));
    assert_non_null(err);
    free(err);
}

static int64_t elapsed_ms(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (int64_t)(b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

static void test_unreachable_server(void **state)
{
    (void)state;
    struct kube_config kube = {.server = "http://127.0.0.1:1"};    /* nothing listens on port 1 */
    atomic_int is_leader = 1;
    char *err = NULL;
    /* A retry wait of 2 minutes: a stop that waited it out would take that long. */
    static const struct leader_config slow_retry = {"kube-system", "gpu-quota-admission", "host_abc", 600000, 300000,
                                                    120000};
    struct leader_elector *le = leader_start(&kube, &slow_retry, &is_leader, &err);
    assert_non_null(le);
    assert_null(err);
    char buf[512];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {    /* the first round fails fast: connection refused */
        leader_describe(le, buf, sizeof buf);
        if (strncmp(buf, "error: ", 7) == 0)
            break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    } while (elapsed_ms(&t0) < 5000);
    assert_int_equal(strncmp(buf, "error: ", 7), 0);
    assert_int_equal(atomic_load(&is_leader), 0);
    /* stop interrupts the 2-minute retry wait: half of it is far beyond any
     * machine's delay (valgrind, a loaded CI) and far short of the wait. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    leader_stop(le);
    assert_true(elapsed_ms(&t0) < 60000);

    char small[8];
    leader_describe(NULL, small, sizeof small);
    assert_int_equal(strlen(small), 7);     /* truncated, terminated */
    leader_stop(NULL);
}

/* ---- the may_lead gate, against a one-Lease fake API server ---- */

/* The Lease as last written (POST or PUT), served back on GET; 404 before. */
static struct {
    pthread_mutex_t mu;
    char body[FAKE_BODY_MAX];
    int exists;
    int writes;
} fake_lease = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int serve_lease(void *ctx, struct fake_conn *c, const struct fake_request *rq)
{
    (void)ctx;
    char body[FAKE_BODY_MAX];
    pthread_mutex_lock(&fake_lease.mu);
    int is_write = strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0;
    if (is_write) {
        snprintf(fake_lease.body, sizeof fake_lease.body, "%.*s", (int)rq->body_len, rq->body);
        fake_lease.exists = 1;
        fake_lease.writes++;
    }
    int exists = fake_lease.exists;
    snprintf(body, sizeof body, "%s", fake_lease.body);
    pthread_mutex_unlock(&fake_lease.mu);
    if (!exists)
        return fake_reply(c, 404, "Not Found", "application/json", "{\"kind\":\"Status\",\"code\":404}");
    return fake_reply(c, is_write && rq->method[1] == 'O' ? 201 : 200, "OK", "application/json", body);
}

struct gate {
    atomic_int ready;
    atomic_int asked;
    atomic_int stopped;
};

static int gate_may_lead(void *ctx, char *why, size_t size)
{
    struct gate *g = ctx;
    atomic_fetch_add(&g->asked, 1);
    if (atomic_load(&g->ready))
        return 1;
    snprintf(why, size, "informer pods has not synced yet: 403 Forbidden");
    return 0;
}

static int gate_started(void *ctx)
{
    (void)ctx;
    return 0;
}

static void gate_stopped(void *ctx)
{
    struct gate *g = ctx;
    atomic_fetch_add(&g->stopped, 1);
}

/* Poll (10 ms steps) until cond(arg) or a generous deadline; 1 when met. */
static int eventually(int (*cond)(void *), void *arg)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!cond(arg)) {
        if (elapsed_ms(&t0) > 30000)
            return 0;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return 1;
}

static int is_one(void *p)
{
    return atomic_load((atomic_int *)p) == 1;
}

static int is_zero(void *p)
{
    return atomic_load((atomic_int *)p) == 0;
}

static int asked_twice(void *p)
{
    return atomic_load(&((struct gate *)p)->asked) >= 2;
}

/* The elector says it does not campaign (leader_describe is set by its
 * own thread, a moment after the Lease write the test saw). */
static int describes_not_campaigning(void *le)
{
    char buf[512];
    leader_describe(le, buf, sizeof buf);
    return strstr(buf, "not campaigning") != NULL;
}

static int lease_released(void *p)
{
    (void)p;
    pthread_mutex_lock(&fake_lease.mu);
    int released = fake_lease.exists && strstr(fake_lease.body, "\"holderIdentity\":\"\"") != NULL;
    pthread_mutex_unlock(&fake_lease.mu);
    return released;
}

static size_t lease_requests(void)
{
    struct fake_request log[FAKE_LOG_MAX];
    size_t n = fakeapi_log(log, FAKE_LOG_MAX), leases = 0;
    for (size_t i = 0; i < n; i++)
        leases += strstr(log[i].path, "/leases") != NULL;
    return leases;
}

/* Not ready: no Lease request at all. Ready: it leads. Not ready again: it
 * stops leading and hands the Lease back (holder cleared) at once, rather
 * than renewing a Lease it cannot use until its deadline. */
static void test_may_lead_gate(void **state)
{
    (void)state;
    assert_int_equal(fakeapi_start(serve_lease, NULL), 0);
    struct kube_config kube = {.server = (char *)fakeapi_url()};
    static const struct leader_config fast = {"kube-system", "gpu-quota-admission", "host_abc", 3000, 2000, 400};
    struct gate g = {0};
    struct leader_callbacks cb = {
        .started = gate_started, .stopped = gate_stopped, .may_lead = gate_may_lead, .ctx = &g};
    atomic_int is_leader = 0;
    char *err = NULL;
    struct leader_elector *le = leader_start_with(&kube, &fast, &is_leader, &cb, &err);
    assert_non_null(le);

    assert_true(eventually(asked_twice, &g)); /* two rounds asked, both refused */
    assert_true(eventually(describes_not_campaigning, le));
    char buf[512];
    leader_describe(le, buf, sizeof buf);
    if (!strstr(buf, "not campaigning") || !strstr(buf, "403 Forbidden"))
        fail_msg("describe: \"%s\"", buf);
    assert_int_equal(lease_requests(), 0);
    assert_int_equal(atomic_load(&is_leader), 0);

    atomic_store(&g.ready, 1);
    assert_true(eventually(is_one, &is_leader));
    int stopped_before = atomic_load(&g.stopped);

    atomic_store(&g.ready, 0);
    assert_true(eventually(is_zero, &is_leader));
    assert_true(eventually(lease_released, NULL));
    assert_int_equal(atomic_load(&g.stopped), stopped_before + 1);
    if (!eventually(describes_not_campaigning, le)) {
        leader_describe(le, buf, sizeof buf);
        fail_msg("describe: \"%s\"", buf);
    }

    /* Stopping does not release again: the Lease is no longer ours. */
    pthread_mutex_lock(&fake_lease.mu);
    int writes = fake_lease.writes;
    pthread_mutex_unlock(&fake_lease.mu);
    leader_stop(le);
    pthread_mutex_lock(&fake_lease.mu);
    assert_int_equal(fake_lease.writes, writes);
    pthread_mutex_unlock(&fake_lease.mu);
    fakeapi_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_microtime),
        cmocka_unit_test(test_format_limits),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_may_acquire),
        cmocka_unit_test(test_start_refuses_bad_config),
        cmocka_unit_test(test_unreachable_server),
        cmocka_unit_test(test_may_lead_gate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_workers.c - unit tests for extender/workers.c: jobs run on the pool's
 * threads, a full queue refuses at once, and stop answers what is still
 * queued with cancelled = true after the running jobs finish. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "extender/workers.h"
#include "lib/strbuf.h"

struct probe {
    atomic_int ran, cancelled;
    atomic_int release; /* the blocking job waits for it */
    atomic_int started;
};

static void count_job(void *arg, bool cancelled)
{
    struct probe *p = arg;
    atomic_fetch_add(&p->ran, 1);
    if (cancelled)
        atomic_fetch_add(&p->cancelled, 1);
}

static void blocking_job(void *arg, bool cancelled)
{
    struct probe *p = arg;
    (void)cancelled;
    atomic_store(&p->started, 1);
    while (!atomic_load(&p->release))
        sched_yield();
}

/* The pool's load as /metrics shows it (one pool at a time here). */
static void load(int *queued, int *running)
{
    struct strbuf sb;
    strbuf_init(&sb);
    workers_render_metrics(&sb);
    assert_non_null(sb.data);
    const char *q = strstr(sb.data, "\ngqa_decisions_queued ");
    const char *r = strstr(sb.data, "\ngqa_decisions_running ");
    assert_non_null(q);
    assert_non_null(r);
    assert_int_equal(sscanf(q, "\ngqa_decisions_queued %d", queued), 1);
    assert_int_equal(sscanf(r, "\ngqa_decisions_running %d", running), 1);
    strbuf_free(&sb);
}

static void wait_running(struct workers *w, int want)
{
    (void)w;
    int queued, running;
    do {
        sched_yield();
        load(&queued, &running);
    } while (running != want);
}

static void test_bounds(void **state)
{
    (void)state;
    assert_null(workers_start(0, 1));
    assert_null(workers_start(1, 0));
    assert_null(workers_start(WORKERS_MAX_THREADS + 1, 1));
    assert_null(workers_start(1, WORKERS_MAX_QUEUE + 1));
    workers_stop(NULL);
}

static void test_jobs_run_and_full_queue_refuses(void **state)
{
    (void)state;
    struct probe block = {0}, jobs = {0};
    struct workers *w = workers_start(1, 2);
    assert_non_null(w);
    assert_int_equal(workers_submit(w, blocking_job, &block), 0);
    wait_running(w, 1);
    assert_int_equal(workers_submit(w, count_job, &jobs), 0);
    assert_int_equal(workers_submit(w, count_job, &jobs), 0);
    assert_int_equal(workers_submit(w, count_job, &jobs), -1); /* full: refused at once */
    int queued, running;
    load(&queued, &running);
    assert_int_equal(queued, 2);
    assert_int_equal(running, 1);
    atomic_store(&block.release, 1);
    workers_stop(w);
    assert_int_equal(atomic_load(&jobs.ran), 2);
}

struct stopper {
    struct workers *w;
};

static void *stop_main(void *arg)
{
    workers_stop(((struct stopper *)arg)->w);
    return NULL;
}

static void test_stop_cancels_queued_jobs(void **state)
{
    (void)state;
    struct probe block = {0}, jobs = {0};
    struct workers *w = workers_start(1, WORKERS_MAX_QUEUE);
    assert_non_null(w);
    assert_int_equal(workers_submit(w, blocking_job, &block), 0);
    wait_running(w, 1);
    assert_int_equal(workers_submit(w, count_job, &jobs), 0);
    assert_int_equal(workers_submit(w, count_job, &jobs), 0);
    int submitted = 2;
    struct stopper st = {w};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_main, &st), 0);
    /* Submissions succeed until the pool is stopping; then they are refused. */
    while (workers_submit(w, count_job, &jobs) == 0) {
        submitted++;
        assert_true(submitted < WORKERS_MAX_QUEUE);
        sched_yield();
    }
    atomic_store(&block.release, 1); /* the running job finishes */
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&jobs.ran), submitted);
    assert_int_equal(atomic_load(&jobs.cancelled), submitted); /* every queued one was cancelled */
}

static void test_parallel_threads(void **state)
{
    (void)state;
    struct probe a = {0}, b = {0};
    struct workers *w = workers_start(2, 4);
    assert_non_null(w);
    assert_int_equal(workers_submit(w, blocking_job, &a), 0);
    assert_int_equal(workers_submit(w, blocking_job, &b), 0);
    wait_running(w, 2); /* both block at once: two threads */
    atomic_store(&a.release, 1);
    atomic_store(&b.release, 1);
    workers_stop(w);
    assert_int_equal(atomic_load(&a.started) + atomic_load(&b.started), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_jobs_run_and_full_queue_refuses),
        cmocka_unit_test(test_stop_cancels_queued_jobs),
        cmocka_unit_test(test_parallel_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* workers.c - a bounded pool of threads. See workers.h. */
#include "extender/workers.h"

#include "lib/strbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Across every pool, for /metrics: never read under a pool's lock. */
static atomic_int all_queued, all_running;

struct job {
    worker_fn fn;
    void *arg;
};

struct workers {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct job *ring; /* queue_cap slots, head..head+queued */
    int cap, head, queued, running;
    bool stopping;
    int nthreads;
    pthread_t *threads;
};

/* Next job, or false when stopping and the queue is empty. */
static bool next_job(struct workers *w, struct job *out, bool *cancelled)
{
    pthread_mutex_lock(&w->lock);
    while (!w->queued && !w->stopping)
        pthread_cond_wait(&w->wake, &w->lock);
    bool have = w->queued > 0;
    if (have) {
        *out = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->queued--;
        w->running++;
        atomic_fetch_sub(&all_queued, 1);
        atomic_fetch_add(&all_running, 1);
        *cancelled = w->stopping;
    }
    pthread_mutex_unlock(&w->lock);
    return have;
}

static void *worker_main(void *arg)
{
    struct workers *w = arg;
    struct job job;
    bool cancelled = false;
    while (next_job(w, &job, &cancelled)) {
        job.fn(job.arg, cancelled);
        pthread_mutex_lock(&w->lock);
        w->running--;
        atomic_fetch_sub(&all_running, 1);
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

static void free_pool(struct workers *w)
{
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w->threads);
    free(w->ring);
    free(w);
}

struct workers *workers_start(int threads, int queue_cap)
{
    if (threads < 1 || threads > WORKERS_MAX_THREADS || queue_cap < 1 || queue_cap > WORKERS_MAX_QUEUE)
        return NULL;
    struct workers *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->ring = calloc((size_t)queue_cap, sizeof(*w->ring));
    w->threads = calloc((size_t)threads, sizeof(*w->threads));
    w->cap = queue_cap;
    bool ok = w->ring && w->threads && pthread_mutex_init(&w->lock, NULL) == 0;
    if (ok && pthread_cond_init(&w->wake, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        ok = false;
    }
    if (!ok) {
        free(w->threads);
        free(w->ring);
        free(w);
        return NULL;
    }
    for (; w->nthreads < threads; w->nthreads++)
        if (pthread_create(&w->threads[w->nthreads], NULL, worker_main, w) != 0)
            break;
    if (w->nthreads < threads) {
        workers_stop(w);
        return NULL;
    }
    return w;
}

int workers_submit(struct workers *w, worker_fn fn, void *arg)
{
    pthread_mutex_lock(&w->lock);
    int rc = -1;
    if (!w->stopping && w->queued < w->cap) {
        w->ring[(w->head + w->queued) % w->cap] = (struct job){fn, arg};
        w->queued++;
        atomic_fetch_add(&all_queued, 1);
        pthread_cond_signal(&w->wake);
        rc = 0;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void workers_render_metrics(struct strbuf *out)
{
    strbuf_printf(out,
                  "# HELP gqa_decisions_queued Decisions waiting for a worker (--decision-queue bounds them).\n"
                  "# TYPE gqa_decisions_queued gauge\ngqa_decisions_queued %d\n"
                  "# HELP gqa_decisions_running Decisions a worker is taking (--decision-workers bounds them).\n"
                  "# TYPE gqa_decisions_running gauge\ngqa_decisions_running %d\n",
                  atomic_load(&all_queued), atomic_load(&all_running));
}

void workers_stop(struct workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    free_pool(w);
}

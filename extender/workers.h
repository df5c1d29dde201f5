/*
 * workers.h - a bounded pool of threads for requests that may wait on the
 * API server.
 *
 * Owns a fixed set of threads and a bounded FIFO of jobs. The HTTP server
 * hands over the requests that can block (decisions that write to the API
 * server) and goes back to serving, so /livez, /readyz, /metrics and
 * /inspect never queue behind network I/O on a libmicrohttpd thread. A full
 * queue refuses a job at once, and the caller answers a clear error rather
 * than letting requests pile up behind a slow API server.
 *
 * Locking: one mutex guards the queue and the stop flag, with a condition
 * variable for idle threads; it is never held while a job runs.
 */
#ifndef GQA_WORKERS_H
#define GQA_WORKERS_H

#include <stdbool.h>

#define WORKERS_MAX_THREADS 256
#define WORKERS_MAX_QUEUE 65536

/* A job: cancelled is true when the pool stopped before it could run (the
 * job must still answer and release what it holds, quickly). */
typedef void (*worker_fn)(void *arg, bool cancelled);

struct workers;

/* Start threads (1..WORKERS_MAX_THREADS) with room for queue_cap waiting
 * jobs (1..WORKERS_MAX_QUEUE). NULL when threads cannot be made. */
struct workers *workers_start(int threads, int queue_cap);
/* Queue a job. 0, or -1 when the queue is full or the pool is stopping. */
int workers_submit(struct workers *w, worker_fn fn, void *arg);
/* gqa_decisions_queued and gqa_decisions_running: jobs waiting for a thread
 * and jobs running, summed over every pool. */
struct strbuf;
void workers_render_metrics(struct strbuf *out);
/* Stop: jobs still queued run with cancelled = true, running ones finish,
 * the threads are joined and w is freed. NULL is a no-op. */
void workers_stop(struct workers *w);

#endif

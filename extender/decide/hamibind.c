/* hamibind.c - HAMi's part of a decision and of a bind. See hamibind.h. */
#include "extender/decide/hamibind.h"
#include "cluster/hami_decision.h"
#include "extender/decide/hami_fit.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int hamibind_attach(const struct node_state *n, struct pod_info *decided, const uint64_t *hami_masks, char **err)
{
    *err = NULL;
    if (!decided->hami)
        return 0;
    const struct hami_node *h = n->spec ? n->spec->hami : NULL;
    if (!h || !n->hami || !hami_masks || !hami_pod_on(decided, n)) {
        hami_pod_clear_alloc(decided->hami);
        return 0;
    }
    struct hami_alloc alloc;
    if (hami_alloc_from_fit(h, decided, hami_masks, &alloc, err) != 0) {
        if (!*err)
            *err = strdup("out of memory");
        return -1;
    }
    struct mig_hami_allocation *mig = NULL;
    int nmig = 0;
    if (hami_fit_mig(n, decided, hami_masks, &alloc, &mig, &nmig, err) != 0) {
        hami_alloc_free(&alloc);
        if (!*err)
            *err = strdup("out of memory");
        return -1;
    }
    hami_pod_set_alloc(decided->hami, &alloc);
    hami_pod_set_mig(decided->hami, &mig, nmig);
    return 0;
}

bool hamibind_wanted(const struct decision_sink *sink, const struct pod_info *pod, const char *node)
{
    if (!sink || !sink->lock_node || !sink->unlock_node || !sink->annotate || !pod->hami || !pod->hami->has_alloc)
        return false;
    if (pod->decision.node && strcmp(pod->decision.node, node) != 0)
        return false;
    for (int i = 0; i < pod->hami->alloc.ncontainers; i++)
        if (pod->hami->alloc.containers[i].count > 0)
            return true;
    return false;
}

/* Sleep ms milliseconds (a bind worker waiting for a held lock; no lock of
 * ours is held). */
static void pause_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The pause before the next try at a held lock: doubling, at most
 * HAMIBIND_LOCK_LAST_TRY_MS. */
static int64_t next_try_ms(int64_t wait)
{
    return wait * 2 < HAMIBIND_LOCK_LAST_TRY_MS ? wait * 2 : HAMIBIND_LOCK_LAST_TRY_MS;
}

int hamibind_lock(const struct decision_sink *sink, const struct pod_info *pod, const char *node, int64_t until_ms,
                  char **err)
{
    int rc = sink->lock_node(sink->ctx, node, pod, err);
    /* A held lock is usually released within moments: HAMi's device plugin
     * releases it once it has allocated the pod that holds it. A bind
     * refused for it costs far more than that wait: kube-scheduler v1.31
     * sends the pod back to its queue, and the release (a Node annotation
     * change) did not bring it back promptly (docs/hami.md, measured with
     * tests/realcp/bench_schedule.py --workload hami). A PodGroup
     * member's failed bind sends its whole gang back besides. So every bind
     * that finds the lock held waits for it, trying again after 50 ms,
     * doubling up to 400 ms between tries (each try reads the Node), at
     * most HAMIBIND_LOCK_WAIT_MS in all: well inside kube-scheduler's bind
     * httpTimeout (3 s in the shipped configurations). */
    int64_t deadline = clock_monotonic_ms() + HAMIBIND_LOCK_WAIT_MS;
    if (until_ms > 0 && until_ms < deadline)
        deadline = until_ms; /* the caller's answer is due earlier (a bind that waited in the queue) */
    for (int64_t wait = HAMIBIND_LOCK_FIRST_TRY_MS; rc == 1; wait = next_try_ms(wait)) {
        int64_t left = deadline - clock_monotonic_ms();
        if (left <= 0)
            break;
        pause_ms(wait < left ? wait : left);
        log_debug("pod %s: node %s's HAMi lock is held (%s); trying again", pod->key, node, *err ? *err : "");
        free(*err);
        *err = NULL;
        rc = sink->lock_node(sink->ctx, node, pod, err);
    }
    return rc;
}

static int annotate(const struct decision_sink *sink, const struct pod_info *pod, int (*fill)(cJSON *, int64_t),
                    char **err)
{
    cJSON *ann = cJSON_CreateObject();
    if (!ann || fill(ann, clock_realtime_ns()) != 0) {
        cJSON_Delete(ann);
        *err = strdup("out of memory");
        return -1;
    }
    return sink->annotate(sink->ctx, pod, ann, err);
}

int hamibind_allocating(const struct decision_sink *sink, const struct pod_info *pod, char **err)
{
    return annotate(sink, pod, hami_bind_annotations, err);
}

static int failed_phase(cJSON *ann, int64_t now_ns)
{
    (void)now_ns;
    return hami_bind_failed_annotation(ann);
}

void hamibind_abort(const struct decision_sink *sink, const struct pod_info *pod, const char *node, bool phase_set)
{
    char *err = NULL;
    if (phase_set && annotate(sink, pod, failed_phase, &err) != 0)
        log_error("pod %s: could not set hami.io/bind-phase: failed: %s", pod->key, err ? err : "unknown error");
    free(err);
    err = NULL;
    if (sink->unlock_node(sink->ctx, node, pod, &err) != 0)
        log_error("pod %s: could not release the HAMi node lock of %s: %s", pod->key, node,
                  err ? err : "unknown error");
    free(err);
}

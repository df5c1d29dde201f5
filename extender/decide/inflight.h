/*
 * inflight.h - the pods whose decision is in progress.
 *
 * Owns a set of pod keys (namespace/name). A decision (filter in filter
 * mode, bind) enters its pod before it reads anything and leaves after its
 * last write to the API server, so two requests for one pod never decide at
 * once (kube-scheduler retries a request after its httpTimeout while the
 * first may still be writing); the second is told to retry instead of
 * waiting behind network I/O.
 *
 * Locking: one mutex, held only to add or remove a key. It is never held
 * across I/O and never together with another lock. What a decision holds
 * across its API writes is its key in the set, not a lock.
 */
#ifndef GQA_INFLIGHT_H
#define GQA_INFLIGHT_H

#include <pthread.h>

#include "lib/dict.h"

struct inflight {
    pthread_mutex_t lock;
    struct dict keys; /* key -> (void *)1 */
};

int inflight_init(struct inflight *f);
void inflight_destroy(struct inflight *f);
/* 1: key entered (the caller must leave it), 0: already in progress, -1: out of memory. */
int inflight_enter(struct inflight *f, const char *key);
void inflight_leave(struct inflight *f, const char *key);

#endif

/*
 * hamibusy.h - the nodes where this process is binding a HAMi pod.
 *
 * Owns a count per node name of HAMi binds in progress (from before the
 * node lock is taken until the Binding is answered). With the node's
 * hami.io/mutex.lock as the watch last showed it, this is what steers the
 * next HAMi pod away from a node it would only wait at: kube-scheduler
 * sends the pods of a binpack run to one node, one after another, and
 * HAMi's lock lets one bind through per device-plugin allocation
 * (placement.c, hami_busy; docs/hami.md).
 *
 * Locking: one mutex, held only to read or change a count. It never takes
 * another lock and is never held across I/O; it may be taken while the
 * caller holds the cluster cache's lock (a leaf lock).
 */
#ifndef GQA_HAMIBUSY_H
#define GQA_HAMIBUSY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "lib/dict.h"

struct hamibusy {
    pthread_mutex_t lock;
    struct dict nodes; /* node name -> (void *)(intptr_t) binds in progress (> 0) */
    atomic_int binds;  /* their sum: 0 answers hamibusy_has without the lock */
};

int hamibusy_init(struct hamibusy *b);
void hamibusy_destroy(struct hamibusy *b);
/* A HAMi bind to node starts: 0, or -1 out of memory (the bind goes on
 * unmarked: only steering is lost). */
int hamibusy_enter(struct hamibusy *b, const char *node);
/* ...and ends (after a successful hamibusy_enter only). */
void hamibusy_leave(struct hamibusy *b, const char *node);
/* Is a HAMi bind to node in progress? */
bool hamibusy_has(struct hamibusy *b, const char *node);

#endif

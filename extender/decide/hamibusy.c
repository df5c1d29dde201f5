/* hamibusy.c - the nodes where this process is binding a HAMi pod. See hamibusy.h. */
#include "extender/decide/hamibusy.h"

#include <stdint.h>

int hamibusy_init(struct hamibusy *b)
{
    if (dict_init(&b->nodes, 16) != 0)
        return -1;
    atomic_init(&b->binds, 0);
    if (pthread_mutex_init(&b->lock, NULL) != 0) {
        dict_free(&b->nodes);
        return -1;
    }
    return 0;
}

void hamibusy_destroy(struct hamibusy *b)
{
    dict_free(&b->nodes);
    pthread_mutex_destroy(&b->lock);
}

int hamibusy_enter(struct hamibusy *b, const char *node)
{
    pthread_mutex_lock(&b->lock);
    intptr_t n = (intptr_t)dict_get(&b->nodes, node);
    int rc = dict_set(&b->nodes, node, (void *)(n + 1), NULL);
    if (rc == 0)
        atomic_fetch_add(&b->binds, 1);
    pthread_mutex_unlock(&b->lock);
    return rc == 0 ? 0 : -1;
}

void hamibusy_leave(struct hamibusy *b, const char *node)
{
    pthread_mutex_lock(&b->lock);
    intptr_t n = (intptr_t)dict_get(&b->nodes, node);
    if (n > 0)
        atomic_fetch_sub(&b->binds, 1);
    if (n <= 1)
        dict_del(&b->nodes, node);
    else
        (void)dict_set(&b->nodes, node, (void *)(n - 1), NULL); /* the key exists: no allocation */
    pthread_mutex_unlock(&b->lock);
}

bool hamibusy_has(struct hamibusy *b, const char *node)
{
    if (atomic_load_explicit(&b->binds, memory_order_relaxed) == 0)
        return false; /* the usual case between bursts: no lock per node evaluated */
    pthread_mutex_lock(&b->lock);
    bool busy = dict_get(&b->nodes, node) != NULL;
    pthread_mutex_unlock(&b->lock);
    return busy;
}

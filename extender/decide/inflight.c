/* inflight.c - the pods whose decision is in progress. See inflight.h. */
#include "extender/decide/inflight.h"

int inflight_init(struct inflight *f)
{
    if (dict_init(&f->keys, 16) != 0)
        return -1;
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        dict_free(&f->keys);
        return -1;
    }
    return 0;
}

void inflight_destroy(struct inflight *f)
{
    dict_free(&f->keys);
    pthread_mutex_destroy(&f->lock);
}

int inflight_enter(struct inflight *f, const char *key)
{
    pthread_mutex_lock(&f->lock);
    int rc = dict_get(&f->keys, key) ? 0 : dict_set(&f->keys, key, (void *)1, NULL) == 0 ? 1 : -1;
    pthread_mutex_unlock(&f->lock);
    return rc;
}

void inflight_leave(struct inflight *f, const char *key)
{
    pthread_mutex_lock(&f->lock);
    dict_del(&f->keys, key);
    pthread_mutex_unlock(&f->lock);
}

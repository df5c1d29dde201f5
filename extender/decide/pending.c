/* pending.c - unschedulable pods by reason class. See pending.h. */
#include "extender/decide/pending.h"
#include "extender/decide/explainsum.h"
#include "lib/clock.h"
#include "lib/dict.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t unschedulable[REASON_CLASS_COUNT];

/* pod key -> (class << 56 | monotonic seconds of the answer); allocated on first use. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dict table;
static int table_ready;

static uintptr_t pack(enum reason_class c, int64_t seconds)
{
    return (uintptr_t)(((uint64_t)c << 56) | ((uint64_t)seconds & 0x00ffffffffffffffULL));
}

static enum reason_class class_of(uintptr_t v)
{
    return (enum reason_class)((uint64_t)v >> 56);
}

static int64_t seconds_of(uintptr_t v)
{
    return (int64_t)((uint64_t)v & 0x00ffffffffffffffULL);
}

static int64_t now_s(void)
{
    return clock_monotonic_ns() / 1000000000LL;
}

void pending_observe(const char *pod_key, const struct evaluation *ev)
{
    if (ev->error || ev->count == 0)
        return;
    enum reason_class why = explain_main_reason(ev);
    if (why != REASON_NONE)
        atomic_fetch_add_explicit(&unschedulable[why], 1, memory_order_relaxed);
    pthread_mutex_lock(&table_lock);
    if (!table_ready)
        table_ready = dict_init(&table, 64) == 0;
    if (table_ready) {
        if (why == REASON_NONE)
            dict_del(&table, pod_key);
        else if (dict_size(&table) < PENDING_MAX_PODS || dict_get(&table, pod_key))
            dict_set(&table, pod_key, (void *)pack(why, now_s()), NULL); /* out of memory: not counted */
    }
    pthread_mutex_unlock(&table_lock);
}

/* Does a table entry still count? Cache read lock held. */
static bool still_pending(struct cluster_cache *cache, const char *key, uintptr_t v, int64_t now)
{
    const struct pod_entry *e = cache_find_pod(cache, key);
    return now - seconds_of(v) <= PENDING_FORGET_S && !(e && e->bound);
}

/* Count the entries that still count by class, and drop the others
 * (after the walk: the table must not change while it is walked). */
static void count_pending(struct cluster_cache *cache, uint64_t *counts)
{
    int64_t now = now_s();
    pthread_mutex_lock(&table_lock);
    size_t pos = 0, ngone = 0;
    char **gone = table_ready ? malloc(sizeof(*gone) * (dict_size(&table) + 1)) : NULL;
    struct dict_entry *de;
    while (gone && (de = dict_next(&table, &pos))) {
        uintptr_t v = (uintptr_t)de->value;
        if (still_pending(cache, de->key, v, now))
            counts[class_of(v)]++;
        else
            gone[ngone++] = de->key;
    }
    for (size_t i = 0; i < ngone; i++) {
        char *key = strdup(gone[i]); /* dict_del frees the table's copy */
        if (key)
            dict_del(&table, key);
        free(key);
    }
    free(gone);
    pthread_mutex_unlock(&table_lock);
}

void pending_render_metrics(struct cluster_cache *cache, struct strbuf *out)
{
    strbuf_puts(out, "# HELP gqa_filter_unschedulable_total Filter answers in which no node fit, by the reason class "
                     "that refused the most nodes.\n# TYPE gqa_filter_unschedulable_total counter\n");
    for (int c = 1; c < REASON_CLASS_COUNT; c++)
        strbuf_printf(out, "gqa_filter_unschedulable_total{reason=\"%s\"} %llu\n", reason_class_name(c),
                      (unsigned long long)atomic_load_explicit(&unschedulable[c], memory_order_relaxed));
    uint64_t counts[REASON_CLASS_COUNT] = {0};
    cache_read_lock(cache);
    count_pending(cache, counts);
    cache_unlock(cache);
    strbuf_puts(out, "# HELP gqa_pending_pods Pods whose latest filter answer found no node, by reason class.\n"
                     "# TYPE gqa_pending_pods gauge\n");
    for (int c = 1; c < REASON_CLASS_COUNT; c++)
        strbuf_printf(out, "gqa_pending_pods{reason=\"%s\"} %llu\n", reason_class_name(c),
                      (unsigned long long)counts[c]);
}

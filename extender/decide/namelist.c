/* namelist.c - a NodeNames array, parsed once and shared. See namelist.h. */
#include "extender/decide/namelist.h"

#include <stdlib.h>
#include <string.h>

static atomic_ullong next_serial = 1;

/* One allocation: the list, its name pointers, its tokens, its text. */
struct name_list *name_list_build(const char *text, size_t len, char *names_buf, size_t names_len,
                                  const size_t *offsets, const struct jscan_span *tokens, size_t count)
{
    size_t per_name = sizeof(const char *) + sizeof(struct jscan_span);
    if (len > SIZE_MAX / 2 || count > (SIZE_MAX / 2 - sizeof(struct name_list)) / per_name) {
        free(names_buf);
        return NULL;
    }
    struct name_list *l = malloc(sizeof(*l) + count * per_name + len);
    if (!l) {
        free(names_buf);
        return NULL;
    }
    l->names = (const char **)(l + 1);
    l->raw_names = (struct jscan_span *)(l->names + count);
    char *raw = (char *)(l->raw_names + count);
    memcpy(raw, text, len);
    for (size_t i = 0; i < count; i++) {
        l->names[i] = names_buf + offsets[i];
        /* The tokens move with the text into the list's own copy. */
        l->raw_names[i] = tokens[i].ptr ? (struct jscan_span){raw + (tokens[i].ptr - text), tokens[i].len}
                                        : (struct jscan_span){NULL, 0};
    }
    atomic_init(&l->refs, 1);
    l->serial = atomic_fetch_add(&next_serial, 1);
    l->count = count;
    l->names_buf = names_buf;
    l->names_len = names_len;
    l->raw = raw;
    l->raw_len = len;
    return l;
}

struct name_list *name_list_ref(struct name_list *l)
{
    if (l)
        atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

void name_list_unref(struct name_list *l)
{
    if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    free(l->names_buf);
    free(l);
}

int name_list_memo_init(struct name_list_memo *m)
{
    m->last = NULL;
    atomic_init(&m->hits, 0);
    atomic_init(&m->misses, 0);
    return pthread_mutex_init(&m->lock, NULL) == 0 ? 0 : -1;
}

void name_list_memo_destroy(struct name_list_memo *m)
{
    name_list_unref(m->last);
    m->last = NULL;
    pthread_mutex_destroy(&m->lock);
}

struct name_list *name_list_memo_match(struct name_list_memo *m, const char *text, size_t avail)
{
    pthread_mutex_lock(&m->lock);
    struct name_list *l = name_list_ref(m->last);
    pthread_mutex_unlock(&m->lock);
    if (l && l->raw_len <= avail && memcmp(l->raw, text, l->raw_len) == 0) {
        atomic_fetch_add_explicit(&m->hits, 1, memory_order_relaxed);
        return l;
    }
    atomic_fetch_add_explicit(&m->misses, 1, memory_order_relaxed);
    name_list_unref(l);
    return NULL;
}

void name_list_memo_remember(struct name_list_memo *m, struct name_list *l)
{
    name_list_ref(l);
    pthread_mutex_lock(&m->lock);
    struct name_list *old = m->last;
    m->last = l;
    pthread_mutex_unlock(&m->lock);
    name_list_unref(old);
}

void name_list_memo_render_metrics(struct name_list_memo *m, struct strbuf *out)
{
    strbuf_printf(out,
                  "# HELP gqa_name_list_memo_total NodeNames arrays that were byte for byte the last one and were "
                  "not scanned again (hit), or were scanned (miss).\n"
                  "# TYPE gqa_name_list_memo_total counter\n"
                  "gqa_name_list_memo_total{outcome=\"hit\"} %llu\n"
                  "gqa_name_list_memo_total{outcome=\"miss\"} %llu\n",
                  (unsigned long long)atomic_load(&m->hits), (unsigned long long)atomic_load(&m->misses));
}

/*
 * namelist.h - a NodeNames array, parsed once and shared.
 *
 * Owns struct name_list: one parsed NodeNames array (its exact bytes, the
 * names decoded, each name's raw token), immutable once built and freed by
 * its last reference; and struct name_list_memo, the most recent list.
 * kube-scheduler sends the same node list with pod after pod, so wire.c
 * asks the memo first: an array that is byte for byte the last one is the
 * same list (a JSON value ends where its bytes say, so equal bytes are an
 * equal, already validated value), and its names are not scanned again.
 * The list's serial, unique in the process, tells placement's own memo
 * that the names are the ones it resolved before, without comparing them.
 *
 * Locking: the memo's mutex is held only to swap its list or take a
 * reference; the comparison runs outside it. References are atomic.
 */
#ifndef GQA_NAMELIST_H
#define GQA_NAMELIST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/jscan.h"
#include "lib/strbuf.h"

struct name_list {
    atomic_size_t refs;
    uint64_t serial; /* unique per list in the process, never 0 */
    size_t count;
    const char **names; /* count NUL-terminated names, back to back in names_buf */
    char *names_buf;
    size_t names_len;
    /* count tokens, each name's string in raw (quotes included) when it
     * can be answered as it came, else {NULL, 0} (wire.h: raw_names) */
    struct jscan_span *raw_names;
    const char *raw; /* the array's exact text, '[' to ']' */
    size_t raw_len;
};

/* A list of the names collected from the array text[0..len): names_buf
 * (taken over: freed with the list, also on failure) holds them back to
 * back, name i at offsets[i]; tokens[i] points into text or is {NULL, 0}.
 * One reference, or NULL when memory runs out. */
struct name_list *name_list_build(const char *text, size_t len, char *names_buf, size_t names_len,
                                  const size_t *offsets, const struct jscan_span *tokens, size_t count);
struct name_list *name_list_ref(struct name_list *l);
void name_list_unref(struct name_list *l);

struct name_list_memo {
    pthread_mutex_t lock;
    struct name_list *last; /* one reference, or NULL */
    atomic_ullong hits, misses;
};

int name_list_memo_init(struct name_list_memo *m);
void name_list_memo_destroy(struct name_list_memo *m);
/* The last list, referenced, when text (avail bytes, at an array's '[')
 * begins with its exact bytes; else NULL. */
struct name_list *name_list_memo_match(struct name_list_memo *m, const char *text, size_t avail);
/* l becomes the last list (the memo takes its own reference). */
void name_list_memo_remember(struct name_list_memo *m, struct name_list *l);
/* gqa_name_list_memo_total{outcome}: arrays found in the memo or scanned. */
void name_list_memo_render_metrics(struct name_list_memo *m, struct strbuf *out);

#endif

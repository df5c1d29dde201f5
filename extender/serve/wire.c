/* wire.c - extender wire format. See wire.h. */
#include "extender/serve/wire.h"
#include "lib/ascii.h"
#include "lib/strbuf.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Names are gathered as offsets into one buffer (it grows while parsing) and
 * turned into pointers at the end: one allocation for thousands of names. In
 * the Nodes form each item's span in the request is kept beside its name. */
struct name_collector {
    struct strbuf buf;
    size_t *offsets;
    struct jscan_span *spans; /* each item's span (Nodes form), or raw token (NodeNames, wire.h) */
    size_t count, cap;
};

/* Room for at least `want` names (else twice as many as now, at least 64). */
static int reserve_collector(struct name_collector *nc, size_t want)
{
    size_t cap = nc->cap ? nc->cap * 2 : 64;
    if (cap < want)
        cap = want;
    if (cap > SIZE_MAX / sizeof(struct jscan_span))
        return -1;
    size_t *o = realloc(nc->offsets, cap * sizeof(*o));
    if (!o)
        return -1;
    nc->offsets = o;
    struct jscan_span *sp = realloc(nc->spans, cap * sizeof(*sp));
    if (!sp)
        return -1;
    nc->spans = sp;
    nc->cap = cap;
    return 0;
}

static int collect_name(struct name_collector *nc, const struct jscan_str *name)
{
    if (nc->count == nc->cap && reserve_collector(nc, nc->count + 1) != 0)
        return -1;
    nc->spans[nc->count] = (struct jscan_span){NULL, 0};
    nc->offsets[nc->count++] = nc->buf.len;
    if (!name->has_escapes) {
        strbuf_append(&nc->buf, name->ptr, name->len);
    } else {
        char *decoded = jscan_str_dup(name);
        if (!decoded)
            return -1;
        strbuf_puts(&nc->buf, decoded);
        free(decoded);
    }
    strbuf_putc(&nc->buf, '\0');
    return strbuf_failed(&nc->buf) ? -1 : 0;
}

/* A run of plain names (no escapes) at once: room for all of them is made
 * first, so each name is one copy with no checks. An ASCII name can go
 * back as it came (its raw token); others are escaped in the answer. The
 * run's text between names is '","', so one check of the whole run says
 * whether every name in it is ASCII. `end` is the end of the text. */
#define PLAIN_RUN 64
#define SHORT_NAME 16 /* copied as one 16-byte move, the rest overwritten */

static int collect_plain_run(struct name_collector *nc, const struct jscan_str *run, size_t n, const char *end)
{
    const struct jscan_str *last = &run[n - 1];
    size_t span = (size_t)(last->ptr + last->len - run[0].ptr);
    bool all_ascii = ascii_only(run[0].ptr, span);
    /* No overflow: the names lie in one request, each plus its NUL no
     * longer than its quoted text. */
    size_t bytes = span + 2 + SHORT_NAME;
    char *w;
    if ((nc->count + n > nc->cap && reserve_collector(nc, nc->count + n) != 0) || !(w = strbuf_begin(&nc->buf, bytes)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct jscan_str *name = &run[i];
        nc->offsets[nc->count] = (size_t)(w - nc->buf.data);
        nc->spans[nc->count++] = all_ascii || ascii_only(name->ptr, name->len)
                                     ? (struct jscan_span){name->ptr - 1, name->len + 2}
                                     : (struct jscan_span){NULL, 0};
        if (name->len <= SHORT_NAME && end - name->ptr >= SHORT_NAME)
            memcpy(w, name->ptr, SHORT_NAME);
        else
            memcpy(w, name->ptr, name->len);
        w += name->len;
        *w++ = '\0';
    }
    strbuf_commit(&nc->buf, w);
    return 0;
}

static void collector_free(struct name_collector *nc)
{
    strbuf_free(&nc->buf);
    free(nc->offsets);
    free(nc->spans);
}

static char *message(const char *text)
{
    return strdup(text);
}

static char *scan_error(const struct jscan *s, const char *where)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "malformed JSON%s%s at byte %zu: %s", where ? " in " : "", where ? where : "", s->error_offset,
                  s->error ? s->error : "unexpected input");
    return strbuf_detach(&sb, NULL);
}

/* Is the next value of type t? When it is not, say so with msg, unless the
 * text is malformed there: then the scanner's own error (with its byte
 * offset) is the better message and *err stays NULL. */
static int expect(struct jscan *s, enum jscan_type t, const char *msg, char **err)
{
    enum jscan_type got = jscan_peek(s);
    if (got == t)
        return 0;
    if (!s->error && got != JSCAN_NONE)
        *err = message(msg);
    else if (!s->error)
        jscan_skip_value(s); /* records the syntax error */
    return -1;
}

/* The array's names, scanned into nc (empty); *list is built from them. */
static int scan_node_names(struct jscan *s, struct name_collector *nc, struct name_list **list, char **err)
{
    const char *open = s->pos;
    jscan_enter_array(s);
    /* Thousands of names: room for them at once instead of by doubling,
     * up to a cluster of 64Ki nodes (beyond, doubling takes over). The
     * names need at most the array's bytes, and a name with its quotes and
     * comma rarely takes under eight. */
    size_t room = (size_t)(s->end - s->pos), expect_names = room / 8 < 65536 ? room / 8 : 65536;
    if (nc->count + expect_names > nc->cap && reserve_collector(nc, nc->count + expect_names) != 0)
        return -1;
    strbuf_reserve(&nc->buf, room < ((size_t)1 << 20) ? room : (size_t)1 << 20);
    for (;;) {
        struct jscan_str run[PLAIN_RUN];
        size_t got = jscan_next_plain_strings(s, run, PLAIN_RUN);
        if (got > 0) { /* the compact, plain common case */
            if (collect_plain_run(nc, run, got, s->end) != 0)
                return -1;
            continue;
        }
        struct jscan_str name;
        int r = jscan_next_element(s);
        if (r == 0)
            break;
        if (r != 1)
            return -1;
        if (expect(s, JSCAN_STRING, "NodeNames must be an array of node names", err) != 0 ||
            jscan_string(s, &name) != 0 || collect_name(nc, &name) != 0)
            return -1;
        if (!name.has_escapes && ascii_only(name.ptr, name.len)) /* it can go back as it came */
            nc->spans[nc->count - 1] = (struct jscan_span){name.ptr - 1, name.len + 2};
    }
    size_t names_len = 0;
    char *names_buf = strbuf_detach(&nc->buf, &names_len);
    if (!names_buf)
        return -1;
    *list = name_list_build(open, (size_t)(s->pos - open), names_buf, names_len, nc->offsets, nc->spans, nc->count);
    return *list ? 0 : -1;
}

/* NodeNames: the memo's list when the array is byte for byte its text
 * (namelist.h), else scanned, and then remembered. */
static int parse_node_names(struct jscan *s, struct name_list_memo *memo, struct name_list **list, char **err)
{
    name_list_unref(*list); /* a repeated key: the last one counts */
    *list = NULL;
    if (jscan_peek(s) == JSCAN_NULL)
        return jscan_skip_value(s);
    if (expect(s, JSCAN_ARRAY, "NodeNames must be an array of node names", err) != 0)
        return -1;
    if (memo && (*list = name_list_memo_match(memo, s->pos, (size_t)(s->end - s->pos))) != NULL)
        return jscan_skip_known(s, (*list)->raw_len);
    struct name_collector nc = {0};
    strbuf_init(&nc.buf);
    int rc = scan_node_names(s, &nc, list, err);
    collector_free(&nc);
    if (rc == 0 && memo)
        name_list_memo_remember(memo, *list);
    return rc;
}

/* metadata: find "name"; everything else is validated and skipped. */
static int parse_item_metadata(struct jscan *s, struct jscan_str *name, bool *found)
{
    if (jscan_peek(s) != JSCAN_OBJECT)
        return jscan_skip_value(s);
    jscan_enter_object(s);
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1) {
        if (jscan_key_is(&key, "name") && jscan_peek(s) == JSCAN_STRING) {
            if (jscan_string(s, name) != 0)
                return -1;
            *found = true;
        } else if (jscan_skip_value(s) != 0) {
            return -1;
        }
    }
    return r;
}

/* One Node: its name is decoded, and its exact bytes [start, end) are kept
 * so that the answer can carry the node as it came (see wire.h). */
static int parse_node_item(struct jscan *s, struct name_collector *nc, char **err)
{
    if (expect(s, JSCAN_OBJECT, "Nodes.items must be an array of Node objects", err) != 0)
        return -1;
    const char *start = s->pos; /* jscan_peek left pos at the '{' */
    jscan_enter_object(s);
    struct jscan_str key, name;
    bool found = false;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1) {
        int rc = jscan_key_is(&key, "metadata") ? parse_item_metadata(s, &name, &found) : jscan_skip_value(s);
        if (rc != 0)
            return -1;
    }
    if (r != 0)
        return -1;
    if (!found) {
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "Nodes.items[%zu] has no metadata.name", nc->count);
        *err = strbuf_detach(&sb, NULL);
        return -1;
    }
    if (collect_name(nc, &name) != 0)
        return -1;
    nc->spans[nc->count - 1] = (struct jscan_span){start, (size_t)(s->pos - start)};
    return 0;
}

/* ---- the Nodes form's items on two cores ---------------------------------- *
 *
 * Scanning a large Nodes form is most of a filter's time (about 60% of the
 * server's CPU at 5,000 nodes, 29 MB). When the items are large enough, a
 * helper thread scans the second half while this thread scans the first.
 * Where the second half begins is a guess (guess_split), which may lie
 * inside an item or a string. The guess stands only when this
 * thread's own walk ends an item exactly at that comma; then both scans
 * together are exactly the serial scan (the helper began at a true item
 * boundary, inside the same containers). Otherwise, or when the helper met
 * anything it did not accept, its work is dropped and this thread goes on
 * alone, so errors and their messages are always the serial walk's. */

/* Below this, one thread: starting a second costs more than it saves. The
 * fuzz build lowers it, so that small inputs take the two-thread walk. */
#ifndef WIRE_SPLIT_MIN_BYTES
#define WIRE_SPLIT_MIN_BYTES ((size_t)2 << 20)
#endif
#define ITEMS_SPLIT_WINDOW ((size_t)1 << 20)

static atomic_ullong splits_taken, splits_dropped;

void wire_items_splits(unsigned long long *taken, unsigned long long *dropped)
{
    *taken = atomic_load(&splits_taken);
    *dropped = atomic_load(&splits_dropped);
}

void wire_render_metrics(struct strbuf *out)
{
    unsigned long long taken, dropped;
    wire_items_splits(&taken, &dropped);
    strbuf_printf(out,
                  "# HELP gqa_nodes_form_splits_total Nodes-form requests whose items were scanned on two threads "
                  "(taken), or whose guessed item boundary failed so that one thread scanned them (dropped).\n"
                  "# TYPE gqa_nodes_form_splits_total counter\n"
                  "gqa_nodes_form_splits_total{outcome=\"taken\"} %llu\n"
                  "gqa_nodes_form_splits_total{outcome=\"dropped\"} %llu\n",
                  taken, dropped);
}

struct items_half {
    struct jscan s; /* forked at the ',' before the half's first item */
    struct name_collector nc;
    atomic_int cancel; /* the guess failed: stop early */
    int ok;            /* every item taken and the array closed */
};

static void *scan_items_half(void *arg)
{
    struct items_half *h = arg;
    char *err = NULL;
    int e;
    while (!atomic_load_explicit(&h->cancel, memory_order_relaxed) && (e = jscan_next_element(&h->s)) == 1)
        if (parse_node_item(&h->s, &h->nc, &err) != 0)
            break;
    h->ok = !atomic_load(&h->cancel) && !h->s.error && !err && h->s.depth == h->s.base_depth - 1;
    free(err);
    return NULL;
}

/* Append src's names and spans to dst's. */
static int merge_collector(struct name_collector *dst, const struct name_collector *src)
{
    if (dst->cap < dst->count + src->count && reserve_collector(dst, dst->count + src->count) != 0)
        return -1;
    size_t base = dst->buf.len;
    strbuf_append(&dst->buf, src->buf.data, src->buf.len);
    if (strbuf_failed(&dst->buf))
        return -1;
    for (size_t i = 0; i < src->count; i++) {
        dst->offsets[dst->count + i] = base + src->offsets[i];
        dst->spans[dst->count + i] = src->spans[i];
    }
    dst->count += src->count;
    return 0;
}

/* Where the guessed second half begins: the ',' between two items after
 * the middle of what is left, or NULL. Items are Nodes, which begin with
 * "metadata" (informers leave the type empty), or with "kind" or
 * "apiVersion" when it is set; the other "},{" are mostly the objects of an
 * item's own arrays (conditions, addresses, images). Looked for within
 * ITEMS_SPLIT_WINDOW bytes of the middle: a Node is far smaller. */
static const char *guess_split(const struct jscan *s)
{
    static const char *const first_keys[] = {"metadata\":", "kind\":", "apiVersion\":"};
    size_t left = (size_t)(s->end - s->pos);
    if (left < WIRE_SPLIT_MIN_BYTES)
        return NULL;
    const char *p = s->pos + left / 2;
    const char *stop = p + ITEMS_SPLIT_WINDOW < s->end ? p + ITEMS_SPLIT_WINDOW : s->end;
    while ((p = memmem(p, (size_t)(stop - p), "},{\"", 4)) != NULL) {
        for (size_t i = 0; i < sizeof(first_keys) / sizeof(first_keys[0]); i++) {
            size_t n = strlen(first_keys[i]);
            if ((size_t)(s->end - p) >= 4 + n && memcmp(p + 4, first_keys[i], n) == 0)
                return p + 1;
        }
        p += 4;
    }
    return NULL;
}

/* Inside Nodes.items, just entered: walk the items, with a helper thread
 * when the guess holds. Returns 0 with the array closed, or -1. */
static int parse_node_items(struct jscan *s, struct name_collector *nc, char **err)
{
    const char *split = guess_split(s);
    struct items_half *h = split ? calloc(1, sizeof(*h)) : NULL;
    pthread_t helper;
    if (h) {
        jscan_fork(&h->s, s, split);
        strbuf_init(&h->nc.buf);
        if (pthread_create(&helper, NULL, scan_items_half, h) != 0) {
            collector_free(&h->nc);
            free(h);
            h = NULL;
        }
    }
    int e, rc = 0;
    while ((e = jscan_next_element(s)) == 1) {
        if (parse_node_item(s, nc, err) != 0) {
            rc = -1;
            break;
        }
        if (h && s->pos >= split) {
            bool landed = s->pos == split;
            if (!landed)
                atomic_store(&h->cancel, 1);
            pthread_join(helper, NULL);
            bool taken = landed && h->ok;
            atomic_fetch_add(taken ? &splits_taken : &splits_dropped, 1);
            if (taken && (merge_collector(nc, &h->nc) != 0 || jscan_join(s, &h->s) != 0))
                rc = -1; /* out of memory: nothing else makes these fail */
            collector_free(&h->nc);
            free(h);
            h = NULL;
            if (taken)
                return rc;
        }
    }
    if (h) {
        atomic_fetch_add(&splits_dropped, 1);
        atomic_store(&h->cancel, 1);
        pthread_join(helper, NULL);
        collector_free(&h->nc);
        free(h);
    }
    return rc == 0 && e == 0 ? 0 : -1;
}

static int parse_nodes(struct jscan *s, struct name_collector *nc, bool *present, char **err)
{
    if (jscan_peek(s) == JSCAN_NULL)
        return jscan_skip_value(s);
    if (expect(s, JSCAN_OBJECT, "Nodes must be a NodeList object", err) != 0)
        return -1;
    *present = true;
    jscan_enter_object(s);
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1) {
        if (!jscan_key_is(&key, "items") || jscan_peek(s) == JSCAN_NULL) {
            if (jscan_skip_value(s) != 0)
                return -1;
            continue;
        }
        if (expect(s, JSCAN_ARRAY, "Nodes.items must be an array of Node objects", err) != 0)
            return -1;
        /* A repeated key: the last one counts, as in Go's encoding/json. */
        nc->count = 0;
        strbuf_reset(&nc->buf);
        jscan_enter_array(s);
        if (parse_node_items(s, nc, err) != 0)
            return -1;
    }
    return r;
}

static int parse_pod(struct jscan *s, struct extender_args *a, char **err)
{
    struct jscan_span span;
    if (jscan_peek(s) == JSCAN_NULL)
        return jscan_skip_value(s);
    if (expect(s, JSCAN_OBJECT, "Pod must be a Pod object", err) != 0)
        return -1;
    if (jscan_value_span(s, &span) != 0)
        return -1;
    cJSON_Delete(a->pod);
    a->pod = cJSON_ParseWithLength(span.ptr, span.len);
    if (!a->pod) {
        *err = message("out of memory while parsing Pod");
        return -1;
    }
    return 0;
}

static int parse_top(struct jscan *s, struct extender_args *a, struct name_list_memo *memo, struct name_collector *nc,
                     bool *has_nodes, char **err)
{
    if (expect(s, JSCAN_OBJECT, "ExtenderArgs must be a JSON object", err) != 0)
        return -1;
    jscan_enter_object(s);
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1) {
        int rc;
        if (jscan_key_is(&key, "Pod")) {
            rc = parse_pod(s, a, err);
        } else if (jscan_key_is(&key, "NodeNames")) {
            rc = parse_node_names(s, memo, &a->list, err);
        } else if (jscan_key_is(&key, "Nodes")) {
            rc = parse_nodes(s, nc, has_nodes, err);
        } else {
            rc = jscan_skip_value(s);
        }
        if (rc != 0)
            return -1;
        if (a->list && *has_nodes) {
            *err = message("ExtenderArgs carries both Nodes and NodeNames; kube-scheduler sends one of them");
            return -1;
        }
    }
    return r == 0 ? jscan_finish(s) : -1;
}

static int finish_args(struct extender_args *a, struct name_collector *nc, bool has_nodes)
{
    if (!has_nodes) { /* the names are the list's */
        a->form = ARGS_NODE_NAMES;
        a->count = a->list->count;
        a->names = a->list->names;
        a->names_buf = a->list->names_buf;
        a->names_len = a->list->names_len;
        a->raw_names = a->list->raw_names;
        return 0;
    }
    a->form = ARGS_NODES;
    a->count = nc->count;
    a->items = nc->spans; /* the collector gives them up */
    nc->spans = NULL;
    a->own_names = calloc(nc->count ? nc->count : 1, sizeof(*a->own_names));
    a->names = (const char *const *)a->own_names;
    if (!a->names)
        return -1;
    a->own_names_buf = strbuf_detach(&nc->buf, &a->names_len);
    a->names_buf = a->own_names_buf;
    if (!a->names_buf)
        return -1;
    for (size_t i = 0; i < nc->count; i++)
        a->own_names[i] = a->own_names_buf + nc->offsets[i];
    return 0;
}

int wire_parse_args_memo(const char *body, size_t len, struct name_list_memo *memo, struct extender_args *a, char **err)
{
    memset(a, 0, sizeof(*a));
    *err = NULL;
    struct jscan s;
    struct name_collector nc = {0};
    strbuf_init(&nc.buf);
    bool has_nodes = false;
    jscan_init(&s, body, len);
    int rc = parse_top(&s, a, memo, &nc, &has_nodes, err);
    if (rc == 0 && !a->pod) {
        *err = message("ExtenderArgs has no Pod");
        rc = -1;
    }
    if (rc == 0 && !a->list && !has_nodes) {
        *err = message("ExtenderArgs has neither Nodes nor NodeNames");
        rc = -1;
    }
    if (rc == 0 && finish_args(a, &nc, has_nodes) != 0)
        rc = -1;
    if (rc != 0 && !*err)
        *err = s.error ? scan_error(&s, NULL) : message("out of memory");
    collector_free(&nc);
    if (rc != 0)
        wire_args_free(a);
    return rc;
}

int wire_parse_args(const char *body, size_t len, struct extender_args *a, char **err)
{
    return wire_parse_args_memo(body, len, NULL, a, err);
}

void wire_args_free(struct extender_args *a)
{
    cJSON_Delete(a->pod);
    name_list_unref(a->list);
    free(a->own_names);
    free(a->own_names_buf);
    free(a->items);
    memset(a, 0, sizeof(*a));
}

/* ---- encoding ------------------------------------------------------------- */

/* An answer being built: framing text, and spans of the request body that
 * are either copied into the text (flat answer) or kept as pieces of their
 * own (the server sends them from the request, see http.h). */
struct piece_ref {
    const char *ptr; /* a request span, or NULL for text[off, off+len) */
    size_t off, len;
};

struct answer {
    struct strbuf text;
    bool copy_spans;
    struct piece_ref *refs;
    size_t nrefs, cap;
    size_t mark; /* text before mark is covered by refs */
    bool failed;
};

static void answer_push(struct answer *an, const char *ptr, size_t off, size_t len)
{
    if (len == 0 || an->failed)
        return;
    if (an->nrefs == an->cap) {
        size_t cap = an->cap ? an->cap * 2 : 16;
        struct piece_ref *r = realloc(an->refs, cap * sizeof(*r));
        if (!r) {
            an->failed = true;
            return;
        }
        an->refs = r;
        an->cap = cap;
    }
    an->refs[an->nrefs++] = (struct piece_ref){ptr, off, len};
}

/* Append request bytes: copied, or as a piece after the text so far. Once
 * the pieces would pass WIRE_MAX_PIECES (the final text piece counted), the
 * rest of the spans are copied into the text: an answer with many separate
 * runs of kept nodes goes out in a bounded number of pieces (wire.h). */
static void answer_span(struct answer *an, const char *ptr, size_t len)
{
    if (!an->copy_spans && an->nrefs + 3 > WIRE_MAX_PIECES)
        an->copy_spans = true;
    if (an->copy_spans) {
        strbuf_append(&an->text, ptr, len);
        return;
    }
    answer_push(an, NULL, an->mark, an->text.len - an->mark);
    answer_push(an, ptr, 0, len);
    an->mark = an->text.len;
}

/* Items i and j (i < j) sit next to each other in the request when only
 * whitespace and one comma lie between them, so a run of kept items is one
 * span of the request (their separators included). */
static bool adjacent(const struct jscan_span *a, const struct jscan_span *b)
{
    const char *p = a->ptr + a->len;
    if (b->ptr < p)
        return false;
    int commas = 0;
    for (; p < b->ptr; p++) {
        if (*p == ',')
            commas++;
        else if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    }
    return commas == 1;
}

/* The Nodes form: each kept node exactly as the request carried it. The
 * bytes are never re-serialised, so labels, annotations and status reach
 * kube-scheduler's score plugins unchanged; runs of neighbouring kept items
 * go out as one span of the request. */
static void put_kept_items(struct answer *an, const struct extender_args *a, const struct evaluation *ev)
{
    size_t n = ev->count < a->count ? ev->count : a->count;
    strbuf_puts(&an->text, "\"Nodes\":{\"metadata\":{},\"items\":[");
    bool first = true;
    for (size_t i = 0; i < n;) {
        if (!ev->verdicts[i].fits) {
            i++;
            continue;
        }
        size_t last = i;
        while (last + 1 < n && ev->verdicts[last + 1].fits && adjacent(&a->items[last], &a->items[last + 1]))
            last++;
        if (!first)
            strbuf_putc(&an->text, ',');
        answer_span(an, a->items[i].ptr, (size_t)(a->items[last].ptr + a->items[last].len - a->items[i].ptr));
        first = false;
        i = last + 1;
    }
    strbuf_puts(&an->text, "]},\"NodeNames\":null,");
}

/* A node name as a JSON string. Names are DNS labels (nothing to escape):
 * those go out in one copy; anything else through the escaper. */
static void put_name(struct strbuf *sb, const char *name)
{
    size_t len = 0;
    while (name[len] > 0x20 && name[len] < 0x7f && name[len] != '"' && name[len] != '\\')
        len++;
    char *w;
    if (name[len] != '\0' || !(w = strbuf_begin(sb, len + 2))) {
        strbuf_json_string(sb, name);
        return;
    }
    w[0] = '"';
    memcpy(w + 1, name, len);
    w[len + 1] = '"';
    strbuf_commit(sb, w + len + 2);
}

/* The request's token for verdict i's name, when it can go back as it came
 * (wire.h: raw_names), else NULL. */
static const struct jscan_span *raw_name(const struct extender_args *a, const struct evaluation *ev, size_t i)
{
    if (!a || !a->raw_names || i >= a->count || a->names[i] != ev->verdicts[i].name || !a->raw_names[i].ptr)
        return NULL;
    return &a->raw_names[i];
}

static void put_node_name(struct strbuf *sb, const struct extender_args *a, const struct evaluation *ev, size_t i)
{
    const struct jscan_span *raw = raw_name(a, ev, i);
    if (raw)
        strbuf_append(sb, raw->ptr, raw->len);
    else
        put_name(sb, ev->verdicts[i].name);
}

/* Kept names that stood next to each other in the request (one comma
 * between them) go back as one copy of that stretch. */
static void put_kept_nodes(struct answer *an, const struct extender_args *a, const struct evaluation *ev)
{
    if (a->form == ARGS_NODES) {
        put_kept_items(an, a, ev);
        return;
    }
    struct strbuf *sb = &an->text;
    bool first = true;
    strbuf_puts(sb, "\"Nodes\":null,\"NodeNames\":[");
    for (size_t i = 0; i < ev->count;) {
        if (!ev->verdicts[i].fits) {
            i++;
            continue;
        }
        if (!first)
            strbuf_putc(sb, ',');
        first = false;
        const struct jscan_span *from = raw_name(a, ev, i), *to = from, *next;
        if (!from) {
            put_name(sb, ev->verdicts[i++].name);
            continue;
        }
        while (++i < ev->count && ev->verdicts[i].fits && (next = raw_name(a, ev, i)) &&
               next->ptr == to->ptr + to->len + 1 && to->ptr[to->len] == ',')
            to = next;
        strbuf_append(sb, from->ptr, (size_t)(to->ptr + to->len - from->ptr));
    }
    strbuf_puts(sb, "],");
}

/* Append sb's own bytes [from, from + len) (a reason escaped before). */
static void repeat_bytes(struct strbuf *sb, size_t from, size_t len)
{
    char *w = strbuf_begin(sb, len); /* may move the buffer: read from it after */
    if (!w)
        return;
    memcpy(w, sb->data + from, len);
    strbuf_commit(sb, w + len);
}

/* One refused node whose name goes back as it came and whose reason was
 * escaped before, at sb[escaped_at, +escaped_len): the usual entry, written
 * with one reservation. */
static void put_repeated_entry(struct strbuf *sb, bool comma, const struct jscan_span *name, size_t escaped_at,
                               size_t escaped_len)
{
    char *w = strbuf_begin(sb, name->len + escaped_len + 2);
    if (!w)
        return;
    if (comma)
        *w++ = ',';
    memcpy(w, name->ptr, name->len);
    w += name->len;
    *w++ = ':';
    memcpy(w, sb->data + escaped_at, escaped_len);
    w += escaped_len;
    strbuf_commit(sb, w);
}

/* The refused nodes of one kind as a JSON object. Returns whether any
 * refused node of the other kind was passed over (else its pass is not
 * needed). */
static bool put_failed(struct strbuf *sb, const char *field, const struct extender_args *a, const struct evaluation *ev,
                       bool unresolvable)
{
    bool first = true, others = false;
    /* Nodes refused for the same reason share its text (placement.c):
     * it is escaped once and copied after that. */
    size_t escaped_at = 0, escaped_len = 0, escaped_off = SIZE_MAX;
    strbuf_printf(sb, "\"%s\":{", field);
    for (size_t i = 0; i < ev->count; i++) {
        const struct verdict *v = &ev->verdicts[i];
        if (v->fits || v->left_out)
            continue;
        if (v->unresolvable != unresolvable) {
            others = true;
            continue;
        }
        bool repeated = v->reason_len && v->reason_off == escaped_off;
        const struct jscan_span *raw = raw_name(a, ev, i);
        if (repeated && raw) {
            put_repeated_entry(sb, !first, raw, escaped_at, escaped_len);
            first = false;
            continue;
        }
        if (!first)
            strbuf_putc(sb, ',');
        put_node_name(sb, a, ev, i);
        strbuf_putc(sb, ':');
        if (repeated) {
            repeat_bytes(sb, escaped_at, escaped_len);
        } else {
            escaped_at = sb->len;
            strbuf_json_string_n(sb, verdict_reason(ev, v), v->reason_len);
            escaped_len = sb->len - escaped_at;
            escaped_off = v->reason_len ? v->reason_off : SIZE_MAX;
        }
        first = false;
    }
    strbuf_puts(sb, "},");
    return others;
}

static void build_filter_result(struct answer *an, const struct extender_args *a, const struct evaluation *ev)
{
    strbuf_init(&an->text);
    strbuf_reserve(&an->text, 64 + ev->count * 48);
    strbuf_putc(&an->text, '{');
    put_kept_nodes(an, a, ev);
    if (put_failed(&an->text, "FailedNodes", a, ev, false))
        put_failed(&an->text, "FailedAndUnresolvableNodes", a, ev, true);
    else
        strbuf_puts(&an->text, "\"FailedAndUnresolvableNodes\":{},");
    strbuf_puts(&an->text, "\"Error\":");
    strbuf_json_string(&an->text, ev->error ? ev->error : "");
    strbuf_putc(&an->text, '}');
}

char *wire_filter_result(const struct extender_args *a, const struct evaluation *ev, size_t *len)
{
    struct answer an = {.copy_spans = true};
    build_filter_result(&an, a, ev);
    return strbuf_detach(&an.text, len);
}

int wire_filter_result_pieces(const struct extender_args *a, const struct evaluation *ev, char **text,
                              struct http_piece **pieces, size_t *npieces)
{
    struct answer an = {.copy_spans = false};
    build_filter_result(&an, a, ev);
    answer_push(&an, NULL, an.mark, an.text.len - an.mark);
    *pieces = NULL;
    *npieces = 0;
    *text = strbuf_detach(&an.text, NULL);
    if (!*text || an.failed || !(*pieces = calloc(an.nrefs ? an.nrefs : 1, sizeof(**pieces)))) {
        free(*text);
        free(an.refs);
        *text = NULL;
        return -1;
    }
    for (size_t i = 0; i < an.nrefs; i++) {
        const struct piece_ref *r = &an.refs[i];
        (*pieces)[i] = (struct http_piece){r->ptr ? r->ptr : *text + r->off, r->len};
    }
    *npieces = an.nrefs;
    free(an.refs);
    return 0;
}

char *wire_filter_error(const char *msg, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},"
                     "\"Error\":");
    strbuf_json_string(&sb, msg);
    strbuf_putc(&sb, '}');
    return strbuf_detach(&sb, len);
}

/* The lowest priority among the requested nodes (0 when there are none). */
static int lowest_priority(const struct evaluation *ev)
{
    int low = 0;
    for (size_t i = 0; i < ev->count; i++) {
        int p = verdict_priority(&ev->verdicts[i]);
        if (i == 0 || p < low)
            low = p;
    }
    return low;
}

char *wire_priority_list(const struct extender_args *a, const struct evaluation *ev, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int low = lowest_priority(ev);
    bool first = true;
    for (size_t i = 0; i < ev->count; i++) {
        static const char host[] = "{\"Host\":", score[] = ",\"Score\":";
        int priority = verdict_priority(&ev->verdicts[i]) - low; /* 0..10 */
        if (priority <= 0)
            continue; /* the request's lowest: implied by leaving it out (wire.h) */
        const struct jscan_span *raw = raw_name(a, ev, i);
        char *w;
        if (raw && priority <= 9 && (w = strbuf_begin(&sb, raw->len + 25))) {
            /* The common entry, written in place: a name as it came, one digit. */
            *w++ = first ? '[' : ',';
            memcpy(w, host, sizeof(host) - 1);
            w += sizeof(host) - 1;
            memcpy(w, raw->ptr, raw->len);
            w += raw->len;
            memcpy(w, score, sizeof(score) - 1);
            w += sizeof(score) - 1;
            *w++ = (char)('0' + priority);
            *w++ = '}';
            strbuf_commit(&sb, w);
            first = false;
            continue;
        }
        strbuf_putc(&sb, first ? '[' : ',');
        first = false;
        strbuf_append(&sb, host, sizeof(host) - 1);
        put_node_name(&sb, a, ev, i);
        strbuf_append(&sb, score, sizeof(score) - 1);
        strbuf_put_i64(&sb, priority);
        strbuf_putc(&sb, '}');
    }
    strbuf_puts(&sb, first ? "[]" : "]");
    return strbuf_detach(&sb, len);
}

/* ---- bind and preemption (small bodies: cJSON) ---------------------------- */

static int take_string(const cJSON *obj, const char *field, char **out, bool required, char **err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (cJSON_IsString(v) && (*v->valuestring || !required))
        return (*out = strdup(v->valuestring)) ? 0 : (*err = message("out of memory"), -1);
    if (!required && (!v || cJSON_IsNull(v)))
        return 0;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "ExtenderBindingArgs.%s must be a non-empty string", field);
    *err = strbuf_detach(&sb, NULL);
    return -1;
}

int wire_parse_binding(const char *body, size_t len, struct binding_args *b, char **err)
{
    memset(b, 0, sizeof(*b));
    *err = NULL;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int rc = -1;
    if (!cJSON_IsObject(root))
        *err = message("ExtenderBindingArgs must be a JSON object");
    else if (take_string(root, "PodName", &b->pod_name, true, err) == 0 &&
             take_string(root, "PodNamespace", &b->pod_namespace, false, err) == 0 &&
             take_string(root, "PodUID", &b->pod_uid, false, err) == 0 &&
             take_string(root, "Node", &b->node, true, err) == 0)
        rc = 0;
    cJSON_Delete(root);
    if (rc != 0)
        wire_binding_free(b);
    return rc;
}

void wire_binding_free(struct binding_args *b)
{
    free(b->pod_name);
    free(b->pod_namespace);
    free(b->pod_uid);
    free(b->node);
    memset(b, 0, sizeof(*b));
}

char *wire_binding_result(const char *error, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"Error\":");
    strbuf_json_string(&sb, error ? error : "");
    strbuf_putc(&sb, '}');
    return strbuf_detach(&sb, len);
}

/* The UID of one victim: {"UID": ...} (meta) or a Pod's metadata.uid. */
static const char *victim_uid(const cJSON *v)
{
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(v, "UID");
    if (!cJSON_IsString(uid))
        uid = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "metadata"), "uid");
    return cJSON_IsString(uid) ? uid->valuestring : NULL;
}

static size_t count_victims(const cJSON *map)
{
    size_t total = 0;
    const cJSON *node;
    cJSON_ArrayForEach(node, map)
    {
        const cJSON *pods = cJSON_GetObjectItemCaseSensitive(node, "Pods");
        total += cJSON_IsArray(pods) ? (size_t)cJSON_GetArraySize(pods) : 0;
    }
    return total;
}

static int fill_preemption(struct preemption_args *a, const cJSON *map, char **err)
{
    size_t nodes = (size_t)cJSON_GetArraySize(map), victims = count_victims(map);
    a->nodes = calloc(nodes + 1, sizeof(*a->nodes));
    a->uids = calloc(victims + 1, sizeof(*a->uids));
    a->pdb_violations = calloc(nodes + 1, sizeof(*a->pdb_violations));
    bool *keep = calloc(victims + 1, sizeof(*keep));
    if (!a->nodes || !a->uids || !a->pdb_violations || !keep) {
        free(keep);
        *err = message("out of memory");
        return -1;
    }
    a->nodes[0].keep_victim = keep; /* one block for all nodes; freed through nodes[0] */
    size_t at = 0;
    const cJSON *node;
    cJSON_ArrayForEach(node, map)
    {
        struct preempt_node *pn = &a->nodes[a->count];
        const cJSON *pods = cJSON_GetObjectItemCaseSensitive(node, "Pods");
        const cJSON *pdb = cJSON_GetObjectItemCaseSensitive(node, "NumPDBViolations");
        if (!cJSON_IsObject(node) || (pods && !cJSON_IsArray(pods) && !cJSON_IsNull(pods))) {
            *err = message("victims must be objects with a Pods array");
            return -1;
        }
        if (pdb && !cJSON_IsNull(pdb) &&
            (!cJSON_IsNumber(pdb) || pdb->valuedouble < 0 || pdb->valuedouble > INT_MAX ||
             pdb->valuedouble != (double)(int)pdb->valuedouble)) {
            *err =
                strbuf_format("NumPDBViolations of node %s must be a whole number from 0 to %d", node->string, INT_MAX);
            return -1;
        }
        pn->node = node->string;
        pn->victims = a->uids + at;
        pn->keep_victim = keep + at;
        a->pdb_violations[a->count] = cJSON_IsNumber(pdb) ? (int)pdb->valuedouble : 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, pods)
        {
            const char *uid = victim_uid(v);
            if (!uid) {
                *err = message("every victim needs a UID (NodeNameToMetaVictims) or metadata.uid (NodeNameToVictims)");
                return -1;
            }
            a->uids[at++] = uid;
            pn->nvictims++;
        }
        a->count++;
    }
    return 0;
}

int wire_parse_preemption(const char *body, size_t len, struct preemption_args *a, char **err)
{
    memset(a, 0, sizeof(*a));
    *err = NULL;
    a->root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(a->root)) {
        *err = message(a->root ? "ExtenderPreemptionArgs must be a JSON object"
                               : "ExtenderPreemptionArgs is not valid JSON (or out of memory)");
        wire_preemption_free(a);
        return -1;
    }
    a->pod = cJSON_GetObjectItemCaseSensitive(a->root, "Pod");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(a->root, "NodeNameToMetaVictims");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(a->root, "NodeNameToVictims");
    const cJSON *map = cJSON_IsObject(meta) ? meta : full;
    bool bad_meta = meta && !cJSON_IsObject(meta) && !cJSON_IsNull(meta);
    bool bad_full = full && !cJSON_IsObject(full) && !cJSON_IsNull(full);
    if (!cJSON_IsObject(a->pod))
        *err = message("ExtenderPreemptionArgs has no Pod");
    else if (bad_meta || bad_full)
        *err = message("NodeNameToMetaVictims / NodeNameToVictims must be objects");
    if (*err || fill_preemption(a, cJSON_IsObject(map) ? map : NULL, err) != 0) {
        wire_preemption_free(a);
        return -1;
    }
    return 0;
}

void wire_preemption_free(struct preemption_args *a)
{
    if (a->nodes)
        free(a->nodes[0].keep_victim);
    free(a->nodes);
    free(a->uids);
    free(a->pdb_violations);
    cJSON_Delete(a->root);
    memset(a, 0, sizeof(*a));
}

/* NumPDBViolations of a node whose victims were trimmed. The service does
 * not know the victims' PodDisruptionBudgets, so it cannot recount: the
 * requested number stands while every victim is kept, and otherwise it is
 * capped by the victims kept (each kept victim violates at most one budget
 * as kube-scheduler counts them), so it never exceeds the victims returned. */
int wire_pdb_violations(int requested, size_t kept, size_t total)
{
    if (kept == total || (size_t)requested <= kept)
        return requested;
    return (int)kept;
}

char *wire_preemption_result(const struct preemption_args *a, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"NodeNameToMetaVictims\":{");
    bool first = true;
    for (size_t i = 0; i < a->count; i++) {
        const struct preempt_node *pn = &a->nodes[i];
        if (!pn->keep)
            continue;
        if (!first)
            strbuf_putc(&sb, ',');
        first = false;
        strbuf_json_string(&sb, pn->node);
        strbuf_puts(&sb, ":{\"Pods\":[");
        size_t kept = 0;
        for (size_t k = 0; k < pn->nvictims; k++) {
            if (!pn->keep_victim[k])
                continue;
            strbuf_puts(&sb, kept ? ",{\"UID\":" : "{\"UID\":");
            strbuf_json_string(&sb, pn->victims[k]);
            strbuf_putc(&sb, '}');
            kept++;
        }
        strbuf_printf(&sb, "],\"NumPDBViolations\":%d}", wire_pdb_violations(a->pdb_violations[i], kept, pn->nvictims));
    }
    strbuf_puts(&sb, "}}");
    return strbuf_detach(&sb, len);
}

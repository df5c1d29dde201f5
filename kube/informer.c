/* informer.c - list+watch into a sink. See informer.h. */
#include "kube/informer.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/jscan.h"
#include "lib/jstream.h"
#include "lib/log.h"
#include "lib/strbuf.h"
#include "lib/termtext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_TIMEOUT_MS 120000
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000

enum event_result { EVENT_OK = 0, EVENT_RELIST = 1, EVENT_REWATCH = 2, EVENT_BAD = -1 };

struct informer *informer_new(const char *name, const char *list_path, const struct informer_sink *sink,
                              const struct kube_config *kube)
{
    struct informer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return NULL;
    inf->name = strdup(name);
    inf->list_path = strdup(list_path);
    inf->sink = *sink;
    inf->kube = kube;
    inf->watch_timeout_s = 300;
    pthread_mutex_init(&inf->lock, NULL);
    if (!inf->name || !inf->list_path) {
        informer_free(inf);
        return NULL;
    }
    return inf;
}

/* ---- state ---------------------------------------------------------------- */

static void set_rv(struct informer *inf, const char *rv)
{
    if (!rv || !*rv)
        return;
    pthread_mutex_lock(&inf->lock);
    snprintf(inf->resource_version, sizeof(inf->resource_version), "%s", rv);
    pthread_mutex_unlock(&inf->lock);
}

static void get_rv(struct informer *inf, char *buf, size_t size)
{
    pthread_mutex_lock(&inf->lock);
    snprintf(buf, size, "%s", inf->resource_version);
    pthread_mutex_unlock(&inf->lock);
}

/* lastError while the first list waits for other informers (not a failure). */
#define WAITING_PREFIX "waiting for informer "

static void note_failure(struct informer *inf, const char *what)
{
    atomic_fetch_add(&inf->errors, 1);
    pthread_mutex_lock(&inf->lock);
    /* The API server's message is untrusted text: one line, cut at a word. */
    term_text_fit(inf->last_error, sizeof(inf->last_error), what ? what : "unknown error");
    if (!inf->failing_since_ns)
        inf->failing_since_ns = clock_monotonic_ns();
    pthread_mutex_unlock(&inf->lock);
    log_warn("informer %s: %s", inf->name, what ? what : "unknown error");
}

/* Healthy again (listed, or a watch accepted): lastError describes the
 * current failure only, so it is cleared with it (issue 22: a synced
 * informer kept "waiting for informer ... to sync first"). */
static void note_healthy(struct informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    inf->failing_since_ns = 0;
    inf->last_error[0] = '\0';
    pthread_mutex_unlock(&inf->lock);
}

void informer_status(struct informer *inf, struct informer_status *out)
{
    pthread_mutex_lock(&inf->lock);
    out->synced = atomic_load(&inf->synced);
    out->failing_for_ns = inf->failing_since_ns ? clock_monotonic_ns() - inf->failing_since_ns : 0;
    snprintf(out->resource_version, sizeof(out->resource_version), "%s", inf->resource_version);
    snprintf(out->last_error, sizeof(out->last_error), "%s", inf->last_error);
    out->waiting = strncmp(inf->last_error, WAITING_PREFIX, strlen(WAITING_PREFIX)) == 0;
    pthread_mutex_unlock(&inf->lock);
}

/* ---- applying objects ----------------------------------------------------- */

static const char *object_rv(const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    return cJSON_IsString(rv) ? rv->valuestring : NULL;
}

/* A dropped object: logged with its reason and told to the sink (metrics). */
static void skip_object(struct informer *inf, const char *what, const char *err)
{
    const char *reason = !err || strcmp(err, "out of memory") == 0 ? "out_of_memory" : "invalid";
    log_warn("informer %s: %s skipped: %s", inf->name, what, err ? err : "out of memory");
    if (inf->sink.skipped)
        inf->sink.skipped(inf->sink.ctx, reason);
}

static void skip_malformed(struct informer *inf, const char *what)
{
    log_warn("informer %s: malformed %s skipped", inf->name, what);
    if (inf->sink.skipped)
        inf->sink.skipped(inf->sink.ctx, "malformed");
}

static int apply_object(struct informer *inf, cJSON *obj)
{
    char *err = NULL;
    int rc = inf->sink.apply(inf->sink.ctx, obj, &err);
    if (rc != 0)
        skip_object(inf, "object", err);
    free(err);
    return rc;
}

/* The API server ends a watch it cannot serve with an ERROR event carrying a
 * Status; 410 (Expired/Gone) means the resourceVersion was compacted away. */
static enum event_result watch_error(struct informer *inf, const cJSON *status)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(status, "message");
    char what[256];
    snprintf(what, sizeof(what), "watch error %d: %s", cJSON_IsNumber(code) ? code->valueint : 0,
             cJSON_IsString(msg) ? msg->valuestring : "no message");
    if (cJSON_IsNumber(code) && code->valueint == 410) {
        log_info("informer %s: %s; listing again", inf->name, what);
        return EVENT_RELIST;
    }
    note_failure(inf, what);
    return EVENT_REWATCH;
}

static bool change_event(const char *type)
{
    return strcmp(type, "ERROR") != 0 && strcmp(type, "BOOKMARK") != 0;
}

/* A watch event taken apart: its type, and its object as text and as
 * read in place (split_event), either the sink's item or a cJSON tree. */
struct event {
    char type[16];
    struct jscan_span object;
    cJSON *parsed;                                             /* the object parsed in place, or NULL */
    void *item;                                                /* the sink's item read in place, or NULL */
    char rv[sizeof(((struct informer *)0)->resource_version)]; /* the item's */
};

static void drop_in_place(const struct informer *inf, struct event *ev)
{
    cJSON_Delete(ev->parsed);
    ev->parsed = NULL;
    if (ev->item)
        inf->sink.free_item(ev->item);
    ev->item = NULL;
}

/* The object of a change event whose type came first (as the API server
 * writes events), read where it stands: into the sink's item when the sink
 * can (sink.item_from_prefix), else into a tree (sink.parse_prefix). The
 * scanner then continues after it. */
static int read_in_place(const struct informer *inf, struct jscan *s, struct event *ev)
{
    size_t used = 0, left = (size_t)(s->end - s->pos);
    const char *at = s->pos;
    drop_in_place(inf, ev);
    if (inf->sink.item_from_prefix)
        ev->item = inf->sink.item_from_prefix(inf->sink.ctx, at, left, &used, ev->rv, sizeof(ev->rv));
    if (!ev->item)
        ev->parsed = inf->sink.parse_prefix(at, left, &used);
    if (!ev->item && !ev->parsed)
        return -1;
    ev->object = (struct jscan_span){at, used};
    s->pos = at + used;
    return 0;
}

/* The event's type and the text of its object, without building a tree;
 * the object may also be read in place (read_in_place). */
static int split_event(const struct informer *inf, const char *line, size_t len, struct event *ev)
{
    struct jscan s;
    struct jscan_str key, value;
    bool has_type = false;
    jscan_init(&s, line, len);
    if (jscan_enter_object(&s) != 0)
        return -1;
    int r;
    while ((r = jscan_next_key(&s, &key)) == 1) {
        if (jscan_key_is(&key, "type") && jscan_peek(&s) == JSCAN_STRING) {
            if (jscan_string(&s, &value) != 0 || value.len >= sizeof(ev->type) || value.has_escapes)
                return -1;
            memcpy(ev->type, value.ptr, value.len);
            ev->type[value.len] = '\0';
            has_type = true;
        } else if (jscan_key_is(&key, "object") && jscan_peek(&s) == JSCAN_OBJECT) {
            bool in_place = has_type && change_event(ev->type) && inf->sink.parse_prefix;
            if (in_place ? read_in_place(inf, &s, ev) != 0 : jscan_value_span(&s, &ev->object) != 0)
                return -1;
            if (!in_place) /* a later object replaces one read before */
                drop_in_place(inf, ev);
        } else if (jscan_skip_value(&s) != 0) {
            return -1;
        }
    }
    return r == 0 && jscan_finish(&s) == 0 && has_type && ev->object.ptr ? 0 : -1;
}

static cJSON *parse_object(const struct informer *inf, const char *text, size_t len)
{
    return inf->sink.parse ? inf->sink.parse(text, len) : cJSON_ParseWithLength(text, len);
}

/* ERROR and BOOKMARK objects are read here, not by the sink. The object
 * parsed in place (split_event) is used when the type is still a change. */
static cJSON *event_object(const struct informer *inf, struct event *ev)
{
    cJSON *parsed = ev->parsed;
    ev->parsed = NULL;
    if (parsed && change_event(ev->type))
        return parsed;
    cJSON_Delete(parsed);
    return change_event(ev->type) ? parse_object(inf, ev->object.ptr, ev->object.len)
                                  : cJSON_ParseWithLength(ev->object.ptr, ev->object.len);
}

/* A change event whose object the sink read as its item. */
static enum event_result apply_item_event(struct informer *inf, struct event *ev)
{
    void *item = ev->item;
    ev->item = NULL;
    atomic_fetch_add(&inf->events, 1);
    if (strcmp(ev->type, "DELETED") == 0) {
        inf->sink.remove_item(inf->sink.ctx, item);
    } else {
        char *err = NULL;
        if (inf->sink.apply_item(inf->sink.ctx, item, &err) != 0)
            skip_object(inf, "object", err);
        free(err);
    }
    set_rv(inf, ev->rv);
    return EVENT_OK;
}

int informer_apply_event(struct informer *inf, const char *line, size_t len)
{
    struct event ev = {0};
    cJSON *obj = NULL;
    bool split = split_event(inf, line, len, &ev) == 0;
    if (split && ev.item && change_event(ev.type))
        return apply_item_event(inf, &ev);
    if (split && !ev.item)
        obj = event_object(inf, &ev);
    else if (split) { /* a later "type" made it an ERROR or BOOKMARK: read as one */
        drop_in_place(inf, &ev);
        obj = cJSON_ParseWithLength(ev.object.ptr, ev.object.len);
    }
    drop_in_place(inf, &ev);
    enum event_result result = EVENT_OK;
    if (!cJSON_IsObject(obj)) {
        skip_malformed(inf, "watch event");
        cJSON_Delete(obj);
        return EVENT_BAD;
    }
    if (strcmp(ev.type, "ERROR") == 0) {
        result = watch_error(inf, obj);
    } else if (strcmp(ev.type, "BOOKMARK") == 0) {
        atomic_fetch_add(&inf->bookmarks, 1);
        set_rv(inf, object_rv(obj));
    } else {
        atomic_fetch_add(&inf->events, 1);
        if (strcmp(ev.type, "DELETED") == 0)
            inf->sink.remove(inf->sink.ctx, obj);
        else
            apply_object(inf, obj);
        set_rv(inf, object_rv(obj));
    }
    cJSON_Delete(obj);
    return result;
}

/* ---- list ----------------------------------------------------------------- */

struct list_items {
    void **items;
    size_t count, cap;
};

static int push_item(struct list_items *l, void *item)
{
    void **p = grow_array(l->items, &l->cap, l->count + 1, sizeof(*p), 256);
    if (!p)
        return -1;
    l->items = p;
    l->items[l->count++] = item;
    return 0;
}

/* Turn one listed object into the sink's item; NULL to skip it. */
static void *convert_item(struct informer *inf, cJSON *obj, bool *taken)
{
    char *err = NULL;
    *taken = false;
    void *out = inf->sink.convert(inf->sink.ctx, obj, taken, &err);
    if (!out)
        skip_object(inf, "listed object", err);
    free(err);
    return out;
}

static void free_items(struct informer *inf, struct list_items *l)
{
    for (size_t i = 0; i < l->count; i++)
        inf->sink.free_item(l->items[i]);
    free(l->items);
}

/* A list answer taken apart as it arrives: each element of "items" becomes
 * a small cJSON tree, converted and freed at once, so a 160,000-pod list
 * (240 MB) never exists in memory, as text or as one tree. */
struct list_stream {
    struct informer *inf;
    struct jstream js;
    struct list_items items;
    char rv[64];
    int oom;
};

/* The largest list item taken: Kubernetes objects stay under etcd's
 * request limit (1.5 MiB by default), ConfigMaps under 1 MiB. */
#define LIST_MAX_ITEM ((size_t)64 << 20)

/* A listed object straight into the sink's item (item_from_prefix), when
 * the sink reads it so and it is the whole element (jstream hands over a
 * value's exact text); else NULL. */
static void *read_list_item(struct informer *inf, const char *text, size_t len)
{
    size_t used = 0;
    char rv[sizeof(inf->resource_version)];
    void *item =
        inf->sink.item_from_prefix ? inf->sink.item_from_prefix(inf->sink.ctx, text, len, &used, rv, sizeof(rv)) : NULL;
    if (item && used != len) {
        inf->sink.free_item(item);
        item = NULL;
    }
    return item;
}

static int on_list_item(void *ctx, const char *text, size_t len)
{
    struct list_stream *ls = ctx;
    void *item = read_list_item(ls->inf, text, len);
    if (!item) {
        cJSON *obj = parse_object(ls->inf, text, len);
        bool taken = false;
        if (!cJSON_IsObject(obj))
            skip_malformed(ls->inf, "listed object");
        item = cJSON_IsObject(obj) ? convert_item(ls->inf, obj, &taken) : NULL;
        if (!taken)
            cJSON_Delete(obj);
    }
    if (item && push_item(&ls->items, item) != 0) {
        ls->inf->sink.free_item(item);
        ls->oom = 1;
        return -1;
    }
    return 0;
}

static int on_list_member(void *ctx, const struct jscan_str *key, const char *text, size_t len)
{
    struct list_stream *ls = ctx;
    if (!jscan_key_is(key, "metadata"))
        return 0;
    cJSON *meta = cJSON_ParseWithLength(text, len);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    if (cJSON_IsString(v))
        snprintf(ls->rv, sizeof(ls->rv), "%s", v->valuestring);
    cJSON_Delete(meta);
    return 0;
}

static int on_list_data(void *ctx, const char *data, size_t len)
{
    struct list_stream *ls = ctx;
    return jstream_feed(&ls->js, data, len);
}

/* Why the list failed; NULL when it did not. */
static const char *list_problem(struct informer *inf, struct list_stream *ls, int transfer_rc,
                                const struct kube_response *r)
{
    if (ls->oom || (ls->js.error && strcmp(ls->js.error, "out of memory") == 0))
        return "out of memory while collecting the listed objects";
    if (transfer_rc == 0 && r->status == 200 && jstream_finish(&ls->js) == 0)
        return *ls->rv ? NULL : "list answer has no metadata.resourceVersion";
    if (!ls->js.error)
        return r->error ? r->error : "list failed";
    log_warn("informer %s: list answer: %s at byte %zu", inf->name, ls->js.error, ls->js.error_offset);
    return "list answer is not a Kubernetes list (a JSON object with an items array)";
}

static int replace_all(struct informer *inf, struct list_items *l)
{
    int rc = inf->sink.replace(inf->sink.ctx, l->items, l->count);
    free(l->items);
    l->items = NULL;
    l->count = 0;
    return rc;
}

static int list_and_replace(struct informer *inf, struct kube_client *kc)
{
    struct list_stream ls = {.inf = inf};
    jstream_init(&ls.js, "items", on_list_item, on_list_member, &ls, LIST_MAX_ITEM);
    struct kube_response r = {0};
    int transfer_rc = kube_get_stream(kc, inf->list_path, on_list_data, &ls, LIST_TIMEOUT_MS, &r);
    const char *problem = list_problem(inf, &ls, transfer_rc, &r);
    int rc = -1;
    if (problem) {
        note_failure(inf, problem);
        free_items(inf, &ls.items);
    } else {
        size_t count = ls.items.count;
        if (replace_all(inf, &ls.items) != 0) {
            note_failure(inf, "out of memory while replacing the listed objects");
        } else {
            set_rv(inf, ls.rv);
            if (atomic_exchange(&inf->synced, 1))
                atomic_fetch_add(&inf->relists, 1);
            log_info("informer %s: listed %zu objects at resourceVersion %s", inf->name, count, ls.rv);
            rc = 0;
        }
    }
    jstream_free(&ls.js);
    kube_response_free(&r);
    return rc;
}

/* ---- watch ---------------------------------------------------------------- */

struct watch_ctx {
    struct informer *inf;
    enum event_result outcome;
    bool healthy; /* an event or bookmark arrived on this watch */
};

static int on_line(void *arg, const char *line, size_t len)
{
    struct watch_ctx *w = arg;
    if (len == 0) {
        /* Accepted by the server: a resumed watch is a recovered informer,
         * even if nothing happens in the cluster for a while. */
        w->healthy = true;
        note_healthy(w->inf);
        return 0;
    }
    int r = informer_apply_event(w->inf, line, len);
    /* A watch that delivers is a recovered informer, even if it never ends. */
    if (r == EVENT_OK && !w->healthy) {
        w->healthy = true;
        note_healthy(w->inf);
    }
    if (r == EVENT_RELIST || r == EVENT_REWATCH) {
        w->outcome = (enum event_result)r;
        return 1;
    }
    return 0;
}

static char *watch_path(struct informer *inf)
{
    char rv[64];
    get_rv(inf, rv, sizeof(rv));
    /* Spread the ends of many watches over time, as client-go does. */
    int timeout = inf->watch_timeout_s + (int)(rand() % (inf->watch_timeout_s / 4 + 1));
    char *erv = kube_escape(rv);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "%s%cwatch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d", inf->list_path,
                  strchr(inf->list_path, '?') ? '&' : '?', erv ? erv : "", timeout);
    free(erv);
    return erv ? strbuf_detach(&sb, NULL) : (strbuf_free(&sb), NULL);
}

/* One watch request. EVENT_OK: the server ended it (resume from the last
 * resourceVersion); EVENT_RELIST: 410; EVENT_REWATCH/EVENT_BAD: failure. */
static enum event_result watch_once(struct informer *inf, struct kube_client *kc)
{
    char *path = watch_path(inf);
    if (!path)
        return EVENT_BAD;
    struct watch_ctx w = {inf, EVENT_OK, false};
    struct kube_response r = {0};
    long idle_ms = (long)(inf->watch_timeout_s * 2 + 60) * 1000L;
    int rc = kube_watch(kc, path, on_line, &w, &inf->stop, idle_ms, &r);
    free(path);
    enum event_result out = w.outcome;
    if (r.status == 410) {
        out = EVENT_RELIST;
    } else if (rc != 0 || (r.status != 200 && r.status != 0) || (r.status == 0 && !inf->stop)) {
        if (out == EVENT_OK) {
            note_failure(inf, r.error ? r.error : "watch failed");
            out = EVENT_REWATCH;
        }
    } else if (out == EVENT_OK) {
        note_healthy(inf);
    }
    kube_response_free(&r);
    return out;
}

/* ---- the loop ------------------------------------------------------------- */

static void pause_ms(struct informer *inf, long ms)
{
    for (long waited = 0; waited < ms && !inf->stop; waited += 50) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Exponential backoff with +-25% jitter, so many replicas do not retry in step. */
static long next_backoff(long *backoff)
{
    *backoff = *backoff ? (*backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : *backoff * 2) : BACKOFF_MIN_MS;
    long jitter = *backoff / 4;
    return *backoff - jitter + (jitter ? rand() % (2 * jitter + 1) : 0);
}

void informer_after(struct informer *inf, struct informer **others, size_t n)
{
    inf->after = others;
    inf->nafter = n;
}

static bool others_synced(struct informer *inf)
{
    for (size_t i = 0; i < inf->nafter; i++)
        if (!atomic_load(&inf->after[i]->synced))
            return false;
    return true;
}

static void wait_for_others(struct informer *inf)
{
    long waited = 0;
    if (!others_synced(inf) && inf->nafter) {
        pthread_mutex_lock(&inf->lock);
        snprintf(inf->last_error, sizeof(inf->last_error), WAITING_PREFIX "%s to sync first", inf->after[0]->name);
        pthread_mutex_unlock(&inf->lock);
    }
    while (!inf->stop && !others_synced(inf) && waited < INFORMER_AFTER_WAIT_S * 1000L) {
        pause_ms(inf, 50);
        waited += 50;
    }
    if (inf->nafter) { /* the wait is over: it is no longer the informer's state */
        pthread_mutex_lock(&inf->lock);
        if (strncmp(inf->last_error, WAITING_PREFIX, strlen(WAITING_PREFIX)) == 0)
            inf->last_error[0] = '\0';
        pthread_mutex_unlock(&inf->lock);
    }
    if (!inf->stop && !others_synced(inf))
        log_warn("informer %s: listing without waiting longer for the ConfigMaps (CRL defaults may be missed "
                 "for pods listed now)",
                 inf->name);
}

static void *informer_main(void *arg)
{
    struct informer *inf = arg;
    wait_for_others(inf);
    struct kube_client *kc = NULL;
    bool listed = false;
    long backoff = 0;
    while (!inf->stop) {
        char *err = NULL;
        if (!kc && !(kc = kube_client_new(inf->kube, &err))) {
            note_failure(inf, err ? err : "cannot create the API client");
            free(err);
            pause_ms(inf, next_backoff(&backoff));
            continue;
        }
        if (!listed) {
            if (list_and_replace(inf, kc) != 0) {
                pause_ms(inf, next_backoff(&backoff));
                continue;
            }
            listed = true;
            backoff = 0;
            note_healthy(inf);
        }
        enum event_result r = watch_once(inf, kc);
        if (r == EVENT_RELIST) {
            listed = false;
        } else if (r != EVENT_OK && !inf->stop) {
            atomic_fetch_add(&inf->reconnects, 1);
            pause_ms(inf, next_backoff(&backoff));
        } else {
            backoff = 0;
        }
    }
    kube_client_free(kc);
    return NULL;
}

int informer_start(struct informer *inf)
{
    if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0)
        return -1;
    inf->started = 1;
    return 0;
}

void informer_free(struct informer *inf)
{
    if (!inf)
        return;
    if (inf->started) {
        inf->stop = 1;
        pthread_join(inf->thread, NULL);
    }
    pthread_mutex_destroy(&inf->lock);
    free(inf->name);
    free(inf->list_path);
    free(inf);
}

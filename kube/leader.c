/*
 * leader.c - leader election on a coordination.k8s.io/v1 Lease.
 *
 * The protocol is client-go's leaderelection with a LeaseLock, so this
 * process and any client-go candidate on the same Lease agree:
 *  - every retry period a candidate GETs the Lease (creating it when it is
 *    missing) and writes itself in as holder with a PUT carrying the
 *    resourceVersion it read, so of two racing candidates only one wins;
 *  - another holder's lease counts as expired only when the record has not
 *    changed for leaseDurationSeconds on the candidate's own monotonic
 *    clock (observed_ns), never by comparing renewTime with a local clock;
 *  - the leader PUTs renewTime every retry period and stops deciding
 *    (*is_leader = 0) once no renewal has succeeded for the renew deadline.
 *
 * Why one leader at a time: a renewal counts from the moment its request
 * was sent, which is before the server stored it, and every other candidate
 * saw that write later still. So the leader gives up at most renew_deadline
 * after the write, while nobody may take over earlier than lease_duration
 * after it, and renew_deadline < lease_duration. Every request of a leader
 * is bounded by the time left to its deadline, so a hung API call cannot
 * keep *is_leader at 1 past it.
 *
 * Only the election thread touches the kube_client and the lease state;
 * the mutex guards the stop flag (with the condition variable, so stop
 * interrupts a wait at once) and the snapshot leader_describe() reads.
 */
#include "kube/leader.h"
#include "lib/clock.h"
#include "lib/jsonset.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define US_PER_S INT64_C(1000000)
#define MICROTIME_LEN 28 /* "2026-11-21T19:50:52.123456Z" + NUL */
/* A remote leaseDurationSeconds beyond this is treated as this (about 31
 * years): effectively "never expires" without overflowing nanoseconds. */
#define MAX_DURATION_S INT64_C(1000000000)

enum view_state { VIEW_STARTING, VIEW_LEADER, VIEW_FOLLOWER, VIEW_ERROR, VIEW_ASIDE };

struct leader_elector {
    /* Immutable after leader_start. */
    char *ns, *name, *identity;
    char *collection_path, *object_path;
    int64_t lease_s; /* our leaseDurationSeconds */
    int64_t deadline_ns, retry_ns;
    atomic_int *is_leader;
    struct leader_callbacks callbacks; /* zeroed when none */
    struct kube_client *client;
    pthread_t thread;

    /* Election thread only. */
    int leading;
    int64_t last_renew_ns; /* send time of the last successful write */
    cJSON *lease;          /* the Lease as last read or written */
    char *observed_spec;   /* its spec, serialised, to notice changes */
    int64_t observed_ns;   /* when observed_spec last changed */
    int spec_changed;      /* the last read changed it (log once per change) */
    int releasing;         /* the release at stop: best effort, short */
    int started_pending;   /* callbacks.started has not succeeded in this term */
    uint64_t rng;

    /* Guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stopping;
    enum view_state view;
    char view_holder[256];
    char view_until[MICROTIME_LEN];
    char view_error[512];
};

/* ---- time ---- */

static int64_t real_us(void)
{
    return clock_realtime_ns() / 1000;
}

int leader_format_microtime(int64_t unix_us, char *buf, size_t size)
{
    int64_t secs = unix_us / US_PER_S, frac = unix_us % US_PER_S;
    if (frac < 0) { /* C division truncates toward zero; we want floor */
        frac += US_PER_S;
        secs--;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
        return -1;
    int n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (400-year eras,
 * years counted from March so the leap day comes last). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Exactly n decimal digits at *p; advances *p. */
static int take_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int take_char(const char **p, const char *allowed)
{
    if (**p == '\0' || !strchr(allowed, **p))
        return -1;
    (*p)++;
    return 0;
}

/* ".ddd..." -> microseconds (extra digits truncated). Absent is 0. */
static int take_fraction(const char **p, int64_t *us)
{
    *us = 0;
    if (**p != '.')
        return 0;
    (*p)++;
    int n = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
        if (n < 6)
            *us = *us * 10 + (**p - '0');
    }
    for (int i = n; i < 6; i++)
        *us *= 10;
    return n > 0 ? 0 : -1;
}

/* "Z" or "+hh:mm"/"-hh:mm" -> seconds east of UTC. */
static int take_offset(const char **p, int64_t *east_s)
{
    *east_s = 0;
    if (take_char(p, "Zz") == 0)
        return 0;
    char sign = **p;
    int hh, mm;
    if (take_char(p, "+-") || take_digits(p, 2, &hh) || take_char(p, ":") || take_digits(p, 2, &mm) || hh > 23 ||
        mm > 59)
        return -1;
    *east_s = (sign == '-' ? -1 : 1) * (int64_t)(hh * 3600 + mm * 60);
    return 0;
}

int leader_parse_microtime(const char *s, int64_t *unix_us)
{
    if (!s)
        return -1;
    const char *p = s;
    int y, mo, d, h, mi, sec;
    int64_t frac, east;
    if (take_digits(&p, 4, &y) || take_char(&p, "-") || take_digits(&p, 2, &mo) || take_char(&p, "-") ||
        take_digits(&p, 2, &d) || take_char(&p, "Tt") || take_digits(&p, 2, &h) || take_char(&p, ":") ||
        take_digits(&p, 2, &mi) || take_char(&p, ":") || take_digits(&p, 2, &sec) || take_fraction(&p, &frac) ||
        take_offset(&p, &east) || *p != '\0')
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 59)
        return -1;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec - east;
    *unix_us = secs * US_PER_S + frac;
    return 0;
}

int leader_may_acquire(const char *holder, const char *identity, int64_t observed_ns, int64_t duration_s,
                       int64_t now_ns)
{
    if (!holder || !*holder || (identity && strcmp(holder, identity) == 0))
        return 1;
    if (duration_s < 0)
        duration_s = 0;
    if (duration_s > MAX_DURATION_S)
        duration_s = MAX_DURATION_S;
    /* Valid while observed + duration is still ahead of now (client-go's
     * isLeaseValid), so the holder gets its full duration. */
    return observed_ns + duration_s * NS_PER_S <= now_ns;
}

/* ---- the describe snapshot ---- */

static void set_view(struct leader_elector *le, enum view_state v, const char *holder, const char *until)
{
    pthread_mutex_lock(&le->mu);
    le->view = v;
    if (holder)
        snprintf(le->view_holder, sizeof le->view_holder, "%s", holder);
    if (until)
        snprintf(le->view_until, sizeof le->view_until, "%s", until);
    pthread_mutex_unlock(&le->mu);
}

/* An API failure: logged, and kept for leader_describe. A leader's failure
 * does not change its view (it is still leader until the deadline). */
static void note_error(struct leader_elector *le, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_error(struct leader_elector *le, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_warn("leader election %s/%s: %s", le->ns, le->name, msg);
    pthread_mutex_lock(&le->mu);
    snprintf(le->view_error, sizeof le->view_error, "%s", msg);
    if (!le->leading)
        le->view = VIEW_ERROR;
    pthread_mutex_unlock(&le->mu);
}

void leader_describe(struct leader_elector *le, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    if (!le) {
        snprintf(buf, size, "leader election off");
        return;
    }
    pthread_mutex_lock(&le->mu);
    switch (le->view) {
    case VIEW_LEADER:
        snprintf(buf, size, "leader");
        break;
    case VIEW_ERROR:
        snprintf(buf, size, "error: %s", le->view_error);
        break;
    case VIEW_ASIDE:
        snprintf(buf, size, "follower: not campaigning: %s", le->view_error);
        break;
    case VIEW_FOLLOWER:
        if (!le->view_holder[0])
            snprintf(buf, size, "follower: lease is free");
        else if (le->view_until[0])
            snprintf(buf, size, "follower: lease held by %s until %s", le->view_holder, le->view_until);
        else
            snprintf(buf, size, "follower: lease held by %s", le->view_holder);
        break;
    default:
        snprintf(buf, size, "follower: no lease observed yet");
        break;
    }
    pthread_mutex_unlock(&le->mu);
}

/* ---- reading a Lease ---- */

/* The fields of a Lease we use. Strings point into the cJSON tree. */
struct lease_view {
    const char *rv;         /* metadata.resourceVersion, or NULL */
    const char *holder;     /* "" when absent or null */
    int64_t duration_s;     /* 0 when absent */
    int64_t transitions;    /* 0 when absent */
    const char *renew_time; /* or NULL */
    int malformed;          /* a field of the wrong type, or no spec */
};

static int64_t clamp_count(double v)
{
    if (!(v >= 0)) /* also NaN */
        return 0;
    return v > 2147483647.0 ? 2147483647 : (int64_t)v;
}

static const char *opt_string(const cJSON *obj, const char *key, int *malformed)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsString(v)) {
        *malformed = 1;
        return NULL;
    }
    return v->valuestring;
}

static int64_t opt_count(const cJSON *obj, const char *key, int *malformed)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v)) {
        *malformed = 1;
        return 0;
    }
    return clamp_count(v->valuedouble);
}

static void read_lease(const cJSON *lease, struct lease_view *v)
{
    memset(v, 0, sizeof *v);
    v->holder = "";
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
    v->rv = cJSON_IsObject(meta) ? opt_string(meta, "resourceVersion", &v->malformed) : NULL;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    if (!cJSON_IsObject(spec)) {
        v->malformed = 1;
        return;
    }
    const char *holder = opt_string(spec, "holderIdentity", &v->malformed);
    v->holder = holder ? holder : "";
    v->duration_s = opt_count(spec, "leaseDurationSeconds", &v->malformed);
    v->transitions = opt_count(spec, "leaseTransitions", &v->malformed);
    v->renew_time = opt_string(spec, "renewTime", &v->malformed);
    (void)opt_string(spec, "acquireTime", &v->malformed);
}

/* The serialised spec; a change of it restarts the holder's lease duration
 * on our clock. When it cannot be serialised (out of memory) we count it as
 * changed, which only makes us wait longer. */
static void observe_spec(struct leader_elector *le, const cJSON *lease)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    char *text = spec ? cJSON_PrintUnformatted(spec) : strdup("null");
    int changed = !text || !le->observed_spec || strcmp(text, le->observed_spec) != 0;
    le->spec_changed = changed;
    if (changed) {
        le->observed_ns = clock_monotonic_ns();
        free(le->observed_spec);
        le->observed_spec = text;
    } else {
        free(text);
    }
}

/* Replace le->lease with lease (taking it) and record what we saw. */
static void keep_lease(struct leader_elector *le, cJSON *lease)
{
    cJSON_Delete(le->lease);
    le->lease = lease;
    observe_spec(le, lease);
}

/* ---- writing a Lease ---- */

struct spec_values {
    const char *holder;
    int64_t duration_s;
    int64_t transitions;
    int new_term; /* acquireTime = now (else keep it) */
};

/* Set our election fields in lease's spec, keeping any others (labels,
 * annotations and newer spec fields survive, as with client-go's LeaseLock). */
static int fill_spec(cJSON *lease, const struct spec_values *sv)
{
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    if (!cJSON_IsObject(spec)) {
        if (json_set_item(lease, "spec", cJSON_CreateObject()))
            return -1;
        spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    }
    char now[MICROTIME_LEN];
    if (leader_format_microtime(real_us(), now, sizeof now))
        return -1;
    int keep_acquire = !sv->new_term && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(spec, "acquireTime"));
    if (json_set_item(spec, "holderIdentity", cJSON_CreateString(sv->holder)) ||
        json_set_item(spec, "leaseDurationSeconds", cJSON_CreateNumber((double)sv->duration_s)) ||
        json_set_item(spec, "renewTime", cJSON_CreateString(now)) ||
        json_set_item(spec, "leaseTransitions", cJSON_CreateNumber((double)sv->transitions)))
        return -1;
    return keep_acquire ? 0 : json_set_item(spec, "acquireTime", cJSON_CreateString(now));
}

/* A fresh Lease naming us as holder, for the create. */
static cJSON *new_lease(const struct leader_elector *le)
{
    cJSON *lease = cJSON_CreateObject();
    cJSON *meta = cJSON_CreateObject();
    if (!lease || !meta || json_set_item(lease, "apiVersion", cJSON_CreateString("coordination.k8s.io/v1")) ||
        json_set_item(lease, "kind", cJSON_CreateString("Lease")) ||
        json_set_item(meta, "name", cJSON_CreateString(le->name)) ||
        json_set_item(meta, "namespace", cJSON_CreateString(le->ns))) {
        cJSON_Delete(lease);
        cJSON_Delete(meta);
        return NULL;
    }
    if (json_set_item(lease, "metadata", meta)) { /* set_field freed meta */
        cJSON_Delete(lease);
        return NULL;
    }
    struct spec_values sv = {le->identity, le->lease_s, 0, 1};
    if (fill_spec(lease, &sv)) {
        cJSON_Delete(lease);
        return NULL;
    }
    return lease;
}

/* ---- API calls ---- */

struct call {
    long status; /* 0: no answer (error says why) */
    cJSON *obj;  /* the parsed 2xx body, or NULL */
    char *error; /* malloc'd message, or NULL */
};

static void call_free(struct call *c)
{
    cJSON_Delete(c->obj);
    free(c->error);
    memset(c, 0, sizeof *c);
}

static const char *call_error(const struct call *c)
{
    return c->error ? c->error : "out of memory";
}

/* How long the next request may take. Capped at half the renew deadline so
 * a follower retries (and stop returns) in reasonable time; a leader's
 * request must also end by its renew deadline; the release at stop gets a
 * retry period, as followers take over on expiry anyway. 0: no time left. */
static long request_timeout_ms(const struct leader_elector *le)
{
    int64_t cap = le->releasing ? le->retry_ns : le->deadline_ns / 2;
    if (le->leading) {
        int64_t left = le->last_renew_ns + le->deadline_ns - clock_monotonic_ns();
        if (left < cap)
            cap = left;
    }
    return cap <= 0 ? 0 : (long)((cap + NS_PER_MS - 1) / NS_PER_MS);
}

/* One request; send (may be NULL) is serialised as the body. A 2xx body
 * that is not a JSON object leaves obj NULL with error set. */
static void lease_call(struct leader_elector *le, const char *method, const char *path, const cJSON *send,
                       struct call *out)
{
    memset(out, 0, sizeof *out);
    long timeout = request_timeout_ms(le);
    if (timeout == 0) {
        out->error = strbuf_format("%s %s: renew deadline reached before the request", method, path);
        return;
    }
    char *body = send ? cJSON_PrintUnformatted(send) : NULL;
    if (send && !body)
        return; /* error NULL reads as "out of memory" */
    struct kube_response r;
    memset(&r, 0, sizeof r);
    int rc = kube_request(le->client, method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
                          timeout, &r);
    free(body);
    out->status = rc == 0 ? r.status : 0;
    if (rc != 0 || r.status >= 400 || r.status < 200) {
        out->error = r.error ? r.error : strbuf_format("%s %s: HTTP %ld", method, path, r.status);
        r.error = NULL;
    } else {
        out->obj = cJSON_ParseWithLength(r.body ? r.body : "", r.body_len);
        if (!cJSON_IsObject(out->obj)) {
            cJSON_Delete(out->obj);
            out->obj = NULL;
            out->error = strbuf_format("%s %s: the answer is not a JSON object", method, path);
        }
    }
    kube_response_free(&r);
}

/* ---- one election round ---- */

static void stop_leading(struct leader_elector *le, enum log_level level, const char *why);
static void release_lease(struct leader_elector *le);
static int stand_aside(struct leader_elector *le);

enum outcome {
    HELD,   /* we hold the lease: written just now */
    OTHER,  /* someone else holds it (or won a race with us) */
    FAILED, /* no answer, an error, or a conflict on our own lease */
};

static int64_t effective_duration_s(const struct leader_elector *le, const struct lease_view *v)
{
    /* A missing, zero or malformed duration would make client-go take the
     * lease at once; waiting our own duration is the safer reading. */
    return v->malformed || v->duration_s <= 0 ? le->lease_s : v->duration_s;
}

/* Remember who holds it (for describe) when that is not us. */
static void note_holder(struct leader_elector *le, const struct lease_view *v, int64_t duration_s)
{
    char until[MICROTIME_LEN] = "";
    int64_t renew_us;
    if (!leader_parse_microtime(v->renew_time, &renew_us))
        leader_format_microtime(renew_us + duration_s * US_PER_S, until, sizeof until);
    set_view(le, VIEW_FOLLOWER, v->malformed ? "(malformed lease)" : v->holder, until);
}

/* PUT lease (a copy of the stored one with our spec). */
static enum outcome put_lease(struct leader_elector *le, cJSON *lease, int ours)
{
    struct call c;
    lease_call(le, "PUT", le->object_path, lease, &c);
    enum outcome out = FAILED;
    if (c.obj) {
        keep_lease(le, c.obj);
        c.obj = NULL;
        out = HELD;
    } else if (c.status == 409 && !ours) {
        log_info("leader election %s/%s: another candidate took the lease first: %s", le->ns, le->name, call_error(&c));
        set_view(le, VIEW_FOLLOWER, "another candidate", "");
        out = OTHER;
    } else {
        note_error(le, "%s lease: %s", ours ? "renewing" : "acquiring", call_error(&c));
    }
    call_free(&c);
    return out;
}

static enum outcome create_lease(struct leader_elector *le)
{
    cJSON *lease = new_lease(le);
    if (!lease) {
        note_error(le, "creating lease: out of memory");
        return FAILED;
    }
    struct call c;
    lease_call(le, "POST", le->collection_path, lease, &c);
    cJSON_Delete(lease);
    enum outcome out = FAILED;
    if (c.obj) {
        keep_lease(le, c.obj);
        c.obj = NULL;
        out = HELD;
    } else if (c.status == 409) {
        log_info("leader election %s/%s: another candidate created the lease first", le->ns, le->name);
        set_view(le, VIEW_FOLLOWER, "another candidate", "");
        out = OTHER;
    } else {
        note_error(le, "creating lease: %s", call_error(&c));
    }
    call_free(&c);
    return out;
}

/* Decide on a Lease just read (stored as le->lease) and write it if we may. */
static enum outcome consider_lease(struct leader_elector *le)
{
    struct lease_view v;
    read_lease(le->lease, &v);
    if (v.malformed && le->spec_changed)
        log_warn("leader election %s/%s: malformed lease (no spec, or a field of the wrong type), treating "
                 "it as held by someone else",
                 le->ns, le->name);
    int64_t duration_s = effective_duration_s(le, &v);
    const char *holder = v.malformed ? "(malformed lease)" : v.holder;
    if (!leader_may_acquire(holder, le->identity, le->observed_ns, duration_s, clock_monotonic_ns())) {
        note_holder(le, &v, duration_s);
        return OTHER;
    }
    int ours = !v.malformed && strcmp(v.holder, le->identity) == 0;
    /* Free (someone cleared our name) is not ours either: stop deciding
     * before racing other candidates for it. */
    if (!ours)
        stop_leading(le, LOG_ERROR, "the lease no longer names us");
    if (!ours && v.holder[0])
        log_info("leader election %s/%s: lease of %s expired (unchanged for %lld s), taking it over", le->ns, le->name,
                 holder, (long long)duration_s);
    /* A new term when it was not ours: transitions count changes of holder. */
    struct spec_values sv = {le->identity, le->lease_s, ours ? v.transitions : v.transitions + 1, !ours};
    cJSON *copy = cJSON_Duplicate(le->lease, 1);
    if (!copy || fill_spec(copy, &sv)) {
        cJSON_Delete(copy);
        note_error(le, "writing lease: out of memory");
        return FAILED;
    }
    enum outcome out = put_lease(le, copy, ours);
    cJSON_Delete(copy);
    return out;
}

/* client-go's fast path: a leader renews the Lease it wrote last without
 * reading it first. 1 when that worked. */
static int renew_cached(struct leader_elector *le)
{
    struct lease_view v;
    read_lease(le->lease, &v);
    if (v.malformed || strcmp(v.holder, le->identity) != 0)
        return 0;
    struct spec_values sv = {le->identity, le->lease_s, v.transitions, 0};
    cJSON *copy = cJSON_Duplicate(le->lease, 1);
    if (!copy || fill_spec(copy, &sv)) {
        cJSON_Delete(copy);
        return 0;
    }
    struct call c;
    lease_call(le, "PUT", le->object_path, copy, &c);
    cJSON_Delete(copy);
    int ok = c.obj != NULL;
    if (ok) {
        keep_lease(le, c.obj);
        c.obj = NULL;
    } else {
        log_warn("leader election %s/%s: renewing lease: %s (reading it again)", le->ns, le->name, call_error(&c));
    }
    call_free(&c);
    return ok;
}

static enum outcome try_acquire_or_renew(struct leader_elector *le)
{
    if (le->leading && le->lease && renew_cached(le))
        return HELD;
    struct call c;
    lease_call(le, "GET", le->object_path, NULL, &c);
    if (c.status == 404) {
        call_free(&c);
        stop_leading(le, LOG_ERROR, "the lease was deleted");
        return create_lease(le);
    }
    if (!c.obj) {
        enum outcome out = FAILED;
        if (c.status >= 200 && c.status < 300) {
            /* Unreadable: we cannot know it is ours, so it is not. */
            log_warn("leader election %s/%s: %s; treating the lease as held by someone else", le->ns, le->name,
                     call_error(&c));
            set_view(le, VIEW_FOLLOWER, "(malformed lease)", "");
            out = OTHER;
        } else {
            note_error(le, "reading lease: %s", call_error(&c));
        }
        call_free(&c);
        return out;
    }
    keep_lease(le, c.obj);
    c.obj = NULL;
    call_free(&c);
    return consider_lease(le);
}

/* ---- the thread ---- */

/* The started callback, until it succeeds once in this term. */
static void run_started(struct leader_elector *le)
{
    if (le->callbacks.started && le->started_pending)
        le->started_pending = le->callbacks.started(le->callbacks.ctx) != 0;
}

static void start_leading(struct leader_elector *le)
{
    if (!le->leading) {
        le->leading = 1;
        le->started_pending = 1;
        /* The callback (routing to this replica) first, then decisions. */
        run_started(le);
        atomic_store(le->is_leader, 1);
        log_info("leader election %s/%s: acquired the lease as %s; now leader", le->ns, le->name, le->identity);
    } else {
        run_started(le); /* a retry, when it failed before */
    }
    set_view(le, VIEW_LEADER, "", "");
}

static void stop_leading(struct leader_elector *le, enum log_level level, const char *why)
{
    if (!le->leading)
        return;
    atomic_store(le->is_leader, 0); /* first: stop deciding, then talk */
    le->leading = 0;
    le->started_pending = 0;
    log_msg(level, "leader election %s/%s: no longer leader: %s", le->ns, le->name, why);
    if (le->callbacks.stopped)
        le->callbacks.stopped(le->callbacks.ctx);
}

static void check_deadline(struct leader_elector *le)
{
    if (le->leading && clock_monotonic_ns() - le->last_renew_ns >= le->deadline_ns) {
        char why[96];
        snprintf(why, sizeof why, "no successful renewal for %lld ms (renew deadline)",
                 (long long)(le->deadline_ns / NS_PER_MS));
        stop_leading(le, LOG_ERROR, why);
        pthread_mutex_lock(&le->mu);
        le->view = VIEW_ERROR;
        snprintf(le->view_error, sizeof le->view_error, "lost leadership: %s", why);
        pthread_mutex_unlock(&le->mu);
    }
}

static uint64_t next_random(struct leader_elector *le)
{
    /* xorshift64: jitter needs spread between processes, not quality. */
    le->rng ^= le->rng << 13;
    le->rng ^= le->rng >> 7;
    le->rng ^= le->rng << 17;
    return le->rng;
}

/* A leader waits a retry period but wakes for its deadline. A follower
 * looks twice as often (a released Lease is taken within about half a
 * retry period; one GET each time) and adds up to 20% so candidates started
 * together drift apart. How soon it may take over an expired lease does not
 * depend on it: that is measured from when it saw the record change. */
static int64_t next_wait_ns(struct leader_elector *le)
{
    if (le->leading) {
        int64_t left = le->last_renew_ns + le->deadline_ns - clock_monotonic_ns();
        return left < le->retry_ns ? (left > 0 ? left : 0) : le->retry_ns;
    }
    int64_t base = le->retry_ns / 2;
    uint64_t extra = (uint64_t)base / 5;
    return base + (extra ? (int64_t)(next_random(le) % (extra + 1)) : 0);
}

/* Sleep up to wait_ns, waking early on stop. 1 when stopping. */
static int wait_or_stop(struct leader_elector *le, int64_t wait_ns)
{
    struct timespec until = clock_monotonic_after(wait_ns);
    pthread_mutex_lock(&le->mu);
    while (!le->stopping) {
        if (pthread_cond_timedwait(&le->wake, &le->mu, &until) != 0)
            break; /* ETIMEDOUT (or an error: do not spin) */
    }
    int stopping = le->stopping;
    pthread_mutex_unlock(&le->mu);
    return stopping;
}

static void run_round(struct leader_elector *le)
{
    check_deadline(le);
    if (stand_aside(le))
        return;
    int64_t start = clock_monotonic_ns();
    switch (try_acquire_or_renew(le)) {
    case HELD:
        le->last_renew_ns = start;
        start_leading(le);
        break;
    case OTHER:
        stop_leading(le, LOG_ERROR, "the lease is held by another candidate");
        break;
    case FAILED:
        check_deadline(le);
        break;
    }
}

/* Hand the lease back so a follower need not wait for it to expire:
 * no holder, a 1 s duration, same transitions (client-go's release). */
static void release_lease(struct leader_elector *le)
{
    struct lease_view v;
    read_lease(le->lease, &v);
    if (v.malformed || strcmp(v.holder, le->identity) != 0)
        return;
    struct spec_values sv = {"", 1, v.transitions, 1};
    le->releasing = 1;
    cJSON *copy = cJSON_Duplicate(le->lease, 1);
    struct call c;
    memset(&c, 0, sizeof c);
    if (copy && !fill_spec(copy, &sv))
        lease_call(le, "PUT", le->object_path, copy, &c);
    cJSON_Delete(copy);
    if (c.obj) {
        log_info("leader election %s/%s: released the lease", le->ns, le->name);
        keep_lease(le, c.obj); /* no longer ours: a later release has nothing to do */
        c.obj = NULL;
    } else {
        log_warn("leader election %s/%s: releasing the lease: %s (followers wait for it to expire)", le->ns, le->name,
                 call_error(&c));
    }
    call_free(&c);
    le->releasing = 0;
}

/* The caller's may_lead says this replica cannot serve (e.g. its informers
 * have not synced): it does not campaign, and a leader stops deciding and
 * hands the Lease back at once so a replica that can serve takes over
 * (rather than renewing a Lease it cannot use). 1 when standing aside. */
static int stand_aside(struct leader_elector *le)
{
    if (!le->callbacks.may_lead)
        return 0;
    char why[384] = "";
    if (le->callbacks.may_lead(le->callbacks.ctx, why, sizeof why))
        return 0;
    if (!why[0])
        snprintf(why, sizeof why, "not ready to serve");
    if (le->leading) {
        char msg[sizeof why + 32];
        snprintf(msg, sizeof msg, "not ready to serve (%s)", why);
        stop_leading(le, LOG_ERROR, msg);
        if (le->lease)
            release_lease(le);
    }
    pthread_mutex_lock(&le->mu);
    if (le->view != VIEW_ASIDE)
        log_warn("leader election %s/%s: not campaigning until this replica is ready: %s", le->ns, le->name, why);
    le->view = VIEW_ASIDE;
    snprintf(le->view_error, sizeof le->view_error, "%s", why);
    pthread_mutex_unlock(&le->mu);
    return 1;
}

static void *election_thread(void *arg)
{
    struct leader_elector *le = arg;
    log_info("leader election %s/%s: started as %s", le->ns, le->name, le->identity);
    /* This process starts as a follower: take back what a previous run in
     * the same pod may have left (a crash skips stop_leading). */
    if (le->callbacks.stopped)
        le->callbacks.stopped(le->callbacks.ctx);
    do {
        run_round(le);
    } while (!wait_or_stop(le, next_wait_ns(le)));
    stop_leading(le, LOG_INFO, "stopping");
    if (le->lease)
        release_lease(le);
    return NULL;
}

/* ---- start and stop ---- */

/* Lease names and namespaces are DNS names; checking keeps paths clean. */
static int valid_dns_name(const char *s)
{
    if (!s || !*s || strlen(s) > 253)
        return 0;
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return 0;
    }
    return 1;
}

static char *check_config(const struct leader_config *cfg, const atomic_int *is_leader)
{
    const char *why = NULL;
    if (!cfg || !is_leader)
        why = "no configuration";
    else if (!valid_dns_name(cfg->namespace_))
        why = "the lease namespace must be a DNS name";
    else if (!valid_dns_name(cfg->name))
        why = "the lease name must be a DNS name";
    else if (!cfg->identity || !*cfg->identity)
        why = "the identity must not be empty";
    else if (cfg->lease_duration_ms < 1000 || cfg->lease_duration_ms > MAX_DURATION_S * 1000)
        why = "the lease duration must be at least 1 s";
    else if (cfg->renew_deadline_ms >= cfg->lease_duration_ms / 1000 * 1000)
        why = "the renew deadline must be shorter than the lease duration (whole seconds)";
    else if (cfg->retry_period_ms <= 0 || cfg->retry_period_ms >= cfg->renew_deadline_ms ||
             cfg->retry_period_ms * 6 >= cfg->renew_deadline_ms * 5)
        why = "the retry period (with 20% jitter) must be shorter than the renew deadline";
    return why ? strbuf_format("leader election: %s", why) : NULL;
}

static void elector_free(struct leader_elector *le)
{
    if (!le)
        return;
    kube_client_free(le->client);
    cJSON_Delete(le->lease);
    free(le->observed_spec);
    free(le->ns);
    free(le->name);
    free(le->identity);
    free(le->collection_path);
    free(le->object_path);
    pthread_cond_destroy(&le->wake);
    pthread_mutex_destroy(&le->mu);
    free(le);
}

static int init_sync(struct leader_elector *le)
{
    /* Waits measured on the monotonic clock, like everything else here. */
    if (clock_cond_init(&le->wake))
        return -1;
    if (pthread_mutex_init(&le->mu, NULL)) {
        pthread_cond_destroy(&le->wake);
        return -1;
    }
    return 0;
}

static char *format_path(const char *ns, const char *name)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", ns);
    if (name)
        strbuf_printf(&sb, "/%s", name);
    return strbuf_detach(&sb, NULL);
}

static struct leader_elector *elector_new(const struct leader_config *cfg, atomic_int *is_leader)
{
    struct leader_elector *le = calloc(1, sizeof *le);
    if (!le)
        return NULL;
    if (init_sync(le)) {
        free(le);
        return NULL;
    }
    le->ns = strdup(cfg->namespace_);
    le->name = strdup(cfg->name);
    le->identity = strdup(cfg->identity);
    le->collection_path = format_path(cfg->namespace_, NULL);
    le->object_path = format_path(cfg->namespace_, cfg->name);
    if (!le->ns || !le->name || !le->identity || !le->collection_path || !le->object_path) {
        elector_free(le);
        return NULL;
    }
    le->lease_s = cfg->lease_duration_ms / 1000;
    le->deadline_ns = cfg->renew_deadline_ms * NS_PER_MS;
    le->retry_ns = cfg->retry_period_ms * NS_PER_MS;
    le->is_leader = is_leader;
    le->rng = (uint64_t)real_us() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)le;
    if (!le->rng)
        le->rng = 0x9e3779b97f4a7c15u;
    return le;
}

struct leader_elector *leader_start(const struct kube_config *kube, const struct leader_config *cfg,
                                    atomic_int *is_leader, char **err)
{
    return leader_start_with(kube, cfg, is_leader, NULL, err);
}

struct leader_elector *leader_start_with(const struct kube_config *kube, const struct leader_config *cfg,
                                         atomic_int *is_leader, const struct leader_callbacks *callbacks, char **err)
{
    char *scratch = NULL;
    if (!err)
        err = &scratch; /* the caller does not want the message */
    char *bad = check_config(cfg, is_leader);
    if (bad || !kube) {
        *err = bad ? bad : strbuf_format("leader election: no API server configuration");
        return NULL;
    }
    atomic_store(is_leader, 0);
    struct leader_elector *le = elector_new(cfg, is_leader);
    if (!le) {
        *err = strbuf_format("leader election: out of memory");
        return NULL;
    }
    if (callbacks)
        le->callbacks = *callbacks;
    char *why = NULL;
    le->client = kube_client_new(kube, &why);
    if (!le->client) {
        *err = strbuf_format("leader election: %s", why ? why : "cannot make an API client");
        free(why);
        elector_free(le);
        return NULL;
    }
    if (pthread_create(&le->thread, NULL, election_thread, le)) {
        *err = strbuf_format("leader election: cannot start its thread");
        elector_free(le);
        return NULL;
    }
    return le;
}

void leader_stop(struct leader_elector *le)
{
    if (!le)
        return;
    pthread_mutex_lock(&le->mu);
    le->stopping = 1;
    pthread_cond_broadcast(&le->wake);
    pthread_mutex_unlock(&le->mu);
    pthread_join(le->thread, NULL);
    elector_free(le);
}

/* guard.c - connection, time, memory and path limits. See guard.h. */
#include "extender/serve/guard.h"
#include "lib/ascii.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Descriptors kept for everything but client connections: listeners,
 * epoll sets, API watches, certificate reloads, logs. */
#define FD_RESERVE 256
/* The reaper looks at most this often, and at least every tenth of the
 * read timeout, so a deadline is enforced within a tick of passing; and at
 * least every 100 ms, so a client waiting at a full listener is let in
 * within about that (make_room_locked). */
#define REAPER_TICK_MIN_NS (50 * NS_PER_MS)
#define REAPER_TICK_MAX_NS (100 * NS_PER_MS)
/* A connection is closed to make room only once it has waited this long
 * for its request (half the read timeout when that is shorter): a client
 * that has just connected, or just had an answer, gets time to send. */
#define EVICT_GRACE_NS (1000 * NS_PER_MS)
/* A body's first buffer; later ones double, up to what the body may hold. */
#define BODY_MIN_CAPACITY 4096

struct guard_conn {
    int fd; /* our dup() of the connection's socket */
    int64_t timeout_ns;
    atomic_int_fast64_t deadline_ns; /* 0: not waiting for a request */
    bool bad_path;                   /* connection thread only */
    bool evicted;                    /* shut down to make room; under the lock */
    struct guard_pool *pool;
    struct guard_conn *prev, *next;
};

/* One listener's connections (guard_daemon_options), counted under the
 * guard's lock. */
struct guard_pool {
    struct guard *g;
    int listen_fd;     /* -1 until guard_listener_started */
    unsigned open;     /* connections libmicrohttpd holds */
    unsigned evicting; /* of them, shut down to make room and not closed yet */
};

struct guard {
    struct guard_config cfg;
    pthread_mutex_t lock; /* the registry, the pools and stop */
    pthread_cond_t wake;
    struct guard_conn *conns;
    struct guard_pool pools[GUARD_MAX_LISTENERS];
    atomic_bool refuse_new; /* draining */
    bool stop;
    bool reaper_started;
    pthread_t reaper;
};

/* Process-wide: one budget for every listener's bodies, and the metrics. */
static atomic_int_fast64_t body_bytes, body_budget;
static atomic_uint_fast64_t open_connections, accepted_connections, deadline_closes, evictions;

/* ---- descriptors ---------------------------------------------------------- */

/* Each connection holds two descriptors (its socket and the guard's dup).
 * The soft limit is raised towards the hard one; when even that is too low
 * the connection limit comes down to fit, so a flood meets a clean refusal
 * from libmicrohttpd rather than EMFILE everywhere (API watches included). */
static void fit_descriptors(struct guard_config *cfg)
{
    uint64_t per_connection = 2ull * (cfg->listeners > 0 ? (unsigned)cfg->listeners : 1u);
    uint64_t need = per_connection * cfg->max_connections + FD_RESERVE;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? (rlim_t)need : rl.rlim_max;
        struct rlimit raised = {want, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            rl.rlim_cur = want;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    uint64_t fit = rl.rlim_cur > FD_RESERVE ? (rl.rlim_cur - FD_RESERVE) / per_connection : 1;
    log_warn("the open-file limit (%llu) leaves room for %llu connections per listener, not --max-connections %u",
             (unsigned long long)rl.rlim_cur, (unsigned long long)fit, cfg->max_connections);
    cfg->max_connections = fit ? (unsigned)fit : 1;
}

/* ---- connections ---------------------------------------------------------- */

static struct guard_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void arm(struct guard_conn *gc)
{
    atomic_store(&gc->deadline_ns, clock_monotonic_ns() + gc->timeout_ns);
}

static void link_conn(struct guard *g, struct guard_conn *gc)
{
    pthread_mutex_lock(&g->lock);
    gc->pool->open++;
    gc->prev = NULL;
    gc->next = g->conns;
    if (g->conns)
        g->conns->prev = gc;
    g->conns = gc;
    pthread_mutex_unlock(&g->lock);
}

static void unlink_conn(struct guard *g, struct guard_conn *gc)
{
    pthread_mutex_lock(&g->lock);
    gc->pool->open--;
    if (gc->evicted)
        gc->pool->evicting--;
    if (gc->prev)
        gc->prev->next = gc->next;
    else
        g->conns = gc->next;
    if (gc->next)
        gc->next->prev = gc->prev;
    pthread_mutex_unlock(&g->lock);
}

/* A connection the guard cannot watch (no memory, no descriptor for the
 * dup) is not served: it would escape the read deadline. */
static struct guard_conn *watch_connection(struct guard_pool *pool, struct MHD_Connection *conn)
{
    struct guard *g = pool->g;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    if (fd >= 0 && atomic_load(&g->refuse_new)) {
        shutdown(fd, SHUT_RDWR);
        return NULL;
    }
    struct guard_conn *gc = fd >= 0 ? calloc(1, sizeof(*gc)) : NULL;
    if (gc && (gc->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
        gc->timeout_ns = g->cfg.read_timeout_ns;
        gc->pool = pool;
        arm(gc);
        link_conn(g, gc);
        atomic_fetch_add(&open_connections, 1);
        atomic_fetch_add(&accepted_connections, 1);
        return gc;
    }
    log_warn("refusing a connection: %s", fd < 0 ? "no socket" : gc ? strerror(errno) : "out of memory");
    free(gc);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct guard_pool *pool = cls;
    struct guard *g = pool->g;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = watch_connection(pool, conn);
        return;
    }
    struct guard_conn *gc = *socket_context;
    if (!gc)
        return;
    unlink_conn(g, gc);
    close(gc->fd);
    free(gc);
    *socket_context = NULL;
    atomic_fetch_sub(&open_connections, 1);
}

bool guard_path_has_control(const char *uri)
{
    for (const char *p = uri; *p && *p != '?'; p++) {
        if (ascii_is_control((unsigned char)*p))
            return true;
        if (*p == '%') {
            int hi = ascii_hex_value(p[1]), lo = hi >= 0 ? ascii_hex_value(p[2]) : -1;
            if (lo >= 0 && ascii_is_control((unsigned char)(hi * 16 + lo)))
                return true;
        }
    }
    return false;
}

/* Called with the raw request target before libmicrohttpd decodes it; the
 * verdict waits on the connection until the request is handled. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    struct guard_conn *gc = conn_of(conn);
    if (gc)
        gc->bad_path = guard_path_has_control(uri);
    return NULL;
}

bool guard_path_refused(struct MHD_Connection *conn)
{
    struct guard_conn *gc = conn_of(conn);
    return gc && gc->bad_path;
}

void guard_request_received(struct MHD_Connection *conn)
{
    struct guard_conn *gc = conn_of(conn);
    if (gc)
        atomic_store(&gc->deadline_ns, 0);
}

void guard_request_done(struct MHD_Connection *conn)
{
    struct guard_conn *gc = conn_of(conn);
    if (gc)
        arm(gc);
}

void guard_daemon_options(struct guard *g, int slot, struct MHD_OptionItem opts[GUARD_MHD_OPTIONS])
{
    struct guard_pool *pool = &g->pools[slot >= 0 && slot < GUARD_MAX_LISTENERS ? slot : 0];
    opts[0] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)g->cfg.max_connections, NULL};
    opts[1] =
        (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)g->cfg.max_connections_per_ip, NULL};
    opts[2] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, pool};
    opts[3] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, g};
    opts[4] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

void guard_listener_started(struct guard *g, int slot, int listen_fd)
{
    if (slot < 0 || slot >= GUARD_MAX_LISTENERS)
        return;
    pthread_mutex_lock(&g->lock);
    g->pools[slot].listen_fd = listen_fd;
    pthread_mutex_unlock(&g->lock);
}

/* ---- the reaper ----------------------------------------------------------- */

/* Shut down (not close: the descriptor is still libmicrohttpd's to close)
 * every connection past its deadline; libmicrohttpd then sees the socket
 * end and closes the connection the usual way. Under the registry lock, so
 * no connection is freed meanwhile. */
static unsigned reap_locked(struct guard *g, int64_t now)
{
    unsigned closed = 0;
    for (struct guard_conn *gc = g->conns; gc; gc = gc->next) {
        int64_t deadline = atomic_load(&gc->deadline_ns);
        if (deadline && deadline <= now) {
            atomic_store(&gc->deadline_ns, 0);
            shutdown(gc->fd, SHUT_RDWR);
            closed++;
        }
    }
    return closed;
}

/* Connections accepted by the kernel that libmicrohttpd has not taken yet
 * (it stops accepting at its connection limit): Linux reports a listening
 * socket's accept queue in tcpi_unacked. UINT_MAX when unknown. */
static unsigned accept_queue(int listen_fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(listen_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_state != TCP_LISTEN)
        return UINT_MAX;
    return ti.tcpi_unacked;
}

/* A connection that may be closed to make room, with its deadline when
 * looked at (the connection's thread may change it meanwhile). */
struct candidate {
    int64_t deadline_ns;
    struct guard_conn *gc;
};

static int by_deadline(const void *a, const void *b)
{
    int64_t x = ((const struct candidate *)a)->deadline_ns, y = ((const struct candidate *)b)->deadline_ns;
    return x < y ? -1 : x > y;
}

/* How many of pool's connections to close so clients waiting in the accept
 * queue get in: none while the listener is below its limit (libmicrohttpd
 * splits --max-connections among its threads, hence the slack), nobody
 * waits, or the server drains (the daemons stop and close the listening
 * socket while the reaper still runs). */
static unsigned room_wanted(const struct guard *g, const struct guard_pool *pool)
{
    unsigned live = pool->open - pool->evicting, limit = g->cfg.max_connections;
    if (pool->listen_fd < 0 || live + limit / 16 < limit || atomic_load(&g->refuse_new))
        return 0; /* draining: what waits is closed on acceptance anyway */
    unsigned waiting = accept_queue(pool->listen_fd);
    if (waiting == UINT_MAX) /* unknown: one at a time, at the limit only */
        waiting = live >= limit ? 1 : 0;
    return waiting < live ? waiting : live;
}

/* A full listener still admits new clients: as many connections as wait to
 * be accepted are shut down, those that have waited longest for a request
 * first (a trickling client, an idle keep-alive one), never one whose
 * request is being answered nor one within EVICT_GRACE_NS of being ready
 * for its request. Deadlines differ by when the wait began (one timeout for
 * all), so the earliest deadline is the longest wait. */
static unsigned make_room_locked(struct guard *g, struct guard_pool *pool, int64_t now)
{
    unsigned want = room_wanted(g, pool);
    if (!want)
        return 0;
    int64_t grace = g->cfg.read_timeout_ns / 2 < EVICT_GRACE_NS ? g->cfg.read_timeout_ns / 2 : EVICT_GRACE_NS;
    struct candidate *cand = malloc((size_t)pool->open * sizeof(*cand));
    if (!cand)
        return 0;
    size_t n = 0;
    for (struct guard_conn *gc = g->conns; gc && n < pool->open; gc = gc->next) {
        int64_t deadline = atomic_load(&gc->deadline_ns);
        if (gc->pool == pool && !gc->evicted && deadline && deadline - gc->timeout_ns <= now - grace)
            cand[n++] = (struct candidate){deadline, gc};
    }
    qsort(cand, n, sizeof(*cand), by_deadline);
    unsigned closed = 0;
    for (size_t i = 0; i < n && closed < want; i++) {
        /* Only if it still waits as it did when looked at: a request that
         * has arrived whole since is answered, not cut off. */
        int_fast64_t expected = cand[i].deadline_ns;
        if (!atomic_compare_exchange_strong(&cand[i].gc->deadline_ns, &expected, 0))
            continue;
        cand[i].gc->evicted = true;
        shutdown(cand[i].gc->fd, SHUT_RDWR);
        pool->evicting++;
        closed++;
    }
    free(cand);
    return closed;
}

static int64_t reaper_tick_ns(const struct guard *g)
{
    int64_t tick = g->cfg.read_timeout_ns / 10;
    return tick < REAPER_TICK_MIN_NS ? REAPER_TICK_MIN_NS : tick > REAPER_TICK_MAX_NS ? REAPER_TICK_MAX_NS : tick;
}

static void *reaper_main(void *arg)
{
    struct guard *g = arg;
    int64_t tick = reaper_tick_ns(g);
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until = clock_monotonic_after(tick);
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
        if (g->stop)
            break;
        int64_t now = clock_monotonic_ns();
        unsigned closed = reap_locked(g, now), evicted = 0;
        for (int i = 0; i < GUARD_MAX_LISTENERS; i++)
            evicted += make_room_locked(g, &g->pools[i], now);
        if (evicted) {
            atomic_fetch_add(&evictions, evicted);
            pthread_mutex_unlock(&g->lock);
            log_warn("a listener is at --max-connections with clients waiting: closed %u connection%s that had waited "
                     "longest for a request",
                     evicted, evicted == 1 ? "" : "s");
            pthread_mutex_lock(&g->lock);
        }
        if (closed) {
            atomic_fetch_add(&deadline_closes, closed);
            pthread_mutex_unlock(&g->lock);
            log_warn("closed %u connection%s that did not send a whole request within --read-timeout", closed,
                     closed == 1 ? "" : "s");
            pthread_mutex_lock(&g->lock);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

struct guard *guard_start(const struct guard_config *cfg, char **err)
{
    struct guard *g = calloc(1, sizeof(*g));
    if (!g) {
        *err = strdup("out of memory");
        return NULL;
    }
    g->cfg = *cfg;
    fit_descriptors(&g->cfg);
    for (int i = 0; i < GUARD_MAX_LISTENERS; i++)
        g->pools[i] = (struct guard_pool){.g = g, .listen_fd = -1};
    atomic_store(&body_budget, cfg->body_budget);
    pthread_mutex_init(&g->lock, NULL);
    clock_cond_init(&g->wake);
    if (pthread_create(&g->reaper, NULL, reaper_main, g) != 0) {
        guard_stop(g);
        *err = strdup("cannot start the connection reaper thread");
        return NULL;
    }
    g->reaper_started = true;
    return g;
}

void guard_refuse_new(struct guard *g)
{
    atomic_store(&g->refuse_new, true);
}

void guard_stop(struct guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    if (g->reaper_started)
        pthread_join(g->reaper, NULL);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* ---- bodies --------------------------------------------------------------- */

/* Take between least and most bytes of the budget, as many as it has left;
 * the number taken, or -1 when not even least is left. */
static int64_t budget_take(int64_t least, int64_t most)
{
    int64_t used = atomic_load(&body_bytes), n;
    do {
        int64_t left = atomic_load(&body_budget) - used;
        if (left < least)
            return -1;
        n = left < most ? left : most;
    } while (!atomic_compare_exchange_weak(&body_bytes, &used, used + n));
    return n;
}

static void budget_give(int64_t n)
{
    atomic_fetch_sub(&body_bytes, n);
}

enum guard_take guard_body_admit(const struct guard *g, uint64_t announced)
{
    if (announced > (uint64_t)g->cfg.max_body)
        return GUARD_TOO_LARGE;
    if ((int64_t)announced > atomic_load(&body_budget) - atomic_load(&body_bytes))
        return GUARD_OVER_BUDGET;
    return GUARD_TAKEN;
}

/* Doubling keeps copies few (and glibc moves large blocks with mremap),
 * but never past what this body may hold: its announced length, else the
 * largest body allowed. */
static size_t grown_capacity(size_t cap, size_t need, size_t most)
{
    size_t want = cap < BODY_MIN_CAPACITY / 2 ? BODY_MIN_CAPACITY : cap * 2;
    if (want > most)
        want = most;
    return want < need ? need : want;
}

/* The budget counts the bytes a buffer can hold (its terminating NUL is
 * the buffer's business), so --body-budget equal to --max-body-bytes admits
 * one body of the largest size. */
static int64_t room(size_t cap)
{
    return cap ? (int64_t)cap - 1 : 0;
}

enum guard_take guard_body_append(const struct guard *g, struct strbuf *body, int64_t *charged, uint64_t announced,
                                  const char *data, size_t n)
{
    size_t max_body = (size_t)g->cfg.max_body;
    if (body->len > max_body || n > max_body - body->len)
        return GUARD_TOO_LARGE;
    size_t need = body->len + n + 1;
    if (need > body->cap) {
        size_t most = (announced && announced <= max_body ? (size_t)announced : max_body) + 1;
        size_t want = grown_capacity(body->cap, need, most);
        /* When the budget cannot double the buffer, it takes what is left
         * (at least what this chunk needs) rather than growing chunk by
         * chunk, which would copy the buffer again for every chunk. */
        int64_t delta = budget_take(room(need) - room(body->cap), room(want) - room(body->cap));
        if (delta < 0)
            return GUARD_OVER_BUDGET;
        want = body->cap + (size_t)delta + (body->cap ? 0 : 1);
        if (strbuf_reserve_exact(body, want - body->len - 1) != 0) {
            budget_give(delta);
            return GUARD_NO_MEMORY;
        }
        *charged += delta;
    }
    strbuf_append(body, data, n);
    return GUARD_TAKEN;
}

void guard_body_release(struct strbuf *body, int64_t *charged)
{
    budget_give(*charged);
    *charged = 0;
    strbuf_free(body);
}

/* ---- metrics -------------------------------------------------------------- */

void guard_render_metrics(struct strbuf *out)
{
    strbuf_printf(out,
                  "# HELP gqa_http_connections Client connections open on the listeners.\n"
                  "# TYPE gqa_http_connections gauge\ngqa_http_connections %llu\n"
                  "# HELP gqa_http_connections_accepted_total Client connections taken on the listeners (a client "
                  "that keeps its connection alive adds one, not one per request).\n"
                  "# TYPE gqa_http_connections_accepted_total counter\ngqa_http_connections_accepted_total %llu\n"
                  "# HELP gqa_http_connections_timed_out_total Connections closed because a request did not arrive "
                  "whole within --read-timeout.\n"
                  "# TYPE gqa_http_connections_timed_out_total counter\ngqa_http_connections_timed_out_total %llu\n"
                  "# HELP gqa_http_connections_evicted_total Connections closed at --max-connections to let waiting "
                  "clients in (those that had waited longest for a request).\n"
                  "# TYPE gqa_http_connections_evicted_total counter\ngqa_http_connections_evicted_total %llu\n"
                  "# HELP gqa_request_body_bytes Memory held by request bodies in flight.\n"
                  "# TYPE gqa_request_body_bytes gauge\ngqa_request_body_bytes %lld\n"
                  "# HELP gqa_request_body_budget_bytes The most request bodies in flight may hold (--body-budget).\n"
                  "# TYPE gqa_request_body_budget_bytes gauge\ngqa_request_body_budget_bytes %lld\n",
                  (unsigned long long)atomic_load(&open_connections),
                  (unsigned long long)atomic_load(&accepted_connections),
                  (unsigned long long)atomic_load(&deadline_closes), (unsigned long long)atomic_load(&evictions),
                  (long long)atomic_load(&body_bytes), (long long)atomic_load(&body_budget));
}

/* server.c - libmicrohttpd listeners. See server.h. */
#include "extender/serve/server.h"
#include "extender/serve/guard.h"
#include "extender/serve/router.h"
#include "extender/tlspolicy.h"
#include "extender/workers.h"
#include "kube/tlscreds.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct server;

struct listener {
    struct server *server;
    struct MHD_Daemon *daemon;
    int slot; /* the guard's pool (guard.h) */
    int tls;
    int require_client_cert;
    int probes_only; /* --listen-probes: health and metrics, on one thread */
};

struct server {
    struct app *app;
    struct guard *guard; /* connection, deadline, body budget and path limits */
    struct listener http, https, probes;
    char *ca_pem;
    char *tls_priorities; /* tlspolicy.c: versions, suites, groups */
    atomic_int in_flight;
    struct workers *workers; /* decisions (router_may_block) run here; NULL: inline */
};

struct request_ctx {
    struct server *server;
    struct listener *listener;
    struct strbuf body;
    int64_t body_charged; /* bytes of the body budget the buffer holds (guard.c) */
    uint64_t announced;   /* Content-Length, 0 when absent */
    int64_t started_ns;
    enum metric_verb verb;
    int status;
    uint64_t answer_bytes; /* of the body queued, for the metrics */
    int too_large;
    int over_budget;
    int answered; /* a response was queued early (413, 403, 400, 503) */
    /* Handed to a decision worker: the connection is suspended meanwhile. */
    struct MHD_Connection *conn;
    char *method, *url;
    struct http_response worker_resp;
    atomic_int worker_done;
    int64_t queued_ns; /* when it was handed to the decision workers */
};

static double seconds_since(int64_t t0_ns)
{
    return (double)(clock_monotonic_ns() - t0_ns) / 1e9;
}

/* A body in pieces (http.h) goes out as an iovec response: the pieces that
 * point into the request body are sent from there (ctx->body lives until
 * on_completed, after the answer), the framing text is freed with the
 * response. MHD copies the iovec array itself. */
static struct MHD_Response *pieces_response(struct http_response *resp)
{
    if (resp->npieces > UINT_MAX)
        return NULL;
    struct MHD_IoVec *iov = calloc(resp->npieces ? resp->npieces : 1, sizeof(*iov));
    if (!iov)
        return NULL;
    for (size_t i = 0; i < resp->npieces; i++)
        iov[i] = (struct MHD_IoVec){resp->pieces[i].ptr, resp->pieces[i].len};
    struct MHD_Response *r = MHD_create_response_from_iovec(iov, (unsigned int)resp->npieces, free, resp->body);
    free(iov);
    return r;
}

static uint64_t answer_size(const struct http_response *resp)
{
    if (!resp->pieces)
        return resp->body_len;
    uint64_t n = 0;
    for (size_t i = 0; i < resp->npieces; i++)
        n += resp->pieces[i].len;
    return n;
}

static enum MHD_Result queue(struct MHD_Connection *conn, struct request_ctx *ctx, struct http_response *resp)
{
    ctx->answer_bytes = answer_size(resp);
    struct MHD_Response *r = resp->pieces
                                 ? pieces_response(resp)
                                 : MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    free(resp->pieces);
    resp->pieces = NULL;
    if (!r) {
        free(resp->body);
        return MHD_NO;
    }
    resp->body = NULL;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type ? resp->content_type : CONTENT_JSON);
    if (resp->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
    if (resp->content_security_policy) {
        MHD_add_response_header(r, "Content-Security-Policy", resp->content_security_policy);
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    }
    ctx->status = resp->status;
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned int)resp->status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, struct request_ctx *ctx, int status, const char *msg)
{
    struct http_response resp = {0};
    http_json_error(&resp, status, msg);
    ctx->answered = 1;
    return queue(conn, ctx, &resp);
}

/* Over the body budget: the fault is the load, not this request. */
static enum MHD_Result queue_busy(struct MHD_Connection *conn, struct request_ctx *ctx)
{
    struct http_response resp = {0};
    http_json_error(&resp, 503, "request bodies in flight have used up --body-budget; retry later");
    ctx->answered = 1;
    struct MHD_Response *r = MHD_create_response_from_buffer(resp.body_len, resp.body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(resp.body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_JSON);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    ctx->status = 503;
    ctx->answer_bytes = resp.body_len;
    enum MHD_Result rc = MHD_queue_response(conn, 503, r);
    MHD_destroy_response(r);
    return rc;
}

/* Content-Length against --max-body-bytes and the budget, before any byte
 * of the body is read; nothing is reserved for it (bodies grow as they
 * arrive). */
static enum MHD_Result check_announced(struct MHD_Connection *conn, struct request_ctx *ctx)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl)
        return MHD_YES;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    enum guard_take verdict = errno || *end ? GUARD_TOO_LARGE : guard_body_admit(ctx->server->guard, n);
    if (verdict == GUARD_TOO_LARGE) {
        ctx->too_large = 1;
        return queue_error(conn, ctx, 413, "request body is larger than --max-body-bytes");
    }
    if (verdict == GUARD_OVER_BUDGET) {
        ctx->over_budget = 1;
        return queue_busy(conn, ctx);
    }
    ctx->announced = n;
    return MHD_YES;
}

/* With --tls-client-ca the peer must have presented a client certificate
 * that verifies against that CA (libmicrohttpd requests one but leaves the
 * verdict to us); NULL when it did, else why not. */
static const char *client_cert_refusal(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    return tls_policy_client_refusal(ci ? (gnutls_session_t)ci->tls_session : NULL);
}

/* A large body buffer is touched once, front to back: with transparent huge
 * pages (madvise mode) that is one fault per 2 MB instead of one per 4 KB. */
static void advise_huge(void *p, size_t len)
{
    const uintptr_t page = 4096, huge = (uintptr_t)2 << 20;
    if (len < 2 * huge)
        return;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + len) & ~(page - 1);
    if (b > a)
        madvise((void *)a, (size_t)(b - a), MADV_HUGEPAGE);
}

static enum MHD_Result begin_request(struct listener *l, struct server *s, struct MHD_Connection *conn, void **con_cls)
{
    struct request_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return MHD_NO;
    ctx->server = s;
    ctx->listener = l;
    ctx->verb = VERB_OTHER;
    strbuf_init(&ctx->body);
    ctx->started_ns = clock_monotonic_ns();
    atomic_fetch_add(&s->in_flight, 1);
    *con_cls = ctx;
    const char *refusal = l->require_client_cert ? client_cert_refusal(conn) : NULL;
    if (refusal)
        return queue_error(conn, ctx, 403, refusal);
    if (guard_path_refused(conn))
        return queue_error(conn, ctx, 400, "the request path contains a control character (decoded NUL or similar)");
    return check_announced(conn, ctx);
}

/* The body grows by what arrives, within --max-body-bytes and the budget;
 * past either, the rest is read and dropped and the answer says why. */
static enum MHD_Result take_body(struct request_ctx *ctx, const char *data, size_t *size)
{
    if (!ctx->answered && !ctx->too_large && !ctx->over_budget) {
        size_t cap = ctx->body.cap;
        switch (guard_body_append(ctx->server->guard, &ctx->body, &ctx->body_charged, ctx->announced, data, *size)) {
        case GUARD_TOO_LARGE:
            ctx->too_large = 1;
            guard_body_release(&ctx->body, &ctx->body_charged);
            break;
        case GUARD_OVER_BUDGET:
            ctx->over_budget = 1;
            guard_body_release(&ctx->body, &ctx->body_charged);
            break;
        case GUARD_NO_MEMORY:
            break;
        case GUARD_TAKEN:
            if (ctx->body.cap != cap)
                advise_huge(ctx->body.data, ctx->body.cap);
            break;
        }
    }
    *size = 0;
    return MHD_YES;
}

/* http_request.query: libmicrohttpd has already split and decoded ?a=b&c=d. */
static const char *query_arg(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

int server_decision_queue_size(int decision_queue, unsigned max_connections, int listeners)
{
    int64_t admitted = (int64_t)max_connections * (listeners > 0 ? listeners : 1);
    int64_t size = decision_queue > admitted ? decision_queue : admitted;
    return size > WORKERS_MAX_QUEUE ? WORKERS_MAX_QUEUE : size < 1 ? 1 : (int)size;
}

/* On a decision worker: answer, then let libmicrohttpd send it. A request
 * that waited too long for this worker is answered without deciding
 * (SERVER_DECISION_MAX_WAIT_NS). */
static void run_on_worker(void *arg, bool cancelled)
{
    struct request_ctx *ctx = arg;
    struct http_request req = {
        ctx->method, ctx->url, ctx->body.data, ctx->body.len, NULL, NULL, ctx->queued_ns / NS_PER_MS};
    if (cancelled)
        ctx->verb = router_refuse(&req, &ctx->worker_resp, "the server is shutting down; retry");
    else if (clock_monotonic_ns() - ctx->queued_ns > SERVER_DECISION_MAX_WAIT_NS)
        ctx->verb = router_refuse(&req, &ctx->worker_resp,
                                  "waited more than 2 s for a decision worker (the API server is slow; "
                                  "--decision-workers); not taken, retry");
    else
        ctx->verb = router_dispatch(ctx->server->app, &req, &ctx->worker_resp);
    atomic_store(&ctx->worker_done, 1);
    MHD_resume_connection(ctx->conn);
}

/* Suspend the connection and queue the request for a decision worker, so
 * this listener thread goes back to serving (health endpoints included).
 * The queue holds every connection the listeners admit
 * (server_decision_queue_size): a request waits there for a worker rather
 * than being refused; only a pool that is stopping refuses at once. */
static enum MHD_Result hand_to_worker(struct MHD_Connection *conn, struct request_ctx *ctx, const char *method,
                                      const char *url)
{
    ctx->conn = conn;
    ctx->method = strdup(method);
    ctx->url = strdup(url);
    if (!ctx->method || !ctx->url)
        return queue_error(conn, ctx, 500, "out of memory");
    MHD_suspend_connection(conn);
    ctx->queued_ns = clock_monotonic_ns();
    if (workers_submit(ctx->server->workers, run_on_worker, ctx) != 0) {
        struct http_request req = {method, url, ctx->body.data, ctx->body.len, NULL, NULL, 0};
        ctx->verb =
            router_refuse(&req, &ctx->worker_resp, "no decision worker can take it (the server is stopping); retry");
        atomic_store(&ctx->worker_done, 1);
        MHD_resume_connection(conn);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct listener *l = cls;
    struct request_ctx *ctx = *con_cls;
    if (!ctx)
        return begin_request(l, l->server, conn, con_cls);
    if (*upload_size || ctx->answered)
        return take_body(ctx, upload_data, upload_size);
    guard_request_received(conn);
    if (ctx->too_large)
        return queue_error(conn, ctx, 413, "request body is larger than --max-body-bytes");
    if (ctx->over_budget)
        return queue_busy(conn, ctx);
    if (strbuf_failed(&ctx->body))
        return queue_error(conn, ctx, 500, "out of memory for the request body");
    if (atomic_load(&ctx->worker_done)) { /* resumed: the worker's answer */
        ctx->answered = 1;
        return queue(conn, ctx, &ctx->worker_resp);
    }
    struct http_request req = {method, url, ctx->body.data, ctx->body.len, query_arg, conn, 0};
    struct http_response resp = {0};
    if (l->probes_only) {
        ctx->verb = router_dispatch_probe(ctx->server->app, &req, &resp);
        ctx->answered = 1;
        return queue(conn, ctx, &resp);
    }
    if (ctx->server->workers && router_may_block(ctx->server->app, &req))
        return hand_to_worker(conn, ctx, method, url);
    ctx->verb = router_dispatch(ctx->server->app, &req, &resp);
    ctx->answered = 1;
    return queue(conn, ctx, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    struct request_ctx *ctx = *con_cls;
    if (!ctx)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !ctx->status)
        ctx->status = 499; /* the client went away before an answer */
    metrics_observe_request(ctx->verb, ctx->status, seconds_since(ctx->started_ns), ctx->body.len, ctx->answer_bytes);
    atomic_fetch_sub(&ctx->server->in_flight, 1);
    guard_body_release(&ctx->body, &ctx->body_charged);
    guard_request_done(conn);
    free(ctx->worker_resp.body);
    free(ctx->method);
    free(ctx->url);
    free(ctx);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_vprintf(&sb, fmt, ap);
    while (sb.len && (sb.data[sb.len - 1] == '\n'))
        sb.data[--sb.len] = '\0';
    log_debug("libmicrohttpd: %s", sb.data ? sb.data : "");
    strbuf_free(&sb);
}

static char *read_file(const char *path, char **err)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (strbuf_read_file(&sb, path) != 0) {
        int e = errno;
        strbuf_free(&sb);
        strbuf_printf(&sb, "cannot read %s: %s", path, strerror(e));
        *err = strbuf_detach(&sb, NULL);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

/* "host:port", "[v6]:port" or ":port" (all interfaces). */
static int resolve(const char *spec, struct sockaddr_storage *out, socklen_t *outlen, char **err)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    struct strbuf sb;
    strbuf_init(&sb);
    if (!colon || colon[1] == '\0' || (size_t)(colon - spec) >= sizeof(host))
        goto bad;
    /* getaddrinfo truncates a numeric service past 65535 to 16 bits. */
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || port < 0 || port > 65535)
        goto bad;
    size_t hlen = (size_t)(colon - spec);
    memcpy(host, spec, hlen);
    host[hlen] = '\0';
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        memmove(host, host + 1, hlen - 2);
        host[hlen - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res) != 0 || !res)
        goto bad;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *outlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
bad:
    strbuf_printf(&sb, "cannot use listen address \"%s\" (want HOST:PORT)", spec);
    *err = strbuf_detach(&sb, NULL);
    return -1;
}

/* "[::]" on a host without IPv6 (ipv6.disable=1, some hardened nodes):
 * listen on every IPv4 address instead of failing, and say so. */
static void ipv6_wildcard_fallback(struct sockaddr_storage *sa, socklen_t *salen, const char *addr)
{
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
    if (sa->ss_family != AF_INET6 || !IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
        return;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd >= 0) {
        close(fd);
        return;
    }
    if (errno != EAFNOSUPPORT)
        return;
    in_port_t port = a6->sin6_port;
    struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
    memset(sa, 0, sizeof(*sa));
    a4->sin_family = AF_INET;
    a4->sin_port = port;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    *salen = sizeof(*a4);
    log_warn("%s: this host has no IPv6: listening on 0.0.0.0:%u instead", addr, (unsigned)ntohs(port));
}

/* Why libmicrohttpd could not listen, which it does not say: a plain
 * socket bound to the same address tells (SO_REUSEADDR as libmicrohttpd
 * sets it, so only a live listener makes the port "in use"). */
static const char *why_no_listener(const struct sockaddr *sa, socklen_t salen)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return "no socket could be made";
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, sa, salen);
    int e = errno;
    close(fd);
    if (rc == 0) /* the address itself is fine: the TLS material, or threads */
        return "the listener could not start (bad TLS certificate or key, or out of resources)";
    if (e == EADDRINUSE)
        return "the port is already in use (another process listens on it)";
    if (e == EADDRNOTAVAIL)
        return "the address is not one of this host's";
    if (e == EACCES)
        return "permission denied (a port below 1024 needs privileges)";
    return strerror(e);
}

static int start_listener(struct server *s, struct listener *l, const struct server_config *cfg, const char *addr,
                          char **err)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    if (resolve(addr, &sa, &salen, err) != 0)
        return -1;
    ipv6_wildcard_fallback(&sa, &salen, addr);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
    /* IPv6 sockets are dual-stack (IPV6_V6ONLY off): "[::]:PORT" also takes
     * IPv4 clients as v4-mapped addresses. MHD_USE_IPv6 alone turns
     * V6ONLY on, which would leave IPv4 clients (and IPv4 probes) out. */
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_DUAL_STACK;
    if (l->tls)
        flags |= MHD_USE_TLS;
    l->server = s;
    struct MHD_OptionItem guard_opts[GUARD_MHD_OPTIONS];
    guard_daemon_options(s->guard, l->slot, guard_opts);
    /* The probe listener answers small GETs from memory: one thread. */
    unsigned threads = l->probes_only ? 1u : (unsigned)cfg->threads;
    l->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, l, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_THREAD_POOL_SIZE,
        threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)SERVER_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)SERVER_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_ARRAY, guard_opts,
        /* The options after this point apply to TLS only: for plain HTTP
         * the list ends here. The certificate comes from a callback so a
         * renewed one is served without a restart (tlscreds.c). */
        l->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, tls_creds_retrieve, MHD_OPTION_HTTPS_PRIORITIES,
        s->tls_priorities, s->ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, s->ca_pem, MHD_OPTION_END);
    if (!l->daemon) {
        *err = strbuf_format("cannot listen on %s%s: %s", addr, l->tls ? " with TLS" : "",
                             why_no_listener((struct sockaddr *)&sa, salen));
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    if (di)
        guard_listener_started(s->guard, l->slot, di->listen_fd);
    log_info("listening on %s://%s (%u thread%s)%s", l->tls ? "https" : "http", addr, threads, threads == 1 ? "" : "s",
             l->probes_only ? " for probes and metrics only" : "");
    return 0;
}

static int load_tls(struct server *s, const struct server_config *cfg, char **err)
{
    if (!(s->tls_priorities = tls_policy_priorities(cfg->tls_min_version, cfg->tls_cipher_suites, err)))
        return -1;
    if (tls_creds_init(cfg->tls_cert_file, cfg->tls_key_file, err) != 0)
        return -1;
    if (cfg->tls_client_ca_file && !(s->ca_pem = read_file(cfg->tls_client_ca_file, err)))
        return -1;
    s->https.tls = 1;
    s->https.require_client_cert = s->ca_pem != NULL;
    return 0;
}

static void free_server(struct server *s)
{
    if (s->https.tls)
        tls_creds_shutdown();
    guard_stop(s->guard);
    free(s->tls_priorities);
    free(s->ca_pem);
    free(s);
}

struct server *server_start(const struct server_config *cfg, struct app *app, char **err)
{
    struct server *s = calloc(1, sizeof(*s));
    if (!s) {
        *err = strdup("out of memory");
        return NULL;
    }
    s->app = app;
    int listeners = (cfg->listen_http && *cfg->listen_http) + (cfg->listen_https && *cfg->listen_https);
    int queue = server_decision_queue_size(cfg->decision_queue, cfg->max_connections, listeners);
    if (cfg->decision_workers > 0 && !(s->workers = workers_start(cfg->decision_workers, queue))) {
        *err = strdup("cannot start the decision workers (threads)");
        free(s);
        return NULL;
    }
    bool http = cfg->listen_http && *cfg->listen_http;
    bool https = cfg->listen_https && *cfg->listen_https;
    bool probes = cfg->listen_probes && *cfg->listen_probes;
    struct guard_config gc = {cfg->max_connections, cfg->max_connections_per_ip, cfg->read_timeout_ns,
                              cfg->body_budget,     cfg->max_body_bytes,         (int)http + (int)https + (int)probes};
    if (!(s->guard = guard_start(&gc, err))) {
        free(s);
        return NULL;
    }
    s->http.slot = 0;
    s->https.slot = 1;
    s->probes.slot = 2;
    s->probes.probes_only = 1;
    /* The probe listener first: it never waits behind the extender
     * listeners' clients (server.h). */
    if ((probes && start_listener(s, &s->probes, cfg, cfg->listen_probes, err) != 0) ||
        (http && start_listener(s, &s->http, cfg, cfg->listen_http, err) != 0) ||
        (https && (load_tls(s, cfg, err) != 0 || start_listener(s, &s->https, cfg, cfg->listen_https, err) != 0))) {
        server_drain_and_stop(s, 0);
        return NULL;
    }
    return s;
}

void server_drain_and_stop(struct server *s, int timeout_ms)
{
    if (!s)
        return;
    /* New connections are closed as soon as they are accepted (guard.c).
     * Not MHD_quiesce_daemon: in libmicrohttpd 0.9.75 it races a worker's
     * epoll loop removing the same listen FD and aborts the process. */
    guard_refuse_new(s->guard);
    for (int waited = 0; atomic_load(&s->in_flight) > 0 && waited < timeout_ms; waited += 10) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->in_flight) > 0)
        log_warn("stopping with %d requests still in flight", atomic_load(&s->in_flight));
    /* No connection may stay suspended when a daemon stops: the workers
     * finish what they run and answer what is queued first. */
    workers_stop(s->workers);
    s->workers = NULL;
    if (s->http.daemon)
        MHD_stop_daemon(s->http.daemon);
    if (s->https.daemon)
        MHD_stop_daemon(s->https.daemon);
    if (s->probes.daemon)
        MHD_stop_daemon(s->probes.daemon);
    free_server(s);
}

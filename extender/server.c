/* server.c - libmicrohttpd listeners. See server.h. */
#include "extender/server.h"
#include "extender/guard.h"
#include "extender/router.h"
#include "extender/tlspolicy.h"
#include "kube/tlscreds.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct server;

struct listener {
    struct server *server;
    struct MHD_Daemon *daemon;
    int tls;
    int require_client_cert;
};

struct server {
    struct app *app;
    struct guard *guard; /* connection, deadline, body budget and path limits */
    struct listener http, https;
    char *ca_pem;
    char *tls_priorities; /* tlspolicy.c: versions, suites, groups */
    atomic_int in_flight;
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
    int too_large;
    int over_budget;
    int answered; /* a response was queued early (413, 403, 400, 503) */
};

static double seconds_since(int64_t t0_ns)
{
    return (double)(clock_monotonic_ns() - t0_ns) / 1e9;
}

static enum MHD_Result queue(struct MHD_Connection *conn, struct request_ctx *ctx, struct http_response *resp)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(resp->body);
        return MHD_NO;
    }
    resp->body = NULL;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type ? resp->content_type : CONTENT_JSON);
    if (resp->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
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
        case GUARD_TAKEN:
            break;
        }
    }
    *size = 0;
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
    struct http_request req = {method, url, ctx->body.data, ctx->body.len};
    struct http_response resp = {0};
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
    metrics_observe_request(ctx->verb, ctx->status, seconds_since(ctx->started_ns), ctx->body.len);
    atomic_fetch_sub(&ctx->server->in_flight, 1);
    guard_body_release(&ctx->body, &ctx->body_charged);
    guard_request_done(conn);
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

static int start_listener(struct server *s, struct listener *l, const struct server_config *cfg, const char *addr,
                          char **err)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    if (resolve(addr, &sa, &salen, err) != 0)
        return -1;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (l->tls)
        flags |= MHD_USE_TLS;
    l->server = s;
    struct MHD_OptionItem guard_opts[GUARD_MHD_OPTIONS];
    guard_daemon_options(s->guard, guard_opts);
    l->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, l, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned int)cfg->threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)SERVER_IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVER_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_ARRAY, guard_opts,
        /* The options after this point apply to TLS only: for plain HTTP
         * the list ends here. The certificate comes from a callback so a
         * renewed one is served without a restart (tlscreds.c). */
        l->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, tls_creds_retrieve, MHD_OPTION_HTTPS_PRIORITIES,
        s->tls_priorities, s->ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, s->ca_pem, MHD_OPTION_END);
    if (!l->daemon) {
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "cannot listen on %s%s (address in use, not local, or bad TLS material)", addr,
                      l->tls ? " with TLS" : "");
        *err = strbuf_detach(&sb, NULL);
        return -1;
    }
    log_info("listening on %s://%s (%d threads)", l->tls ? "https" : "http", addr, cfg->threads);
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
    bool http = cfg->listen_http && *cfg->listen_http;
    bool https = cfg->listen_https && *cfg->listen_https;
    struct guard_config gc = {cfg->max_connections, cfg->max_connections_per_ip, cfg->read_timeout_ns,
                              cfg->body_budget,     cfg->max_body_bytes,         (int)http + (int)https};
    if (!(s->guard = guard_start(&gc, err))) {
        free(s);
        return NULL;
    }
    if ((http && start_listener(s, &s->http, cfg, cfg->listen_http, err) != 0) ||
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
    if (s->http.daemon)
        MHD_stop_daemon(s->http.daemon);
    if (s->https.daemon)
        MHD_stop_daemon(s->https.daemon);
    free_server(s);
}

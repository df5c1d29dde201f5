/* fakeapi.c - a scripted HTTP/1.1 server for unit tests. See fakeapi.h. */
#include "tests/unit/fakeapi.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define HOLD_MAX_MS 10000

struct fake_conn {
    int fd;
    char buf[65536];
    size_t have;
};

static struct {
    int fd, port;
    char url[64];
    fake_respond_fn respond;
    void *ctx;
    pthread_t accept_thread;
    pthread_t conns[MAX_CONNS];
    int nconns;
    atomic_int quit;
    atomic_int connections;
    pthread_mutex_t mu; /* guards last and the log */
    struct fake_request last;
    struct fake_request *log;
    size_t nlog;
} srv;

long long fake_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fake_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* 1 readable, 0 timed out, -1 the server is stopping. */
static int wait_readable(struct fake_conn *c, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (atomic_load(&srv.quit))
            return -1;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0)
            return 1;
    }
    return 0;
}

static int fill(struct fake_conn *c)
{
    if (c->have >= sizeof(c->buf) - 1 || wait_readable(c, HOLD_MAX_MS) != 1)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - 1 - c->have, 0);
    if (n <= 0)
        return -1;
    c->have += (size_t)n;
    return 0;
}

static void header_value(const char *headers, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    out[0] = '\0';
    for (const char *line = headers; line; line = strstr(line, "\r\n")) {
        line += line == headers ? 0 : 2;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            size_t len = strcspn(v, "\r");
            snprintf(out, cap, "%.*s", (int)len, v);
            return;
        }
    }
}

static int read_request(struct fake_conn *c, struct fake_request *rq)
{
    char *end;
    while (c->buf[c->have] = '\0', !(end = strstr(c->buf, "\r\n\r\n")))
        if (fill(c) != 0)
            return -1;
    memset(rq, 0, sizeof(*rq));
    size_t header_len = (size_t)(end - c->buf) + 4;
    if (sscanf(c->buf, "%15s %1023s", rq->method, rq->path) != 2)
        return -1;
    end[2] = '\0';
    char length[32];
    header_value(c->buf, "Content-Length", length, sizeof(length));
    header_value(c->buf, "Authorization", rq->auth, sizeof(rq->auth));
    header_value(c->buf, "Content-Type", rq->ctype, sizeof(rq->ctype));
    header_value(c->buf, "Accept", rq->accept, sizeof(rq->accept));
    header_value(c->buf, "User-Agent", rq->agent, sizeof(rq->agent));
    rq->body_len = (size_t)atol(length);
    if (rq->body_len >= sizeof(rq->body))
        return -1;
    while (c->have < header_len + rq->body_len)
        if (fill(c) != 0)
            return -1;
    memcpy(rq->body, c->buf + header_len, rq->body_len);
    memmove(c->buf, c->buf + header_len + rq->body_len, c->have - header_len - rq->body_len);
    c->have -= header_len + rq->body_len;
    return 0;
}

static int send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int fake_reply(struct fake_conn *c, int status, const char *reason, const char *ctype, const char *body)
{
    char head[512];
    int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n", status,
                     reason, ctype, strlen(body));
    return send_all(c->fd, head, (size_t)n) == 0 && send_all(c->fd, body, strlen(body)) == 0 ? 0 : -1;
}

int fake_start_chunked(struct fake_conn *c)
{
    static const char head[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    return send_all(c->fd, head, sizeof(head) - 1);
}

int fake_chunk(struct fake_conn *c, const char *data, size_t len)
{
    char size[32];
    int n = snprintf(size, sizeof(size), "%zx\r\n", len);
    if (send_all(c->fd, size, (size_t)n) != 0 || send_all(c->fd, data, len) != 0 || send_all(c->fd, "\r\n", 2) != 0)
        return -1;
    fake_sleep_ms(10); /* separate TCP segments: the client sees the pieces apart */
    return 0;
}

int fake_chunk_str(struct fake_conn *c, const char *s)
{
    return fake_chunk(c, s, strlen(s));
}

int fake_end_chunked(struct fake_conn *c)
{
    return send_all(c->fd, "0\r\n\r\n", 5);
}

int fake_hold(struct fake_conn *c)
{
    char tmp[256];
    while (wait_readable(c, HOLD_MAX_MS) == 1 && recv(c->fd, tmp, sizeof(tmp), 0) > 0)
        ;
    return -1;
}

static void note(const struct fake_request *rq)
{
    pthread_mutex_lock(&srv.mu);
    srv.last = *rq;
    if (srv.log && srv.nlog < FAKE_LOG_MAX)
        srv.log[srv.nlog++] = *rq;
    pthread_mutex_unlock(&srv.mu);
}

static void *conn_main(void *arg)
{
    struct fake_conn *c = arg;
    struct fake_request *rq = malloc(sizeof(*rq));
    while (rq && read_request(c, rq) == 0) {
        note(rq);
        if (srv.respond(srv.ctx, c, rq) != 0)
            break;
    }
    free(rq);
    close(c->fd);
    free(c);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&srv.quit)) {
        struct pollfd p = {.fd = srv.fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(srv.fd, NULL, NULL);
        struct fake_conn *c = fd >= 0 ? calloc(1, sizeof(*c)) : NULL;
        if (!c || srv.nconns == MAX_CONNS) {
            if (fd >= 0)
                close(fd);
            free(c);
            continue;
        }
        c->fd = fd;
        atomic_fetch_add(&srv.connections, 1);
        if (pthread_create(&srv.conns[srv.nconns], NULL, conn_main, c) == 0)
            srv.nconns++;
        else
            close(fd), free(c);
    }
    return NULL;
}

int fakeapi_start(fake_respond_fn respond, void *ctx)
{
    memset(&srv, 0, sizeof(srv));
    srv.respond = respond;
    srv.ctx = ctx;
    srv.log = calloc(FAKE_LOG_MAX, sizeof(*srv.log));
    pthread_mutex_init(&srv.mu, NULL);
    srv.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (!srv.log || srv.fd < 0 || bind(srv.fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(srv.fd, 16) != 0 ||
        getsockname(srv.fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    srv.port = ntohs(a.sin_port);
    snprintf(srv.url, sizeof(srv.url), "http://127.0.0.1:%d/", srv.port);
    return pthread_create(&srv.accept_thread, NULL, accept_main, NULL) == 0 ? 0 : -1;
}

void fakeapi_stop(void)
{
    atomic_store(&srv.quit, 1);
    pthread_join(srv.accept_thread, NULL);
    for (int i = 0; i < srv.nconns; i++)
        pthread_join(srv.conns[i], NULL);
    close(srv.fd);
    pthread_mutex_destroy(&srv.mu);
    free(srv.log);
    srv.log = NULL;
}

int fakeapi_port(void)
{
    return srv.port;
}

const char *fakeapi_url(void)
{
    return srv.url;
}

struct fake_request fakeapi_last(void)
{
    pthread_mutex_lock(&srv.mu);
    struct fake_request r = srv.last;
    pthread_mutex_unlock(&srv.mu);
    return r;
}

size_t fakeapi_log(struct fake_request *out, size_t max)
{
    pthread_mutex_lock(&srv.mu);
    size_t n = srv.nlog < max ? srv.nlog : max;
    memcpy(out, srv.log, n * sizeof(*out));
    pthread_mutex_unlock(&srv.mu);
    return n;
}

void fakeapi_clear_log(void)
{
    pthread_mutex_lock(&srv.mu);
    srv.nlog = 0;
    pthread_mutex_unlock(&srv.mu);
}

int fakeapi_connections(void)
{
    return atomic_load(&srv.connections);
}

/*
 * kubeclient.c - Kubernetes API client on libcurl; see kubeclient.h.
 *
 * Every transfer runs through the client's own multi handle rather than
 * curl_easy_perform: the loop wakes at least every KUBE_POLL_MS, so a watch
 * notices *stop and its idle timeout promptly (curl_easy_perform's progress
 * callback may be called only once a second when the stream is quiet). The
 * multi handle also keeps the connection cache, so consecutive requests of
 * one client reuse their connection.
 */
#include "kube/kubeclient.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"
#include "lib/version.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KUBE_CONNECT_TIMEOUT_MS 10000L
#define KUBE_DEFAULT_TIMEOUT_MS 60000L /* kube_request with timeout_ms <= 0 */
#define KUBE_POLL_MS 100               /* how often a transfer checks stop and idle */
#define KUBE_KEEPIDLE_S 30L
#define KUBE_KEEPINTVL_S 15L
#define KUBE_MAX_LINE ((size_t)64 << 20) /* one watch event */
#define KUBE_LINE_KEEP ((size_t)1 << 20) /* a line buffer bigger than this is released after use */
#define KUBE_MAX_TOKEN ((off_t)64 << 10)

/* ---- small helpers -------------------------------------------------------- */

static void set_err(char **err, char *msg)
{
    if (err)
        *err = msg;
    else
        free(msg);
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* ---- the client ----------------------------------------------------------- */

struct kube_client {
    CURL *curl;
    CURLM *multi; /* owns the connection cache between transfers */
    char *server;
    char *static_token;
    char *token_file;
    char *file_token;       /* the last successful read of token_file */
    struct stat token_stat; /* the file as it was for that read */
    int token_warned;       /* a failed re-read was logged; quiet until it recovers */
    struct kube_exec *exec; /* the credential plugin (a reference), or NULL */
    uint64_t exec_serial;   /* the plugin credential this client uses (0: none yet) */
    char *exec_token;       /* its bearer token, or NULL when it gave a certificate */
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;
static atomic_int insecure_warned;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Options that stay the same for every transfer of this client. */
static CURLcode set_common_options(CURL *h, char *errbuf)
{
    CURLcode rc = curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_USERAGENT, "gpu-quota-admission/" GQA_VERSION);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L); /* notice a vanished server on a quiet watch */
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, KUBE_KEEPIDLE_S);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, KUBE_KEEPINTVL_S);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* big lists come gzipped */
    /* HTTP/2 when the TLS server offers it; a build without it keeps HTTP/1.1. */
    if (rc == CURLE_OK)
        (void)curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    return rc;
}

static CURLcode set_blob(CURL *h, CURLoption opt, const char *pem)
{
    struct curl_blob blob = {.data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};
    return curl_easy_setopt(h, opt, &blob);
}

/* The cluster CA only: the system's CA directory must not vouch for the API
 * server as well, hence CAPATH is cleared whenever a CA is configured. */
static CURLcode set_tls_options(CURL *h, const struct kube_config *cfg)
{
    CURLcode rc = CURLE_OK;
    if (cfg->insecure_skip_tls_verify) {
        rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        if (!atomic_exchange(&insecure_warned, 1))
            log_warn("kube client: TLS verification of %s is disabled (insecure-skip-tls-verify in %s)", cfg->server,
                     cfg->source ? cfg->source : "the configuration");
    } else if (cfg->ca_data || cfg->ca_file) {
        rc = cfg->ca_data ? set_blob(h, CURLOPT_CAINFO_BLOB, cfg->ca_data)
                          : curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (rc == CURLE_OK && (cfg->client_cert_data || cfg->client_cert_file)) {
        rc = cfg->client_cert_data ? set_blob(h, CURLOPT_SSLCERT_BLOB, cfg->client_cert_data)
                                   : curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->client_cert_file);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (rc == CURLE_OK && (cfg->client_key_data || cfg->client_key_file)) {
        rc = cfg->client_key_data ? set_blob(h, CURLOPT_SSLKEY_BLOB, cfg->client_key_data)
                                  : curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->client_key_file);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    return rc;
}

void kube_client_free(struct kube_client *c)
{
    if (!c)
        return;
    if (c->multi)
        curl_multi_cleanup(c->multi);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->server);
    free(c->static_token);
    free(c->token_file);
    free(c->file_token);
    free(c->exec_token);
    kube_exec_unref(c->exec);
    free(c);
}

static int copy_str(char **dst, const char *src)
{
    *dst = NULL;
    return src && !(*dst = strdup(src)) ? -1 : 0;
}

/* The client keeps its own copies: it does not depend on cfg afterwards. */
static int copy_config(struct kube_client *c, const struct kube_config *cfg)
{
    size_t len = strlen(cfg->server);
    while (len > 0 && cfg->server[len - 1] == '/')
        len--;
    c->server = strndup(cfg->server, len);
    if (!c->server || copy_str(&c->static_token, cfg->token) != 0 || copy_str(&c->token_file, cfg->token_file) != 0)
        return -1;
    c->exec = cfg->exec;
    kube_exec_ref(c->exec);
    return 0;
}

struct kube_client *kube_client_new(const struct kube_config *cfg, char **err)
{
    if (err)
        *err = NULL;
    if (!cfg || !cfg->server || !*cfg->server) {
        set_err(err, strdup("kube client: no API server address"));
        return NULL;
    }
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        set_err(err, strbuf_format("kube client: libcurl initialisation failed: %s", curl_easy_strerror(global_rc)));
        return NULL;
    }
    struct kube_client *c = calloc(1, sizeof(*c));
    if (!c || copy_config(c, cfg) != 0 || !(c->curl = curl_easy_init()) || !(c->multi = curl_multi_init())) {
        kube_client_free(c);
        set_err(err, strdup("kube client: out of memory"));
        return NULL;
    }
    CURLcode rc = set_common_options(c->curl, c->errbuf);
    if (rc == CURLE_OK)
        rc = set_tls_options(c->curl, cfg);
    if (rc != CURLE_OK) {
        set_err(err, strbuf_format("kube client for %s: %s", cfg->server, curl_easy_strerror(rc)));
        kube_client_free(c);
        return NULL;
    }
    return c;
}

/* ---- bearer tokens -------------------------------------------------------- */

static int same_file_state(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The token file's content without surrounding whitespace (a trailing
 * newline is common). NULL with *why set (a static string) on failure. */
static char *read_token(const char *path, const struct stat *st, const char **why)
{
    if (st->st_size > KUBE_MAX_TOKEN) {
        *why = "file too large for a token";
        return NULL;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    if (strbuf_read_file(&sb, path) != 0) {
        *why = strerror(errno);
        strbuf_free(&sb);
        return NULL;
    }
    size_t start = 0, end = sb.len;
    while (start < end && is_space(sb.data[start]))
        start++;
    while (end > start && is_space(sb.data[end - 1]))
        end--;
    char *tok = end > start ? strndup(sb.data + start, end - start) : NULL;
    *why = end > start ? "out of memory" : "the file is empty";
    strbuf_free(&sb);
    return tok;
}

/* A re-read failed: keep the token we had (the file may be mid-rotation),
 * or fail the request when there never was one. */
static int token_fallback(struct kube_client *c, const char *why, const char **token, char **err)
{
    const char *old = c->file_token ? c->file_token : c->static_token;
    if (old) {
        if (!c->token_warned)
            log_warn("kube client: cannot read token file %s (%s); using the previous token", c->token_file, why);
        c->token_warned = 1;
        *token = old;
        return 0;
    }
    *err = strbuf_format("token file %s: %s", c->token_file, why);
    return -1;
}

/* A newer plugin credential: its token, or its certificate and key on the
 * handle (a new certificate means a new connection; curl does not reuse
 * one made with another). */
static int take_exec_cred(struct kube_client *c, struct kube_exec_cred *cred, char **err)
{
    CURLcode rc = CURLE_OK;
    if (cred->cert_pem) {
        rc = set_blob(c->curl, CURLOPT_SSLCERT_BLOB, cred->cert_pem);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(c->curl, CURLOPT_SSLCERTTYPE, "PEM");
        if (rc == CURLE_OK)
            rc = set_blob(c->curl, CURLOPT_SSLKEY_BLOB, cred->key_pem);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(c->curl, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (rc != CURLE_OK) {
        *err = strbuf_format("exec plugin client certificate: %s", curl_easy_strerror(rc));
        kube_exec_cred_clear(cred);
        return -1;
    }
    free(c->exec_token);
    c->exec_token = cred->token; /* taken */
    cred->token = NULL;
    c->exec_serial = cred->serial;
    kube_exec_cred_clear(cred);
    return 0;
}

/* The plugin's credential in force, running the plugin when it expired. */
static int exec_token(struct kube_client *c, const char **token, char **err)
{
    struct kube_exec_cred cred;
    int rc = kube_exec_current(c->exec, c->exec_serial, &cred, err);
    if (rc == 1)
        rc = take_exec_cred(c, &cred, err);
    *token = c->exec_token;
    return rc < 0 ? -1 : 0;
}

/* The token for the next request. The file is stat'ed every time and read
 * again only when it changed: projected service-account tokens rotate. */
static int current_token(struct kube_client *c, const char **token, char **err)
{
    if (c->exec)
        return exec_token(c, token, err);
    *token = c->static_token;
    if (!c->token_file)
        return 0;
    struct stat st;
    if (stat(c->token_file, &st) != 0)
        return token_fallback(c, strerror(errno), token, err);
    if (c->file_token && same_file_state(&st, &c->token_stat)) {
        *token = c->file_token;
        return 0;
    }
    const char *why = NULL;
    char *fresh = read_token(c->token_file, &st, &why);
    if (!fresh)
        return token_fallback(c, why, token, err);
    if (c->token_warned)
        log_info("kube client: token file %s is readable again", c->token_file);
    free(c->file_token);
    c->file_token = fresh;
    c->token_stat = st;
    c->token_warned = 0;
    *token = fresh;
    return 0;
}

static struct curl_slist *add_header(struct curl_slist *list, const char *line, int *failed)
{
    struct curl_slist *next = *failed ? NULL : curl_slist_append(list, line);
    if (!next)
        *failed = 1;
    return next ? next : list;
}

/* The request's headers. "Expect:" stops curl from waiting for
 * "100 Continue" before sending a large body. */
static struct curl_slist *build_headers(struct kube_client *c, const char *content_type, char **err)
{
    const char *token = NULL;
    if (current_token(c, &token, err) != 0)
        return NULL;
    int failed = 0;
    struct curl_slist *h = add_header(NULL, "Accept: application/json", &failed);
    h = add_header(h, "Expect:", &failed);
    char *line = content_type ? strbuf_format("Content-Type: %s", content_type) : NULL;
    if (content_type)
        h = line ? add_header(h, line, &failed) : (failed = 1, h);
    free(line);
    line = token ? strbuf_format("Authorization: Bearer %s", token) : NULL;
    if (token)
        h = line ? add_header(h, line, &failed) : (failed = 1, h);
    free(line);
    if (failed) {
        curl_slist_free_all(h);
        *err = strdup("out of memory");
        return NULL;
    }
    return h;
}

/* ---- one transfer --------------------------------------------------------- */

struct xfer {
    struct kube_client *c;
    struct strbuf body;   /* the answer (a refused watch's too) */
    struct strbuf line;   /* a watch line still waiting for its '\n' */
    kube_line_fn on_line; /* NULL: collect the body */
    kube_data_fn on_data; /* a streamed request's 200 body goes here */
    void *ctx;
    const volatile int *stop;
    long idle_timeout_ms;
    int64_t last_byte_ms;
    int mode;    /* watch and stream: 0 undecided, 1 stream, 2 collect */
    int stopped; /* stop flag or on_line: a clean end */
    int idle, too_long, oom;
};

static int deliver_line(struct xfer *x)
{
    struct strbuf *l = &x->line;
    size_t n = l->len;
    if (n > 0 && l->data[n - 1] == '\r')
        n--;
    int rc = 0;
    if (n > 0) {
        l->data[n] = '\0';
        rc = x->on_line(x->ctx, l->data, n);
    }
    /* One huge object must not pin its buffer for the rest of the watch. */
    if (l->cap > KUBE_LINE_KEEP)
        strbuf_free(l);
    else
        strbuf_reset(l);
    if (rc != 0)
        x->stopped = 1;
    return rc != 0 ? -1 : 0;
}

/* Split the stream into lines; a line may span any number of chunks. */
static int feed_lines(struct xfer *x, const char *data, size_t len)
{
    while (len > 0) {
        if (x->stop && *x->stop) {
            x->stopped = 1;
            return -1;
        }
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (take > KUBE_MAX_LINE - x->line.len) {
            x->too_long = 1;
            return -1;
        }
        strbuf_append(&x->line, data, take);
        if (strbuf_failed(&x->line)) {
            x->oom = 1;
            return -1;
        }
        if (!nl)
            return 0;
        if (deliver_line(x) != 0)
            return -1;
        data = nl + 1;
        len -= take + 1;
    }
    return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * nmemb;
    x->last_byte_ms = clock_monotonic_ms();
    if ((x->on_line || x->on_data) && x->mode == 0) {
        /* Headers are complete by the first body byte: only a 200 is a stream. */
        long code = 0;
        curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &code);
        x->mode = code == 200 ? 1 : 2;
    }
    if (x->on_line && x->mode == 1)
        return feed_lines(x, data, len) == 0 ? len : 0;
    if (x->on_data && x->mode == 1) {
        if (x->on_data(x->ctx, data, len) == 0)
            return len;
        x->stopped = 1;
        return 0;
    }
    strbuf_append(&x->body, data, len);
    if (strbuf_failed(&x->body)) {
        x->oom = 1;
        return 0;
    }
    return len;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * nmemb;
    x->last_byte_ms = clock_monotonic_ms();
    /* The blank line ends the headers: a watch answered 200 is open now,
     * and its caller hears so before the first event (a zero-length line). */
    if (x->on_line && x->mode == 0 && len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code == 200) {
            x->mode = 1;
            if (x->on_line(x->ctx, "", 0) != 0) {
                x->stopped = 1;
                return 0;
            }
        }
    }
    return len;
}

/* The method and body. curl's method options interact (POSTFIELDS means
 * POST, HTTPGET clears it, NOBODY means HEAD), so all are set each time. */
static CURLcode set_method(CURL *h, const char *method, const char *body, size_t body_len)
{
    CURLcode rc = curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    if (rc == CURLE_OK && body) {
        rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    } else if (rc == CURLE_OK) {
        rc = curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    if (rc == CURLE_OK && strcmp(method, "HEAD") == 0)
        rc = curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    const char *custom = strcmp(method, body ? "POST" : "GET") == 0 || strcmp(method, "HEAD") == 0 ? NULL : method;
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, custom);
    return rc;
}

static CURLcode prepare(struct xfer *x, const char *method, const char *path, struct curl_slist *headers,
                        const char *body, size_t body_len, long timeout_ms)
{
    CURL *h = x->c->curl;
    x->c->errbuf[0] = '\0';
    char *url = strbuf_format("%s%s", x->c->server, path);
    if (!url)
        return CURLE_OUT_OF_MEMORY;
    CURLcode rc = curl_easy_setopt(h, CURLOPT_URL, url);
    free(url);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (rc == CURLE_OK)
        rc = set_method(h, method, body, body_len);
    return rc;
}

/* Checked between polls: the caller's stop flag and the idle timeout. */
static int should_end(struct xfer *x)
{
    if (x->stop && *x->stop)
        return x->stopped = 1;
    if (x->idle_timeout_ms > 0 && clock_monotonic_ms() - x->last_byte_ms > x->idle_timeout_ms)
        return x->idle = 1;
    return 0;
}

static CURLcode finished_result(CURLM *multi, CURL *h)
{
    CURLcode result = CURLE_RECV_ERROR;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == h)
            result = m->data.result;
    return result;
}

/* Drive the transfer to its end, or until should_end() (then
 * CURLE_ABORTED_BY_CALLBACK; removing the unfinished transfer closes its
 * connection). */
static CURLcode run_transfer(struct xfer *x)
{
    struct kube_client *c = x->c;
    x->last_byte_ms = clock_monotonic_ms();
    CURLMcode mc = curl_multi_add_handle(c->multi, c->curl);
    if (mc != CURLM_OK) {
        snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_multi_strerror(mc));
        return CURLE_FAILED_INIT;
    }
    CURLcode result = CURLE_ABORTED_BY_CALLBACK;
    int running = 1;
    while (mc == CURLM_OK) {
        mc = curl_multi_perform(c->multi, &running);
        if (mc != CURLM_OK)
            break;
        if (!running) {
            result = finished_result(c->multi, c->curl);
            break;
        }
        if (should_end(x))
            break;
        mc = curl_multi_poll(c->multi, NULL, 0, KUBE_POLL_MS, NULL);
    }
    if (mc != CURLM_OK) {
        snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_multi_strerror(mc));
        result = CURLE_RECV_ERROR;
    }
    curl_multi_remove_handle(c->multi, c->curl);
    return result;
}

/* ---- answers and errors --------------------------------------------------- */

static const char *reason_phrase(long status)
{
    static const struct {
        long code;
        const char *text;
    } table[] = {
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {406, "Not Acceptable"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {410, "Gone"},
        {412, "Precondition Failed"},
        {413, "Request Entity Too Large"},
        {415, "Unsupported Media Type"},
        {422, "Unprocessable Entity"},
        {429, "Too Many Requests"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].code == status)
            return table[i].text;
    return NULL;
}

/* The Status.message of a Kubernetes error body; for anything else (a
 * proxy's text page) its first line, shortened. NULL when there is none. */
static char *body_message(const char *body, size_t len)
{
    if (!body || len == 0)
        return NULL;
    /* The whole body must be one JSON object: "404 page not found" would
     * otherwise parse as the number 404. body[len] is the NUL the strbuf keeps. */
    cJSON *j = cJSON_ParseWithLengthOpts(body, len + 1, NULL, 1);
    if (cJSON_IsObject(j)) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
        char *msg = cJSON_IsString(m) && *m->valuestring ? strdup(m->valuestring) : NULL;
        cJSON_Delete(j);
        return msg;
    }
    cJSON_Delete(j);
    size_t start = 0, end = 0;
    while (start < len && is_space(body[start]))
        start++;
    end = start;
    while (end < len && end - start < 200 && body[end] != '\n' && body[end] != '\r' && body[end] != '\0')
        end++;
    return end > start ? strndup(body + start, end - start) : NULL;
}

static char *status_error(const char *method, const char *path, long status, const char *body, size_t len)
{
    char *msg = body_message(body, len);
    const char *reason = reason_phrase(status);
    char *err = strbuf_format("%s %s: %ld%s%s%s%s", method, path, status, reason ? " " : "", reason ? reason : "",
                              msg ? ": " : "", msg ? msg : "");
    free(msg);
    return err;
}

static char *transport_error(const struct xfer *x, const char *method, const char *path, CURLcode rc)
{
    if (x->oom)
        return strbuf_format("%s %s: out of memory while receiving the answer", method, path);
    if (x->too_long)
        return strbuf_format("%s %s: a watch event is larger than %zu MiB", method, path, KUBE_MAX_LINE >> 20);
    if (x->idle)
        return strbuf_format("%s %s: no data from the API server for %ld ms", method, path, x->idle_timeout_ms);
    if (x->on_data && x->stopped)
        return strbuf_format("%s %s: the receiver stopped the answer", method, path);
    const char *detail = x->c->errbuf;
    return strbuf_format("%s %s: %s%s%s", method, path, curl_easy_strerror(rc), *detail ? ": " : "", detail);
}

void kube_response_free(struct kube_response *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->error);
    r->body = r->error = NULL;
    r->body_len = 0;
    r->status = 0;
}

/* r->body from the collected answer; "" when there is none. */
static int take_body(struct xfer *x, struct kube_response *r)
{
    if (x->oom)
        strbuf_free(&x->body);
    r->body = strbuf_detach(&x->body, &r->body_len);
    return r->body ? 0 : -1;
}

static void xfer_init(struct xfer *x, struct kube_client *c)
{
    memset(x, 0, sizeof(*x));
    x->c = c;
    strbuf_init(&x->body);
    strbuf_init(&x->line);
}

static void xfer_done(struct xfer *x)
{
    strbuf_free(&x->body);
    strbuf_free(&x->line);
}

/* Headers and options; on failure r->error says why. */
static struct curl_slist *start(struct xfer *x, const char *method, const char *path, const char *content_type,
                                const char *body, size_t body_len, long timeout_ms, struct kube_response *r)
{
    char *why = NULL;
    struct curl_slist *headers = build_headers(x->c, content_type, &why);
    CURLcode rc = headers ? prepare(x, method, path, headers, body, body_len, timeout_ms) : CURLE_OK;
    if (headers && rc != CURLE_OK) {
        curl_slist_free_all(headers);
        headers = NULL;
        why = strdup(curl_easy_strerror(rc));
    }
    if (!headers) {
        r->error = strbuf_format("%s %s: %s", method, path, why ? why : "out of memory");
        r->body = strdup("");
    }
    free(why);
    return headers;
}

static int request(struct xfer *x, const char *method, const char *path, const char *content_type, const char *body,
                   size_t body_len, long timeout_ms, struct kube_response *r);

/* A 401 to a plugin credential: the plugin runs again before the next
 * request (an expired or revoked token is the usual cause). true when the
 * request is worth one more try with the new credential. */
static bool refused_exec_credential(struct kube_client *c, const struct kube_response *r)
{
    if (!c->exec || r->status != 401)
        return false;
    kube_exec_invalidate(c->exec, c->exec_serial);
    return true;
}

int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, size_t body_len, long timeout_ms, struct kube_response *r)
{
    struct xfer x;
    xfer_init(&x, c);
    int rc = request(&x, method, path, content_type, body, body_len, timeout_ms, r);
    if (rc == 0 && refused_exec_credential(c, r)) { /* a 401 was not acted on: the retry is safe */
        kube_response_free(r);
        xfer_init(&x, c);
        rc = request(&x, method, path, content_type, body, body_len, timeout_ms, r);
    }
    return rc;
}

int kube_get_stream(struct kube_client *c, const char *path, kube_data_fn on_data, void *ctx, long timeout_ms,
                    struct kube_response *r)
{
    for (int attempt = 0;; attempt++) {
        struct xfer x;
        xfer_init(&x, c);
        x.on_data = on_data; /* only a 200 reaches it: a refused try fed it nothing */
        x.ctx = ctx;
        int rc = request(&x, "GET", path, NULL, NULL, 0, timeout_ms, r);
        if (attempt > 0 || rc != 0 || !refused_exec_credential(c, r))
            return rc;
        kube_response_free(r);
    }
}

/* One request on x; frees what x holds. */
static int request(struct xfer *x, const char *method, const char *path, const char *content_type, const char *body,
                   size_t body_len, long timeout_ms, struct kube_response *r)
{
    struct kube_client *c = x->c;
    memset(r, 0, sizeof(*r));
    struct curl_slist *headers = start(x, method, path, body ? content_type : NULL, body, body_len,
                                       timeout_ms > 0 ? timeout_ms : KUBE_DEFAULT_TIMEOUT_MS, r);
    if (!headers)
        return -1;
    CURLcode rc = run_transfer(x);
    curl_slist_free_all(headers);
    if (rc == CURLE_OK && take_body(x, r) == 0) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
        if (r->status >= 400 && !(r->error = status_error(method, path, r->status, r->body, r->body_len)))
            r->error = strdup("out of memory");
        xfer_done(x);
        return 0;
    }
    /* A partial answer is no answer. */
    r->error = transport_error(x, method, path, rc == CURLE_OK ? CURLE_OUT_OF_MEMORY : rc);
    free(r->body);
    r->body = strdup("");
    r->body_len = 0;
    xfer_done(x);
    return -1;
}

/* After a watch: the server may end the body without a final '\n'. */
static void flush_last_line(struct xfer *x)
{
    if (x->line.len > 0 && !x->stopped)
        deliver_line(x);
}

int kube_watch(struct kube_client *c, const char *path, kube_line_fn on_event, void *ctx, const volatile int *stop,
               long idle_timeout_ms, struct kube_response *r)
{
    memset(r, 0, sizeof(*r));
    struct xfer x;
    xfer_init(&x, c);
    x.on_line = on_event;
    x.ctx = ctx;
    x.stop = stop;
    x.idle_timeout_ms = idle_timeout_ms;
    /* No total timeout: the server's timeoutSeconds ends a watch. */
    struct curl_slist *headers = start(&x, "GET", path, NULL, NULL, 0, 0, r);
    if (!headers)
        return -1;
    CURLcode rc = run_transfer(&x);
    curl_slist_free_all(headers);
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
    int ret = 0;
    if (rc != CURLE_OK && !x.stopped) {
        r->error = transport_error(&x, "GET", path, rc);
        ret = -1;
    } else if (r->status != 200 && !x.stopped) {
        r->error = status_error("GET", path, r->status, x.body.data, x.body.len);
        refused_exec_credential(c, r); /* the caller's next watch runs the plugin again */
    } else if (rc == CURLE_OK) {
        flush_last_line(&x);
    }
    if (take_body(&x, r) != 0 && !r->error) {
        r->error = strdup("out of memory");
        ret = -1;
    }
    xfer_done(&x);
    return ret;
}

/* ---- query parameters ----------------------------------------------------- */

char *kube_escape(const char *value)
{
    /* RFC 3986 unreserved characters stay; everything else is encoded. */
    char *escaped = curl_easy_escape(NULL, value ? value : "", 0);
    char *out = escaped ? strdup(escaped) : NULL;
    curl_free(escaped);
    return out;
}

/*
 * null_extender.c - the cheapest scheduler extender that still does the
 * extender's work: the floor of the extender protocol itself, for
 * tests/realcp/bench_schedule.py (--alt-binary null=PATH).
 *
 * It answers filter with every node it is given (NodeNames form), prioritize
 * with an empty list, and bind by POSTing the Binding (no annotations) over
 * one keep-alive TLS connection per server thread; /readyz and /metrics
 * answer 200 so the benchmark can start and read it like the product. It
 * decides nothing and holds no state: whatever throughput kube-scheduler
 * reaches with it is what any extender wired the same way (three HTTP calls
 * per pod, the Binding from the extender) could reach on that machine.
 *
 *   null-extender --listen-http 127.0.0.1:PORT --kubeconfig FILE [ignored flags...]
 *
 * The kubeconfig must be the JSON one tests/realcp/controlplane.py writes
 * (server, certificate-authority, client-certificate and client-key files).
 * NULL_EXTENDER_PROTOBUF=1 in its environment sends the Binding as
 * protobuf (application/vnd.kubernetes.protobuf), as client-go does.
 *
 * Not a product component: a measuring stick, built with the benchmarks.
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BODY (64u << 20)

struct kube {
    char server[512], ca[1024], cert[1024], key[1024];
};

static struct kube kube;
static volatile sig_atomic_t stopping;

struct body {
    char *data;
    size_t len;
};

static int copy_field(char *dst, size_t size, const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
        return -1;
    strcpy(dst, v->valuestring);
    return 0;
}

static int read_kubeconfig(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *cfg = cJSON_Parse(buf);
    const cJSON *cluster =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "clusters"), 0), "cluster");
    const cJSON *user = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "users"), 0), "user");
    int rc = copy_field(kube.server, sizeof(kube.server), cluster, "server") ||
                     copy_field(kube.ca, sizeof(kube.ca), cluster, "certificate-authority") ||
                     copy_field(kube.cert, sizeof(kube.cert), user, "client-certificate") ||
                     copy_field(kube.key, sizeof(kube.key), user, "client-key")
                 ? -1
                 : 0;
    cJSON_Delete(cfg);
    return rc;
}

static size_t discard(char *data, size_t size, size_t nmemb, void *arg)
{
    (void)data;
    (void)arg;
    return size * nmemb;
}

/* One easy handle per server thread: its connection stays open between binds. */
static _Thread_local CURL *thread_curl;

static CURL *curl_for_thread(void)
{
    if (thread_curl)
        return thread_curl;
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_CAINFO, kube.ca);
    curl_easy_setopt(h, CURLOPT_SSLCERT, kube.cert);
    curl_easy_setopt(h, CURLOPT_SSLKEY, kube.key);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    return thread_curl = h;
}

/* ---- the Binding in protobuf (NULL_EXTENDER_PROTOBUF=1) -------------------- */

struct pb {
    unsigned char buf[4096];
    size_t len;
};

static void pb_varint(struct pb *b, uint64_t v)
{
    while (v >= 0x80 && b->len < sizeof(b->buf)) {
        b->buf[b->len++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    if (b->len < sizeof(b->buf))
        b->buf[b->len++] = (unsigned char)v;
}

static void pb_bytes(struct pb *b, int field, const void *data, size_t len)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    if (b->len + len <= sizeof(b->buf)) {
        memcpy(b->buf + b->len, data, len);
        b->len += len;
    }
}

static void pb_string(struct pb *b, int field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

/* "k8s\0" + runtime.Unknown{typeMeta{v1, Binding}, raw = Binding{metadata, target}}. */
static size_t binding_protobuf(unsigned char *out, size_t size, const char *ns, const char *name, const char *uid,
                               const char *node)
{
    struct pb meta = {.len = 0}, target = {.len = 0}, binding = {.len = 0}, type = {.len = 0}, unknown = {.len = 0};
    pb_string(&meta, 1, name);
    pb_string(&meta, 3, ns);
    pb_string(&meta, 5, uid);
    pb_string(&target, 1, "Node");
    pb_string(&target, 3, node);
    pb_bytes(&binding, 1, meta.buf, meta.len);
    pb_bytes(&binding, 2, target.buf, target.len);
    pb_string(&type, 1, "v1");
    pb_string(&type, 2, "Binding");
    pb_bytes(&unknown, 1, type.buf, type.len);
    pb_bytes(&unknown, 2, binding.buf, binding.len);
    if (unknown.len + 4 > size)
        return 0;
    memcpy(out, "k8s\0", 4);
    memcpy(out + 4, unknown.buf, unknown.len);
    return unknown.len + 4;
}

/* The ExtenderBindingArgs as a Binding; "" on success, else the error. */
static const char *post_binding(const char *body, size_t len)
{
    cJSON *args = cJSON_ParseWithLength(body, len);
    const char *ns = cJSON_GetStringValue(cJSON_GetObjectItem(args, "PodNamespace"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(args, "PodName"));
    const char *uid = cJSON_GetStringValue(cJSON_GetObjectItem(args, "PodUID"));
    const char *node = cJSON_GetStringValue(cJSON_GetObjectItem(args, "Node"));
    const char *err = "bad ExtenderBindingArgs";
    CURL *h = curl_for_thread();
    if (ns && name && uid && node && h) {
        char url[1024], binding[2048];
        snprintf(url, sizeof(url), "%s/api/v1/namespaces/%s/pods/%s/binding", kube.server, ns, name);
        snprintf(binding, sizeof(binding),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
                 "\"uid\":\"%s\"},\"target\":{\"kind\":\"Node\",\"name\":\"%s\"}}",
                 name, ns, uid, node);
        unsigned char proto[4096];
        size_t proto_len = getenv("NULL_EXTENDER_PROTOBUF")
                               ? binding_protobuf(proto, sizeof(proto), ns, name, uid, node)
                               : 0;
        struct curl_slist *hdrs = curl_slist_append(
            NULL, proto_len ? "Content-Type: application/vnd.kubernetes.protobuf" : "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        if (proto_len) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)proto_len);
            curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, (const char *)proto);
        } else {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, -1L);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, binding);
        }
        long status = 0;
        err = curl_easy_perform(h) == CURLE_OK &&
                      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 201
                  ? ""
                  : "binding failed";
        curl_slist_free_all(hdrs);
    }
    cJSON_Delete(args);
    return err;
}

/* ExtenderFilterResult with every node given. */
static char *filter_answer(const char *body, size_t len)
{
    cJSON *args = cJSON_ParseWithLength(body, len);
    cJSON *out = cJSON_CreateObject();
    cJSON *names = cJSON_DetachItemFromObject(args, "NodeNames");
    cJSON_AddItemToObject(out, "NodeNames", names ? names : cJSON_CreateNull());
    cJSON_AddItemToObject(out, "FailedNodes", cJSON_CreateObject());
    cJSON_AddStringToObject(out, "Error", "");
    char *text = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    cJSON_Delete(args);
    return text;
}

static enum MHD_Result answer(struct MHD_Connection *conn, int status, char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned int)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    struct body *b = *con_cls;
    if (!b) {
        *con_cls = calloc(1, sizeof(*b));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        if (b->len + *upload_size > MAX_BODY)
            return MHD_NO;
        char *grown = realloc(b->data, b->len + *upload_size + 1);
        if (!grown)
            return MHD_NO;
        memcpy(grown + b->len, upload, *upload_size);
        b->data = grown;
        b->len += *upload_size;
        b->data[b->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    const char *data = b->data ? b->data : "";
    if (strcmp(method, "POST") == 0 && strstr(url, "/predicates"))
        return answer(conn, 200, filter_answer(data, b->len));
    if (strcmp(method, "POST") == 0 && strstr(url, "/priorities"))
        return answer(conn, 200, strdup("[]"));
    if (strcmp(method, "POST") == 0 && strstr(url, "/bind")) {
        char text[256];
        snprintf(text, sizeof(text), "{\"Error\":\"%s\"}", post_binding(data, b->len));
        return answer(conn, 200, strdup(text));
    }
    return answer(conn, 200, strdup("ok\n")); /* /readyz, /healthz, /metrics */
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    struct body *b = *con_cls;
    if (b)
        free(b->data);
    free(b);
    *con_cls = NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv)
{
    int port = 0;
    const char *kubeconfig = NULL;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--listen-http") == 0) {
            const char *colon = strrchr(argv[i + 1], ':');
            port = colon ? atoi(colon + 1) : 0;
        } else if (strcmp(argv[i], "--kubeconfig") == 0) {
            kubeconfig = argv[i + 1];
        }
    }
    if (port <= 0 || port > 65535 || !kubeconfig || read_kubeconfig(kubeconfig) != 0) {
        fprintf(stderr, "usage: null-extender --listen-http 127.0.0.1:PORT --kubeconfig FILE (a JSON kubeconfig)\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL,
                                            NULL, on_request, NULL, MHD_OPTION_THREAD_POOL_SIZE, 8u,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "null-extender: cannot listen on port %d\n", port);
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stopping)
        pause();
    MHD_stop_daemon(d);
    curl_global_cleanup();
    return 0;
}

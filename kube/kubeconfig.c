/*
 * kubeconfig.c - where the API server is and how to authenticate; see
 * kubeconfig.h.
 *
 * A kubeconfig is read as YAML (or JSON) into one cJSON tree; the current
 * context names a cluster and a user, and every field the client supports
 * is checked as it is taken, so the first problem is reported with its
 * place ("kubeconfig F: users[admin].user: client-key-data is not valid
 * base64"). In-cluster, the service account's files are checked for
 * readability at start-up.
 */
#include "kube/kubeconfig.h"
#include "lib/base64.h"
#include "lib/strbuf.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static void set_err(char **err, char *msg)
{
    if (err)
        *err = msg;
    else
        free(msg);
}

void kube_config_free(struct kube_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->server);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->client_cert_file);
    free(cfg->client_key_file);
    free(cfg->client_cert_data);
    free(cfg->client_key_data);
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->source);
    free(cfg->namespace_);
    free(cfg);
}

static struct kube_config *config_new(const char *source)
{
    struct kube_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg && !(cfg->source = strdup(source))) {
        free(cfg);
        cfg = NULL;
    }
    return cfg;
}

/* What is needed while reading one kubeconfig. */
struct kc_parse {
    const char *path;
    const char *context; /* instead of current-context, or NULL */
    char *dir;           /* the kubeconfig's directory: relative paths start there */
    char *err;           /* the first failure: "kubeconfig PATH: ..." */
    int failed;
};

static int kc_fail(struct kc_parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int kc_fail(struct kc_parse *p, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    char *why = strbuf_vformat(fmt, ap);
    va_end(ap);
    p->err = why ? strbuf_format("kubeconfig %s: %s", p->path, why) : NULL;
    free(why);
    return -1;
}

static int kc_oom(struct kc_parse *p)
{
    return kc_fail(p, "out of memory");
}

/* The directory part of the kubeconfig path ("." when it has none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* key's string value in obj: *out is NULL when absent, null or empty (Go's
 * omitempty treats "" as absent). where names obj in the error. */
static int kc_string(struct kc_parse *p, const cJSON *obj, const char *key, const char *where, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return kc_fail(p, "%s: %s must be a string", where, key);
    if (*v->valuestring)
        *out = v->valuestring;
    return 0;
}

/* The entry of the named list (contexts, clusters, users) called name; *body
 * is its member (context, cluster, user), NULL when the entry has none.
 * 1 when found, 0 when not, -1 on a malformed list. */
static int kc_named(struct kc_parse *p, const cJSON *root, const char *list, const char *member, const char *name,
                    const cJSON **body)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list);
    *body = NULL;
    if (!arr || cJSON_IsNull(arr))
        return 0;
    if (!cJSON_IsArray(arr))
        return kc_fail(p, "%s must be a list", list);
    const cJSON *item;
    cJSON_ArrayForEach(item, arr)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(item, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)
            continue;
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(item, member);
        if (b && !cJSON_IsNull(b) && !cJSON_IsObject(b))
            return kc_fail(p, "%s \"%s\": %s must be a mapping", member, name, member);
        *body = cJSON_IsObject(b) ? b : NULL;
        return 1;
    }
    return 0;
}

/* A file named by the kubeconfig: resolved against its directory and
 * checked now, so a typo is reported at startup rather than as a TLS error. */
static int kc_path(struct kc_parse *p, const char *where, const char *field, const char *value, char **out)
{
    char *path = value[0] == '/' ? strdup(value)
                                 : strbuf_format("%s%s%s", p->dir, p->dir[strlen(p->dir) - 1] == '/' ? "" : "/", value);
    if (!path)
        return kc_oom(p);
    if (access(path, R_OK) != 0) {
        int e = errno;
        kc_fail(p, "%s: %s %s: %s", where, field, path, strerror(e));
        free(path);
        return -1;
    }
    *out = path;
    return 0;
}

/* A *-data field: base64 of PEM text. */
static int kc_pem(struct kc_parse *p, const char *where, const char *field, const char *value, char **out)
{
    size_t len;
    int rc = base64_decode(value, out, &len);
    if (rc == -2)
        return kc_oom(p);
    if (rc != 0)
        return kc_fail(p, "%s: %s is not valid base64", where, field);
    if (memchr(*out, '\0', len) || !strstr(*out, "-----BEGIN ")) {
        free(*out);
        *out = NULL;
        return kc_fail(p, "%s: %s does not hold PEM data", where, field);
    }
    return 0;
}

/* PEM material given inline (*-data, which wins as in kubectl) or as a file. */
static int kc_pem_or_file(struct kc_parse *p, const cJSON *obj, const char *where, const char *field, char **data,
                          char **file)
{
    char data_key[64];
    snprintf(data_key, sizeof(data_key), "%s-data", field);
    const char *d, *f;
    if (kc_string(p, obj, data_key, where, &d) != 0 || kc_string(p, obj, field, where, &f) != 0)
        return -1;
    if (d)
        return kc_pem(p, where, data_key, d, data);
    return f ? kc_path(p, where, field, f, file) : 0;
}

static int kc_bool(struct kc_parse *p, const cJSON *obj, const char *key, const char *where, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsBool(v))
        return kc_fail(p, "%s: %s must be true or false", where, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* "https://host:6443" without trailing slashes; a bare host:port gets
 * https://, as kubectl does. */
static int kc_server(struct kc_parse *p, const char *server, struct kube_config *cfg)
{
    size_t len = strlen(server);
    while (len > 0 && server[len - 1] == '/')
        len--;
    const char *scheme = strstr(server, "://") ? "" : "https://";
    cfg->server = strbuf_format("%s%.*s", scheme, (int)len, server);
    return cfg->server ? 0 : kc_oom(p);
}

static int kc_cluster(struct kc_parse *p, const char *name, const cJSON *cluster, struct kube_config *cfg)
{
    char *where = strbuf_format("cluster \"%s\"", name);
    if (!where)
        return kc_oom(p);
    const char *server;
    int rc = kc_string(p, cluster, "server", where, &server);
    if (rc == 0 && !server)
        rc = kc_fail(p, "%s has no server", where);
    if (rc == 0)
        rc = kc_server(p, server, cfg);
    if (rc == 0)
        rc = kc_bool(p, cluster, "insecure-skip-tls-verify", where, &cfg->insecure_skip_tls_verify);
    if (rc == 0)
        rc = kc_pem_or_file(p, cluster, where, "certificate-authority", &cfg->ca_data, &cfg->ca_file);
    free(where);
    return rc;
}

/* Credential kinds this client cannot use: a clear error beats an anonymous
 * request that fails later with 401. */
static int kc_unsupported_auth(struct kc_parse *p, const cJSON *user, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(user, "exec");
    if (v && !cJSON_IsNull(v))
        return kc_fail(
            p, "%s: exec credential plugins are not supported (use token, tokenFile or a client certificate)", where);
    v = cJSON_GetObjectItemCaseSensitive(user, "auth-provider");
    if (v && !cJSON_IsNull(v))
        return kc_fail(p, "%s: auth-provider plugins are not supported (use token, tokenFile or a client certificate)",
                       where);
    const char *s1, *s2;
    if (kc_string(p, user, "username", where, &s1) != 0 || kc_string(p, user, "password", where, &s2) != 0)
        return -1;
    if (s1 || s2)
        return kc_fail(p, "%s: basic authentication (username/password) is not supported", where);
    return 0;
}

static int kc_token(struct kc_parse *p, const cJSON *user, const char *where, struct kube_config *cfg)
{
    const char *token, *file;
    if (kc_string(p, user, "token", where, &token) != 0 || kc_string(p, user, "tokenFile", where, &file) != 0)
        return -1;
    /* DESIGN.md spells it token-file; kubectl writes tokenFile. */
    if (!file && kc_string(p, user, "token-file", where, &file) != 0)
        return -1;
    if (token && !(cfg->token = strdup(token)))
        return kc_oom(p);
    return file ? kc_path(p, where, "tokenFile", file, &cfg->token_file) : 0;
}

static int kc_user(struct kc_parse *p, const char *name, const cJSON *user, struct kube_config *cfg)
{
    char *where = strbuf_format("user \"%s\"", name);
    if (!where)
        return kc_oom(p);
    int rc = kc_unsupported_auth(p, user, where);
    if (rc == 0)
        rc = kc_token(p, user, where, cfg);
    if (rc == 0)
        rc = kc_pem_or_file(p, user, where, "client-certificate", &cfg->client_cert_data, &cfg->client_cert_file);
    if (rc == 0)
        rc = kc_pem_or_file(p, user, where, "client-key", &cfg->client_key_data, &cfg->client_key_file);
    int has_cert = cfg->client_cert_data || cfg->client_cert_file;
    int has_key = cfg->client_key_data || cfg->client_key_file;
    if (rc == 0 && has_cert != has_key)
        rc = kc_fail(p, "%s has a client %s but no client %s", where, has_cert ? "certificate" : "key",
                     has_cert ? "key" : "certificate");
    free(where);
    return rc;
}

/* current-context (or the one asked for) -> its context's cluster, user and namespace. */
static int kc_context(struct kc_parse *p, const cJSON *root, const char **cluster_name, const char **user_name,
                      const char **ns)
{
    const char *ctx_name = p->context;
    const cJSON *ctx;
    if (!ctx_name && kc_string(p, root, "current-context", "top level", &ctx_name) != 0)
        return -1;
    if (!ctx_name)
        return kc_fail(p, "no current-context");
    int found = kc_named(p, root, "contexts", "context", ctx_name, &ctx);
    if (found == 0)
        return kc_fail(p, "%s \"%s\" not found in contexts", p->context ? "context" : "current-context", ctx_name);
    if (found < 0)
        return -1;
    char *where = strbuf_format("context \"%s\"", ctx_name);
    if (!where)
        return kc_oom(p);
    int rc = kc_string(p, ctx, "cluster", where, cluster_name);
    if (rc == 0)
        rc = kc_string(p, ctx, "user", where, user_name);
    if (rc == 0)
        rc = kc_string(p, ctx, "namespace", where, ns);
    if (rc == 0 && !*cluster_name)
        rc = kc_fail(p, "%s has no cluster", where);
    free(where);
    return rc;
}

/* The chain is followed in order, so the error names the first broken link.
 * A context without a user is anonymous access. */
static struct kube_config *kc_build(struct kc_parse *p, const cJSON *root)
{
    const char *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    const cJSON *cluster, *user;
    if (kc_context(p, root, &cluster_name, &user_name, &ns) != 0)
        return NULL;
    int found = kc_named(p, root, "clusters", "cluster", cluster_name, &cluster);
    if (found == 0)
        kc_fail(p, "cluster \"%s\" not found in clusters", cluster_name);
    if (found <= 0)
        return NULL;
    struct kube_config *cfg = config_new(p->path);
    if (!cfg)
        return kc_oom(p), NULL;
    int rc = kc_cluster(p, cluster_name, cluster, cfg);
    if (rc == 0 && ns && !(cfg->namespace_ = strdup(ns)))
        rc = kc_oom(p);
    if (rc == 0 && user_name) {
        found = kc_named(p, root, "users", "user", user_name, &user);
        if (found == 0)
            kc_fail(p, "user \"%s\" not found in users", user_name);
        rc = found > 0 ? kc_user(p, user_name, user, cfg) : -1;
    }
    if (rc != 0) {
        kube_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static cJSON *kc_load(struct kc_parse *p)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (strbuf_read_file(&sb, p->path) != 0) {
        int e = errno;
        strbuf_free(&sb);
        return kc_fail(p, "%s", strerror(e)), NULL;
    }
    size_t len = 0;
    char *text = strbuf_detach(&sb, &len);
    if (!text)
        return kc_oom(p), NULL;
    char *why = NULL;
    cJSON *root = yaml_to_json(text, len, &why);
    free(text);
    if (!root)
        kc_fail(p, "%s", why ? why : "out of memory");
    else if (!cJSON_IsObject(root))
        kc_fail(p, "not a kubeconfig (the document is not a mapping)");
    free(why);
    if (p->failed) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

struct kube_config *kube_config_from_file(const char *path, char **err)
{
    return kube_config_from_file_context(path, NULL, err);
}

struct kube_config *kube_config_from_file_context(const char *path, const char *context, char **err)
{
    if (err)
        *err = NULL;
    struct kc_parse p = {.path = path, .context = context};
    struct kube_config *cfg = NULL;
    p.dir = dir_of(path);
    if (!p.dir) {
        kc_oom(&p);
    } else {
        cJSON *root = kc_load(&p);
        if (root)
            cfg = kc_build(&p, root);
        cJSON_Delete(root);
    }
    free(p.dir);
    if (!cfg && !p.failed)
        kc_oom(&p);
    set_err(err, p.err); /* NULL on success */
    return cfg;
}

static int readable_or_err(const char *path, char **err)
{
    if (access(path, R_OK) == 0)
        return 0;
    int e = errno;
    set_err(err, strbuf_format("in-cluster config: %s: %s", path, strerror(e)));
    return -1;
}

struct kube_config *kube_config_in_cluster(char **err)
{
    if (err)
        *err = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        set_err(err, strdup("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
                            "(not running in a pod?)"));
        return NULL;
    }
    const char *dir = getenv("GQA_SERVICEACCOUNT_DIR");
    if (!dir || !*dir)
        dir = KUBE_SA_DIR;
    struct kube_config *cfg = config_new("in-cluster");
    int v6 = strchr(host, ':') && host[0] != '['; /* an IPv6 literal needs brackets in a URL */
    if (cfg) {
        cfg->server = strbuf_format("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
        cfg->ca_file = strbuf_format("%s/ca.crt", dir);
        cfg->token_file = strbuf_format("%s/token", dir);
    }
    if (!cfg || !cfg->server || !cfg->ca_file || !cfg->token_file) {
        set_err(err, strdup("in-cluster config: out of memory"));
    } else if (readable_or_err(cfg->ca_file, err) == 0 && readable_or_err(cfg->token_file, err) == 0) {
        return cfg;
    }
    kube_config_free(cfg);
    return NULL;
}

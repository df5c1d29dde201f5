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
    kube_exec_unref(cfg->exec);
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
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(user, "auth-provider");
    if (v && !cJSON_IsNull(v))
        return kc_fail(p,
                       "%s: auth-provider plugins are not supported (their exec replacements are: "
                       "gke-gcloud-auth-plugin, kubelogin; or use a token, tokenFile or a client certificate)",
                       where);
    const char *s1, *s2;
    if (kc_string(p, user, "username", where, &s1) != 0 || kc_string(p, user, "password", where, &s2) != 0)
        return -1;
    if (s1 || s2)
        return kc_fail(p, "%s: basic authentication (username/password) is not supported", where);
    return 0;
}

/* ---- exec credential plugins ---------------------------------------------- */

/* What an exec stanza holds while it is read; strings point into the tree. */
struct kc_exec {
    struct kube_exec_params params;
    const char **args;
    char **env; /* "NAME=value", owned */
    char *command;
    char *cluster_json;
    char *source;
};

static void kc_exec_free(struct kc_exec *x)
{
    for (size_t i = 0; x->env && i < x->params.nenv; i++)
        free(x->env[i]);
    free(x->env);
    free(x->args);
    free(x->command);
    free(x->cluster_json);
    free(x->source);
}

static int kc_exec_args(struct kc_parse *p, const cJSON *exec, const char *where, struct kc_exec *x)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(exec, "args"), *a;
    if (!args || cJSON_IsNull(args))
        return 0;
    if (!cJSON_IsArray(args))
        return kc_fail(p, "%s: exec.args must be a list of strings", where);
    x->args = calloc((size_t)cJSON_GetArraySize(args) + 1, sizeof(*x->args));
    if (!x->args)
        return kc_oom(p);
    cJSON_ArrayForEach(a, args)
    {
        if (!cJSON_IsString(a))
            return kc_fail(p, "%s: exec.args must be a list of strings", where);
        x->args[x->params.nargs++] = a->valuestring;
    }
    x->params.args = x->args;
    return 0;
}

static int kc_exec_env(struct kc_parse *p, const cJSON *exec, const char *where, struct kc_exec *x)
{
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(exec, "env"), *e;
    if (!env || cJSON_IsNull(env))
        return 0;
    if (!cJSON_IsArray(env))
        return kc_fail(p, "%s: exec.env must be a list of {name, value}", where);
    x->env = calloc((size_t)cJSON_GetArraySize(env) + 1, sizeof(*x->env));
    if (!x->env)
        return kc_oom(p);
    cJSON_ArrayForEach(e, env)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(e, "value");
        if (!cJSON_IsString(name) || !*name->valuestring || strchr(name->valuestring, '=') ||
            (value && !cJSON_IsNull(value) && !cJSON_IsString(value)))
            return kc_fail(p, "%s: exec.env entries need a name (without '=') and a string value", where);
        char *entry = strbuf_format("%s=%s", name->valuestring, cJSON_IsString(value) ? value->valuestring : "");
        if (!entry)
            return kc_oom(p);
        x->env[x->params.nenv++] = entry;
    }
    x->params.env = (const char *const *)x->env;
    return 0;
}

/* apiVersion and interactiveMode: v1 must say how interactive the command
 * may be; v1beta1 defaults to IfAvailable (as client-go does). */
static int kc_exec_mode(struct kc_parse *p, const cJSON *exec, const char *where, struct kc_exec *x)
{
    const char *version, *mode;
    if (kc_string(p, exec, "apiVersion", where, &version) != 0 ||
        kc_string(p, exec, "interactiveMode", where, &mode) != 0)
        return -1;
    if (!version)
        return kc_fail(p, "%s: exec.apiVersion is missing (%s or %s)", where, KUBE_EXEC_V1, KUBE_EXEC_V1BETA1);
    if (strcmp(version, KUBE_EXEC_V1) != 0 && strcmp(version, KUBE_EXEC_V1BETA1) != 0)
        return kc_fail(p, "%s: exec.apiVersion %s is not supported (%s or %s)", where, version, KUBE_EXEC_V1,
                       KUBE_EXEC_V1BETA1);
    x->params.api_version = version;
    if (!mode && strcmp(version, KUBE_EXEC_V1) == 0)
        return kc_fail(p, "%s: exec.interactiveMode must be given for %s (Never, IfAvailable or Always)", where,
                       version);
    if (!mode || strcmp(mode, "IfAvailable") == 0)
        x->params.interactive_mode = KUBE_EXEC_IF_AVAILABLE;
    else if (strcmp(mode, "Never") == 0)
        x->params.interactive_mode = KUBE_EXEC_NEVER;
    else if (strcmp(mode, "Always") == 0)
        x->params.interactive_mode = KUBE_EXEC_ALWAYS;
    else
        return kc_fail(p, "%s: exec.interactiveMode %s is not Never, IfAvailable or Always", where, mode);
    return 0;
}

/* The command: a name is looked up on PATH when it runs; a relative path
 * with a '/' is relative to the kubeconfig's directory, as in kubectl. */
static int kc_exec_command(struct kc_parse *p, const cJSON *exec, const char *where, struct kc_exec *x)
{
    const char *command;
    if (kc_string(p, exec, "command", where, &command) != 0)
        return -1;
    if (!command)
        return kc_fail(p, "%s: exec.command is missing", where);
    if (command[0] != '/' && strchr(command, '/'))
        x->command = strbuf_format("%s%s%s", p->dir, p->dir[strlen(p->dir) - 1] == '/' ? "" : "/", command);
    else
        x->command = strdup(command);
    if (!x->command)
        return kc_oom(p);
    x->params.command = x->command;
    x->params.shown_command = command;
    return kc_string(p, exec, "installHint", where, &x->params.install_hint);
}

/* The certificate authority as the command is told it: base64 of the PEM. */
static int kc_ca_base64(struct kc_parse *p, const struct kube_config *cfg, struct strbuf *out)
{
    struct strbuf pem;
    strbuf_init(&pem);
    if (cfg->ca_data)
        strbuf_puts(&pem, cfg->ca_data);
    else if (strbuf_read_file(&pem, cfg->ca_file) != 0) {
        int e = errno;
        strbuf_free(&pem);
        return kc_fail(p, "certificate-authority %s: %s", cfg->ca_file, strerror(e));
    }
    base64_append(out, (const unsigned char *)(pem.data ? pem.data : ""), pem.len);
    int failed = strbuf_failed(&pem);
    strbuf_free(&pem);
    return failed ? kc_oom(p) : 0;
}

static void add_cluster_string(cJSON *obj, const cJSON *cluster, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cluster, key);
    if (cJSON_IsString(v) && *v->valuestring)
        cJSON_AddStringToObject(obj, key, v->valuestring);
}

/* The cluster's extension named client.authentication.k8s.io/exec, or NULL. */
static const cJSON *exec_extension(const cJSON *cluster)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cluster, "extensions"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(name) && strcmp(name->valuestring, "client.authentication.k8s.io/exec") == 0)
            return cJSON_GetObjectItemCaseSensitive(e, "extension");
    }
    return NULL;
}

/* provideClusterInfo: spec.cluster of KUBERNETES_EXEC_INFO. */
static int kc_exec_cluster(struct kc_parse *p, const cJSON *cluster, const struct kube_config *cfg, struct kc_exec *x)
{
    cJSON *obj = cJSON_CreateObject();
    struct strbuf ca;
    strbuf_init(&ca);
    if (!obj || !cJSON_AddStringToObject(obj, "server", cfg->server)) {
        cJSON_Delete(obj);
        return kc_oom(p);
    }
    add_cluster_string(obj, cluster, "tls-server-name");
    add_cluster_string(obj, cluster, "proxy-url");
    if (cfg->insecure_skip_tls_verify)
        cJSON_AddTrueToObject(obj, "insecure-skip-tls-verify");
    int rc = cfg->ca_data || cfg->ca_file ? kc_ca_base64(p, cfg, &ca) : 0;
    if (rc == 0 && ca.data)
        cJSON_AddStringToObject(obj, "certificate-authority-data", ca.data);
    const cJSON *ext = exec_extension(cluster);
    if (rc == 0 && ext)
        cJSON_AddItemToObject(obj, "config", cJSON_Duplicate(ext, 1));
    if (rc == 0 && !(x->cluster_json = cJSON_PrintUnformatted(obj)))
        rc = kc_oom(p);
    x->params.cluster_json = x->cluster_json;
    strbuf_free(&ca);
    cJSON_Delete(obj);
    return rc;
}

/* users[].user.exec -> cfg->exec. */
static int kc_exec(struct kc_parse *p, const cJSON *user, const cJSON *cluster, const char *where,
                   struct kube_config *cfg)
{
    const cJSON *exec = cJSON_GetObjectItemCaseSensitive(user, "exec");
    if (!exec || cJSON_IsNull(exec))
        return 0;
    if (!cJSON_IsObject(exec))
        return kc_fail(p, "%s: exec must be a mapping", where);
    if (cfg->token || cfg->token_file || cfg->client_cert_data || cfg->client_cert_file)
        return kc_fail(p, "%s: exec cannot be combined with token, tokenFile or a client certificate", where);
    struct kc_exec x;
    memset(&x, 0, sizeof(x));
    int provide = 0;
    int rc = kc_exec_mode(p, exec, where, &x);
    if (rc == 0)
        rc = kc_exec_command(p, exec, where, &x);
    if (rc == 0)
        rc = kc_exec_args(p, exec, where, &x);
    if (rc == 0)
        rc = kc_exec_env(p, exec, where, &x);
    if (rc == 0)
        rc = kc_bool(p, exec, "provideClusterInfo", where, &provide);
    if (rc == 0 && provide)
        rc = kc_exec_cluster(p, cluster, cfg, &x);
    if (rc == 0 && !(x.source = strbuf_format("kubeconfig %s: %s", p->path, where)))
        rc = kc_oom(p);
    x.params.source = x.source;
    if (rc == 0 && !(cfg->exec = kube_exec_new(&x.params)))
        rc = kc_oom(p);
    kc_exec_free(&x);
    return rc;
}

static int kc_token(struct kc_parse *p, const cJSON *user, const char *where, struct kube_config *cfg)
{
    const char *token, *file;
    if (kc_string(p, user, "token", where, &token) != 0 || kc_string(p, user, "tokenFile", where, &file) != 0)
        return -1;
    /* design.md spells it token-file; kubectl writes tokenFile. */
    if (!file && kc_string(p, user, "token-file", where, &file) != 0)
        return -1;
    if (token && !(cfg->token = strdup(token)))
        return kc_oom(p);
    return file ? kc_path(p, where, "tokenFile", file, &cfg->token_file) : 0;
}

static int kc_user(struct kc_parse *p, const char *name, const cJSON *user, const cJSON *cluster,
                   struct kube_config *cfg)
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
    if (rc == 0)
        rc = kc_exec(p, user, cluster, where, cfg);
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
        rc = found > 0 ? kc_user(p, user_name, user, cluster, cfg) : -1;
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

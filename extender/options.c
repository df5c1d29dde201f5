/* options.c - flags and environment. See options.h. */
#include "extender/options.h"
#include "extender/quantity.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*setter_fn)(struct options *o, const char *value);

struct flag {
    const char *name;       /* without the leading "--" */
    const char *arg;        /* NULL for switches */
    setter_fn set;
    const char *help;
    int simulate;           /* also accepted by `simulate` */
};

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -1;
    free(*field);
    *field = copy;
    return 0;
}

/* "HOST:PORT", "[v6]:PORT" or ":PORT" with a decimal port 0..65535; "" turns
 * the listener off. Checked here so a typo is a flag error (exit 2), and a
 * port past 65535 is not silently truncated by getaddrinfo. */
static bool valid_listen_address(const char *v)
{
    if (!*v)
        return true;
    const char *colon = strrchr(v, ':');
    if (!colon || !isdigit((unsigned char)colon[1]))
        return false;
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || port > 65535)
        return false;
    size_t hlen = (size_t)(colon - v);
    if (hlen > 0 && v[0] == '[')
        return hlen >= 2 && v[hlen - 1] == ']';
    return memchr(v, ':', hlen) == NULL;    /* an IPv6 host needs brackets */
}

static int set_listen(char **field, const char *v)
{
    return valid_listen_address(v) ? set_string(field, v) : 1;
}

static int set_listen_http(struct options *o, const char *v) { return set_listen(&o->listen_http, v); }
static int set_listen_https(struct options *o, const char *v) { return set_listen(&o->listen_https, v); }
static int set_tls_cert(struct options *o, const char *v) { return set_string(&o->tls_cert, v); }
static int set_tls_key(struct options *o, const char *v) { return set_string(&o->tls_key, v); }
static int set_tls_client_ca(struct options *o, const char *v) { return set_string(&o->tls_client_ca, v); }
static int set_state_file(struct options *o, const char *v) { return set_string(&o->state_file, v); }
static int set_pod_file(struct options *o, const char *v) { return set_string(&o->pod_file, v); }
static int set_kubeconfig(struct options *o, const char *v) { return set_string(&o->kubeconfig, v); }
static int set_lease_name(struct options *o, const char *v) { return *v ? set_string(&o->lease_name, v) : 1; }
static int set_leader_elect(struct options *o, const char *v) { (void)v; o->leader_elect = 1; return 0; }

/* Kubernetes names: lowercase RFC 1123 labels, which is what a namespace must be. */
static int is_dns_label(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 63 || v[0] == '-' || v[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
            return 0;
    return 1;
}

static int set_crl_namespace(struct options *o, const char *v)
{
    return is_dns_label(v) ? set_string(&o->crl_namespace, v) : 1;
}

static int set_model_label(struct options *o, const char *v) { return *v ? set_string(&o->gpu_model_label, v) : 1; }
static int set_pool_label(struct options *o, const char *v) { return *v ? set_string(&o->gpu_pool_label, v) : 1; }

static int set_lease_namespace(struct options *o, const char *v)
{
    return is_dns_label(v) ? set_string(&o->lease_namespace, v) : 1;
}

static int set_quota_configmap(struct options *o, const char *v)
{
    const char *slash = strchr(v, '/');
    if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/'))
        return 1;
    char ns[64];
    size_t n = (size_t)(slash - v);
    if (n >= sizeof(ns))
        return 1;
    memcpy(ns, v, n);
    ns[n] = '\0';
    return is_dns_label(ns) ? set_string(&o->quota_configmap, v) : 1;
}

static int set_placement(struct options *o, const char *v)
{
    if (strcmp(v, "filter") == 0)
        o->placement = PLACEMENT_FILTER;
    else if (strcmp(v, "bind") == 0)
        o->placement = PLACEMENT_BIND;
    else
        return 1;
    return 0;
}

static int set_gpu_policy(struct options *o, const char *v) { return policy_parse(v, &o->policy.gpu) ? 1 : 0; }
static int set_node_policy(struct options *o, const char *v) { return policy_parse(v, &o->policy.node) ? 1 : 0; }

static int set_assume_ttl(struct options *o, const char *v)
{
    int64_t ns = parse_duration_ns(v);
    if (ns <= 0)
        return 1;
    o->assume_ttl_ns = ns;
    return 0;
}

static int set_threads(struct options *o, const char *v)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 1 || n > 1024)
        return 1;
    o->threads = (int)n;
    return 0;
}

static int set_max_body(struct options *o, const char *v)
{
    int64_t n;
    if (quantity_parse_int(v, strlen(v), &n) != QTY_OK || n < 1024)
        return 1;
    o->max_body_bytes = n;
    return 0;
}

static int set_log_level(struct options *o, const char *v) { return log_parse_level(v, &o->log_level) ? 1 : 0; }

static int set_log_format(struct options *o, const char *v)
{
    if (strcmp(v, "text") == 0)
        o->log_json = 0;
    else if (strcmp(v, "json") == 0)
        o->log_json = 1;
    else
        return 1;
    return 0;
}

static int set_help(struct options *o, const char *v) { (void)v; o->show_help = 1; return 0; }
static int set_version(struct options *o, const char *v) { (void)v; o->show_version = 1; return 0; }

static const struct flag flags[] = {
    {"listen-http", "ADDR:PORT", set_listen_http, "plain HTTP listener for the extender verbs (default 127.0.0.1:3456; \"\" disables)", 0},
    {"listen-https", "ADDR:PORT", set_listen_https, "HTTPS listener (needs --tls-cert and --tls-key; default off)", 0},
    {"tls-cert", "FILE", set_tls_cert, "PEM certificate (chain) served on the HTTPS listener", 0},
    {"tls-key", "FILE", set_tls_key, "PEM private key of --tls-cert", 0},
    {"tls-client-ca", "FILE", set_tls_client_ca, "require HTTPS clients to present a certificate signed by this CA", 0},
    {"kubeconfig", "FILE", set_kubeconfig, "follow the cluster of this kubeconfig's current context (default: in-cluster config when KUBERNETES_SERVICE_HOST is set)", 0},
    {"state-file", "FILE", set_state_file, "offline mode: load Nodes, Pods and ConfigMaps from a kind: List (YAML or JSON)", 1},
    {"pod", "FILE", set_pod_file, "simulate: the Pod (YAML or JSON) to place", 1},
    {"placement", "filter|bind", set_placement, "filter: decide in the filter and answer one node (default); bind: answer every feasible node", 1},
    {"gpu-policy", "binpack|spread", set_gpu_policy, "order of GPUs for shared requests (default binpack; spread is refused for vcuda)", 1},
    {"node-policy", "binpack|spread", set_node_policy, "shape of node scores (default binpack)", 1},
    {"assume-ttl", "DURATION", set_assume_ttl, "how long an unbound decision holds its GPUs (default 60s)", 1},
    {"crl-namespace", "NAMESPACE", set_crl_namespace, "namespace of the CustomResourceLimitation ConfigMaps (default kube-public)", 1},
    {"quota-configmap", "NAMESPACE/NAME", set_quota_configmap, "the GPU quota ConfigMap (default kube-system/gpu-quota)", 1},
    {"gpu-model-label", "LABEL", set_model_label, "node label naming the GPU model, for quota (default tkestack.io/gpu-model)", 1},
    {"gpu-pool-label", "LABEL", set_pool_label, "node label naming the GPU pool, for quota (default tkestack.io/gpu-pool)", 1},
    {"leader-elect", NULL, set_leader_elect, "take decisions only while holding the Lease (run several replicas)", 0},
    {"lease-namespace", "NAMESPACE", set_lease_namespace, "namespace of the leader-election Lease (default kube-system)", 0},
    {"lease-name", "NAME", set_lease_name, "name of the leader-election Lease (default gpu-quota-admission)", 0},
    {"threads", "N", set_threads, "HTTP worker threads (default: number of cores)", 0},
    {"max-body-bytes", "BYTES", set_max_body, "largest request body; larger ones get 413 (default 256Mi)", 0},
    {"log-level", "debug|info|warn|error", set_log_level, "least severe level logged (default info)", 1},
    {"log-format", "text|json", set_log_format, "log line format (default text)", 1},
    {"version", NULL, set_version, "print the version and exit", 1},
    {"help", NULL, set_help, "print this help and exit", 1},
};

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

int64_t parse_duration_ns(const char *text)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0 || v > 1e9)
        return -1;
    double scale = 1e9;
    if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "m") == 0)
        scale = 60e9;
    else if (strcmp(end, "h") == 0)
        scale = 3600e9;
    else if (*end && strcmp(end, "s") != 0)
        return -1;
    return (int64_t)(v * scale);
}

static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    o->placement = PLACEMENT_FILTER;
    o->policy.gpu = POLICY_BINPACK;
    o->policy.node = POLICY_BINPACK;
    o->assume_ttl_ns = 60LL * 1000000000LL;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cores > 0 ? (int)cores : 2;
    o->max_body_bytes = 256LL * 1024 * 1024;
    o->log_level = LOG_INFO;
}

static const struct flag *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

static int apply(struct options *o, const struct flag *f, const char *value, const char *source, FILE *err)
{
    int rc = f->set(o, value);
    if (rc < 0) {
        fprintf(err, "gpu-quota-admission: out of memory\n");
        return -1;
    }
    if (rc > 0) {
        fprintf(err, "gpu-quota-admission: invalid value \"%s\" for %s%s (expected %s)\n", value,
                source[0] == '-' ? "--" : "", source[0] == '-' ? f->name : source, f->arg ? f->arg : "no value");
        return -1;
    }
    return 0;
}

static int is_true(const char *v) { return !strcmp(v, "true") || !strcmp(v, "1"); }
static int is_false(const char *v) { return !strcmp(v, "false") || !strcmp(v, "0") || !*v; }

/* GQA_LISTEN_HTTP for --listen-http, and so on; switches take true/false.
 * --help and --version are not read from the environment. */
static int apply_environment(struct options *o, enum options_command cmd, FILE *err)
{
    for (size_t i = 0; i < NFLAGS; i++) {
        const struct flag *f = &flags[i];
        if ((cmd == CMD_SIMULATE && !f->simulate) || f->set == set_help || f->set == set_version)
            continue;
        char env[64] = "GQA_";
        size_t k = 4;
        for (const char *p = f->name; *p && k < sizeof(env) - 1; p++)
            env[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[k] = '\0';
        const char *value = getenv(env);
        if (!value || (!f->arg && is_false(value)))
            continue;
        if (!f->arg && !is_true(value)) {
            fprintf(err, "gpu-quota-admission: invalid value \"%s\" for %s (expected true or false)\n", value, env);
            return -1;
        }
        if (apply(o, f, value, env, err) != 0)
            return -1;
    }
    return 0;
}

static int apply_arguments(struct options *o, enum options_command cmd, int argc, char **argv, FILE *err)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(err, "gpu-quota-admission: unexpected argument \"%s\"\n", a);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        const struct flag *f = find_flag(a + 2, len);
        if (!f || (cmd == CMD_SIMULATE && !f->simulate)) {
            fprintf(err, "gpu-quota-admission: unknown flag %.*s\n", (int)(len + 2), a);
            return -1;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (f->arg && !value) {
            if (i + 1 >= argc) {
                fprintf(err, "gpu-quota-admission: flag --%s needs a value (%s)\n", f->name, f->arg);
                return -1;
            }
            value = argv[++i];
        } else if (!f->arg && value) {
            fprintf(err, "gpu-quota-admission: flag --%s takes no value\n", f->name);
            return -1;
        }
        if (apply(o, f, value ? value : "", "--", err) != 0)
            return -1;
    }
    return 0;
}

static int check_combination(const struct options *o, enum options_command cmd, FILE *err)
{
    bool https = o->listen_https && *o->listen_https;
    if (https && (!o->tls_cert || !o->tls_key)) {
        fprintf(err, "gpu-quota-admission: --listen-https needs --tls-cert and --tls-key\n");
        return -1;
    }
    if (!https && o->tls_client_ca) {
        fprintf(err, "gpu-quota-admission: --tls-client-ca needs --listen-https\n");
        return -1;
    }
    if (o->show_help || o->show_version)
        return 0;
    if (cmd == CMD_SIMULATE && !o->state_file) {
        fprintf(err, "gpu-quota-admission: simulate needs --state-file FILE\n");
        return -1;
    }
    if (o->state_file && o->kubeconfig) {
        fprintf(err, "gpu-quota-admission: --state-file (offline) and --kubeconfig (live) exclude each other\n");
        return -1;
    }
    if (o->state_file && o->leader_elect) {
        fprintf(err, "gpu-quota-admission: --leader-elect needs a cluster, not --state-file\n");
        return -1;
    }
    if (!o->state_file && !o->kubeconfig && !getenv("KUBERNETES_SERVICE_HOST")) {
        fprintf(err, "gpu-quota-admission: no cluster: give --kubeconfig, run in a pod (KUBERNETES_SERVICE_HOST), "
                     "or --state-file for offline mode\n");
        return -1;
    }
    if (cmd == CMD_SIMULATE && !o->pod_file) {
        fprintf(err, "gpu-quota-admission: simulate needs --pod FILE\n");
        return -1;
    }
    if (cmd == CMD_SERVE && !*o->listen_http && !https) {
        fprintf(err, "gpu-quota-admission: --listen-http is empty and --listen-https is not set: nothing to serve\n");
        return -1;
    }
    return 0;
}

int options_parse(struct options *o, enum options_command cmd, int argc, char **argv, FILE *err)
{
    set_defaults(o);
    if (set_string(&o->listen_http, "127.0.0.1:3456") != 0 || set_string(&o->crl_namespace, "kube-public") != 0 ||
        set_string(&o->quota_configmap, "kube-system/gpu-quota") != 0 ||
        set_string(&o->lease_namespace, "kube-system") != 0 || set_string(&o->lease_name, "gpu-quota-admission") != 0 ||
        set_string(&o->gpu_model_label, "tkestack.io/gpu-model") != 0 ||
        set_string(&o->gpu_pool_label, "tkestack.io/gpu-pool") != 0) {
        options_free(o);
        return -1;
    }
    if (apply_environment(o, cmd, err) != 0 || apply_arguments(o, cmd, argc, argv, err) != 0 ||
        check_combination(o, cmd, err) != 0) {
        options_free(o);
        return -1;
    }
    return 0;
}

void options_free(struct options *o)
{
    free(o->listen_http);
    free(o->listen_https);
    free(o->tls_cert);
    free(o->tls_key);
    free(o->tls_client_ca);
    free(o->state_file);
    free(o->pod_file);
    free(o->kubeconfig);
    free(o->crl_namespace);
    free(o->quota_configmap);
    free(o->gpu_model_label);
    free(o->gpu_pool_label);
    free(o->lease_namespace);
    free(o->lease_name);
    memset(o, 0, sizeof(*o));
}

void options_print_help(FILE *out)
{
    fprintf(out,
            "Usage: gpu-quota-admission [flags]                       serve the extender\n"
            "       gpu-quota-admission simulate --state-file F --pod POD.yaml [flags]\n"
            "                                                        print where the pod would go, exit 1 if nowhere\n"
            "       gpu-quota-admission validate-crl [--crl-namespace NS] FILE...\n"
            "                                                        check CustomResourceLimitation ConfigMaps, exit 1 if any is invalid\n"
            "\nFlags (each also settable as GQA_<NAME>, e.g. GQA_LISTEN_HTTP):\n");
    for (size_t i = 0; i < NFLAGS; i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", flags[i].name, flags[i].arg ? " " : "",
                 flags[i].arg ? flags[i].arg : "");
        fprintf(out, "  %-32s %s\n", left, flags[i].help);
    }
}

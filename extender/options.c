/* options.c - flags and environment. See options.h. */
#include "extender/options.h"
#include "admission/schedulername.h"
#include "extender/tlspolicy.h"
#include "extender/workers.h"
#include "lib/clock.h"
#include "lib/duration.h"
#include "lib/flags.h"
#include "lib/quantity.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "gpu-quota-admission"
#define SERVE (1u << CMD_SERVE)
#define BOTH (SERVE | 1u << CMD_SIMULATE)

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
    return memchr(v, ':', hlen) == NULL; /* an IPv6 host needs brackets */
}

static bool any_value(const char *v)
{
    (void)v;
    return true;
}

static bool nonempty(const char *v)
{
    return *v != '\0';
}

/* Kubernetes names: lowercase RFC 1123 labels, which is what a namespace must be. */
static bool is_dns_label(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 63 || v[0] == '-' || v[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
            return false;
    return true;
}

/* A setter that checks the value (false: invalid) and keeps a copy in field. */
#define STRING_FLAG(setter, field, valid)                                              \
    static int setter(void *target, const char *v)                                     \
    {                                                                                  \
        return valid(v) ? flags_set_string(&((struct options *)target)->field, v) : 1; \
    }

STRING_FLAG(set_listen_http, listen_http, valid_listen_address)
STRING_FLAG(set_listen_https, listen_https, valid_listen_address)
STRING_FLAG(set_listen_probes, listen_probes, valid_listen_address)
STRING_FLAG(set_tls_cert, tls_cert, any_value)
STRING_FLAG(set_tls_key, tls_key, any_value)
STRING_FLAG(set_tls_client_ca, tls_client_ca, any_value)
STRING_FLAG(set_tls_min_version, tls_min_version, tls_policy_version_ok)

/* Checked in check_combination, which can say which suite is wrong and why. */
STRING_FLAG(set_tls_cipher_suites, tls_cipher_suites, any_value)
STRING_FLAG(set_state_file, state_file, any_value)
STRING_FLAG(set_pod_file, pod_file, any_value)
STRING_FLAG(set_kubeconfig, kubeconfig, any_value)
STRING_FLAG(set_decision_key_file, decision_key_file, nonempty)
STRING_FLAG(set_lease_name, lease_name, nonempty)
STRING_FLAG(set_lease_namespace, lease_namespace, is_dns_label)
STRING_FLAG(set_crl_namespace, crl_namespace, is_dns_label)
STRING_FLAG(set_model_label, gpu_model_label, nonempty)
STRING_FLAG(set_pool_label, gpu_pool_label, nonempty)
STRING_FLAG(set_scheduler_name, set_scheduler_name, schedname_valid)

static int set_leader_elect(void *target, const char *v)
{
    struct options *o = target;
    (void)v;
    o->leader_elect = 1;
    return 0;
}

static int set_quota_configmap(void *target, const char *v)
{
    struct options *o = target;
    const char *slash = strchr(v, '/');
    if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/'))
        return 1;
    char ns[64];
    size_t n = (size_t)(slash - v);
    if (n >= sizeof(ns))
        return 1;
    memcpy(ns, v, n);
    ns[n] = '\0';
    return is_dns_label(ns) ? flags_set_string(&o->quota_configmap, v) : 1;
}

static int set_placement(void *target, const char *v)
{
    struct options *o = target;
    if (strcmp(v, "filter") == 0)
        o->placement = PLACEMENT_FILTER;
    else if (strcmp(v, "bind") == 0)
        o->placement = PLACEMENT_BIND;
    else
        return 1;
    return 0;
}

static int set_gpu_policy(void *target, const char *v)
{
    struct options *o = target;
    return pack_policy_parse(v, &o->policy.gpu) ? 1 : 0;
}

static int set_vcuda_shares(void *target, const char *v)
{
    struct options *o = target;
    if (strcmp(v, "place") == 0)
        o->policy.refuse_vcuda_shares = false;
    else if (strcmp(v, "refuse") == 0)
        o->policy.refuse_vcuda_shares = true;
    else
        return 1;
    return 0;
}

static int set_node_policy(void *target, const char *v)
{
    struct options *o = target;
    return pack_policy_parse(v, &o->policy.node) ? 1 : 0;
}

static int set_hami_gpu_policy(void *target, const char *v)
{
    struct options *o = target;
    return pack_policy_parse(v, &o->policy.hami_gpu) ? 1 : 0;
}

static int set_hami_memory_scaling(void *target, const char *v)
{
    struct options *o = target;
    char *end;
    errno = 0;
    double f = strtod(v, &end);
    if (errno || *end || end == v || !(f > 0) || f > 100)
        return 1;
    o->hami.memory_scaling = f;
    return 0;
}

/* A decimal integer in [min, max]. */
static int parse_int_in(const char *v, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < min || n > max)
        return 1;
    *out = n;
    return 0;
}

static int set_hami_split_count(void *target, const char *v)
{
    struct options *o = target;
    long n;
    if (parse_int_in(v, 1, HAMI_MAX_SPLIT, &n))
        return 1;
    o->hami.default_split = (int)n;
    return 0;
}

static int set_hami_default_memory(void *target, const char *v)
{
    struct options *o = target;
    long n;
    if (parse_int_in(v, 0, (long)HAMI_MAX_MEMORY_MIB, &n))
        return 1;
    o->hami.default_memory_mib = n;
    return 0;
}

static int set_hami_default_cores(void *target, const char *v)
{
    struct options *o = target;
    long n;
    if (parse_int_in(v, 0, 100, &n))
        return 1;
    o->hami.default_cores = (int)n;
    return 0;
}

static int set_hami_memory_factor(void *target, const char *v)
{
    struct options *o = target;
    long n;
    if (parse_int_in(v, 1, HAMI_MAX_MEMORY_FACTOR, &n))
        return 1;
    o->hami.memory_factor = (int)n;
    return 0;
}

static int set_hami_handshake(void *target, const char *v)
{
    struct options *o = target;
    enum hami_handshake_mode m;
    if (hami_handshake_mode_parse(v, &m) != 0)
        return 1;
    o->hami.handshake = m;
    return 0;
}

static int set_hami_handshake_timeout(void *target, const char *v)
{
    struct options *o = target;
    int64_t ns = parse_duration_ns(v);
    if (ns <= 0)
        return 1;
    o->hami.handshake_timeout_ns = ns;
    return 0;
}

static int set_hami_handshake_interval(void *target, const char *v)
{
    struct options *o = target;
    int64_t ns = parse_duration_ns(v);
    if (ns < NS_PER_S / 10 || ns > 3600 * NS_PER_S)
        return 1;
    o->hami.handshake_interval_ns = ns;
    return 0;
}

static int set_hami_resource_quota(void *target, const char *v)
{
    struct options *o = target;
    if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
        return 1;
    o->hami_resource_quota = strcmp(v, "on") == 0;
    return 0;
}

static int set_assume_ttl(void *target, const char *v)
{
    struct options *o = target;
    int64_t ns = parse_duration_ns(v);
    if (ns <= 0)
        return 1;
    o->assume_ttl_ns = ns;
    return 0;
}

static int set_threads(void *target, const char *v)
{
    struct options *o = target;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 0 || n > 1024)
        return 1;
    if (n == 0) { /* as Kubernetes components read 0 workers: one per core */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores > 0 ? (cores > 1024 ? 1024 : cores) : 2;
    }
    o->threads = (int)n;
    return 0;
}

/* A whole number in lo..hi into *out: 0, or 1 when it is not one. */
static int set_int_in(const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < lo || n > hi)
        return 1;
    *out = (int)n;
    return 0;
}

static int set_decision_workers(void *target, const char *v)
{
    return set_int_in(v, 1, WORKERS_MAX_THREADS, &((struct options *)target)->decision_workers);
}

static int set_filter_best(void *target, const char *v)
{
    return set_int_in(v, 0, PLACEMENT_FILTER_BEST_MAX, &((struct options *)target)->filter_best);
}

static int set_decision_queue(void *target, const char *v)
{
    return set_int_in(v, 1, WORKERS_MAX_QUEUE, &((struct options *)target)->decision_queue);
}

static int set_max_body(void *target, const char *v)
{
    struct options *o = target;
    int64_t n;
    if (quantity_parse_int(v, strlen(v), &n) != QTY_OK || n < 1024)
        return 1;
    o->max_body_bytes = n;
    return 0;
}

static int set_body_budget(void *target, const char *v)
{
    struct options *o = target;
    int64_t n;
    if (quantity_parse_int(v, strlen(v), &n) != QTY_OK || n < 1024)
        return 1;
    o->body_budget = n;
    return 0;
}

/* A count of connections, 1..1,000,000 (0 too when zero_means_off). */
static int parse_connections(const char *v, bool zero_means_off, unsigned *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < (zero_means_off ? 0 : 1) || n > 1000000)
        return 1;
    *out = (unsigned)n;
    return 0;
}

static int set_max_connections(void *target, const char *v)
{
    return parse_connections(v, false, &((struct options *)target)->max_connections);
}

static int set_max_connections_per_ip(void *target, const char *v)
{
    return parse_connections(v, true, &((struct options *)target)->max_connections_per_ip);
}

static int set_read_timeout(void *target, const char *v)
{
    struct options *o = target;
    int64_t ns = parse_duration_ns(v);
    if (ns < 100 * 1000000LL || ns > 3600 * 1000000000LL)
        return 1;
    o->read_timeout_ns = ns;
    return 0;
}

static int set_log_level(void *target, const char *v)
{
    struct options *o = target;
    return log_parse_level(v, &o->log_level) ? 1 : 0;
}

/* klog's -v: 4 and above is --log-level debug, below it info. */
static int set_verbosity(void *target, const char *v)
{
    struct options *o = target;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 0 || n > 10)
        return 1;
    o->log_level = log_level_of_verbosity((int)n);
    return 0;
}

static int set_log_format(void *target, const char *v)
{
    struct options *o = target;
    return log_parse_format(v, &o->log_format) ? 1 : 0;
}

static int set_metrics_per_node(void *target, const char *v)
{
    struct options *o = target;
    (void)v;
    o->metrics_per_node = 1;
    return 0;
}

static int set_metrics_per_pod(void *target, const char *v)
{
    struct options *o = target;
    (void)v;
    o->metrics_per_pod = 1;
    return 0;
}

static int set_help(void *target, const char *v)
{
    struct options *o = target;
    (void)v;
    o->show_help = 1;
    return 0;
}

static int set_version(void *target, const char *v)
{
    struct options *o = target;
    (void)v;
    o->show_version = 1;
    return 0;
}

static const struct flag_spec flags[] = {
    {"listen-http", "ADDR:PORT", set_listen_http,
     "plain HTTP listener for the extender verbs (default 127.0.0.1:3456; \"\" disables)", SERVE},
    {"listen-https", "ADDR:PORT", set_listen_https, "HTTPS listener (needs --tls-cert and --tls-key; default off)",
     SERVE},
    {"listen-probes", "ADDR:PORT", set_listen_probes,
     "plain HTTP listener for /livez, /readyz, /healthz and /metrics only, apart from the extender listeners' "
     "connections (default off)",
     SERVE},
    {"tls-cert", "FILE", set_tls_cert, "PEM certificate (chain) served on the HTTPS listener", SERVE},
    {"tls-key", "FILE", set_tls_key, "PEM private key of --tls-cert", SERVE},
    {"tls-client-ca", "FILE", set_tls_client_ca,
     "require HTTPS clients to present a certificate signed by this CA, with the clientAuth extended key usage", SERVE},
    {"tls-min-version", "VERSION", set_tls_min_version,
     "oldest TLS version accepted: VersionTLS12 or VersionTLS13 (default VersionTLS12; TLS 1.3 is always preferred)",
     SERVE},
    {"tls-cipher-suites", "SUITE,...", set_tls_cipher_suites,
     "TLS 1.2 cipher suites, kube-apiserver's names; only ECDHE with AES-GCM or ChaCha20-Poly1305 "
     "(default all of those)",
     SERVE},
    {"kubeconfig", "FILE", set_kubeconfig,
     "follow the cluster of this kubeconfig's current context (default: in-cluster config when KUBERNETES_SERVICE_HOST "
     "is set)",
     SERVE},
    {"decision-key-file", "FILE", set_decision_key_file,
     "live mode: the secret (16..4096 bytes, from a Secret shared by the replicas) that proves this service's "
     "decisions (gpu-admission.io/proof); without it a random key per process: decisions of other replicas are then "
     "fitted again",
     SERVE},
    {"state-file", "FILE", set_state_file,
     "offline mode: load Nodes, Pods and ConfigMaps from a kind: List (YAML or JSON)", BOTH},
    {"pod", "FILE", set_pod_file, "simulate: the Pod (YAML or JSON) to place; - reads standard input", BOTH},
    {"placement", "filter|bind", set_placement,
     "filter: decide in the filter and answer one node (default); bind: answer every feasible node", BOTH},
    {"filter-best", "N", set_filter_best,
     "bind placement: answer only the N best feasible nodes (0..1000; default 0: every one), so kube-scheduler "
     "scores N nodes, not all",
     BOTH},
    {"gpu-policy", "binpack|spread", set_gpu_policy,
     "order of GPUs for shared requests (default binpack; spread needs --vcuda-shares refuse)", BOTH},
    {"vcuda-shares", "place|refuse", set_vcuda_shares,
     "place tencent.com/vcuda-core shares (default), or refuse them with an Error (no GPU-Manager in the cluster; "
     "needed for --gpu-policy spread, whose order GPU-Manager would reject)",
     BOTH},
    {"node-policy", "binpack|spread", set_node_policy, "shape of node scores (default binpack)", BOTH},
    {"assume-ttl", "DURATION", set_assume_ttl,
     "the longest an unbound decision holds its GPUs; binding, deletion or the pod's next scheduling attempt end it "
     "sooner (default 15m, past gang waits at Coscheduling's Permit)",
     BOTH},
    {"hami-gpu-policy", "binpack|spread", set_hami_gpu_policy,
     "order of HAMi GPUs for vGPUs, unless the pod says hami.io/gpu-scheduler-policy (default spread, as HAMi)", BOTH},
    {"hami-memory-scaling", "FACTOR", set_hami_memory_scaling,
     "multiply HAMi GPUs' registered memory by this, 0 < FACTOR <= 100 (default 1; HAMi's plugin already applies its "
     "own deviceMemoryScaling)",
     BOTH},
    {"hami-split-count", "N", set_hami_split_count,
     "tasks per HAMi GPU when its registration gives none, 1..1024 (default 10, HAMi's deviceSplitCount)", BOTH},
    {"hami-default-memory", "MIB", set_hami_default_memory,
     "memory of a vGPU without gpumem or gpumem-percentage, in MiB (default 0: the whole GPU, as HAMi's defaultMem)",
     BOTH},
    {"hami-default-cores", "PERCENT", set_hami_default_cores,
     "gpucores of a vGPU that names none, 0..100 (default 0, as HAMi's defaultCores)", BOTH},
    {"hami-memory-factor", "N", set_hami_memory_factor,
     "nvidia.com/gpumem counts units of N MiB, as HAMi's memoryFactor (nvidia section of its device config), "
     "1..1048576 (default 1)",
     BOTH},
    {"hami-handshake", "off|observe|write", set_hami_handshake,
     "observe: drop a HAMi node's devices while its plugin leaves hami.io/node-handshake unanswered past the timeout "
     "and the node advertises no nvidia.com/gpu (default); write: also write the Requesting_ requests (only where "
     "no HAMi scheduler process runs); off: ignore the handshake",
     BOTH},
    {"hami-handshake-timeout", "DURATION", set_hami_handshake_timeout,
     "how long a Requesting_ handshake may stay unanswered (default 60s)", BOTH},
    {"hami-handshake-interval", "DURATION", set_hami_handshake_interval,
     "with --hami-handshake write: how often requests are written, 100ms..1h (default 15s, as HAMi's scheduler)", BOTH},
    {"hami-resource-quota", "on|off", set_hami_resource_quota,
     "live mode: watch ResourceQuotas and refuse HAMi vGPUs over limits.nvidia.com/gpumem and gpucores as HAMi's "
     "scheduler does (default on; needs list and watch on resourcequotas)",
     SERVE},
    {"crl-namespace", "NAMESPACE", set_crl_namespace,
     "namespace of the CustomResourceLimitation ConfigMaps (default kube-public)", BOTH},
    {"quota-configmap", "NAMESPACE/NAME", set_quota_configmap,
     "the GPU quota ConfigMap (default kube-system/gpu-quota)", BOTH},
    {"gpu-model-label", "LABEL", set_model_label,
     "node label naming the GPU model, for quota (default tkestack.io/gpu-model)", BOTH},
    {"gpu-pool-label", "LABEL", set_pool_label,
     "node label naming the GPU pool, for quota (default tkestack.io/gpu-pool)", BOTH},
    {"leader-elect", NULL, set_leader_elect, "take decisions only while holding the Lease (run several replicas)",
     SERVE},
    {"lease-namespace", "NAMESPACE", set_lease_namespace,
     "namespace of the leader-election Lease (default kube-system)", SERVE},
    {"lease-name", "NAME", set_lease_name, "name of the leader-election Lease (default gpu-quota-admission)", SERVE},
    {"set-scheduler-name", "NAME", set_scheduler_name,
     "POST /admission/mutate-scheduler-name sets spec.schedulerName NAME on pods asking for a managed GPU resource "
     "that name no other scheduler (default: off, that path answers 404)",
     SERVE},
    {"threads", "N", set_threads, "HTTP worker threads, 1..1024; 0 or unset: number of cores", SERVE},
    {"decision-workers", "N", set_decision_workers,
     "live mode: threads that take decisions (filter in filter mode, bind) and wait on the API server for them "
     "(default 16)",
     SERVE},
    {"decision-queue", "N", set_decision_queue,
     "decisions that may wait for a free decision worker, at least --max-connections per listener; one that "
     "waited over 2 s is answered with an Error (default 128)",
     SERVE},
    {"max-body-bytes", "BYTES", set_max_body, "largest request body; larger ones get 413 (default 256Mi)", SERVE},
    {"body-budget", "BYTES", set_body_budget,
     "memory all request bodies in flight may hold together; past it requests get 503 (default 384Mi)", SERVE},
    {"max-connections", "N", set_max_connections,
     "open client connections per listener; when full, those that have waited longest for a request are closed for "
     "clients waiting to connect (default 1024)",
     SERVE},
    {"max-connections-per-ip", "N", set_max_connections_per_ip,
     "open client connections per listener from one address; 0: no limit (default 256)", SERVE},
    {"read-timeout", "DURATION", set_read_timeout,
     "longest time a client may take to send one whole request; the connection is closed after it (default 30s)",
     SERVE},
    {"log-level", "debug|info|warn|error", set_log_level, "least severe level logged (default info)", BOTH},
    {"v", "N", set_verbosity, "klog verbosity, 0..10: 4 or more logs debug lines (as --log-level debug)", BOTH},
    {"log-format", "text|json|klog", set_log_format,
     "log line format: text, one JSON object per line, or klog's (Kubernetes components') text (default text)", BOTH},
    {"metrics-per-node", NULL, set_metrics_per_node,
     "also export the capacity gauges per node and per GPU (gqa_node_*, gqa_gpu_*; one series per node and resource, "
     "and per GPU with DCGM exporter's labels)",
     SERVE},
    {"metrics-per-pod", NULL, set_metrics_per_pod,
     "also export what each pod holds on each GPU (gqa_pod_gpu_*; one series per pod and GPU)", SERVE},
    {"version", NULL, set_version, "print the version and exit", BOTH | FLAG_NO_ENV},
    {"help", NULL, set_help, "print this help and exit", BOTH | FLAG_NO_ENV},
};

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    o->placement = PLACEMENT_FILTER;
    o->policy.gpu = POLICY_BINPACK;
    o->policy.node = POLICY_BINPACK;
    o->policy.hami_gpu = POLICY_SPREAD;
    hami_config_defaults(&o->hami);
    o->hami_resource_quota = 1;
    o->assume_ttl_ns = OPTIONS_ASSUME_TTL_NS;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cores > 0 ? (int)cores : 2;
    o->decision_workers = OPTIONS_DECISION_WORKERS;
    o->decision_queue = OPTIONS_DECISION_QUEUE;
    o->max_body_bytes = 256LL * 1024 * 1024;
    o->body_budget = 384LL * 1024 * 1024;
    o->max_connections = 1024;
    o->max_connections_per_ip = 256;
    o->read_timeout_ns = 30LL * 1000000000LL;
    o->log_level = LOG_INFO;
}

static int parse_flags(struct options *o, enum options_command cmd, int argc, char **argv, FILE *err)
{
    struct flag_parser p = {PROG, flags, NFLAGS, "GQA_", 1u << cmd, err};
    return flags_parse(&p, o, argc, argv);
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
    if (!https && (o->tls_min_version || o->tls_cipher_suites)) {
        fprintf(err, "gpu-quota-admission: --tls-min-version and --tls-cipher-suites need --listen-https\n");
        return -1;
    }
    char *why = NULL;
    if (o->tls_cipher_suites && tls_policy_suites_ok(o->tls_cipher_suites, &why) != 0) {
        fprintf(err, "gpu-quota-admission: %s\n", why ? why : "out of memory");
        free(why);
        return -1;
    }
    if (o->show_help || o->show_version)
        return 0;
    if (o->policy.gpu == POLICY_SPREAD && !o->policy.refuse_vcuda_shares) {
        fprintf(err, "gpu-quota-admission: --gpu-policy spread cannot place tencent.com/vcuda-core shares "
                     "(GPU-Manager re-checks them in its binpack order and fails the pod with \"Nvidia node "
                     "mismatch\"): use --gpu-policy binpack, or add --vcuda-shares refuse when no pod asks for "
                     "vcuda shares\n");
        return -1;
    }
    if (o->body_budget < o->max_body_bytes) {
        fprintf(err, "gpu-quota-admission: --body-budget is smaller than --max-body-bytes: the largest body could "
                     "never be received\n");
        return -1;
    }
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
    if (flags_set_string(&o->listen_http, "127.0.0.1:3456") != 0 ||
        flags_set_string(&o->crl_namespace, "kube-public") != 0 ||
        flags_set_string(&o->quota_configmap, "kube-system/gpu-quota") != 0 ||
        flags_set_string(&o->lease_namespace, "kube-system") != 0 ||
        flags_set_string(&o->lease_name, "gpu-quota-admission") != 0 ||
        flags_set_string(&o->gpu_model_label, "tkestack.io/gpu-model") != 0 ||
        flags_set_string(&o->gpu_pool_label, "tkestack.io/gpu-pool") != 0) {
        options_free(o);
        return -1;
    }
    if (parse_flags(o, cmd, argc, argv, err) != 0 || check_combination(o, cmd, err) != 0) {
        options_free(o);
        return -1;
    }
    return 0;
}

void options_free(struct options *o)
{
    free(o->listen_http);
    free(o->listen_https);
    free(o->listen_probes);
    free(o->tls_cert);
    free(o->tls_key);
    free(o->tls_client_ca);
    free(o->tls_min_version);
    free(o->tls_cipher_suites);
    free(o->state_file);
    free(o->pod_file);
    free(o->kubeconfig);
    free(o->decision_key_file);
    free(o->crl_namespace);
    free(o->quota_configmap);
    free(o->gpu_model_label);
    free(o->gpu_pool_label);
    free(o->lease_namespace);
    free(o->lease_name);
    free(o->set_scheduler_name);
    memset(o, 0, sizeof(*o));
}

void options_print_help(FILE *out)
{
    fprintf(out,
            "Usage: gpu-quota-admission [flags]                       serve the extender\n"
            "       gpu-quota-admission simulate --state-file F --pod POD.yaml [flags]\n"
            "                                                        print where the pod would go, exit 1 if nowhere\n"
            "       gpu-quota-admission validate-crl [--crl-namespace NS] FILE...\n"
            "                                                        check CustomResourceLimitation ConfigMaps, exit 1 "
            "if any is invalid\n"
            "\nFlags (each also settable as GQA_<NAME>, e.g. GQA_LISTEN_HTTP):\n");
    struct flag_parser p = {PROG, flags, NFLAGS, "GQA_", 1u << CMD_SERVE, out};
    flags_print_help(&p, out, 32);
}

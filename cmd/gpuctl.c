/* gpuctl.c - the kubectl gpu plugin's commands. See gpuctl.h. */
#include "cmd/gpuctl.h"
#include "lib/strbuf.h"
#include "lib/table.h"
#include "lib/termtext.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 10

/* ---- connecting ----------------------------------------------------------- */

/* kubectl's choice: --kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config. */
static char *kubeconfig_path(const struct gpuctl_options *o)
{
    if (o->kubeconfig)
        return strdup(o->kubeconfig);
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
        const char *colon = strchr(env, ':');
        return colon ? strndup(env, (size_t)(colon - env)) : strdup(env);
    }
    const char *home = getenv("HOME");
    return strbuf_format("%s/.kube/config", home && *home ? home : ".");
}

static int open_api(struct gpuctl *g)
{
    char *path = kubeconfig_path(g->opts), *err = NULL;
    if (!path) {
        g->api_error = strdup("out of memory");
        return -1;
    }
    g->api = kube_config_from_file_context(path, g->opts->context, &err);
    free(path);
    /* A credential plugin may ask the user at this terminal (a browser login,
     * an MFA code) and has the request's deadline. */
    if (g->api && g->api->exec)
        kube_exec_configure(g->api->exec, (long)g->opts->timeout_ms, true);
    if (g->api && !(g->api_client = kube_client_new(g->api, &err))) {
        kube_config_free(g->api);
        g->api = NULL;
    }
    if (!g->api) {
        g->api_error = err ? err : strdup("out of memory");
        return -1;
    }
    return 0;
}

/* "NS/NAME[:PORT]" -> the service proxy path prefix. */
static char *proxy_prefix(const char *service)
{
    const char *slash = strchr(service, '/');
    if (!slash || slash == service || !slash[1] || strchr(slash + 1, '/'))
        return NULL;
    return strbuf_format("/api/v1/namespaces/%.*s/services/%s/proxy", (int)(slash - service), service, slash + 1);
}

static int open_direct(struct gpuctl *g)
{
    char *err = NULL;
    size_t len = strlen(g->opts->server);
    while (len > 0 && g->opts->server[len - 1] == '/')
        len--;
    g->direct = calloc(1, sizeof(*g->direct));
    if (!g->direct || !(g->direct->server = strndup(g->opts->server, len)) ||
        !(g->direct->source = strdup("--server")) || !(g->direct_client = kube_client_new(g->direct, &err))) {
        fprintf(g->err, "kubectl-gpu: --server %s: %s\n", g->opts->server, err ? err : "out of memory");
        free(err);
        return -1;
    }
    return 0;
}

static bool want_color(const struct gpuctl_options *o, FILE *out)
{
    if (o->color != COLOR_AUTO)
        return o->color == COLOR_ALWAYS;
    const char *term = getenv("TERM"), *no_color = getenv("NO_COLOR");
    return isatty(fileno(out)) && !(no_color && *no_color) && !(term && strcmp(term, "dumb") == 0);
}

int gpuctl_open(struct gpuctl *g, const struct gpuctl_options *o, FILE *out, FILE *err)
{
    memset(g, 0, sizeof(*g));
    g->opts = o;
    g->out = out;
    g->err = err;
    g->color = want_color(o, out);
    if (o->server) {
        open_api(g); /* optional: explain POD reads the pod through it */
        if (open_direct(g) != 0 || !(g->proxy_prefix = strdup("")))
            return -1;
    } else {
        if (open_api(g) != 0) {
            fprintf(err, "kubectl-gpu: %s\n", g->api_error);
            return -1;
        }
        if (!(g->proxy_prefix = proxy_prefix(o->service ? o->service : GPUCTL_DEFAULT_SERVICE))) {
            fprintf(err, "kubectl-gpu: --service %s: expected NAMESPACE/NAME[:PORT]\n", o->service);
            return -1;
        }
    }
    g->ns = o->namespace_ ? o->namespace_ : g->api && g->api->namespace_ ? g->api->namespace_ : "default";
    return 0;
}

void gpuctl_close(struct gpuctl *g)
{
    kube_client_free(g->api_client);
    kube_config_free(g->api);
    kube_client_free(g->direct_client);
    kube_config_free(g->direct);
    free(g->proxy_prefix);
    free(g->api_error);
    memset(g, 0, sizeof(*g));
}

/* ---- requests --------------------------------------------------------------- */

/* The message of a failed answer: the service's {"error"}, else the API's
 * Status, else the transport's; control characters escaped (termtext.h). */
static char *failure_text(const struct kube_response *r)
{
    cJSON *body = r->body ? cJSON_Parse(r->body) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(body, "error");
    char *msg = cJSON_IsString(e) ? strbuf_format("%ld: %s", r->status, e->valuestring) : NULL;
    cJSON_Delete(body);
    char *safe = term_text_escape(msg ? msg : r->error ? r->error : "no answer");
    free(msg);
    return safe;
}

/* Replace *text (a cJSON string or key) by its escaped copy when it holds
 * a control character. 0, or -1 when memory ran out. */
static int clean_text(char **text)
{
    if (!*text || term_text_clean(*text))
        return 0;
    char *safe = term_text_escape(*text);
    if (!safe)
        return -1;
    cJSON_free(*text);
    *text = safe; /* cJSON's default hooks are malloc and free */
    return 0;
}

/* Every key and string of an answer printed as text (tables, explain
 * lines) comes from the cluster: node names, the topology annotation's
 * model, quota ConfigMap keys, reasons quoting pod annotations. Escaped
 * once here, so no cell or line can carry a terminal escape (issue 22). */
static int clean_tree(cJSON *v)
{
    for (; v; v = v->next) {
        if ((!(v->type & cJSON_StringIsConst) && clean_text(&v->string) != 0) ||
            (cJSON_IsString(v) && clean_text(&v->valuestring) != 0) || clean_tree(v->child) != 0)
            return -1;
    }
    return 0;
}

/* A JSON answer of the service, or NULL after printing why. */
static cJSON *service_call(struct gpuctl *g, const char *method, const char *path, const char *body)
{
    struct kube_client *c = g->opts->server ? g->direct_client : g->api_client;
    struct strbuf url;
    strbuf_init(&url);
    strbuf_printf(&url, "%s%s", g->proxy_prefix, path);
    struct kube_response r = {0};
    int rc = url.data ? kube_request(c, method, url.data, body ? "application/json" : NULL, body,
                                     body ? strlen(body) : 0, g->opts->timeout_ms, &r)
                      : -1;
    cJSON *answer = NULL;
    if (rc == 0 && r.status == 200 && !(answer = cJSON_Parse(r.body ? r.body : "")))
        fprintf(g->err, "kubectl-gpu: %s: the answer is not JSON\n", url.data);
    else if (answer && g->opts->output != OUT_JSON && g->opts->output != OUT_YAML && clean_tree(answer) != 0) {
        fprintf(g->err, "kubectl-gpu: out of memory\n");
        cJSON_Delete(answer);
        answer = NULL;
    } else if (!answer) {
        char *why = failure_text(&r);
        const char *where =
            g->opts->server ? g->opts->server : (g->opts->service ? g->opts->service : GPUCTL_DEFAULT_SERVICE);
        fprintf(g->err, "kubectl-gpu: %s %s (service %s): %s\n", method, path, where, why ? why : "out of memory");
        free(why);
    }
    kube_response_free(&r);
    strbuf_free(&url);
    return answer;
}

static void indent(struct strbuf *sb, int depth)
{
    for (int i = 0; i < depth; i++)
        strbuf_puts(sb, "  ");
}

/* JSON as kubectl -o json lays it out (Go's MarshalIndent with two
 * spaces): one member or element per line, empty {} and [] kept short. */
static void put_indented(struct strbuf *sb, const cJSON *v, int depth)
{
    bool object = cJSON_IsObject(v);
    if (!object && !cJSON_IsArray(v)) {
        char *text = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        if (cJSON_IsString(v))
            strbuf_json_string(sb, v->valuestring);
        else if (text)
            strbuf_puts(sb, text);
        else
            sb->failed = 1;
        free(text);
        return;
    }
    if (!v->child) {
        strbuf_puts(sb, object ? "{}" : "[]");
        return;
    }
    strbuf_puts(sb, object ? "{\n" : "[\n");
    for (const cJSON *c = v->child; c; c = c->next) {
        indent(sb, depth + 1);
        if (object) {
            strbuf_json_string(sb, c->string ? c->string : "");
            strbuf_puts(sb, ": ");
        }
        put_indented(sb, c, depth + 1);
        strbuf_puts(sb, c->next ? ",\n" : "\n");
    }
    indent(sb, depth);
    strbuf_putc(sb, object ? '}' : ']');
}

/* -o json|yaml: the data as it came. Both writers escape C0 controls in
 * strings; DEL and C1 controls are escaped here too (the same data). */
static int print_data(struct gpuctl *g, const cJSON *data)
{
    struct strbuf sb, safe;
    strbuf_init(&sb);
    strbuf_init(&safe);
    if (g->opts->output == OUT_YAML) {
        json_to_yaml(data, &sb);
    } else {
        put_indented(&sb, data, 0);
        strbuf_putc(&sb, '\n');
    }
    if (sb.data)
        term_text_put_json(&safe, sb.data);
    if (safe.data)
        fputs(safe.data, g->out);
    int failed = strbuf_failed(&sb) || strbuf_failed(&safe);
    strbuf_free(&sb);
    strbuf_free(&safe);
    return failed ? 1 : 0;
}

/* ---- cells ------------------------------------------------------------------- */

static int64_t num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && v->valuedouble > -9e15 && v->valuedouble < 9e15 ? (int64_t)v->valuedouble : 0;
}

static const char *str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int percent(int64_t used, int64_t total)
{
    if (total <= 0 || used <= 0)
        return 0;
    return used >= total ? 100 : (int)(used * 100 / total);
}

/* "[###-------] 30%", the filled part green, yellow from 70%, red from 90% when coloured. */
static void bar(const struct gpuctl *g, int64_t used, int64_t total, char *buf, size_t size)
{
    if (total <= 0) {
        snprintf(buf, size, "-");
        return;
    }
    int pct = percent(used, total), filled = (pct * BAR_WIDTH + 50) / 100;
    if (used > 0 && filled == 0)
        filled = 1;
    char hashes[BAR_WIDTH + 1], dashes[BAR_WIDTH + 1];
    memset(hashes, '#', (size_t)filled);
    hashes[filled] = '\0';
    memset(dashes, '-', (size_t)(BAR_WIDTH - filled));
    dashes[BAR_WIDTH - filled] = '\0';
    const char *on = !g->color ? "" : pct >= 90 ? "\033[31m" : pct >= 70 ? "\033[33m" : "\033[32m";
    snprintf(buf, size, "[%s%s%s%s] %d%%", on, hashes, g->color ? "\033[0m" : "", dashes, pct);
}

/* vcuda-memory is counted in 256 MiB blocks: shown in Gi/Mi. mps-memory
 * units are taken as GiB (the reference MPS device plugin's unit,
 * docs/behaviour.md). Other units as the node advertises them. */
static void memory_amount(const char *resource, int64_t v, char *buf, size_t size)
{
    if (strcmp(resource, "nvidia.com/mps-memory") == 0)
        snprintf(buf, size, "%" PRId64 "Gi", v);
    else if (strcmp(resource, "tencent.com/vcuda-memory") != 0)
        snprintf(buf, size, "%" PRId64, v);
    else if (v % 4 == 0)
        snprintf(buf, size, "%" PRId64 "Gi", v / 4);
    else
        snprintf(buf, size, "%" PRId64 "Mi", v * 256);
}

static void used_of(const char *resource, int64_t used, int64_t total, char *buf, size_t size)
{
    char u[32], t[32];
    if (total <= 0) {
        snprintf(buf, size, "-");
        return;
    }
    memory_amount(resource, used, u, sizeof(u));
    memory_amount(resource, total, t, sizeof(t));
    snprintf(buf, size, "%s/%s", u, t);
}

static void print_table(struct gpuctl *g, struct table *t, bool failed)
{
    if (!failed)
        table_print(t, g->out);
    else
        fprintf(g->err, "kubectl-gpu: out of memory\n");
    table_free(t);
}

/* ---- top ---------------------------------------------------------------------- */

struct node_sums {
    int64_t cores, memory, memory_total;
    int gpus_used, idle, partial;
    int pods;
    int unassigned;
};

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t collect_pods(const cJSON *list, const char **names, size_t n)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, list) if (cJSON_IsString(p))
    {
        if (names)
            names[n] = p->valuestring;
        n++;
    }
    return n;
}

/* Every pod name on the node's GPUs and unattributed, into names (when not NULL); the count. */
static size_t node_pods(const cJSON *node, const char **names)
{
    const cJSON *gpu, *unattributed = cJSON_GetObjectItemCaseSensitive(node, "unattributed");
    size_t n = collect_pods(cJSON_GetObjectItemCaseSensitive(unattributed, "pods"), names, 0);
    cJSON_ArrayForEach(gpu, cJSON_GetObjectItemCaseSensitive(node, "gpus"))
    {
        n = collect_pods(cJSON_GetObjectItemCaseSensitive(gpu, "pods"), names, n);
    }
    return n;
}

/* Distinct pods (a pod may hold several GPUs). */
static int count_pods(const cJSON *node)
{
    size_t total = node_pods(node, NULL);
    const char **names = malloc(sizeof(*names) * (total + 1));
    if (!names)
        return (int)total;
    size_t n = node_pods(node, names);
    qsort(names, n, sizeof(*names), compare_strings);
    int distinct = 0;
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || strcmp(names[i], names[i - 1]) != 0;
    free(names);
    return distinct;
}

static struct node_sums sum_node(const cJSON *node)
{
    struct node_sums s = {0};
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(node, "unattributed"), *gpu;
    bool mps = strcmp(str(node, "memoryResource"), "nvidia.com/mps-memory") == 0;
    s.cores = num(u, "cores");
    s.memory = num(u, mps ? "mpsMemory" : "vcudaMemory");
    s.unassigned = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(u, "pods"));
    cJSON_ArrayForEach(gpu, cJSON_GetObjectItemCaseSensitive(node, "gpus"))
    {
        int64_t cores = num(gpu, "coreUsed"), mem = num(gpu, "memoryUsed");
        s.cores += cores;
        s.memory += mem;
        s.memory_total += num(gpu, "memoryTotal");
        if (cores >= 100)
            s.gpus_used++;
        else if (cores > 0 || mem > 0)
            s.gpus_used++, s.partial++;
        else
            s.idle++;
    }
    s.pods = count_pods(node);
    return s;
}

static int top_nodes_table(struct gpuctl *g, const cJSON *nodes)
{
    bool wide = g->opts->output == OUT_WIDE;
    static const char *const narrow_h[] = {"NAME", "MODEL", "GPUS", "CORES", "CORES%", "MEMORY", "MEMORY%", "PODS"};
    static const char *const wide_h[] = {"NAME",  "MODEL",  "POOL",   "GPUS",    "IDLE", "PARTIAL",
                                         "CORES", "CORES%", "MEMORY", "MEMORY%", "PODS", "UNASSIGNED"};
    struct table *t = wide ? table_new(12, wide_h) : table_new(8, narrow_h);
    bool failed = !t;
    const cJSON *node;
    cJSON_ArrayForEach(node, nodes)
    {
        int count = (int)num(node, "gpuCount");
        if (failed || count <= 0)
            continue;
        struct node_sums s = sum_node(node);
        const char *memres = str(node, "memoryResource");
        char gpus[32], idle[16], partial[16], cores[48], cbar[64], mem[64], mbar[64], pods[16], unassigned[16];
        snprintf(gpus, sizeof(gpus), "%d/%d", s.gpus_used, count);
        snprintf(idle, sizeof(idle), "%d", s.idle);
        snprintf(partial, sizeof(partial), "%d", s.partial);
        snprintf(cores, sizeof(cores), "%" PRId64 "/%d", s.cores, count * 100);
        bar(g, s.cores, (int64_t)count * 100, cbar, sizeof(cbar));
        used_of(memres, s.memory, s.memory_total, mem, sizeof(mem));
        bar(g, s.memory, s.memory_total, mbar, sizeof(mbar));
        snprintf(pods, sizeof(pods), "%d", s.pods);
        snprintf(unassigned, sizeof(unassigned), "%d", s.unassigned);
        const char *model = *str(node, "model") ? str(node, "model") : "-";
        const char *pool = *str(node, "pool") ? str(node, "pool") : "-";
        const char *narrow_row[] = {str(node, "node"), model, gpus, cores, cbar, mem, mbar, pods};
        const char *wide_row[] = {str(node, "node"), model, pool, gpus, idle, partial, cores, cbar, mem, mbar, pods,
                                  unassigned};
        failed = table_add_row(t, wide ? wide_row : narrow_row) != 0;
    }
    print_table(g, t, failed);
    return failed ? 1 : 0;
}

static void join_pods(const cJSON *gpu, char *buf, size_t size)
{
    size_t used = 0;
    const cJSON *p;
    buf[0] = '\0';
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(gpu, "pods")) if (cJSON_IsString(p) && used < size)
    {
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "," : "", p->valuestring);
    }
    if (!buf[0])
        snprintf(buf, size, "-");
}

static int top_gpus_table(struct gpuctl *g, const cJSON *nodes)
{
    bool wide = g->opts->output == OUT_WIDE;
    static const char *const narrow_h[] = {"NODE", "GPU", "MODEL", "CORES", "CORES%", "MEMORY", "MEMORY%", "PODS"};
    static const char *const wide_h[] = {"NODE",   "GPU",    "MINOR",   "NUMA", "MODEL",    "CORES",
                                         "CORES%", "MEMORY", "MEMORY%", "PODS", "POD NAMES"};
    struct table *t = wide ? table_new(11, wide_h) : table_new(8, narrow_h);
    bool failed = !t;
    const cJSON *node, *gpu;
    cJSON_ArrayForEach(node, nodes)
    {
        const char *memres = str(node, "memoryResource");
        const char *model = *str(node, "model") ? str(node, "model") : "-";
        cJSON_ArrayForEach(gpu, cJSON_GetObjectItemCaseSensitive(node, "gpus"))
        {
            if (failed)
                break;
            int64_t cu = num(gpu, "coreUsed"), mu = num(gpu, "memoryUsed"), mt = num(gpu, "memoryTotal");
            char idx[16], minor[16], numa[16], cores[32], cbar[64], mem[64], mbar[64], pods[16], names[1024];
            snprintf(idx, sizeof(idx), "%" PRId64, num(gpu, "index"));
            snprintf(minor, sizeof(minor), "%" PRId64, num(gpu, "minor"));
            int64_t numa_node = num(gpu, "numa");
            snprintf(numa, sizeof(numa), numa_node < 0 ? "-" : "%" PRId64, numa_node);
            snprintf(cores, sizeof(cores), "%" PRId64 "/100", cu);
            bar(g, cu, 100, cbar, sizeof(cbar));
            used_of(memres, mu, mt, mem, sizeof(mem));
            bar(g, mu, mt, mbar, sizeof(mbar));
            snprintf(pods, sizeof(pods), "%d", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(gpu, "pods")));
            join_pods(gpu, names, sizeof(names));
            const char *narrow_row[] = {str(node, "node"), idx, model, cores, cbar, mem, mbar, pods};
            const char *wide_row[] = {str(node, "node"), idx, minor, numa, model, cores, cbar, mem, mbar, pods, names};
            failed = table_add_row(t, wide ? wide_row : narrow_row) != 0;
        }
    }
    print_table(g, t, failed);
    return failed ? 1 : 0;
}

/* ---- MIG instances ---------------------------------------------------------------- */

/* Nodes that advertise MIG instances (nvidia.com/mig-<profile>, docs/mig.md)
 * list them in "units": one entry per profile with total and used. They
 * are not GPUs with cores and memory, so they get a table of their own
 * after the GPU table, one row per node and profile; a cluster without
 * MIG prints exactly what it printed before. */
static bool has_units(const cJSON *nodes)
{
    const cJSON *node;
    cJSON_ArrayForEach(node, nodes) if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(node, "units")) > 0)
    {
        return true;
    }
    return false;
}

/* "nvidia.com/mig-3g.20gb" -> "mig-3g.20gb": the name a pod asks for, without the vendor. */
static const char *profile_name(const char *resource)
{
    static const char vendor[] = "nvidia.com/";
    size_t n = sizeof(vendor) - 1;
    if (strncmp(resource, vendor, n) == 0 && resource[n])
        return resource + n;
    return *resource ? resource : "-";
}

static int top_mig_table(struct gpuctl *g, const cJSON *nodes)
{
    bool wide = g->opts->output == OUT_WIDE;
    static const char *const narrow_h[] = {"NODE", "MODEL", "PROFILE", "INSTANCES", "USE%"};
    static const char *const wide_h[] = {"NODE", "MODEL", "POOL", "PROFILE", "INSTANCES", "FREE", "USE%"};
    struct table *t = wide ? table_new(7, wide_h) : table_new(5, narrow_h);
    bool failed = !t;
    const cJSON *node, *unit;
    cJSON_ArrayForEach(node, nodes)
    {
        const char *model = *str(node, "model") ? str(node, "model") : "-";
        const char *pool = *str(node, "pool") ? str(node, "pool") : "-";
        cJSON_ArrayForEach(unit, cJSON_GetObjectItemCaseSensitive(node, "units"))
        {
            if (failed)
                break;
            int64_t used = num(unit, "used"), total = num(unit, "total");
            char instances[48], free_[32], ubar[64];
            snprintf(instances, sizeof(instances), "%" PRId64 "/%" PRId64, used, total);
            snprintf(free_, sizeof(free_), "%" PRId64, total > used ? total - used : 0);
            bar(g, used, total, ubar, sizeof(ubar));
            const char *profile = profile_name(str(unit, "resource"));
            const char *narrow_row[] = {str(node, "node"), model, profile, instances, ubar};
            const char *wide_row[] = {str(node, "node"), model, pool, profile, instances, free_, ubar};
            failed = table_add_row(t, wide ? wide_row : narrow_row) != 0;
        }
    }
    print_table(g, t, failed);
    return failed ? 1 : 0;
}

/* The GPU table (nodes or GPUs), then the MIG table when a node has MIG
 * instances. The GPU table is left out when only MIG nodes matched. */
static int top_tables(struct gpuctl *g, const cJSON *nodes, bool gpus)
{
    bool mig = has_units(nodes), any_gpu = false;
    const cJSON *node;
    cJSON_ArrayForEach(node, nodes) any_gpu = any_gpu || num(node, "gpuCount") > 0;
    int rc = 0;
    if (any_gpu || !mig)
        rc = gpus ? top_gpus_table(g, nodes) : top_nodes_table(g, nodes);
    if (mig && rc == 0) {
        if (any_gpu)
            fputc('\n', g->out);
        rc = top_mig_table(g, nodes);
    }
    return rc;
}

/* /inspect/nodes?topology=false with the node filters, as query parameters. */
static char *nodes_path(const struct gpuctl_options *o)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "/inspect/nodes?topology=false");
    const char *names[] = {"labelSelector", "model"}, *values[] = {o->selector, o->model};
    for (int i = 0; i < 2; i++) {
        if (!values[i] || !*values[i])
            continue;
        char *v = kube_escape(values[i]);
        strbuf_printf(&sb, "&%s=%s", names[i], v ? v : "");
        if (!v)
            sb.failed = 1;
        free(v);
    }
    return strbuf_detach(&sb, NULL);
}

int gpuctl_top(struct gpuctl *g, const char *what)
{
    bool gpus = what && (strcmp(what, "gpus") == 0 || strcmp(what, "gpu") == 0);
    if (what && !gpus && strcmp(what, "nodes") != 0 && strcmp(what, "node") != 0) {
        fprintf(g->err, "kubectl-gpu: top shows \"nodes\" or \"gpus\", not \"%s\"\n", what);
        return 1;
    }
    char *path = nodes_path(g->opts);
    cJSON *nodes = path ? service_call(g, "GET", path, NULL) : NULL;
    free(path);
    if (!cJSON_IsArray(nodes)) {
        cJSON_Delete(nodes);
        return 1;
    }
    int rc;
    if (g->opts->output == OUT_JSON || g->opts->output == OUT_YAML)
        rc = print_data(g, nodes);
    else if (cJSON_GetArraySize(nodes) == 0)
        rc = (fprintf(g->err, "No GPU nodes found.\n"), 0);
    else
        rc = top_tables(g, nodes, gpus);
    cJSON_Delete(nodes);
    return rc;
}

/* ---- explain ------------------------------------------------------------------ */

/* The pod: from -f FILE (YAML or JSON, "-" for stdin) or read from the API server. */
static cJSON *load_pod_file(struct gpuctl *g, const char *path)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = strcmp(path, "-") == 0 ? strbuf_read_file(&sb, "/dev/stdin") : strbuf_read_file(&sb, path);
    if (rc != 0 || strbuf_failed(&sb)) {
        fprintf(g->err, "kubectl-gpu: cannot read %s\n", path);
        strbuf_free(&sb);
        return NULL;
    }
    char *err = NULL;
    cJSON *pod = yaml_to_json(sb.data ? sb.data : "", sb.len, &err);
    strbuf_free(&sb);
    if (!cJSON_IsObject(pod)) {
        fprintf(g->err, "kubectl-gpu: %s: %s\n", path, err ? err : "not a Pod object");
        cJSON_Delete(pod);
        pod = NULL;
    }
    free(err);
    /* As kubectl does with -f: -n fills in a missing namespace and must agree with a given one. */
    cJSON *meta = pod ? cJSON_GetObjectItemCaseSensitive(pod, "metadata") : NULL;
    const char *given = str(meta, "namespace");
    if (cJSON_IsObject(meta) && !*given && g->opts->namespace_)
        cJSON_AddStringToObject(meta, "namespace", g->opts->namespace_);
    if (*given && g->opts->namespace_ && strcmp(given, g->opts->namespace_) != 0) {
        fprintf(g->err, "kubectl-gpu: the namespace of %s (%s) does not match -n %s\n", path, given,
                g->opts->namespace_);
        cJSON_Delete(pod);
        return NULL;
    }
    return pod;
}

static cJSON *fetch_pod(struct gpuctl *g, const char *name)
{
    if (!g->api_client) {
        fprintf(g->err, "kubectl-gpu: explain %s reads the pod from the API server: %s (or give -f FILE)\n", name,
                g->api_error ? g->api_error : "no kubeconfig");
        return NULL;
    }
    char *ns = kube_escape(g->ns), *n = kube_escape(name);
    char *path = ns && n ? strbuf_format("/api/v1/namespaces/%s/pods/%s", ns, n) : NULL;
    struct kube_response r = {0};
    cJSON *pod = NULL;
    if (path && kube_request(g->api_client, "GET", path, NULL, NULL, 0, g->opts->timeout_ms, &r) == 0 &&
        r.status == 200)
        pod = cJSON_Parse(r.body ? r.body : "");
    if (!pod) {
        char *why = term_text_escape(r.error ? r.error : "the answer is not a Pod");
        fprintf(g->err, "kubectl-gpu: cannot read pod %s/%s: %s\n", g->ns, name, why ? why : "out of memory");
        free(why);
    }
    kube_response_free(&r);
    free(path);
    free(ns);
    free(n);
    return pod;
}

/* --server without a usable kubeconfig: the service explains a pod it
 * holds (its informer's copy), named by namespace and name. */
static cJSON *explain_held_pod(struct gpuctl *g, const char *name)
{
    char *ns = kube_escape(g->ns), *n = kube_escape(name);
    char *path = ns && n ? strbuf_format("/inspect/explain?namespace=%s&name=%s", ns, n) : NULL;
    cJSON *answer = path ? service_call(g, "GET", path, NULL) : NULL;
    if (!path)
        fprintf(g->err, "kubectl-gpu: out of memory\n");
    free(path);
    free(ns);
    free(n);
    return answer;
}

static void gpus_text(const cJSON *gpus, char *buf, size_t size)
{
    size_t used = 0;
    const cJSON *c, *m;
    buf[0] = '\0';
    cJSON_ArrayForEach(c, gpus)
    {
        if (used >= size)
            break;
        used += (size_t)snprintf(buf + used, size - used, "%s%s=[", used ? " " : "", c->string ? c->string : "");
        bool first = true;
        cJSON_ArrayForEach(m, c) if (used < size)
        {
            used += (size_t)snprintf(buf + used, size - used, first ? "%d" : ",%d", m->valueint);
            first = false;
        }
        if (used < size)
            used += (size_t)snprintf(buf + used, size - used, "]");
    }
}

static void explain_headline(struct gpuctl *g, const cJSON *answer, int total, int64_t feasible)
{
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(answer, "nodes"), *best = nodes ? nodes->child : NULL;
    const char *err = str(answer, "error");
    if (*err) {
        fprintf(g->out, "Pod %s: refused: %s\n", str(answer, "pod"), err);
        return;
    }
    if (feasible > 0 && best) {
        char gpus[512];
        gpus_text(cJSON_GetObjectItemCaseSensitive(best, "gpus"), gpus, sizeof(gpus));
        fprintf(g->out, "Pod %s fits %" PRId64 " of %d node%s; best: %s (score %" PRId64 "%s%s)\n", str(answer, "pod"),
                feasible, total, total == 1 ? "" : "s", str(best, "node"), num(best, "score"), *gpus ? ", GPUs " : "",
                gpus);
    } else {
        fprintf(g->out, "Pod %s fits none of %d node%s\n", str(answer, "pod"), total, total == 1 ? "" : "s");
    }
}

static void explain_groups(struct gpuctl *g, const cJSON *summary, int64_t feasible)
{
    if (!cJSON_GetArraySize(summary))
        return;
    fprintf(g->out, "%s\n", feasible > 0 ? "Other nodes:" : "Why:");
    bool wide = g->opts->output == OUT_WIDE;
    const cJSON *grp, *ex;
    cJSON_ArrayForEach(grp, summary)
    {
        int64_t count = num(grp, "count");
        fprintf(g->out, "  %" PRId64 " node%s: %s", count, count == 1 ? "" : "s", str(grp, "message"));
        int shown = 0, limit = wide ? 5 : 3;
        fputs(" (", g->out);
        cJSON_ArrayForEach(ex, cJSON_GetObjectItemCaseSensitive(grp, "examples")) if (shown < limit)
        {
            fprintf(g->out, "%s%s", shown ? ", " : "", cJSON_IsString(ex) ? ex->valuestring : "");
            shown++;
        }
        if (count > shown)
            fprintf(g->out, ", and %" PRId64 " more", count - shown);
        fputs(")\n", g->out);
    }
}

static void explain_near_miss(struct gpuctl *g, const cJSON *near)
{
    if (!cJSON_IsObject(near))
        return;
    fprintf(g->out, "Nearest: %s: %s\n", str(near, "node"), str(near, "message"));
    if (*str(near, "hint"))
        fprintf(g->out, "To fit:  %s\n", str(near, "hint"));
}

/* -o wide: every node with its verdict. */
static int explain_nodes_table(struct gpuctl *g, const cJSON *nodes)
{
    static const char *const h[] = {"NODE", "FITS", "SCORE", "GPUS", "REASON"};
    struct table *t = table_new(5, h);
    bool failed = !t;
    const cJSON *n;
    cJSON_ArrayForEach(n, nodes)
    {
        if (failed)
            break;
        bool fits = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "fits"));
        char score[16], gpus[512];
        snprintf(score, sizeof(score), "%" PRId64, num(n, "score"));
        gpus_text(cJSON_GetObjectItemCaseSensitive(n, "gpus"), gpus, sizeof(gpus));
        const char *row[] = {str(n, "node"), fits ? "yes" : "no", fits ? score : "-", *gpus ? gpus : "-",
                             *str(n, "reason") ? str(n, "reason") : "-"};
        failed = table_add_row(t, row) != 0;
    }
    fputc('\n', g->out);
    print_table(g, t, failed);
    return failed ? 1 : 0;
}

int gpuctl_explain(struct gpuctl *g, const char *pod_name)
{
    if (!pod_name && !g->opts->filename) {
        fprintf(g->err, "kubectl-gpu: explain needs a pod name, - (a pod on standard input) or -f FILE\n");
        return 1;
    }
    if (pod_name && g->opts->filename) {
        fprintf(g->err, "kubectl-gpu: explain takes a pod name or -f FILE, not both\n");
        return 1;
    }
    /* "-" is standard input, as -f - is: `kubectl get pod P -o yaml | kubectl gpu explain -`. */
    const char *file = g->opts->filename ? g->opts->filename : strcmp(pod_name, "-") == 0 ? "-" : NULL;
    cJSON *answer = NULL;
    if (!file && !g->api_client && g->opts->server) {
        answer = explain_held_pod(g, pod_name);
    } else {
        cJSON *pod = file ? load_pod_file(g, file) : fetch_pod(g, pod_name);
        char *body = pod ? cJSON_PrintUnformatted(pod) : NULL;
        cJSON_Delete(pod);
        answer = body ? service_call(g, "POST", "/inspect/explain", body) : NULL;
        free(body);
    }
    if (!cJSON_IsObject(answer)) {
        cJSON_Delete(answer);
        return 1;
    }
    int rc = 0;
    int64_t feasible = num(answer, "feasible");
    if (g->opts->output == OUT_JSON || g->opts->output == OUT_YAML) {
        rc = print_data(g, answer);
    } else {
        const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(answer, "nodes");
        explain_headline(g, answer, cJSON_GetArraySize(nodes), feasible);
        explain_groups(g, cJSON_GetObjectItemCaseSensitive(answer, "summary"), feasible);
        explain_near_miss(g, cJSON_GetObjectItemCaseSensitive(answer, "nearMiss"));
        if (g->opts->output == OUT_WIDE)
            rc = explain_nodes_table(g, nodes);
    }
    cJSON_Delete(answer);
    /* Scripts ask "would it fit?": a pod no node takes (or one refused as a
     * whole) is not success, as with `gpu-quota-admission simulate`. */
    return rc != 0 ? rc : feasible > 0 ? 0 : GPUCTL_EXIT_FITS_NOWHERE;
}

/* ---- quota ---------------------------------------------------------------------- */

/* Cores (100 = one GPU) as GPUs: 350 -> "3.5". */
static void gpus_of_cores(int64_t cores, char *buf, size_t size)
{
    if (cores % 100 == 0)
        snprintf(buf, size, "%" PRId64, cores / 100);
    else if (cores % 10 == 0)
        snprintf(buf, size, "%" PRId64 ".%" PRId64, cores / 100, (cores % 100) / 10);
    else
        snprintf(buf, size, "%" PRId64 ".%02" PRId64, cores / 100, cores % 100);
}

static void pools_text(const cJSON *pools, char *buf, size_t size)
{
    size_t used = 0;
    const cJSON *p;
    buf[0] = '\0';
    cJSON_ArrayForEach(p, pools) if (cJSON_IsString(p) && used < size)
    {
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "," : "", p->valuestring);
    }
    if (!buf[0])
        snprintf(buf, size, "*");
}

static int quota_table(struct gpuctl *g, const cJSON *namespaces)
{
    static const char *const h[] = {"NAMESPACE", "POOLS", "MODEL", "USED", "QUOTA", "USE%"};
    struct table *t = table_new(6, h);
    bool failed = !t, any = false;
    const cJSON *ns, *m;
    cJSON_ArrayForEach(ns, namespaces)
    {
        char pools[256];
        pools_text(cJSON_GetObjectItemCaseSensitive(ns, "pools"), pools, sizeof(pools));
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(ns, "models"))
        {
            if (failed)
                break;
            int64_t used = num(m, "usedCores"), quota = num(m, "quotaGpus");
            char u[32], q[32], b[64];
            gpus_of_cores(used, u, sizeof(u));
            snprintf(q, sizeof(q), "%" PRId64, quota);
            bar(g, used, quota * 100, b, sizeof(b));
            const char *row[] = {str(ns, "namespace"), pools, str(m, "model"), u, q, b};
            failed = table_add_row(t, row) != 0;
            any = true;
        }
    }
    if (!any && !failed) {
        table_free(t);
        fprintf(g->err, "No GPU quota found%s%s.\n", g->opts->namespace_ ? " for namespace " : "",
                g->opts->namespace_ ? g->opts->namespace_ : "");
        return 0;
    }
    print_table(g, t, failed);
    return failed ? 1 : 0;
}

/* Only the -n namespace, when one was given (quota is a cluster view otherwise). */
static void keep_namespace(cJSON *answer, const char *ns)
{
    cJSON *list = cJSON_GetObjectItemCaseSensitive(answer, "namespaces");
    for (cJSON *e = list ? list->child : NULL, *next; e; e = next) {
        next = e->next;
        if (strcmp(str(e, "namespace"), ns) != 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(list, e));
    }
}

int gpuctl_quota(struct gpuctl *g)
{
    cJSON *answer = service_call(g, "GET", "/inspect/quota", NULL);
    if (!cJSON_IsObject(answer)) {
        cJSON_Delete(answer);
        return 1;
    }
    if (g->opts->namespace_)
        keep_namespace(answer, g->opts->namespace_);
    if (*str(answer, "error")) {
        /* With -o json|yaml the answer is not cleaned for the terminal: this line is. */
        char *source = term_text_escape(str(answer, "source")), *why = term_text_escape(str(answer, "error"));
        fprintf(g->err, "Warning: the quota ConfigMap %s is not used: %s\n", source ? source : "?",
                why ? why : "out of memory");
        free(source);
        free(why);
    }
    int rc = g->opts->output == OUT_JSON || g->opts->output == OUT_YAML
                 ? print_data(g, answer)
                 : quota_table(g, cJSON_GetObjectItemCaseSensitive(answer, "namespaces"));
    cJSON_Delete(answer);
    return rc;
}

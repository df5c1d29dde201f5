/*
 * kubectl-gpu.c - the `kubectl gpu` plugin's entry point.
 *
 * kubectl runs kubectl-gpu for `kubectl gpu ...` when it is on PATH. This
 * file only parses the command line the way kubectl users type it (short
 * flags -n, -l, -o, -f, -A, -h, values attached or separate, flags before or
 * after the arguments) into the long flags of lib/flags, and dispatches to
 * cmd/gpuctl.c. Exit codes: 0, 1 when a command fails, 2 for a bad
 * command line, 3 when explain finds no node for the pod.
 */
#include "cmd/gpuctl.h"
#include "lib/duration.h"
#include "lib/flags.h"
#include "lib/version.h"

#include <stdlib.h>
#include <string.h>

#define PROG "kubectl-gpu"

#define OPT_STRING(setter, field)                                                       \
    static int setter(void *target, const char *v)                                      \
    {                                                                                   \
        return *v ? flags_set_string(&((struct gpuctl_options *)target)->field, v) : 1; \
    }

OPT_STRING(set_kubeconfig, kubeconfig)
OPT_STRING(set_context, context)
OPT_STRING(set_server, server)
OPT_STRING(set_service, service)
OPT_STRING(set_namespace, namespace_)
OPT_STRING(set_selector, selector)
OPT_STRING(set_model, model)
OPT_STRING(set_filename, filename)

static int set_output(void *target, const char *v)
{
    struct gpuctl_options *o = target;
    static const char *const names[] = {"", "wide", "json", "yaml"};
    for (int i = 1; i < 4; i++)
        if (strcmp(v, names[i]) == 0) {
            o->output = (enum gpuctl_output)i;
            return 0;
        }
    return 1;
}

static int set_color(void *target, const char *v)
{
    struct gpuctl_options *o = target;
    if (strcmp(v, "auto") == 0)
        o->color = COLOR_AUTO;
    else if (strcmp(v, "always") == 0)
        o->color = COLOR_ALWAYS;
    else if (strcmp(v, "never") == 0)
        o->color = COLOR_NEVER;
    else
        return 1;
    return 0;
}

static int set_timeout(void *target, const char *v)
{
    int64_t ns = parse_duration_ns(v);
    if (ns <= 0)
        return 1;
    ((struct gpuctl_options *)target)->timeout_ms = ns / 1000000 > 0 ? ns / 1000000 : 1;
    return 0;
}

static int set_all_namespaces(void *target, const char *v)
{
    (void)v;
    struct gpuctl_options *o = target;
    free(o->namespace_);
    o->namespace_ = NULL;
    return 0;
}

static int set_help(void *target, const char *v)
{
    (void)v;
    ((struct gpuctl_options *)target)->show_help = 1;
    return 0;
}

static int set_version(void *target, const char *v)
{
    (void)v;
    ((struct gpuctl_options *)target)->show_version = 1;
    return 0;
}

static const struct flag_spec flags[] = {
    {"kubeconfig", "FILE", set_kubeconfig, "kubeconfig to use (default $KUBECONFIG, else ~/.kube/config)", 0},
    {"context", "NAME", set_context, "kubeconfig context (default its current-context)", 0},
    {"server", "URL", set_server,
     "talk to the service at this URL directly, not through the API server (explain POD then asks the service for "
     "the pod when no kubeconfig is usable)",
     0},
    {"service", "NS/NAME[:PORT]", set_service,
     "the service behind the API server's service proxy (default " GPUCTL_DEFAULT_SERVICE ")", 0},
    {"namespace", "NS", set_namespace, "-n: the pod's namespace (explain), or only this namespace (quota)", 0},
    {"all-namespaces", NULL, set_all_namespaces, "-A: every namespace (quota; the default there)", 0},
    {"selector", "SELECTOR", set_selector, "-l: only nodes with these labels (top), e.g. -l tkestack.io/gpu-pool=a", 0},
    {"model", "MODEL", set_model, "only nodes of this GPU model (top)", 0},
    {"filename", "FILE", set_filename, "-f: explain the pod in this YAML or JSON file (- for stdin)", 0},
    {"output", "wide|json|yaml", set_output, "-o: more columns, or the service's answer as data", 0},
    {"color", "auto|always|never", set_color, "colour the bars (default auto: only on a terminal, not with NO_COLOR)",
     0},
    {"request-timeout", "DURATION", set_timeout, "give up on a request after this long (default 30s)", 0},
    {"version", NULL, set_version, "print the version and exit", 0},
    {"help", NULL, set_help, "-h: print this help and exit", 0},
};
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *out)
{
    fprintf(out, "kubectl gpu: the GPU cluster as gpu-quota-admission sees it.\n\n"
                 "Usage:\n"
                 "  kubectl gpu top [nodes|gpus] [-l SELECTOR] [--model M] [-o wide|json|yaml]\n"
                 "      one row per GPU node (or per GPU): GPUs, cores and memory used, pods\n"
                 "      and, when nodes have MIG instances, one row per node and MIG profile\n"
                 "  kubectl gpu explain POD [-n NS] | - | -f POD.yaml [-o wide|json|yaml]\n"
                 "      why a pod fits where it fits, the other nodes grouped by reason, the nearest miss;\n"
                 "      - (or -f -) reads the pod from standard input; exit 3 when no node fits\n"
                 "  kubectl gpu quota [-n NS] [-o json|yaml]\n"
                 "      GPU quota and usage per namespace, model and pool\n\n"
                 "Flags:\n");
    struct flag_parser p = {PROG, flags, NFLAGS, NULL, 0, out};
    flags_print_help(&p, out, 34);
}

static const struct flag_spec *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

static const char *long_of_short(char c)
{
    switch (c) {
    case 'n':
        return "namespace";
    case 'l':
        return "selector";
    case 'o':
        return "output";
    case 'f':
        return "filename";
    case 'A':
        return "all-namespaces";
    case 'h':
        return "help";
    default:
        return NULL;
    }
}

/* Split argv into long flags (rewriting -x forms) and positional arguments. */
static int split_args(int argc, char **argv, char **flagv, int *nflags, char **posv, int *npos, char **owned,
                      int *nowned)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            while (++i < argc)
                posv[(*npos)++] = argv[i];
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            posv[(*npos)++] = argv[i];
            continue;
        }
        if (a[1] != '-') { /* -n NS, -nNS, -n=NS */
            const char *name = long_of_short(a[1]);
            if (!name) {
                fprintf(stderr, PROG ": unknown flag %s (see --help)\n", a);
                return -1;
            }
            const char *rest = a[2] == '=' ? a + 3 : a + 2;
            char *rewritten = *rest ? malloc(strlen(name) + strlen(rest) + 4) : malloc(strlen(name) + 3);
            if (!rewritten)
                return -1;
            if (*rest)
                sprintf(rewritten, "--%s=%s", name, rest);
            else
                sprintf(rewritten, "--%s", name);
            owned[(*nowned)++] = rewritten;
            flagv[(*nflags)++] = rewritten;
            a = rewritten;
            if (*rest)
                continue;
        } else {
            flagv[(*nflags)++] = argv[i];
        }
        const char *eq = strchr(a + 2, '=');
        const struct flag_spec *f = find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
        if (f && f->arg && !eq && i + 1 < argc)
            flagv[(*nflags)++] = argv[++i];
    }
    return 0;
}

static void options_free(struct gpuctl_options *o)
{
    free(o->kubeconfig);
    free(o->context);
    free(o->server);
    free(o->service);
    free(o->namespace_);
    free(o->selector);
    free(o->model);
    free(o->filename);
}

static int run(const struct gpuctl_options *o, int npos, char **posv)
{
    const char *cmd = npos > 0 ? posv[0] : NULL;
    bool known = cmd && (strcmp(cmd, "top") == 0 || strcmp(cmd, "explain") == 0 || strcmp(cmd, "quota") == 0);
    if (!known) {
        if (cmd)
            fprintf(stderr, PROG ": unknown command \"%s\"\n", cmd);
        usage(stderr);
        return 2;
    }
    if (npos > 2 || (npos > 1 && strcmp(cmd, "quota") == 0)) {
        fprintf(stderr, PROG ": %s: unexpected argument \"%s\"\n", cmd, posv[npos - 1]);
        return 2;
    }
    struct gpuctl g;
    int rc = 1;
    if (gpuctl_open(&g, o, stdout, stderr) == 0) {
        if (strcmp(cmd, "top") == 0)
            rc = gpuctl_top(&g, npos > 1 ? posv[1] : NULL);
        else if (strcmp(cmd, "explain") == 0)
            rc = gpuctl_explain(&g, npos > 1 ? posv[1] : NULL);
        else
            rc = gpuctl_quota(&g);
    }
    gpuctl_close(&g);
    return rc;
}

int main(int argc, char **argv)
{
    struct gpuctl_options o = {.timeout_ms = 30000};
    int n = argc > 0 ? argc : 1;
    char **flagv = calloc((size_t)n * 2, sizeof(*flagv)), **posv = calloc((size_t)n, sizeof(*posv));
    char **owned = calloc((size_t)n, sizeof(*owned));
    int nflags = 0, npos = 0, nowned = 0, rc = 2;
    struct flag_parser p = {PROG, flags, NFLAGS, NULL, 0, stderr};
    if (flagv && posv && owned && split_args(argc - 1, argv + 1, flagv, &nflags, posv, &npos, owned, &nowned) == 0 &&
        flags_parse(&p, &o, nflags, flagv) == 0) {
        if (o.show_help) {
            usage(stdout);
            rc = 0;
        } else if (o.show_version) {
            printf("kubectl-gpu %s (commit %s, built %s)\n", GQA_VERSION, GQA_GIT_COMMIT, GQA_BUILD_DATE);
            rc = 0;
        } else {
            rc = run(&o, npos, posv);
        }
    }
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(flagv);
    free(posv);
    free(owned);
    options_free(&o);
    return rc;
}

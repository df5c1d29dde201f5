/*
 * gpuctl.h - the `kubectl gpu` plugin: top, explain and quota.
 *
 * Owns what the plugin asks the service and how it shows the answers. The
 * service is reached through the API server's service proxy
 * (/api/v1/namespaces/NS/services/NAME[:PORT]/proxy/...) with the user's
 * kubeconfig, so the user's own credentials and RBAC apply, or directly
 * with --server URL. Tables follow kubectl: upper-case headers, -o wide for
 * more columns, -o json|yaml for the service's answer as data, colour only
 * when stdout is a terminal (and NO_COLOR is unset). Every request has a
 * deadline (--request-timeout). Single-threaded: a command-line tool.
 */
#ifndef GQA_GPUCTL_H
#define GQA_GPUCTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kube/kubeclient.h"

#define GPUCTL_DEFAULT_SERVICE "kube-system/gpu-quota-admission"

enum gpuctl_output { OUT_TABLE = 0, OUT_WIDE, OUT_JSON, OUT_YAML };

enum gpuctl_color { COLOR_AUTO = 0, COLOR_ALWAYS, COLOR_NEVER };

struct gpuctl_options {
    char *kubeconfig; /* NULL: $KUBECONFIG's first file, else ~/.kube/config */
    char *context;    /* NULL: current-context */
    char *server;     /* direct URL of the service, or NULL (service proxy) */
    char *service;    /* NAMESPACE/NAME[:PORT] for the service proxy */
    char *namespace_; /* -n; NULL: the context's namespace, else "default" */
    char *selector;   /* -l */
    char *model;      /* --model */
    char *filename;   /* explain -f */
    enum gpuctl_output output;
    enum gpuctl_color color;
    int64_t timeout_ms;
    int show_help, show_version;
};

struct gpuctl {
    const struct gpuctl_options *opts;
    struct kube_config *api; /* the user's cluster (NULL with --server when no kubeconfig is usable) */
    struct kube_client *api_client;
    struct kube_config *direct; /* --server */
    struct kube_client *direct_client;
    char *proxy_prefix; /* "/api/v1/namespaces/NS/services/NAME[:PORT]/proxy", "" with --server */
    char *api_error;    /* why api is NULL, for commands that need it */
    const char *ns;     /* the namespace in effect */
    bool color;
    FILE *out, *err;
};

/* Connect as the options say. 0, or -1 after printing one line to err. */
int gpuctl_open(struct gpuctl *g, const struct gpuctl_options *o, FILE *out, FILE *err);
void gpuctl_close(struct gpuctl *g);

/* explain: the pod fits no node (its answer is still printed). */
#define GPUCTL_EXIT_FITS_NOWHERE 3

/* The commands; each returns the process exit code (0, or 1 after printing
 * why; explain also GPUCTL_EXIT_FITS_NOWHERE). */
int gpuctl_top(struct gpuctl *g, const char *what); /* "nodes" (NULL) or "gpus" */
int gpuctl_explain(struct gpuctl *g, const char *pod_name);
int gpuctl_quota(struct gpuctl *g);

#endif

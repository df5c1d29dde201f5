/*
 * options.h - command-line flags and their GQA_* environment twins.
 *
 * Owns every setting of design.md section 8 that this build honours, its
 * default, its validation and the --help text. Precedence: flag, then the
 * environment variable GQA_<NAME> (dashes as underscores, upper case), then
 * the default. A bad value is a one-line error naming the flag (exit 2).
 */
#ifndef GQA_OPTIONS_H
#define GQA_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "extender/decide/allocator.h"
#include "extender/decide/placement.h"
#include "lib/log.h"

struct options {
    char *listen_http;   /* "" disables the HTTP listener */
    char *listen_https;  /* NULL/"" disables the HTTPS listener */
    char *listen_probes; /* NULL/"": no probe listener (server.h) */
    char *tls_cert, *tls_key, *tls_client_ca;
    char *tls_min_version, *tls_cipher_suites; /* kube-apiserver's names (extender/tlspolicy.h) */
    char *state_file;
    char *kubeconfig;                       /* live mode; else in-cluster when KUBERNETES_SERVICE_HOST is set */
    char *decision_key_file;                /* live mode: the key that proves decisions (cluster/proof.h) */
    char *crl_namespace;                    /* ConfigMaps watched for CustomResourceLimitations */
    char *quota_configmap;                  /* NAMESPACE/NAME of the quota ConfigMap */
    char *gpu_model_label, *gpu_pool_label; /* node labels naming a node's GPU model and pool */
    int leader_elect;
    char *lease_namespace, *lease_name;
    char *set_scheduler_name; /* the scheduler-name webhook's name; NULL: that webhook is off */
    char *pod_file;           /* simulate only */
    enum placement_mode placement;
    int filter_best; /* bind placement: answer at most this many feasible nodes, the best; 0: all */
    struct alloc_policy policy;
    struct hami_config hami; /* the --hami-* flags */
    int hami_resource_quota; /* live: watch ResourceQuotas and check HAMi's rule (admission/hamiquota.h) */
    int64_t assume_ttl_ns;   /* the most an unbound decision holds its GPUs (OPTIONS_ASSUME_TTL_NS) */
    int threads;
    int decision_workers, decision_queue; /* see workers.h */
    int64_t max_body_bytes;
    /* Client limits (extender/serve/guard.h). */
    int64_t body_budget;
    unsigned max_connections, max_connections_per_ip;
    int64_t read_timeout_ns;
    enum log_level log_level;
    int log_format;
    int show_help, show_version;
    int metrics_per_node; /* also export gqa_node_* and gqa_gpu_* capacity series, one per node and GPU */
    int metrics_per_pod;  /* also export gqa_pod_gpu_* series, one per pod and GPU */
};

/* Decisions mostly wait on the API server, so there are more of them than
 * cores: kube-scheduler binds pods in parallel. */
#define OPTIONS_DECISION_WORKERS 16
#define OPTIONS_DECISION_QUEUE 128

/* 15 minutes: longer than any gang's wait at Coscheduling's Permit (its
 * default is 60 s, and PodGroups set scheduleTimeoutSeconds well past it),
 * yet a decision nobody acts on frees its GPUs in the end
 * (docs/behaviour.md, "Decisions: proof, holding and hand-over"). */
#define OPTIONS_ASSUME_TTL_NS (15LL * 60 * 1000000000LL)

enum options_command { CMD_SERVE, CMD_SIMULATE };

/* Parse argv (after the subcommand, if any) and the environment. Returns 0,
 * or -1 after printing a one-line error to err_out. */
int options_parse(struct options *o, enum options_command cmd, int argc, char **argv, FILE *err_out);
void options_free(struct options *o);
void options_print_help(FILE *out);

#endif

/*
 * kubeconfig.h - where the API server is and how to authenticate.
 *
 * Owns reading the cluster connection: the in-cluster service account, or a
 * kubeconfig file's current context (cluster and user). The result is an
 * immutable kube_config that any number of clients (kubeclient.h) share.
 */
#ifndef GQA_KUBECONFIG_H
#define GQA_KUBECONFIG_H

#include "kube/execcred.h"

struct kube_config {
    char *server;  /* "https://10.0.0.1:6443", no trailing slash */
    char *ca_file; /* PEM file, or NULL */
    char *ca_data; /* PEM text (decoded certificate-authority-data), or NULL */
    char *client_cert_file, *client_key_file;
    char *client_cert_data, *client_key_data; /* PEM text, or NULL */
    char *token;                              /* static bearer token, or NULL */
    char *token_file;                         /* re-read when its mtime/size changes, or NULL; when both are set the
                                   file wins and token is used only while the file cannot be read */
    int insecure_skip_tls_verify;
    char *source;     /* "in-cluster" or the kubeconfig path, for messages */
    char *namespace_; /* the context's namespace (kubectl's default -n), or NULL */
    /* users[].user.exec: the credential plugin (execcred.h), or NULL. Shared
     * with every client made from this config, which hold references; never
     * set together with token, token_file or a client certificate. */
    struct kube_exec *exec;
};

/* In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's ca.crt and
 * token under /var/run/secrets/kubernetes.io/serviceaccount (the directory
 * can be overridden with GQA_SERVICEACCOUNT_DIR for tests). NULL with *err
 * when the environment is not a pod's. */
struct kube_config *kube_config_in_cluster(char **err);
/* A kubeconfig file (YAML or JSON): current-context -> cluster + user:
 * server, certificate-authority(-data), client-certificate(-data),
 * client-key(-data), token, tokenFile, insecure-skip-tls-verify, exec
 * (apiVersion client.authentication.k8s.io/v1 or v1beta1, command, args,
 * env, installHint, interactiveMode, provideClusterInfo; the cluster's
 * extension client.authentication.k8s.io/exec is its spec.cluster.config).
 * Relative file paths, and an exec command with a '/' in it, are relative
 * to the kubeconfig's directory. NULL with *err naming the missing or bad
 * field. auth-provider and username/password are refused with a message. */
struct kube_config *kube_config_from_file(const char *path, char **err);
/* The same with the context named `context` instead of current-context
 * (kubectl's --context; NULL: current-context). */
struct kube_config *kube_config_from_file_context(const char *path, const char *context, char **err);
void kube_config_free(struct kube_config *cfg);

#endif

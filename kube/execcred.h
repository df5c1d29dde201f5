/*
 * execcred.h - exec credential plugins (client.authentication.k8s.io v1 and v1beta1).
 *
 * Owns running the command a kubeconfig user names under `exec` (EKS's
 * `aws eks get-token`, GKE's gke-gcloud-auth-plugin, AKS's kubelogin, OIDC
 * login helpers) and keeping the credential it prints: a bearer token, or a
 * client certificate and key, until its status.expirationTimestamp.
 *
 * The command runs without a shell (argv as configured; a name without '/'
 * is looked up on PATH), with the kubeconfig's env added to this process's
 * environment and KUBERNETES_EXEC_INFO set to an ExecCredential that names
 * the apiVersion, spec.interactive and, with provideClusterInfo,
 * spec.cluster. It has a deadline; past it the command (and, when it is not
 * interactive, its process group) is killed. Its stdout must be one
 * ExecCredential of the configured apiVersion; when it fails, the error
 * carries the first line of its stderr.
 *
 * Interactive: only when the owner allowed it (the kubectl plugin does, the
 * service does not), standard input is a terminal and interactiveMode is not
 * Never; the command then reads that terminal and its stderr is shown as it
 * comes. interactiveMode Always without that is an error.
 *
 * A kube_exec is shared by every client made from one kube_config
 * (reference-counted) and is thread-safe. One caller at a time runs the
 * command (a run-in-progress flag); its mutex is not held while the command
 * runs. A caller whose credential is still valid uses it at once, even
 * during a run; callers with none wait on a condition variable (with a
 * deadline a little past the run's) for that one run's result instead of
 * starting one each. A valid credential that expires within
 * KUBE_EXEC_REFRESH_AHEAD_MS is replaced early by one caller while the
 * others keep using it (once per credential, at most once per window, not
 * with a terminal); if that run fails, the credential serves until it
 * expires. The mutex is a leaf (nothing else is taken under it) and is
 * never held across network I/O or a run.
 */
#ifndef GQA_EXECCRED_H
#define GQA_EXECCRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_EXEC_V1 "client.authentication.k8s.io/v1"
#define KUBE_EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"
#define KUBE_EXEC_DEFAULT_TIMEOUT_MS 60000L
#define KUBE_EXEC_REFRESH_AHEAD_MS 60000L

enum kube_exec_interactive { KUBE_EXEC_NEVER = 0, KUBE_EXEC_IF_AVAILABLE, KUBE_EXEC_ALWAYS };

/* What the kubeconfig says (users[].user.exec), as kubeconfig.c read it. */
struct kube_exec_params {
    const char *api_version;   /* KUBE_EXEC_V1 or KUBE_EXEC_V1BETA1 */
    const char *command;       /* a path (relative ones already resolved) or a name looked up on PATH */
    const char *shown_command; /* as the kubeconfig writes it, for messages (NULL: command) */
    const char *const *args;
    size_t nargs;
    const char *const *env; /* "NAME=value" */
    size_t nenv;
    const char *install_hint; /* or NULL */
    enum kube_exec_interactive interactive_mode;
    const char *cluster_json; /* spec.cluster as JSON text (provideClusterInfo), or NULL */
    const char *source;       /* who configured it, for messages: "kubeconfig F: user \"U\"" */
};

struct kube_exec;

/* A copy of everything in p. NULL only when memory runs out. */
struct kube_exec *kube_exec_new(const struct kube_exec_params *p);
void kube_exec_ref(struct kube_exec *e);
void kube_exec_unref(struct kube_exec *e); /* NULL is fine */

/* Before the first credential is asked for: the deadline of one run
 * (<= 0: KUBE_EXEC_DEFAULT_TIMEOUT_MS) and whether the command may talk to
 * this process's terminal. */
void kube_exec_configure(struct kube_exec *e, long timeout_ms, bool may_use_terminal);

/* A credential: token, or cert_pem with key_pem (PEM text); serial names it. */
struct kube_exec_cred {
    char *token, *cert_pem, *key_pem;
    int64_t expiry_ns; /* Unix ns; 0 = does not expire */
    uint64_t serial;   /* 1, 2, ... one per successful run */
};

/* The credential in force, running the command when there is none yet, it
 * expired, or it was invalidated. 0 when the caller's copy (serial `have`;
 * 0: none) is still it; 1 with *out filled (malloc'd copies; free with
 * kube_exec_cred_clear) when a newer one is; -1 with *err (malloc'd) when
 * the command failed or printed no usable credential. */
int kube_exec_current(struct kube_exec *e, uint64_t have, struct kube_exec_cred *out, char **err);
/* The API server refused credential `serial` (401): the next
 * kube_exec_current runs the command again, unless a newer credential
 * already replaced that one. */
void kube_exec_invalidate(struct kube_exec *e, uint64_t serial);
void kube_exec_cred_clear(struct kube_exec_cred *c);

/* Read one ExecCredential the command printed (exposed for tests): 0 with
 * *out (serial 0), or -1 with *err (malloc'd, without the command's name). */
int kube_exec_parse(const char *api_version, const char *text, size_t len, struct kube_exec_cred *out, char **err);

/* The early-refresh window (default KUBE_EXEC_REFRESH_AHEAD_MS; 0: none). */
void kube_exec_set_refresh_ahead(struct kube_exec *e, long ms);

/* How many times the command ran (tests and logs). */
uint64_t kube_exec_runs(struct kube_exec *e);

#endif

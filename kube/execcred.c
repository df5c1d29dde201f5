/*
 * execcred.c - exec credential plugins; see execcred.h.
 *
 * A run: two pipes (stdout, stderr) created close-on-exec, the command
 * looked up on PATH as execvp would and started with posix_spawn (safe in a
 * threaded process, no shell), and one
 * poll loop that reads both until they close, the command exits, or the
 * deadline passes. Output is bounded: an ExecCredential is a few kB, so
 * more than KUBE_EXEC_MAX_OUTPUT bytes of stdout fails the run, and only
 * the first line of stderr is kept for the error.
 */
#include "kube/execcred.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rfc3339.h"
#include "lib/strbuf.h"
#include "lib/termtext.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KUBE_EXEC_MAX_OUTPUT ((size_t)1 << 20)
#define KUBE_EXEC_ERR_LINE 400 /* bytes of stderr's first line kept for the message */
#define KUBE_EXEC_POLL_MS 200  /* how often a run checks whether the command exited */

extern char **environ;

struct kube_exec {
    atomic_int refs;
    /* Immutable after kube_exec_new: read by a run without the lock. */
    char *api_version, *command, *install_hint, *cluster_json, *source;
    char *shown; /* the command as the kubeconfig writes it, for messages */
    char **argv; /* command, args..., NULL */
    char **env;  /* "NAME=value", nenv of them */
    size_t nenv;
    enum kube_exec_interactive mode;

    /* Guarded by lock, which is never held while the command runs. */
    pthread_mutex_t lock;
    pthread_cond_t done; /* broadcast when a run ends */
    long timeout_ms;
    long refresh_ahead_ms;
    bool may_use_terminal;
    struct kube_exec_cred cred; /* serial 0: none yet */
    bool stale;                 /* invalidated: run again before use */
    uint64_t runs;              /* runs started */
    bool running;               /* one run in progress (one runner at a time) */
    uint64_t finished;          /* runs ended; waiters watch it change */
    char *run_err;              /* the last run's error (NULL: it succeeded) */
    uint64_t early_serial;      /* an early refresh was tried for this credential */
    int64_t early_ns;           /* monotonic time of the last early refresh */
};

/* ---- lifetime ------------------------------------------------------------- */

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void kube_exec_cred_clear(struct kube_exec_cred *c)
{
    if (!c)
        return;
    free(c->token);
    free(c->cert_pem);
    free(c->key_pem);
    memset(c, 0, sizeof(*c));
}

static size_t argv_count(char **argv)
{
    size_t n = 0;
    while (argv && argv[n])
        n++;
    return n;
}

static void exec_free(struct kube_exec *e)
{
    free(e->api_version);
    free(e->command);
    free(e->install_hint);
    free(e->cluster_json);
    free(e->source);
    free(e->shown);
    free_strings(e->argv, argv_count(e->argv));
    free_strings(e->env, e->nenv);
    kube_exec_cred_clear(&e->cred);
    free(e->run_err);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static char *dup_or_null(const char *s, bool *failed)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *failed = true;
    return d;
}

/* argv as posix_spawn wants it: its strings owned by e (argv[0] is a copy of the command). */
static char **copy_argv(const struct kube_exec_params *p)
{
    char **argv = calloc(p->nargs + 2, sizeof(*argv));
    if (!argv)
        return NULL;
    bool failed = !(argv[0] = strdup(p->command));
    for (size_t i = 0; i < p->nargs && !failed; i++)
        failed = !(argv[i + 1] = strdup(p->args[i]));
    if (failed) {
        free_strings(argv, p->nargs + 1);
        return NULL;
    }
    return argv;
}

struct kube_exec *kube_exec_new(const struct kube_exec_params *p)
{
    struct kube_exec *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    if (pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e);
        return NULL;
    }
    if (clock_cond_init(&e->done) != 0) {
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
    }
    atomic_init(&e->refs, 1);
    bool failed = false;
    e->api_version = dup_or_null(p->api_version, &failed);
    e->command = dup_or_null(p->command, &failed);
    e->install_hint = dup_or_null(p->install_hint, &failed);
    e->cluster_json = dup_or_null(p->cluster_json, &failed);
    e->source = dup_or_null(p->source ? p->source : "kubeconfig", &failed);
    e->shown = dup_or_null(p->shown_command ? p->shown_command : p->command, &failed);
    e->mode = p->interactive_mode;
    e->timeout_ms = KUBE_EXEC_DEFAULT_TIMEOUT_MS;
    e->refresh_ahead_ms = KUBE_EXEC_REFRESH_AHEAD_MS;
    e->env = p->nenv ? calloc(p->nenv, sizeof(*e->env)) : NULL;
    failed |= p->nenv && !e->env;
    for (size_t i = 0; !failed && i < p->nenv; i++, e->nenv++)
        failed = !(e->env[i] = strdup(p->env[i]));
    if (!failed && p->command)
        failed = !(e->argv = copy_argv(p));
    if (failed || !e->api_version || !e->command || !e->shown) {
        kube_exec_unref(e);
        return NULL;
    }
    return e;
}

void kube_exec_ref(struct kube_exec *e)
{
    if (e)
        atomic_fetch_add(&e->refs, 1);
}

void kube_exec_unref(struct kube_exec *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1)
        exec_free(e);
}

void kube_exec_configure(struct kube_exec *e, long timeout_ms, bool may_use_terminal)
{
    pthread_mutex_lock(&e->lock);
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : KUBE_EXEC_DEFAULT_TIMEOUT_MS;
    e->may_use_terminal = may_use_terminal;
    pthread_mutex_unlock(&e->lock);
}

void kube_exec_set_refresh_ahead(struct kube_exec *e, long ms)
{
    pthread_mutex_lock(&e->lock);
    e->refresh_ahead_ms = ms > 0 ? ms : 0;
    pthread_mutex_unlock(&e->lock);
}

uint64_t kube_exec_runs(struct kube_exec *e)
{
    pthread_mutex_lock(&e->lock);
    uint64_t n = e->runs;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* ---- the ExecCredential --------------------------------------------------- */

static int parse_fail(char **err, const char *msg)
{
    *err = strdup(msg);
    return -1;
}

/* key's string in obj: NULL when absent or "", -1 when present and not a string. */
static int optional_string(const cJSON *obj, const char *key, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return -1;
    *out = *v->valuestring ? v->valuestring : NULL;
    return 0;
}

/* status: token, or clientCertificateData with clientKeyData; expirationTimestamp. */
static int parse_status(const cJSON *status, struct kube_exec_cred *out, char **err)
{
    const char *token, *cert, *key, *expiry;
    if (optional_string(status, "token", &token) || optional_string(status, "clientCertificateData", &cert) ||
        optional_string(status, "clientKeyData", &key) || optional_string(status, "expirationTimestamp", &expiry))
        return parse_fail(err, "status.token, clientCertificateData, clientKeyData and expirationTimestamp must be "
                               "strings");
    if (!cert != !key)
        return parse_fail(err, cert ? "status has clientCertificateData but no clientKeyData"
                                    : "status has clientKeyData but no clientCertificateData");
    if (!token && !cert)
        return parse_fail(err, "status has neither a token nor clientCertificateData and clientKeyData");
    if (cert && (!strstr(cert, "-----BEGIN ") || !strstr(key, "-----BEGIN ")))
        return parse_fail(err, "status.clientCertificateData and clientKeyData must be PEM");
    if (expiry && (out->expiry_ns = rfc3339_parse_ns(expiry)) < 0)
        return parse_fail(err, "status.expirationTimestamp is not an RFC 3339 time");
    if (!expiry)
        out->expiry_ns = 0;
    if ((token && !(out->token = strdup(token))) || (cert && !(out->cert_pem = strdup(cert))) ||
        (key && !(out->key_pem = strdup(key))))
        return parse_fail(err, "out of memory");
    return 0;
}

int kube_exec_parse(const char *api_version, const char *text, size_t len, struct kube_exec_cred *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = -1;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(root, "status");
    if (!cJSON_IsObject(root))
        parse_fail(err, "its output is not a JSON ExecCredential");
    else if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ExecCredential") != 0)
        parse_fail(err, "its output is not an ExecCredential (kind)");
    else if (!cJSON_IsString(version) || strcmp(version->valuestring, api_version) != 0)
        *err = strbuf_format("it printed apiVersion %.80s, the kubeconfig asks for %s",
                             cJSON_IsString(version) ? version->valuestring : "(none)", api_version);
    else if (!cJSON_IsObject(status))
        parse_fail(err, "its ExecCredential has no status");
    else
        rc = parse_status(status, out, err);
    cJSON_Delete(root);
    if (rc != 0) {
        kube_exec_cred_clear(out);
        if (!*err)
            *err = strdup("out of memory");
    }
    return rc;
}

/* ---- one run -------------------------------------------------------------- */

struct run {
    pid_t pid;
    int out_fd, err_fd;
    bool interactive;
    struct strbuf out;
    char err_line[KUBE_EXEC_ERR_LINE + 1];
    size_t err_len;
    bool err_line_done, too_big, timed_out, exited;
    int status;
};

/* KUBERNETES_EXEC_INFO: what the spec tells the command. */
static char *exec_info(const struct kube_exec *e, bool interactive)
{
    return strbuf_format("KUBERNETES_EXEC_INFO={\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\",\"spec\":{%s%s%s"
                         "\"interactive\":%s}}",
                         e->api_version, e->cluster_json ? "\"cluster\":" : "", e->cluster_json ? e->cluster_json : "",
                         e->cluster_json ? "," : "", interactive ? "true" : "false");
}

/* Is "NAME=..." entry the variable name[0..len)? */
static bool names_var(const char *entry, const char *name, size_t len)
{
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/* Set by the kubeconfig (or KUBERNETES_EXEC_INFO): the inherited value gives way. */
static bool overridden(const struct kube_exec *e, const char *entry)
{
    const char *eq = strchr(entry, '=');
    size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
    if (names_var("KUBERNETES_EXEC_INFO=", entry, len))
        return true;
    for (size_t i = 0; i < e->nenv; i++)
        if (names_var(e->env[i], entry, len))
            return true;
    return false;
}

/* This process's environment, the kubeconfig's env, then KUBERNETES_EXEC_INFO.
 * The strings are borrowed except the last, which the caller frees. */
static char **child_env(const struct kube_exec *e, bool interactive)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + e->nenv + 2, sizeof(*env));
    char *info = exec_info(e, interactive);
    if (!env || !info) {
        free(env);
        free(info);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!overridden(e, environ[i]))
            env[k++] = environ[i];
    for (size_t i = 0; i < e->nenv; i++)
        env[k++] = e->env[i];
    env[k] = info;
    return env;
}

static void free_child_env(char **env)
{
    size_t k = 0;
    while (env[k + 1])
        k++;
    free(env[k]); /* KUBERNETES_EXEC_INFO, the only string of our own */
    free(env);
}

static int spawn_actions(posix_spawn_file_actions_t *fa, posix_spawnattr_t *attr, bool interactive, int out_w,
                         int err_w)
{
    int rc = posix_spawn_file_actions_init(fa);
    if (rc != 0)
        return rc;
    if (!interactive)
        rc = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(fa, out_w, 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(fa, err_w, 2);
    if (rc == 0)
        rc = posix_spawnattr_init(attr);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(fa);
        return rc;
    }
    /* Default signal handling and an empty mask, whatever this process set;
     * its own process group, so a deadline kills helpers it started too. A
     * command at the terminal stays in the foreground group to read it. */
    sigset_t none, pipe_sig;
    sigemptyset(&none);
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (interactive ? 0 : POSIX_SPAWN_SETPGROUP);
    rc = posix_spawnattr_setflags(attr, flags);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(attr, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(attr, &pipe_sig);
    if (rc == 0 && !interactive)
        rc = posix_spawnattr_setpgroup(attr, 0);
    if (rc != 0) {
        posix_spawnattr_destroy(attr);
        posix_spawn_file_actions_destroy(fa);
    }
    return rc;
}

/* The program to start: the command itself when it names a path, else the
 * first executable file of that name on PATH (as execvp looks). Resolved
 * here rather than by posix_spawnp so that "not found" is ENOENT wherever
 * the spawn cannot report exec's error (it then exits 127). 0 with *path
 * (malloc'd), or an errno. */
static int find_program(const char *command, char **path)
{
    *path = NULL;
    if (strchr(command, '/')) {
        if (access(command, X_OK) != 0)
            return errno;
        return (*path = strdup(command)) ? 0 : ENOMEM;
    }
    const char *dirs = getenv("PATH");
    if (!dirs || !*dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    int why = ENOENT;
    for (const char *d = dirs; *d;) {
        size_t len = strcspn(d, ":");
        char *candidate = strbuf_format("%.*s/%s", (int)len, len ? d : ".", command);
        if (!candidate)
            return ENOMEM;
        struct stat st;
        if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(candidate, X_OK) == 0) {
                *path = candidate;
                return 0;
            }
            why = EACCES;
        }
        free(candidate);
        d += len;
        d += *d == ':';
    }
    return why;
}

/* Start the command with its stdout and stderr on pipes. 0, or an errno. */
static int start_command(const struct kube_exec *e, struct run *r)
{
    char *program = NULL;
    int found = find_program(e->command, &program);
    if (found != 0)
        return found;
    int out_p[2], err_p[2];
    if (pipe2(out_p, O_CLOEXEC) != 0) {
        int saved = errno;
        free(program);
        return saved;
    }
    if (pipe2(err_p, O_CLOEXEC) != 0) {
        int saved = errno;
        close(out_p[0]);
        close(out_p[1]);
        free(program);
        return saved;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char **env = child_env(e, r->interactive);
    int rc = env ? spawn_actions(&fa, &attr, r->interactive, out_p[1], err_p[1]) : ENOMEM;
    if (rc == 0) {
        rc = posix_spawn(&r->pid, program, &fa, &attr, e->argv, env);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
    }
    if (env)
        free_child_env(env);
    free(program);
    close(out_p[1]);
    close(err_p[1]);
    if (rc != 0) {
        close(out_p[0]);
        close(err_p[0]);
        return rc;
    }
    r->out_fd = out_p[0];
    r->err_fd = err_p[0];
    return 0;
}

/* stderr: shown as it comes when interactive; its first line kept. */
static void take_stderr(struct run *r, const char *buf, size_t n)
{
    if (r->interactive) {
        ssize_t w = write(STDERR_FILENO, buf, n);
        (void)w; /* the terminal is a courtesy; the run does not depend on it */
    }
    for (size_t i = 0; i < n && !r->err_line_done; i++) {
        if (buf[i] == '\n' && r->err_len > 0)
            r->err_line_done = true;
        else if (buf[i] != '\n' && buf[i] != '\r' && r->err_len < KUBE_EXEC_ERR_LINE)
            r->err_line[r->err_len++] = buf[i];
    }
}

/* Read what fd has: 1 open, 0 closed (or failed). */
static int read_some(struct run *r, int fd)
{
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0)
        return 0;
    if (fd == r->err_fd) {
        take_stderr(r, buf, (size_t)n);
    } else if (r->out.len + (size_t)n > KUBE_EXEC_MAX_OUTPUT) {
        r->too_big = true;
        return 0;
    } else {
        strbuf_append(&r->out, buf, (size_t)n);
    }
    return 1;
}

/* Read both pipes until they close, the command exits, or the deadline. */
static void collect(struct run *r, long timeout_ms)
{
    int64_t deadline = clock_monotonic_ms() + timeout_ms;
    struct pollfd fds[2] = {{.fd = r->out_fd, .events = POLLIN}, {.fd = r->err_fd, .events = POLLIN}};
    bool open_fd[2] = {true, true};
    while ((open_fd[0] || open_fd[1]) && !r->too_big) {
        int64_t left = deadline - clock_monotonic_ms();
        if (left <= 0) {
            r->timed_out = true;
            return;
        }
        for (int i = 0; i < 2; i++)
            fds[i].fd = open_fd[i] ? (i ? r->err_fd : r->out_fd) : -1;
        int ready = poll(fds, 2, (int)(left < KUBE_EXEC_POLL_MS ? left : KUBE_EXEC_POLL_MS));
        if (ready < 0 && errno != EINTR)
            return;
        for (int i = 0; i < 2 && ready > 0; i++)
            if (open_fd[i] && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                open_fd[i] = read_some(r, fds[i].fd) == 1;
        /* Exited while something it started still holds the pipes: what it
         * wrote is read (POLLIN came first); the holder is not waited for. */
        if (ready == 0 && waitpid(r->pid, &r->status, WNOHANG) == r->pid) {
            r->exited = true;
            return;
        }
    }
}

static void finish(struct run *r)
{
    if (r->timed_out || r->too_big) {
        kill(r->interactive ? r->pid : -r->pid, SIGKILL);
    }
    if (!r->exited)
        while (waitpid(r->pid, &r->status, 0) < 0 && errno == EINTR)
            ;
    close(r->out_fd);
    close(r->err_fd);
    r->err_line[r->err_len] = '\0';
}

/* What went wrong with a finished run, or NULL when it exited 0. */
static char *run_failure(long timeout_ms, const struct run *r)
{
    const char *sep = r->err_len ? ": " : "";
    if (r->timed_out)
        return strbuf_format("did not finish within %ld ms (killed)%s%s", timeout_ms, sep, r->err_line);
    if (r->too_big)
        return strbuf_format("printed more than %zu bytes", KUBE_EXEC_MAX_OUTPUT);
    if (WIFSIGNALED(r->status))
        return strbuf_format("killed by signal %d%s%s", WTERMSIG(r->status), sep, r->err_line);
    if (WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0)
        return strbuf_format("exited with status %d%s%s", WEXITSTATUS(r->status), sep, r->err_line);
    return NULL;
}

static char *spawn_failure(const struct kube_exec *e, int rc)
{
    if (rc == EACCES)
        return strbuf_format("not executable: %s", strerror(rc));
    if (rc == ENOENT)
        return strbuf_format("executable not found%s%s", e->install_hint ? ": " : " (on PATH or at that path)",
                             e->install_hint ? e->install_hint : "");
    return strbuf_format("cannot start it: %s", strerror(rc));
}

/* "kubeconfig F: user "U": exec plugin CMD: WHY", with control characters
 * shown escaped (termtext.h): the command's stderr ends up on a terminal
 * and in logs. */
static char *run_error(const struct kube_exec *e, char *why)
{
    char *msg = strbuf_format("%s: exec plugin %s: %s", e->source, e->shown, why ? why : "out of memory");
    char *safe = msg ? term_text_escape(msg) : NULL;
    free(why);
    free(msg);
    return safe;
}

/* What a run needs that may change (kube_exec_configure): read under the
 * lock before it starts. */
struct run_settings {
    long timeout_ms;
    bool may_use_terminal;
};

/* Run the command once, without the lock (only e's immutable fields are
 * read): 0 with *fresh (serial 0), or -1 with *err. */
static int run_command(const struct kube_exec *e, const struct run_settings *s, struct kube_exec_cred *fresh,
                       char **err)
{
    struct run r = {.pid = -1, .out_fd = -1, .err_fd = -1};
    bool tty = s->may_use_terminal && isatty(STDIN_FILENO);
    r.interactive = tty && e->mode != KUBE_EXEC_NEVER;
    if (e->mode == KUBE_EXEC_ALWAYS && !r.interactive) {
        *err = run_error(e, strdup("interactiveMode is Always, but standard input is not a terminal this process "
                                   "lets the command use"));
        return -1;
    }
    strbuf_init(&r.out);
    int rc = start_command(e, &r);
    if (rc != 0) {
        strbuf_free(&r.out);
        *err = run_error(e, spawn_failure(e, rc));
        return -1;
    }
    collect(&r, s->timeout_ms);
    finish(&r);
    char *why = run_failure(s->timeout_ms, &r);
    if (!why && strbuf_failed(&r.out))
        why = strdup("out of memory");
    if (!why)
        kube_exec_parse(e->api_version, r.out.data ? r.out.data : "", r.out.len, fresh, &why);
    strbuf_free(&r.out);
    if (why) {
        *err = run_error(e, why);
        return -1;
    }
    return 0;
}

static bool usable(const struct kube_exec *e)
{
    if (e->cred.serial == 0 || e->stale)
        return false;
    return e->cred.expiry_ns == 0 || clock_realtime_ns() < e->cred.expiry_ns;
}

/* A usable credential close to its expiry, worth replacing while it still
 * serves: once per credential, at most once per window (a credential that
 * lives less than the window would otherwise run the command at every
 * use), and never with the terminal (a prompt nobody asked for). */
static bool due_early(const struct kube_exec *e)
{
    if (!e->cred.expiry_ns || e->refresh_ahead_ms <= 0 || e->may_use_terminal || e->running ||
        e->early_serial == e->cred.serial)
        return false;
    int64_t window = (int64_t)e->refresh_ahead_ms * NS_PER_MS;
    if (e->early_ns && clock_monotonic_ns() - e->early_ns < window)
        return false;
    return e->cred.expiry_ns - clock_realtime_ns() < window;
}

/* Run the command as the one runner, the lock released meanwhile; on
 * return (lock held) e->cred is the fresh credential, or e->run_err says
 * why there is none. */
static int run_as_runner(struct kube_exec *e, bool early)
{
    struct run_settings s = {e->timeout_ms, e->may_use_terminal};
    e->running = true;
    e->runs++;
    if (early) {
        e->early_serial = e->cred.serial;
        e->early_ns = clock_monotonic_ns();
    }
    pthread_mutex_unlock(&e->lock);
    struct kube_exec_cred fresh;
    memset(&fresh, 0, sizeof(fresh));
    char *why = NULL;
    int rc = run_command(e, &s, &fresh, &why);
    if (rc != 0 && !why)
        why = strdup("out of memory");
    pthread_mutex_lock(&e->lock);
    if (rc == 0) {
        uint64_t serial = e->cred.serial + 1;
        kube_exec_cred_clear(&e->cred);
        e->cred = fresh;
        e->cred.serial = serial;
        e->stale = false;
    }
    free(e->run_err);
    e->run_err = why; /* NULL when it worked (or memory ran out for the message) */
    e->running = false;
    e->finished++;
    pthread_cond_broadcast(&e->done);
    return rc;
}

/* Wait (lock held) for the run in progress to end, with a deadline a little
 * past its own (it is killed at its timeout). 0 when it produced a
 * credential, else -1 with *err. */
static int wait_for_runner(struct kube_exec *e, char **err)
{
    uint64_t seen = e->finished;
    struct timespec until = clock_monotonic_after(((int64_t)e->timeout_ms + 5000) * NS_PER_MS);
    while (e->running && e->finished == seen)
        if (pthread_cond_timedwait(&e->done, &e->lock, &until) != 0)
            break;
    if (e->finished == seen) {
        *err = strbuf_format("%s: exec plugin %s: another thread's run did not end in time", e->source, e->shown);
        return -1;
    }
    if (e->run_err) {
        *err = strdup(e->run_err);
        return -1;
    }
    return 0;
}

static int copy_cred(const struct kube_exec_cred *from, struct kube_exec_cred *to)
{
    memset(to, 0, sizeof(*to));
    bool failed = false;
    to->token = dup_or_null(from->token, &failed);
    to->cert_pem = dup_or_null(from->cert_pem, &failed);
    to->key_pem = dup_or_null(from->key_pem, &failed);
    to->expiry_ns = from->expiry_ns;
    to->serial = from->serial;
    if (failed)
        kube_exec_cred_clear(to);
    return failed ? -1 : 0;
}

/* Under the lock: 0 when e->cred may be used now, else -1 with *err. A
 * usable credential is used at once, even while a run is in progress (an
 * early refresh); otherwise one caller runs the command and the others wait
 * for its result. */
static int current_locked(struct kube_exec *e, char **err)
{
    if (usable(e) && due_early(e) && run_as_runner(e, true) != 0)
        log_warn("%s (the credential in force serves until it expires)", e->run_err ? e->run_err : "out of memory");
    if (usable(e))
        return 0;
    if (e->running)
        return wait_for_runner(e, err);
    if (run_as_runner(e, false) != 0) {
        *err = strdup(e->run_err ? e->run_err : "out of memory");
        return -1;
    }
    return 0; /* the fresh credential, even one that expired at once */
}

int kube_exec_current(struct kube_exec *e, uint64_t have, struct kube_exec_cred *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    pthread_mutex_lock(&e->lock);
    int rc = current_locked(e, err);
    if (rc == 0 && e->cred.serial != have)
        rc = copy_cred(&e->cred, out) == 0 ? 1 : (*err = strdup("out of memory"), -1);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void kube_exec_invalidate(struct kube_exec *e, uint64_t serial)
{
    pthread_mutex_lock(&e->lock);
    if (serial == e->cred.serial && !e->stale) {
        e->stale = true;
        log_debug("%s: the API server refused the exec plugin's credential; it runs again for the next request",
                  e->source);
    }
    pthread_mutex_unlock(&e->lock);
}

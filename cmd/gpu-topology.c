/*
 * topology/main.c - the gpu-topology binary: publishes a GPU node's
 * gpu-admission.io/topology annotation (design.md section 5).
 *
 * One round: read `nvidia-smi topo -m` and `nvidia-smi --query-gpu=...`
 * (run, or from files), the device minors from the driver's
 * /proc/driver/nvidia/gpus/<bus>/information files, build the annotation
 * with topology_from_smi() (so it obeys the extender's own parser), print it,
 * and with --patch-node GET the Node and send one JSON merge patch when the
 * value differs. --interval repeats rounds until SIGTERM/SIGINT; a failed
 * round is logged and retried at the next tick. Flags and exit codes are in
 * usage() and topology/README.md.
 */
#include "kube/kubeclient.h"
#include "lib/clock.h"
#include "lib/duration.h"
#include "lib/flags.h"
#include "lib/log.h"
#include "lib/strbuf.h"
#include "lib/version.h"
#include "topology/annotation.h"
#include "topology/smi.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROG "gpu-topology"
#define DEFAULT_NVIDIA_SMI "nvidia-smi"
#define DEFAULT_PROC_DIR "/proc/driver/nvidia/gpus"
#define DEFAULT_TIMEOUT_NS (30LL * 1000000000LL)
#define MIN_INTERVAL_NS (100LL * 1000000LL)
#define MAX_SMI_OUTPUT ((size_t)16 << 20) /* far above any real topo -m */
#define MAX_SMI_STDERR ((size_t)64 << 10)
#define MAX_INFO_FILE ((size_t)64 << 10)
#define API_ATTEMPTS 3 /* per request: transport errors, 5xx, 429 */
#define API_BACKOFF_MS 500L
#define QUERY_ARG "--query-gpu=index,uuid,name,memory.total"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

struct config {
    char *topo_file, *query_file;
    char *nvidia_smi;
    char *proc_dir; /* "" disables */
    int proc_dir_given;
    char *patch_node;
    char *kubeconfig;
    int64_t interval_ns; /* 0: once */
    int once;
    int64_t timeout_ns;
    enum log_level log_level;
    int log_format;
    int show_help, show_version;
};

/* Set once --interval is running: SIGTERM/SIGINT are blocked and taken
 * with sigtimedwait, and long waits (nvidia-smi, back-off) look for them. */
static bool signals_blocked;
static sigset_t stop_signals;

/* ------------------------------------------------------------------ flags */

static int set_topo_file(void *target, const char *v)
{
    struct config *c = target;
    return flags_set_nonempty(&c->topo_file, v);
}

static int set_query_file(void *target, const char *v)
{
    struct config *c = target;
    return flags_set_nonempty(&c->query_file, v);
}

static int set_nvidia_smi(void *target, const char *v)
{
    struct config *c = target;
    return flags_set_nonempty(&c->nvidia_smi, v);
}

static int set_kubeconfig(void *target, const char *v)
{
    struct config *c = target;
    return flags_set_nonempty(&c->kubeconfig, v);
}

static int set_proc_dir(void *target, const char *v)
{
    struct config *c = target;
    c->proc_dir_given = 1;
    return flags_set_string(&c->proc_dir, v);
}

/* A Node name: a lowercase RFC 1123 subdomain (which also keeps the URL path clean). */
static bool valid_node_name(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = v[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '-' && ch != '.')
            return false;
        /* Each dot-separated label starts and ends with a letter or digit. */
        bool edge = i == 0 || i == n - 1 || v[i - 1] == '.' || v[i + 1] == '.';
        if (edge && !alnum)
            return false;
    }
    return true;
}

static int set_patch_node(void *target, const char *v)
{
    struct config *c = target;
    return valid_node_name(v) ? flags_set_string(&c->patch_node, v) : 1;
}

static int set_interval(void *target, const char *v)
{
    struct config *c = target;
    int64_t ns = parse_duration_ns(v);
    if (ns < 0 || (ns > 0 && ns < MIN_INTERVAL_NS))
        return 1;
    c->interval_ns = ns;
    return 0;
}

static int set_once(void *target, const char *v)
{
    struct config *c = target;
    (void)v;
    c->once = 1;
    return 0;
}

static int set_timeout(void *target, const char *v)
{
    struct config *c = target;
    int64_t ns = parse_duration_ns(v);
    if (ns < 1000000LL || ns > 3600LL * 1000000000LL)
        return 1;
    c->timeout_ns = ns;
    return 0;
}

static int set_log_level(void *target, const char *v)
{
    struct config *c = target;
    return log_parse_level(v, &c->log_level) ? 1 : 0;
}

/* klog's -v: 4 and above is --log-level debug, below it info. */
static int set_verbosity(void *target, const char *v)
{
    struct config *c = target;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 0 || n > 10)
        return 1;
    c->log_level = log_level_of_verbosity((int)n);
    return 0;
}

static int set_log_format(void *target, const char *v)
{
    struct config *c = target;
    return log_parse_format(v, &c->log_format) ? 1 : 0;
}

static int set_help(void *target, const char *v)
{
    struct config *c = target;
    (void)v;
    c->show_help = 1;
    return 0;
}

static int set_version(void *target, const char *v)
{
    struct config *c = target;
    (void)v;
    c->show_version = 1;
    return 0;
}

static const struct flag_spec flags[] = {
    {"topo-file", "FILE", set_topo_file, "read `nvidia-smi topo -m` output from FILE instead of running nvidia-smi", 0},
    {"query-file", "FILE", set_query_file,
     "read `nvidia-smi " QUERY_ARG " --format=csv,noheader` output from FILE (with --topo-file and without "
     "this flag: no query, so uuid, model and memory are left out)",
     0},
    {"nvidia-smi", "PATH", set_nvidia_smi, "the nvidia-smi to run (default: nvidia-smi, looked up in PATH)", 0},
    {"proc-dir", "DIR", set_proc_dir,
     "read device minors from DIR/*/information (default " DEFAULT_PROC_DIR " when nvidia-smi is run, "
     "none with --topo-file; \"\" disables; without them minor = index)",
     0},
    {"patch-node", "NAME", set_patch_node,
     "also patch Node NAME's " TOPOLOGY_ANNOTATION " annotation when its value differs", 0},
    {"kubeconfig", "FILE", set_kubeconfig,
     "API server and credentials for --patch-node (default: the in-cluster service account)", 0},
    {"interval", "DURATION", set_interval,
     "run again every DURATION (e.g. 10m, 30s; at least 100ms) until SIGTERM or SIGINT; 0 means once", 0},
    {"once", NULL, set_once, "run one round and exit (the default)", 0},
    {"timeout", "DURATION", set_timeout, "limit for each nvidia-smi run and each API request (default 30s)", 0},
    {"log-level", "debug|info|warn|error", set_log_level, "least severe level logged to stderr (default info)", 0},
    {"v", "N", set_verbosity, "klog verbosity, 0..10: 4 or more logs debug lines (as --log-level debug)", 0},
    {"log-format", "text|json|klog", set_log_format,
     "log line format: text, one JSON object per line, or klog's (Kubernetes components') text (default text)", 0},
    {"version", NULL, set_version, "print the version and exit", FLAG_NO_ENV},
    {"help", NULL, set_help, "print this help and exit", FLAG_NO_ENV},
};

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *out)
{
    fprintf(out, "Usage: " PROG " [flags]\n"
                 "Prints the node's " TOPOLOGY_ANNOTATION " annotation (one line of JSON) built from\n"
                 "`nvidia-smi topo -m` and `nvidia-smi " QUERY_ARG " --format=csv,noheader`,\n"
                 "and with --patch-node publishes it on the Node.\n"
                 "\nFlags:\n");
    struct flag_parser p = {PROG, flags, NFLAGS, NULL, 0, out};
    flags_print_help(&p, out, 34);
    fprintf(out, "\nExit codes: 0 done (or stopped by SIGTERM/SIGINT with --interval); 1 nvidia-smi failed, its\n"
                 "output did not parse (the message names the line and column), or the Node could not be read\n"
                 "or patched; 2 bad flags.\n");
}

static void config_free(struct config *c)
{
    free(c->topo_file);
    free(c->query_file);
    free(c->nvidia_smi);
    free(c->proc_dir);
    free(c->patch_node);
    free(c->kubeconfig);
    memset(c, 0, sizeof(*c));
}

/* 0, or -1 after printing one line to stderr. */
static int parse_flags(struct config *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    c->timeout_ns = DEFAULT_TIMEOUT_NS;
    c->log_level = LOG_INFO;
    struct flag_parser p = {PROG, flags, NFLAGS, NULL, 0, stderr};
    if (flags_parse(&p, c, argc - 1, argv + 1) != 0)
        return -1;
    if (c->show_help || c->show_version)
        return 0;
    if (c->once && c->interval_ns > 0) {
        fprintf(stderr, PROG ": --once and --interval exclude each other\n");
        return -1;
    }
    if (c->kubeconfig && !c->patch_node) {
        fprintf(stderr, PROG ": --kubeconfig is only used with --patch-node NAME\n");
        return -1;
    }
    if (!c->nvidia_smi && flags_set_string(&c->nvidia_smi, DEFAULT_NVIDIA_SMI) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    /* The driver's files describe this machine: read them by default only
     * when the matrix is this machine's too. */
    if (!c->proc_dir_given && !c->topo_file && flags_set_string(&c->proc_dir, DEFAULT_PROC_DIR) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ time */

static bool stop_pending(void)
{
    if (!signals_blocked)
        return false;
    sigset_t pending;
    if (sigpending(&pending) != 0)
        return false;
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

/* Sleeps ms; true when a stop signal arrived meanwhile (it stays pending
 * for the main loop to take). */
static bool pause_ms(long ms)
{
    int64_t deadline = clock_monotonic_ns() + (int64_t)ms * 1000000LL;
    while (!stop_pending()) {
        int64_t left = deadline - clock_monotonic_ns();
        if (left <= 0)
            return false;
        if (left > 50000000LL)
            left = 50000000LL;
        struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* ------------------------------------------------------------------ messages */

/* The first non-blank line of text, trimmed, at most 300 bytes. */
static void first_line(const char *text, char *out, size_t size)
{
    out[0] = '\0';
    if (!text)
        return;
    while (*text == '\n' || *text == '\r' || *text == ' ' || *text == '\t')
        text++;
    size_t n = strcspn(text, "\r\n");
    if (n >= size)
        n = size - 1;
    if (n > 300)
        n = 300;
    memcpy(out, text, n);
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t'))
        n--;
    out[n] = '\0';
}

/* ------------------------------------------------------------------ nvidia-smi */

/* Makes sb a C string even when nothing was appended. 0, or -1 when it
 * failed (out of memory, now or before). */
static int terminate(struct strbuf *sb)
{
    strbuf_append(sb, "", 0);
    return strbuf_failed(sb) ? -1 : 0;
}

/* Appends what is readable on fd to sb (up to cap bytes kept; the rest is
 * read and dropped). Returns 1 at EOF, 0 otherwise. */
static int drain_fd(int fd, struct strbuf *sb, size_t cap, bool *overflow)
{
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0)
        return 1;
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1;
    size_t keep = (size_t)n;
    if (sb->len + keep > cap) {
        keep = sb->len < cap ? cap - sb->len : 0;
        *overflow = true;
    }
    strbuf_append(sb, buf, keep);
    return 0;
}

/* Runs prog with args (argv[0] excluded), standard input from /dev/null.
 * On success (exit status 0) *out holds its standard output, NUL-terminated.
 * Otherwise -1 with *err (malloc'd, may be NULL when memory ran out). */
static int run_command(const char *prog, const char *what, char *const args[], int nargs, int64_t timeout_ns,
                       struct strbuf *out, char **err)
{
    char *argv[8];
    if (nargs > 6)
        return *err = strbuf_format("%s: too many arguments", what), -1;
    argv[0] = (char *)prog;
    for (int i = 0; i < nargs; i++)
        argv[i + 1] = args[i];
    argv[nargs + 1] = NULL;

    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
        }
        *err = strbuf_format("%s: cannot make a pipe: %s", what, strerror(e));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        rc = posix_spawnattr_init(&attr);
        if (rc != 0)
            posix_spawn_file_actions_destroy(&fa);
    }
    if (rc != 0) {
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        *err = strbuf_format("%s: %s", what, strerror(rc));
        return -1;
    }
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    pid_t pid = -1;
    rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, po[1], STDOUT_FILENO);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, pe[1], STDERR_FILENO);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&attr, &dfl);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&attr, 0);
    /* Its own process group, so a timeout or a stop also ends what a
     * wrapper script started. */
    if (rc == 0)
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    if (rc == 0)
        rc = strchr(prog, '/') ? posix_spawn(&pid, prog, &fa, &attr, argv, environ)
                               : posix_spawnp(&pid, prog, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(po[1]);
    close(pe[1]);
    if (rc != 0) {
        close(po[0]);
        close(pe[0]);
        *err = strbuf_format("%s: cannot run %s: %s", what, prog, strerror(rc));
        return -1;
    }

    struct strbuf errtext;
    strbuf_init(&errtext);
    bool overflow = false, dropped = false, timed_out = false, stopped = false;
    bool open_out = true, open_err = true;
    int64_t deadline = clock_monotonic_ns() + timeout_ns;
    while (open_out || open_err) {
        if (stop_pending()) {
            stopped = true;
            break;
        }
        int64_t left = deadline - clock_monotonic_ns();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd[2];
        int n = 0;
        if (open_out)
            pfd[n++] = (struct pollfd){.fd = po[0], .events = POLLIN};
        if (open_err)
            pfd[n++] = (struct pollfd){.fd = pe[0], .events = POLLIN};
        int wait_ms = left / 1000000LL > 100 ? 100 : (int)(left / 1000000LL) + 1;
        int ready = poll(pfd, (nfds_t)n, wait_ms);
        if (ready < 0 && errno != EINTR)
            break;
        for (int i = 0; ready > 0 && i < n; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (pfd[i].fd == po[0])
                open_out = !drain_fd(po[0], out, MAX_SMI_OUTPUT, &overflow);
            else
                open_err = !drain_fd(pe[0], &errtext, MAX_SMI_STDERR, &dropped);
        }
    }
    close(po[0]);
    close(pe[0]);
    if (timed_out || stopped)
        kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }

    int result = -1;
    char line[320];
    first_line(errtext.data && errtext.len ? errtext.data : out->data, line, sizeof(line));
    if (stopped)
        *err = strbuf_format("%s: interrupted by a stop signal", what);
    else if (timed_out)
        *err = strbuf_format("%s: no answer within %lld ms (killed)", what, (long long)(timeout_ns / 1000000LL));
    else if (strbuf_failed(out) || strbuf_failed(&errtext))
        *err = strbuf_format("out of memory");
    else if (overflow)
        *err = strbuf_format("%s: output larger than %zu bytes", what, MAX_SMI_OUTPUT);
    else if (WIFSIGNALED(status))
        *err = strbuf_format("%s: killed by signal %d%s%s", what, WTERMSIG(status), line[0] ? ": " : "", line);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        *err = strbuf_format("%s: exited with status %d%s%s", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                             line[0] ? ": " : "", line);
    else if (terminate(out) != 0)
        *err = strbuf_format("out of memory");
    else
        result = 0;
    strbuf_free(&errtext);
    return result;
}

/* ------------------------------------------------------------------ minors */

struct proc_gpu {
    int minor;
    uint64_t bus; /* domain:bus:device.function as one sortable number */
    char uuid[96];
    int index; /* matched topology index */
};

/* "0000:07:00.0" (domain of 4 or 8 hex digits, any case) -> sortable number. */
static int parse_bus(const char *s, uint64_t *out)
{
    unsigned int dom, bus, dev, fn;
    int used = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) != 4 || s[used] != '\0' || bus > 0xff || dev > 0x1f ||
        fn > 7)
        return -1;
    *out = ((uint64_t)dom << 16) | (bus << 8) | (dev << 3) | fn;
    return 0;
}

/* Copies src into dst[size], cut to fit. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    size_t lead = strspn(s, " \t");
    if (lead)
        memmove(s, s + lead, n - lead + 1);
}

/* One DIR/<entry>/information file: "Device Minor:", "Bus Location:" (else
 * the directory name) and "GPU UUID:". 0, or -1 with a reason in why. */
static int read_information(const char *dir, const char *entry, struct proc_gpu *g, char *why, size_t whysize)
{
    struct strbuf path, text;
    strbuf_init(&path);
    strbuf_init(&text);
    strbuf_printf(&path, "%s/%s/information", dir, entry);
    int rc = -1;
    if (strbuf_failed(&path)) {
        snprintf(why, whysize, "out of memory");
        goto done;
    }
    if (strbuf_read_file(&text, path.data) != 0) {
        snprintf(why, whysize, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    if (terminate(&text) != 0 || text.len > MAX_INFO_FILE) {
        snprintf(why, whysize, "%s: %s", path.data, strbuf_failed(&text) ? "out of memory" : "too large");
        goto done;
    }
    g->minor = -1;
    g->uuid[0] = '\0';
    char bus[64] = "";
    copy_str(bus, sizeof(bus), entry);
    char *save = NULL;
    for (char *ln = strtok_r(text.data, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        char *colon = strchr(ln, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *key = ln, *value = colon + 1;
        trim(key);
        trim(value);
        if (strcmp(key, "Device Minor") == 0) {
            char *end;
            errno = 0;
            long v = strtol(value, &end, 10);
            if (errno || end == value || *end || v < 0 || v > 1000000) {
                snprintf(why, whysize, "%s: bad Device Minor \"%.40s\"", path.data, value);
                goto done;
            }
            g->minor = (int)v;
        } else if (strcmp(key, "Bus Location") == 0) {
            copy_str(bus, sizeof(bus), value);
        } else if (strcmp(key, "GPU UUID") == 0 && strncmp(value, "GPU-", 4) == 0) {
            copy_str(g->uuid, sizeof(g->uuid), value);
        }
    }
    if (g->minor < 0) {
        snprintf(why, whysize, "%s: no Device Minor line", path.data);
        goto done;
    }
    if (parse_bus(bus, &g->bus) != 0) {
        snprintf(why, whysize, "%s: bad Bus Location \"%.40s\"", path.data, bus);
        goto done;
    }
    rc = 0;
done:
    strbuf_free(&path);
    strbuf_free(&text);
    return rc;
}

static int by_bus(const void *a, const void *b)
{
    const struct proc_gpu *x = a, *y = b;
    return x->bus < y->bus ? -1 : x->bus > y->bus;
}

/* Matches the driver's GPUs to topology indices: by UUID when every GPU has
 * one on both sides and they pair up one to one; else by PCI bus order,
 * which is the order nvidia-smi numbers GPUs in. */
static void match_indices(struct proc_gpu *pg, int n, const struct gpu_topology *t)
{
    bool by_uuid = true;
    bool taken[TOPOLOGY_MAX_GPUS] = {false};
    for (int i = 0; i < n && by_uuid; i++) {
        pg[i].index = -1;
        for (int j = 0; j < t->count && pg[i].uuid[0]; j++) {
            if (!taken[j] && t->gpus[j].uuid && strcmp(t->gpus[j].uuid, pg[i].uuid) == 0) {
                pg[i].index = j;
                taken[j] = true;
                break;
            }
        }
        by_uuid = pg[i].index >= 0;
    }
    if (by_uuid)
        return;
    qsort(pg, (size_t)n, sizeof(*pg), by_bus);
    for (int i = 0; i < n; i++)
        pg[i].index = i;
}

/* Fills minors[t->count] from the driver's files. 1 when they were read,
 * 0 when there are none to use (reason logged), -1 when memory ran out. */
static int read_minors(const char *dir, const struct gpu_topology *t, int *minors)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            log_debug("no %s: device minors are the indices", dir);
        else
            log_warn("cannot read %s (%s): device minors are the indices", dir, strerror(errno));
        return 0;
    }
    struct proc_gpu *pg = calloc(TOPOLOGY_MAX_GPUS, sizeof(*pg));
    if (!pg) {
        closedir(d);
        return -1;
    }
    int n = 0, rc = 1;
    char why[512] = "";
    struct dirent *de;
    while (rc == 1 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == TOPOLOGY_MAX_GPUS) {
            snprintf(why, sizeof(why), "more than %d GPUs", TOPOLOGY_MAX_GPUS);
            rc = 0;
        } else if (read_information(dir, de->d_name, &pg[n], why, sizeof(why)) != 0) {
            rc = strcmp(why, "out of memory") == 0 ? -1 : 0;
        } else {
            n++;
        }
    }
    closedir(d);
    if (rc == 1 && n != t->count) {
        snprintf(why, sizeof(why), "%d %s there, %d in nvidia-smi", n, n == 1 ? "GPU" : "GPUs", t->count);
        rc = 0;
    }
    if (rc == 1) {
        match_indices(pg, n, t);
        for (int i = 0; i < n; i++)
            minors[pg[i].index] = pg[i].minor;
    } else if (rc == 0) {
        log_warn("device minors from %s not used (%s): minors are the indices", dir, why);
    }
    free(pg);
    return rc;
}

/* ------------------------------------------------------------------ one round */

struct runner {
    const struct config *cfg;
    struct kube_client *client; /* with --patch-node */
    char *last_printed;         /* the annotation last written to stdout */
};

static int read_input_file(const char *path, struct strbuf *sb, char **err)
{
    if (strbuf_read_file(sb, path) != 0) {
        *err = strbuf_format("%s: %s", path, strerror(errno));
        return -1;
    }
    if (terminate(sb) != 0) {
        *err = strbuf_format("out of memory");
        return -1;
    }
    return 0;
}

/* The annotation text (malloc'd) or NULL with *err. */
static char *build_annotation(const struct config *cfg, char **err)
{
    struct strbuf topo, query;
    strbuf_init(&topo);
    strbuf_init(&query);
    char *text = NULL;
    struct gpu_topology *t = NULL;
    const char *topo_src = cfg->topo_file, *query_src = cfg->query_file;
    int rc;
    if (cfg->topo_file) {
        rc = read_input_file(cfg->topo_file, &topo, err);
    } else {
        char *args[] = {"topo", "-m"};
        topo_src = "nvidia-smi topo -m";
        rc = run_command(cfg->nvidia_smi, topo_src, args, 2, cfg->timeout_ns, &topo, err);
    }
    bool with_query = cfg->query_file || !cfg->topo_file;
    if (rc == 0 && cfg->query_file) {
        rc = read_input_file(cfg->query_file, &query, err);
    } else if (rc == 0 && with_query) {
        char *args[] = {QUERY_ARG, "--format=csv,noheader"};
        query_src = "nvidia-smi --query-gpu";
        rc = run_command(cfg->nvidia_smi, query_src, args, 2, cfg->timeout_ns, &query, err);
    }
    if (rc != 0)
        goto done;

    const char *csv = with_query ? query.data : NULL;
    char *why = NULL;
    t = topology_from_smi(topo.data, csv, NULL, &why);
    if (!t) {
        /* Name the input the message is about: the CSV's messages say so. */
        const char *src = !why || strcmp(why, "out of memory") == 0 ? NULL
                          : strncmp(why, "query CSV", 9) == 0       ? query_src
                          : strncmp(why, "annotation:", 11) == 0    ? NULL
                                                                    : topo_src;
        *err =
            why ? (src ? strbuf_format("%s: %s", src, why) : strbuf_format("%s", why)) : strbuf_format("out of memory");
        free(why);
        goto done;
    }
    if (cfg->proc_dir && *cfg->proc_dir) {
        int minors[TOPOLOGY_MAX_GPUS];
        int got = read_minors(cfg->proc_dir, t, minors);
        if (got < 0) {
            *err = strbuf_format("out of memory");
            goto done;
        }
        bool differ = false;
        for (int i = 0; got == 1 && i < t->count; i++)
            differ = differ || minors[i] != i;
        if (differ) {
            struct gpu_topology *with_minors = topology_from_smi(topo.data, csv, minors, &why);
            if (with_minors) {
                topology_free(t);
                t = with_minors;
            } else if (why && strcmp(why, "out of memory") != 0) {
                log_warn("device minors from %s not used (%s): minors are the indices", cfg->proc_dir, why);
            } else {
                free(why);
                *err = strbuf_format("out of memory");
                goto done;
            }
            free(why);
            why = NULL;
        }
    }
    text = topology_serialize(t);
    if (!text)
        *err = strbuf_format("out of memory");
done:
    topology_free(t);
    strbuf_free(&topo);
    strbuf_free(&query);
    return text;
}

static bool transient(int rc, const struct kube_response *r)
{
    return rc != 0 || r->status == 429 || r->status >= 500;
}

/* One API request with up to API_ATTEMPTS tries on transport errors, 5xx
 * and 429. 0 with an answer in *r (any status), -1 with r->error. */
static int api_request(struct runner *rn, const char *method, const char *path, const char *body,
                       struct kube_response *r)
{
    long timeout_ms = (long)(rn->cfg->timeout_ns / 1000000LL);
    for (int attempt = 1;; attempt++) {
        memset(r, 0, sizeof(*r));
        int rc = kube_request(rn->client, method, path, body ? "application/merge-patch+json" : NULL, body,
                              body ? strlen(body) : 0, timeout_ms, r);
        if (!transient(rc, r) || attempt == API_ATTEMPTS)
            return rc;
        log_warn("%s %s: %s; trying again", method, path, r->error ? r->error : "no answer");
        kube_response_free(r);
        if (pause_ms(API_BACKOFF_MS << (attempt - 1))) {
            memset(r, 0, sizeof(*r));
            r->error = strbuf_format("%s %s: interrupted by a stop signal", method, path);
            return -1;
        }
    }
}

static char *response_error(const struct kube_response *r, const char *fallback)
{
    return r->error ? strbuf_format("%s", r->error) : strbuf_format("%s", fallback);
}

/* GET the Node; PATCH its annotation when it differs. 0, or -1 with *err. */
static int publish(struct runner *rn, const char *value, bool repeat, char **err)
{
    const char *node = rn->cfg->patch_node;
    char *path = strbuf_format("/api/v1/nodes/%s", node);
    if (!path)
        return *err = strbuf_format("out of memory"), -1;
    struct kube_response r;
    int result = -1;
    cJSON *obj = NULL, *patch = NULL;
    char *body = NULL;
    if (api_request(rn, "GET", path, NULL, &r) != 0 || r.status != 200) {
        *err = r.status == 404 ? strbuf_format("node %s not found", node) : response_error(&r, "GET failed");
        goto done;
    }
    obj = cJSON_ParseWithLength(r.body ? r.body : "", r.body ? r.body_len : 0);
    if (!obj || !cJSON_IsObject(obj)) {
        *err = strbuf_format("GET %s: the answer is not a JSON object", path);
        goto done;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(ann, TOPOLOGY_ANNOTATION);
    if (cJSON_IsString(cur) && strcmp(cur->valuestring, value) == 0) {
        if (repeat)
            log_debug("node %s: %s unchanged", node, TOPOLOGY_ANNOTATION);
        else
            log_info("node %s: %s unchanged", node, TOPOLOGY_ANNOTATION);
        result = 0;
        goto done;
    }
    bool had = cur != NULL;
    kube_response_free(&r);
    memset(&r, 0, sizeof(r));
    patch = cJSON_CreateObject();
    cJSON *pmeta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
    cJSON *pann = pmeta ? cJSON_AddObjectToObject(pmeta, "annotations") : NULL;
    body = pann && cJSON_AddStringToObject(pann, TOPOLOGY_ANNOTATION, value) ? cJSON_PrintUnformatted(patch) : NULL;
    if (!body) {
        *err = strbuf_format("out of memory");
        goto done;
    }
    if (api_request(rn, "PATCH", path, body, &r) != 0 || r.status != 200) {
        *err = r.status == 404 ? strbuf_format("node %s not found", node) : response_error(&r, "PATCH failed");
        goto done;
    }
    log_info("node %s: %s %s", node, TOPOLOGY_ANNOTATION, had ? "updated" : "added");
    result = 0;
done:
    kube_response_free(&r);
    cJSON_Delete(obj);
    cJSON_Delete(patch);
    free(body); /* cJSON's default hooks are malloc/free */
    free(path);
    return result;
}

static int print_annotation(struct runner *rn, char *text)
{
    if (rn->last_printed && strcmp(rn->last_printed, text) == 0)
        return 0;
    if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        log_error("cannot write to standard output: %s", strerror(errno));
        return -1;
    }
    char *copy = strdup(text);
    if (!copy) {
        log_error("out of memory");
        return -1;
    }
    free(rn->last_printed);
    rn->last_printed = copy;
    return 0;
}

/* One round: EXIT_OK or EXIT_FAILED (the reason logged). */
static int run_round(struct runner *rn, bool repeat)
{
    char *err = NULL;
    char *text = build_annotation(rn->cfg, &err);
    if (!text) {
        log_error("%s", err ? err : "out of memory");
        free(err);
        return EXIT_FAILED;
    }
    int rc = print_annotation(rn, text) == 0 ? EXIT_OK : EXIT_FAILED;
    if (rc == EXIT_OK && rn->client && publish(rn, text, repeat, &err) != 0) {
        log_error("node %s: %s", rn->cfg->patch_node, err ? err : "out of memory");
        rc = EXIT_FAILED;
    }
    free(err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ main */

static int make_client(const struct config *cfg, struct kube_config **kc, struct kube_client **client)
{
    char *err = NULL;
    *kc = cfg->kubeconfig ? kube_config_from_file(cfg->kubeconfig, &err) : kube_config_in_cluster(&err);
    if (*kc)
        *client = kube_client_new(*kc, &err);
    if (!*kc || !*client) {
        log_error("cannot talk to the API server: %s", err ? err : "out of memory");
        free(err);
        return -1;
    }
    return 0;
}

/* --interval: rounds every interval_ns from the start of the previous one,
 * until SIGTERM or SIGINT (exit 0). */
static int run_forever(struct runner *rn)
{
    int64_t interval = rn->cfg->interval_ns;
    log_info(PROG " %s: every %.3gs%s%s", GQA_VERSION, (double)interval / 1e9, rn->cfg->patch_node ? ", node " : "",
             rn->cfg->patch_node ? rn->cfg->patch_node : "");
    for (int round = 0;; round++) {
        int64_t next = clock_monotonic_ns() + interval;
        if (run_round(rn, round > 0) != EXIT_OK)
            log_warn("round failed; next try in %.3gs", (double)interval / 1e9);
        for (;;) {
            int64_t left = next - clock_monotonic_ns();
            if (left < 0)
                left = 0;
            struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
            int sig = sigtimedwait(&stop_signals, NULL, &ts);
            if (sig > 0) {
                log_info("received %s: stopping", strsignal(sig));
                return EXIT_OK;
            }
            if (sig < 0 && errno == EAGAIN)
                break;
        }
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    struct config cfg;
    if (parse_flags(&cfg, argc, argv) != 0) {
        config_free(&cfg);
        return EXIT_USAGE;
    }
    if (cfg.show_help || cfg.show_version) {
        if (cfg.show_help)
            usage(stdout);
        else
            printf(PROG " %s (commit %s, built %s)\n", GQA_VERSION, GQA_GIT_COMMIT, GQA_BUILD_DATE);
        config_free(&cfg);
        return EXIT_OK;
    }
    log_configure(cfg.log_level, cfg.log_format);
    if (cfg.interval_ns > 0) {
        /* Taken synchronously (sigtimedwait), so a stop never cuts a patch in half. */
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGTERM);
        sigaddset(&stop_signals, SIGINT);
        sigprocmask(SIG_BLOCK, &stop_signals, NULL);
        signals_blocked = true;
    }
    struct runner rn = {.cfg = &cfg};
    struct kube_config *kc = NULL;
    int rc = EXIT_FAILED;
    if (!cfg.patch_node || make_client(&cfg, &kc, &rn.client) == 0)
        rc = cfg.interval_ns > 0 ? run_forever(&rn) : run_round(&rn, false);
    kube_client_free(rn.client);
    kube_config_free(kc);
    free(rn.last_printed);
    config_free(&cfg);
    return rc;
}

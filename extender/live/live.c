/* live.c - live mode: informers, recorder, leader election. See live.h. */
#include "extender/live/live.h"
#include "extender/live/feed.h"
#include "extender/live/hamihandshake.h"
#include "extender/live/leaderlabel.h"
#include "extender/live/recorder.h"
#include "kube/informer.h"
#include "kube/leader.h"
#include "lib/log.h"
#include "lib/termtext.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NINFORMERS 5 /* nodes, pods, CRL ConfigMaps, the quota ConfigMap, ResourceQuotas (HAMi) */

struct live {
    struct app *app;
    struct kube_config *kube;
    struct informer *informers[NINFORMERS];
    int ninformers;                 /* started: the ResourceQuotas only with --hami-resource-quota on */
    struct feed *feeds[NINFORMERS]; /* informers[i] feeds the cache through feeds[i] */
    struct recorder *recorder;
    struct leader_elector *leader;
    struct leader_label *label;         /* with --leader-elect in a pod (POD_NAME, POD_NAMESPACE) */
    struct hami_handshaker *handshaker; /* with --hami-handshake write */
    char identity[128];
    struct decision_key key; /* proves decisions (cluster/proof.h); read-only once informers run */
    /* A new leader's hand-over: the election thread's callbacks set and
     * clear the target, request threads check it (live_caught_up). */
    atomic_int caught_up; /* 1 once the pods informer reached target_rv in this term */
    pthread_mutex_t mu;   /* guards target_rv and rv_warned, and orders caught_up's changes; a leaf */
    char target_rv[64];   /* the pods' resourceVersion when this term began ("": not read yet) */
    bool rv_warned;       /* a resourceVersion that is not a number was said once */
    bool labelled;        /* the election thread's: the label's started callback succeeded this term */
    bool leader_gate;     /* placement asks live_caught_up */
};

static struct kube_config *load_config(const struct options *o, char **err)
{
    return o->kubeconfig ? kube_config_from_file(o->kubeconfig, err) : kube_config_in_cluster(err);
}

static struct informer *cache_informer(struct live *l, int i, const char *title, const char *path, enum feed_kind kind,
                                       const char *ns, const char *name)
{
    l->feeds[i] = feed_new(kind, &l->app->cache, ns, name);
    return l->feeds[i] ? informer_new(title, path, feed_sink(l->feeds[i]), l->kube) : NULL;
}

/* ConfigMaps of one namespace, or (name given) just one of them. */
static struct informer *configmap_informer(struct live *l, int i, const char *ns, const char *name)
{
    struct strbuf path, title, selector;
    strbuf_init(&path);
    strbuf_init(&title);
    strbuf_init(&selector);
    char *ens = kube_escape(ns), *sel = NULL;
    if (name) {
        strbuf_printf(&selector, "metadata.name=%s", name);
        sel = selector.data ? kube_escape(selector.data) : NULL;
    }
    strbuf_printf(&path, "/api/v1/namespaces/%s/configmaps%s%s", ens ? ens : "", sel ? "?fieldSelector=" : "",
                  sel ? sel : "");
    strbuf_printf(&title, "configmaps/%s%s%s", ns, name ? "/" : "", name ? name : "");
    bool ok = ens && (!name || sel) && !strbuf_failed(&path) && !strbuf_failed(&title);
    struct informer *inf = ok ? cache_informer(l, i, title.data, path.data, FEED_CONFIGMAPS, ns, name) : NULL;
    free(ens);
    free(sel);
    strbuf_free(&path);
    strbuf_free(&title);
    strbuf_free(&selector);
    return inf;
}

static int make_informers(struct live *l, const struct options *o)
{
    char quota_ns[64] = "", *quota_name = strchr(o->quota_configmap, '/');
    snprintf(quota_ns, sizeof(quota_ns), "%.*s", (int)(quota_name - o->quota_configmap), o->quota_configmap);
    l->informers[0] = cache_informer(l, 0, "nodes", "/api/v1/nodes", FEED_NODES, NULL, NULL);
    /* Finished pods hold no GPU; the API server leaves them out and sends a
     * DELETED event when a pod finishes. */
    l->informers[1] = cache_informer(
        l, 1, "pods", "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed", FEED_PODS,
        NULL, NULL);
    l->informers[2] = configmap_informer(l, 2, o->crl_namespace, NULL);
    l->informers[3] = configmap_informer(l, 3, quota_ns, quota_name + 1);
    l->ninformers = 4;
    if (o->hami_resource_quota) {
        l->feeds[4] = feed_new_resourcequotas(&l->app->cache, &l->app->hami_quota);
        l->informers[4] =
            l->feeds[4] ? informer_new("resourcequotas", "/api/v1/resourcequotas", feed_sink(l->feeds[4]), l->kube)
                        : NULL;
        l->ninformers = 5;
    }
    /* Pods are charged with CRL defaults: list them after the CRLs. */
    if (l->informers[1])
        informer_after(l->informers[1], &l->informers[2], 2);
    for (int i = 0; i < l->ninformers; i++)
        if (!l->informers[i] || informer_start(l->informers[i]) != 0)
            return -1;
    return 0;
}

/* The leader's pod gets the label the extender Service selects on; its
 * name and namespace come from the downward API. */
static int make_label(struct live *l, char **err)
{
    const char *pod = getenv("POD_NAME"), *ns = getenv("POD_NAMESPACE");
    if (!pod || !*pod || !ns || !*ns) {
        log_warn("POD_NAME and POD_NAMESPACE are not set: the leader does not label its pod " LEADER_LABEL
                 "=true, so a Service that selects on that label finds no endpoint (set both from the downward API)");
        return 0;
    }
    l->label = leader_label_new(l->kube, ns, pod, err);
    return l->label ? 0 : -1;
}

/* ---- a new leader catches up ------------------------------------------------ */

/* The pods' resourceVersion now: a list of at most one pod, read from the
 * API server's store (no resourceVersion given), says how far the cluster
 * has got. 0, or -1 (the next renewal tries again). */
static int read_pods_rv(struct live *l, char *out, size_t size)
{
    char *err = NULL;
    struct kube_client *client = kube_client_new(l->kube, &err);
    struct kube_response resp = {0};
    int rc = -1;
    if (client && kube_request(client, "GET", "/api/v1/pods?limit=1", NULL, NULL, 0, 3000, &resp) == 0 &&
        resp.status == 200) {
        cJSON *list = cJSON_Parse(resp.body);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(list, "metadata");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
        if (cJSON_IsString(rv) && *rv->valuestring && strlen(rv->valuestring) < size) {
            snprintf(out, size, "%s", rv->valuestring);
            rc = 0;
        }
        cJSON_Delete(list);
    }
    if (rc != 0)
        log_warn("leader: cannot read the pods' resourceVersion to catch up with (%s); trying again at the next "
                 "renewal",
                 err          ? err
                 : resp.error ? resp.error
                              : "not a list with metadata.resourceVersion");
    free(err);
    kube_response_free(&resp);
    kube_client_free(client);
    return rc;
}

static bool decimal_rv(const char *s, unsigned long long *v)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return *s >= '0' && *s <= '9' && !errno && *end == '\0';
}

/* Has the informer applied every change up to target? resourceVersions are
 * opaque to clients, but every API server in use gives etcd revisions,
 * which grow; one that is not a number cannot be compared and is taken as
 * reached (said once). */
static bool rv_reached(struct live *l, const char *have, const char *target)
{
    unsigned long long h, t;
    if (decimal_rv(have, &h) && decimal_rv(target, &t))
        return h >= t;
    if (!l->rv_warned)
        log_warn("leader: resourceVersions %s and %s are not numbers; deciding without waiting to catch up", have,
                 target);
    l->rv_warned = true;
    return true;
}

/* The cache holds the cluster's pods as of this term's start? Decisions of
 * the previous leader that the watch had not delivered yet would otherwise
 * look like free GPUs. Checked by every verb until it holds (an informer
 * status read: no I/O). */
static bool live_caught_up(void *ctx)
{
    struct live *l = ctx;
    if (atomic_load(&l->caught_up))
        return true;
    pthread_mutex_lock(&l->mu);
    if (l->target_rv[0]) {
        struct informer_status st;
        informer_status(l->informers[1], &st);
        if (st.synced && rv_reached(l, st.resource_version, l->target_rv)) {
            atomic_store(&l->caught_up, 1);
            log_info("leader: the cache holds the pods as of resourceVersion %s; deciding", l->target_rv);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return atomic_load(&l->caught_up);
}

/* This term's target: the pods' resourceVersion now. Non-zero: not read
 * yet (tried again at the next renewal). */
static int catch_up(struct live *l)
{
    pthread_mutex_lock(&l->mu);
    bool have = l->target_rv[0] != '\0';
    pthread_mutex_unlock(&l->mu);
    char rv[sizeof(l->target_rv)];
    if (have)
        return 0;
    if (read_pods_rv(l, rv, sizeof(rv)) != 0)
        return 1;
    pthread_mutex_lock(&l->mu);
    snprintf(l->target_rv, sizeof(l->target_rv), "%s", rv);
    pthread_mutex_unlock(&l->mu);
    log_info("leader: deciding once the pods informer has reached resourceVersion %s", rv);
    live_caught_up(l);
    return 0;
}

/* The label first (routing), then the catch-up target; each is retried at
 * the next renewal until it succeeds, and a label that cannot be set does
 * not hold decisions back (docs/behaviour.md). */
static int on_started(void *ctx)
{
    struct live *l = ctx;
    int pending = 0;
    if (l->label && !l->labelled) {
        const struct leader_callbacks *lc = leader_label_callbacks(l->label);
        if (lc->started(lc->ctx) == 0)
            l->labelled = true;
        else
            pending = 1;
    }
    return catch_up(l) != 0 ? 1 : pending;
}

static void on_stopped(void *ctx)
{
    struct live *l = ctx;
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->caught_up, 0);
    l->target_rv[0] = '\0';
    pthread_mutex_unlock(&l->mu);
    l->labelled = false;
    if (l->label) {
        const struct leader_callbacks *lc = leader_label_callbacks(l->label);
        lc->stopped(lc->ctx);
    }
}

/* Only a replica that can serve campaigns: one whose informers cannot sync
 * (RBAC missing, say) would otherwise win the Lease and decide nothing. */
static int may_lead(void *ctx, char *why, size_t size)
{
    return live_ready(ctx, why, size);
}

static int start_leader(struct live *l, const struct options *o, char **err)
{
    char host[64] = "unknown";
    gethostname(host, sizeof(host) - 1);
    snprintf(l->identity, sizeof(l->identity), "%s_%08lx", host,
             (unsigned long)(clock_realtime_ns() % NS_PER_S ^ getpid()));
    struct leader_config lc = {o->lease_namespace, o->lease_name, l->identity, 15000, 10000, 2000};
    if (make_label(l, err) != 0)
        return -1;
    struct leader_callbacks callbacks = {.started = on_started, .stopped = on_stopped, .may_lead = may_lead, .ctx = l};
    l->leader = leader_start_with(l->kube, &lc, &l->app->is_leader, &callbacks, err);
    return l->leader ? 0 : -1;
}

/* The key from --decision-key-file, else a random one of this process. */
static int load_key(struct live *l, const struct options *o, char **err)
{
    /* The manifests mount the Secret as optional: a file that is not there
     * (the Secret was never created) is said loudly, not fatal. */
    bool absent = o->decision_key_file && access(o->decision_key_file, F_OK) != 0 && errno == ENOENT;
    if (o->decision_key_file && !absent) {
        if (decision_key_load(&l->key, o->decision_key_file, err) != 0)
            return -1;
        log_info("decisions are proven with the key of %s (gpu-admission.io/proof)", o->decision_key_file);
    } else if (decision_key_random(&l->key) != 0) {
        *err = strdup("cannot make a random decision key (the random source failed)");
        return -1;
    } else {
        log_warn("%s%s: decisions are proven with a random key of this process, so the pending decisions other "
                 "replicas (a previous leader) wrote are not honoured but fitted again, and a pod the previous leader "
                 "decided may then share a GPU with one decided here; create the Secret the replicas share "
                 "(kubectl -n kube-system create secret generic gpu-quota-admission-decision-key "
                 "--from-literal=key=\"$(openssl rand -hex 32)\") and pass --decision-key-file",
                 absent ? "the decision key file is not there: " : "no --decision-key-file",
                 absent ? o->decision_key_file : "");
    }
    cache_set_decision_key(&l->app->cache, &l->key);
    placement_set_decision_key(&l->app->placement, &l->key);
    return 0;
}

struct live *live_start(struct app *app, const struct options *o, char **err)
{
    struct live *l = calloc(1, sizeof(*l));
    if (!l) {
        *err = strdup("out of memory");
        return NULL;
    }
    l->app = app;
    pthread_mutex_init(&l->mu, NULL);
    if (!(l->kube = load_config(o, err)) || !(l->recorder = recorder_new(l->kube, err)))
        goto fail;
    log_info("following the cluster at %s (%s)", l->kube->server, l->kube->source);
    if (load_key(l, o, err) != 0)
        goto fail;
    placement_set_sink(&app->placement, recorder_sink(l->recorder));
    if (o->leader_elect) {
        atomic_store(&app->is_leader, 0);
        placement_require_leader(&app->placement, &app->is_leader, live_caught_up, l);
        l->leader_gate = true;
    }
    /* The informers first: a new leader's catching up reads the pods'. */
    if (make_informers(l, o) != 0) {
        *err = strdup("cannot start the informers (out of memory or threads)");
        goto fail;
    }
    if (o->leader_elect && start_leader(l, o, err) != 0)
        goto fail;
    if (o->hami.handshake == HAMI_HANDSHAKE_WRITE &&
        !(l->handshaker = hami_handshaker_start(l->kube, &app->cache, o->leader_elect ? &app->is_leader : NULL,
                                                o->hami.handshake_interval_ns, err)))
        goto fail;
    return l;
fail:
    live_stop(l);
    return NULL;
}

void live_stop(struct live *l)
{
    if (!l)
        return;
    hami_handshaker_stop(l->handshaker);
    leader_stop(l->leader); /* a leader takes its label off, then releases the Lease */
    if (l->leader_gate)     /* is_leader is 0 now; the gate reads the informers freed below */
        placement_require_leader(&l->app->placement, &l->app->is_leader, NULL, NULL);
    leader_label_free(l->label);
    for (int i = 0; i < NINFORMERS; i++) {
        informer_free(l->informers[i]);
        feed_free(l->feeds[i]);
    }
    if (l->app) {
        placement_set_sink(&l->app->placement, NULL);
        placement_set_decision_key(&l->app->placement, NULL);
        cache_set_decision_key(&l->app->cache, NULL);
    }
    OPENSSL_cleanse(&l->key, sizeof(l->key));
    pthread_mutex_destroy(&l->mu);
    recorder_free(l->recorder);
    kube_config_free(l->kube);
    free(l);
}

/* The reason in /readyz: one line, cut at a word when it must be. */
static void not_ready(char *reason, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void not_ready(char *reason, size_t size, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    term_text_fit(reason, size, text);
}

/* An API error without its request line ("GET /api/...?...: "): the
 * informer's name already says what was asked, the answer says why. */
static const char *api_answer(const char *err)
{
    const char *sep = strstr(err, ": ");
    return strncmp(err, "GET /", 5) == 0 && sep ? sep + 2 : err;
}

int live_ready(struct live *l, char *reason, size_t size)
{
    struct informer_status st[NINFORMERS];
    int n = l->ninformers;
    for (int i = 0; i < n; i++)
        informer_status(l->informers[i], &st[i]);
    /* The cause first: an informer that waits for another (pods for the
     * ConfigMaps) would otherwise hide why that one cannot sync. */
    for (int i = 0; i < n; i++) {
        if (!st[i].synced && st[i].last_error[0] && !st[i].waiting) {
            not_ready(reason, size, "informer %s: %s", l->informers[i]->name, api_answer(st[i].last_error));
            return 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (!st[i].synced) {
            not_ready(reason, size, "informer %s has not synced yet%s%s", l->informers[i]->name,
                      st[i].last_error[0] ? ": " : "", st[i].last_error);
            return 0;
        }
        if (st[i].failing_for_ns > (int64_t)LIVE_FAILING_BOUND_S * 1000000000LL) {
            not_ready(reason, size, "informer %s has been failing for %llds: %s", l->informers[i]->name,
                      (long long)(st[i].failing_for_ns / 1000000000LL), api_answer(st[i].last_error));
            return 0;
        }
    }
    /* Leader or not: every synced replica is ready, so rollouts and
     * disruption budgets work; verbs reach the leader by its label. */
    return 1;
}

void live_render_informers(struct live *l, struct strbuf *out)
{
    strbuf_putc(out, '[');
    for (int i = 0; i < l->ninformers; i++) {
        struct informer *inf = l->informers[i];
        struct informer_status st;
        informer_status(inf, &st);
        strbuf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        strbuf_json_string(out, inf->name);
        strbuf_printf(out, ",\"synced\":%s,\"resourceVersion\":", st.synced ? "true" : "false");
        strbuf_json_string(out, st.resource_version);
        strbuf_printf(out, ",\"failingForSeconds\":%lld,\"lastError\":", (long long)(st.failing_for_ns / 1000000000LL));
        strbuf_json_string(out, st.last_error);
        strbuf_printf(out, ",\"events\":%llu,\"bookmarks\":%llu,\"relists\":%llu,\"reconnects\":%llu}",
                      (unsigned long long)atomic_load(&inf->events), (unsigned long long)atomic_load(&inf->bookmarks),
                      (unsigned long long)atomic_load(&inf->relists),
                      (unsigned long long)atomic_load(&inf->reconnects));
    }
    strbuf_puts(out, "]\n");
}

static void metric_family(struct strbuf *out, struct live *l, const char *name, const char *help, size_t offset)
{
    strbuf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < l->ninformers; i++) {
        atomic_uint_fast64_t *v = (atomic_uint_fast64_t *)((char *)l->informers[i] + offset);
        strbuf_printf(out, "%s{informer=\"%s\"} %llu\n", name, l->informers[i]->name,
                      (unsigned long long)atomic_load(v));
    }
}

void live_render_metrics(struct live *l, struct strbuf *out)
{
    metric_family(out, l, "gqa_informer_events_total", "Watch events applied to the cache.",
                  offsetof(struct informer, events));
    metric_family(out, l, "gqa_informer_relists_total", "Lists after the first (410 Gone or a broken resume).",
                  offsetof(struct informer, relists));
    metric_family(out, l, "gqa_informer_reconnects_total", "Watches resumed after a failure.",
                  offsetof(struct informer, reconnects));
    metric_family(out, l, "gqa_informer_bookmarks_total", "Bookmark events received.",
                  offsetof(struct informer, bookmarks));
    metric_family(out, l, "gqa_informer_errors_total", "Failed lists and watches.", offsetof(struct informer, errors));
    strbuf_puts(out, "# HELP gqa_informer_synced 1 once the informer's first list is in the cache.\n"
                     "# TYPE gqa_informer_synced gauge\n");
    for (int i = 0; i < l->ninformers; i++)
        strbuf_printf(out, "gqa_informer_synced{informer=\"%s\"} %d\n", l->informers[i]->name,
                      atomic_load(&l->informers[i]->synced));
    strbuf_printf(out,
                  "# HELP gqa_leader 1 while this replica may take decisions.\n# TYPE gqa_leader gauge\n"
                  "gqa_leader %d\n",
                  l->leader ? atomic_load(&l->app->is_leader) : 1);
}

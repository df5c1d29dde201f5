/*
 * app.h - the application state the endpoints share.
 *
 * Owns struct app: the flags, the cluster cache, placement, the admission
 * policy derived from ConfigMaps, readiness and leadership flags, and (live)
 * the connection to the cluster. Made once at start-up by app_init and
 * handed to every handler; each part guards itself (the cache's lock,
 * placement's, atomics for the flags).
 */
#ifndef GQA_APP_H
#define GQA_APP_H

#include <cjson/cJSON.h>
#include <stdatomic.h>

#include "admission/hamiquota.h"
#include "admission/policy.h"
#include "cluster/cache.h"
#include "extender/decide/namelist.h"
#include "extender/decide/placement.h"
#include "extender/options.h"

struct live;

struct app {
    const struct options *opts;
    struct cluster_cache cache;
    struct placement placement;
    struct name_list_memo node_lists; /* the last NodeNames array (wire.c) */
    struct admission_policy policy;   /* CRLs and quota from ConfigMaps */
    struct hami_quota_set hami_quota; /* HAMi's ResourceQuotas (live); guarded by the cache's lock */
    atomic_int ready;                 /* offline: the state is loaded; live: see live_ready() */
    atomic_int is_leader;             /* live with --leader-elect: set by the elector */
    struct live *live;                /* NULL offline */
    char not_ready_reason[160];
};

int app_init(struct app *app, const struct options *opts);
void app_destroy(struct app *app);

/* Check a pod object against the enabled CRLs and write their defaults into
 * it, then parse it; a violation becomes the pod's request error (every
 * node refuses it with the CRL's name and rule). NULL with *err when the
 * object is not a usable Pod. */
struct pod_info *app_pod_from_json(struct app *app, cJSON *pod_json, char **err);

#endif

/*
 * live.h - running against an API server.
 *
 * Owns live mode's parts and their lifecycle: the cluster connection
 * (kubeconfig or in-cluster), the informers that feed the cache (nodes; pods
 * that are not finished; ConfigMaps of the CRL namespace; the quota
 * ConfigMap; with --hami-resource-quota on, ResourceQuotas, which feed
 * HAMi's quota rule), the recorder through which decisions reach the pods, and
 * leader election with the leader label (leaderlabel.h). Also owns what
 * live mode means for readiness: ready when every informer has synced and
 * none has been failing for longer than LIVE_FAILING_BOUND_S, on every
 * replica, leader or not.
 */
#ifndef GQA_LIVE_H
#define GQA_LIVE_H

#include <stddef.h>

#include "extender/app.h"
#include "lib/strbuf.h"

#define LIVE_FAILING_BOUND_S 60

struct live;

/* Connect and start everything; decisions go through the recorder from now
 * on. NULL with *err when the cluster configuration is unusable. */
struct live *live_start(struct app *app, const struct options *opts, char **err);
void live_stop(struct live *l);

/* 1 when ready; else 0 with a reason. */
int live_ready(struct live *l, char *reason, size_t size);
/* JSON array of informer states for /inspect/informers. */
void live_render_informers(struct live *l, struct strbuf *out);
/* Prometheus lines for informers and leadership. */
void live_render_metrics(struct live *l, struct strbuf *out);

#endif

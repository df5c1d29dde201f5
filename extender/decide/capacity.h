/*
 * capacity.h - allocatable against allocated, and how fragmented it is.
 *
 * Owns the cluster-wide capacity figures of issue 14: per GPU model and pool
 * (low cardinality), each GPU resource's allocatable and allocated amounts,
 * GPUs idle, partly used and full, free cores on idle and on partly used
 * GPUs (their ratio is the fragmentation), and stranded capacity: free
 * cores on GPUs whose memory is all taken, and free memory on GPUs whose
 * cores are. Rendered as Prometheus gauges (with --metrics-per-node also one
 * series per node, and per GPU labelled as DCGM exporter's series) and as JSON for GET /inspect/capacity, which /ui and
 * `kubectl gpu top` show. Computed at scrape time under the cache's read
 * lock: one pass over the nodes, no I/O while it is held.
 */
#ifndef GQA_CAPACITY_H
#define GQA_CAPACITY_H

#include <stdbool.h>

#include "cluster/cache.h"
#include "lib/strbuf.h"

/* Prometheus text for every capacity gauge; per_node adds the gqa_node_* series. */
void capacity_render_metrics(struct cluster_cache *cache, bool per_node, struct strbuf *out);
/* --metrics-per-pod: what each pod holds on each GPU (gqa_pod_gpu_*), one
 * series per pod and GPU, with namespace, pod, node, gpu and UUID labels. */
void capacity_render_pod_metrics(struct cluster_cache *cache, struct strbuf *out);
/* The JSON answer of GET /inspect/capacity. */
void capacity_render_json(struct cluster_cache *cache, struct strbuf *out);

#endif

/*
 * statefile.h - offline cluster state (--state-file).
 *
 * Owns loading a `kind: List` of Nodes, Pods and ConfigMaps, as
 * `kubectl get nodes,pods,configmaps -A -o yaml` (or -o json) prints it, into
 * the cache through the same functions the API watch uses. JSON files are
 * walked item by item (a 5000-node state never exists as one cJSON tree);
 * YAML is converted document by document. Also accepted: a single object, a
 * NodeList/PodList/ConfigMapList, and multi-document YAML of any of these.
 * An unusable item fails the load with its position; objects of other kinds
 * are skipped and counted.
 */
#ifndef GQA_STATEFILE_H
#define GQA_STATEFILE_H

#include <stddef.h>

#include "cluster/cache.h"

struct state_counts {
    size_t nodes, pods, configmaps, skipped;
};

/* Returns 0, or -1 with *err (malloc'd, names the file and item). */
int statefile_load(struct cluster_cache *cache, const char *path, struct state_counts *counts, char **err);
/* Read a whole file ("-": standard input). NULL with *err on failure. */
char *read_whole_file(const char *path, size_t *len, char **err);
/* Parse one object (a Pod for `simulate`) from YAML or JSON text. */
cJSON *parse_object_text(const char *text, size_t len, char **err);

#endif

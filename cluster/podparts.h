/*
 * podparts.h - the steps of reading a pod that do not depend on where the
 * pod comes from.
 *
 * Owns: a container's GPU amounts turned into its request (the families of
 * design.md section 3 and their errors), the whole-GPU limit, the decision
 * annotations of section 4 read through a lookup function, and HAMi's pod
 * annotations. podspec.c reads a Pod from cJSON and podtext.c a watched Pod
 * straight from its text; both go through these steps, so the two readers
 * give the same pod_info. No state, no locks.
 */
#ifndef GQA_PODPARTS_H
#define GQA_PODPARTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/family.h"
#include "cluster/podinfo.h"
#include "lib/strbuf.h"

#define MAX_GPUS_PER_CONTAINER 64

/* After the app containers were read into pod->containers: the init
 * containers (init[j] is spec.initContainers[j], classified, with sidecar
 * set) as Kubernetes counts a pod's effective request. Sidecars asking for
 * GPUs run beside the app containers and are placed with them; a plain init
 * container asking for GPUs is placed only when neither an app container
 * nor a sidecar asks for any (it runs before them, so the GPUs it had are
 * theirs afterwards). The placed ones are appended to pod->containers with
 * init_slot = j + 1. Takes the names in init[] (freed or moved); the array
 * itself stays the caller's. 0, or -1 on allocation failure. */
int pod_place_init_containers(struct pod_info *pod, struct container_request *init, int ninit);

/* HAMi's allocation entries for the pod as HAMi v2.9 and later list them:
 * one per init container (spec.initContainers[j] is entry j), then one
 * per app container. Without init containers that is the older layout
 * (app containers only). pod_hami_entry: the entry of containers[i]. */
int pod_hami_entries(const struct pod_info *pod);
int pod_hami_entry(const struct pod_info *pod, int i);
/* The app containers: containers[0..n) (placed init containers follow). */
int pod_app_containers(const struct pod_info *pod);

/* A container's name (len bytes, may hold no NUL), or "#i" for container i
 * when name is NULL: malloc'd, NULL on allocation failure. */
char *pod_container_name(const char *name, size_t len, int i);

/* After every container was classified: a pod that uses GPUs and has a
 * container past MAX_GPUS_PER_CONTAINER whole GPUs gets that as its
 * request_error (unless it has one). 0, or -1 on allocation failure. */
int pod_check_whole_gpu_limit(struct pod_info *pod);

/* The annotation `key` of the pod being read as a NUL-terminated string,
 * or NULL when the pod has no such string annotation. */
typedef const char *(*annotation_get_fn)(const void *src, const char *key);

/* Read the decision annotations of a pod that has an annotations object
 * into d (zeroed by the caller): node, time, assigned, and per container
 * (pod->containers, each app or init container under its own key) the GPU
 * minors. 0, or -1 on allocation failure. */
int pod_decision_read(annotation_get_fn get, const void *src, const struct pod_info *pod, struct pod_decision *d);

/* An index annotation's key: prefix then container i in decimal, into key
 * (size bytes); "" when it does not fit. */
const char *pod_index_key(char *key, size_t size, const char *prefix, int i);
/* The gpu-admission.io index key of container i of pod (an app container's
 * or an init container's), into key (size bytes). */
const char *pod_gqa_index_key(char *key, size_t size, const struct pod_info *pod, int i);

/* Does a container have a HAMi request (so HAMi's annotations are read)? */
bool pod_wants_hami(const struct pod_info *pod);

/* HAMi's pod annotations, read only when a container has a HAMi request:
 * ann is the pod's annotations object, or NULL when it has none. A problem
 * becomes the pod's request_error unless it has one. 0, or -1 on
 * allocation failure. */
int pod_read_hami(struct pod_info *pod, const cJSON *ann);

/* Parse "0,1,3" into minors (podspec.h and podtext.c read decisions with it). Returns the count, or -1 on syntax error.
 * out must have room for max entries. */
int parse_gpu_index_list(const char *text, int *out, int max);

#endif

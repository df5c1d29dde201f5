/*
 * hami_occupancy.h - the HAMi part of the cache's occupancy index.
 *
 * Owns how pods are charged to HAMi devices (docs/hami.md): a pod on a HAMi
 * node takes, on every device its allocation annotation names by UUID
 * (hami.io/vgpu-devices-allocated, else -to-allocate), one task and the
 * memory and cores written there. A pod whose annotation is missing, names
 * another node, or does not match the node's devices and the pod's requests
 * is held against the node as a whole ("unattributed"), like the other
 * families. A pod on a MIG-mode device (HAMi v2.10 dynamic MIG,
 * docs/mig.md) also holds the MIG instance its hami.io/vgpu-mig-allocations
 * entry names (profile and placement), when that placement is one of the
 * device's and free; the instances in use are kept per device for the
 * fit's choice and the fragmentation gauge. Also owns the HAMi part of
 * /inspect/nodes.
 *
 * Concurrency: the cache (cache.c) calls the writers under its write lock,
 * with the same bookkeeping as for the other families (each pod remembers
 * the charge it applied); readers run under the cache's read lock.
 */
#ifndef GQA_HAMI_OCCUPANCY_H
#define GQA_HAMI_OCCUPANCY_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/mig_place.h"
#include "cluster/podspec.h"
#include "lib/strbuf.h"

struct node_state;
struct pod_entry;

/* One HAMi device: what the fit needs of node_spec.hami->devices[i],
 * copied here so a filter over thousands of nodes reads one contiguous
 * table per node (64 bytes a device), and its use. */
struct hami_gpu_state {
    int split, cores;
    int64_t memory_mib;
    double inv_split, inv_memory, inv_cores;
    int tasks;           /* vGPUs placed on it (at most its split count) */
    int64_t memory_used; /* MiB */
    int64_t cores_used;  /* percent */
};

/* HAMi use the cache cannot place on a device. */
struct hami_usage {
    int64_t vgpus, memory_mib, cores;
    int pods;
};

/* A MIG instance in use on a HAMi device: the device's template (index
 * into hami_device.mig->templates, -1: none) and its placement. */
struct hami_mig_inst {
    int16_t tmpl;
    int8_t start, size;
};

/* The MIG instances in use on one MIG-mode device (never overlapping). */
struct hami_mig_use {
    int n;
    struct hami_mig_inst inst[MIG_MAX_INUSE];
};

/* One device's share of a pod's charge (mig.tmpl -1: no MIG instance). */
struct hami_charge {
    int dev;
    struct hami_mig_inst mig;
    int64_t memory_mib, cores;
};

/* node_state.hami: set on HAMi nodes only (also with an unusable
 * registration, then with no device), so other nodes carry one pointer. */
struct hami_node_state {
    int count; /* = spec->hami->count; 0 after a failed rebuild */
    struct hami_usage unattributed;
    /* count entries, inside this allocation, when the node has a MIG-mode
     * device with profiles (hami_node_has_mig); else NULL */
    struct hami_mig_use *mig;
    struct hami_gpu_state gpus[]; /* count entries */
};

/* pod_entry.hami_charge: set only while the pod holds HAMi use on a node. */
struct hami_pod_charge {
    struct hami_usage unattributed;
    int nslots;
    struct hami_charge slots[]; /* nslots entries */
};

/* hami_node_is() and hami_container_on() are inline in cache.h. */

/* ---- MIG instances (pure helpers the fit shares) ---- */

/* Does inst overlap none of u's instances, and is there room? */
bool hami_mig_free(const struct hami_mig_use *u, struct hami_mig_inst inst);
/* Add inst (it must be free: hami_mig_free), or remove one equal to it. */
void hami_mig_add(struct hami_mig_use *u, struct hami_mig_inst inst);
void hami_mig_remove(struct hami_mig_use *u, struct hami_mig_inst inst);
/* The device's geometry with u's instances in use, for mig_choose. */
void hami_mig_gpu(const struct mig_gpu *templates, const struct hami_mig_use *u, struct mig_gpu *out);
/* The MIG fragmentation of a node (the largest of its MIG devices',
 * mig_fragmentation), and how many MIG devices with profiles it has
 * (0: no figure). Under the cache's read lock. */
double hami_mig_node_fragmentation(const struct node_state *n, int *devices);

/* Writers, under the cache's write lock. */
int hami_occupancy_reset(struct node_state *n);                             /* the device table from n->spec */
int hami_occupancy_charge(struct pod_entry *e, const struct node_state *n); /* decide e's HAMi charge on n */
void hami_occupancy_apply(struct node_state *n, const struct pod_entry *e, int sign);
void hami_occupancy_forget(struct pod_entry *e); /* after the charge was taken back */
/* Debug builds: every counter equals the sum of the charged pods' shares. */
void hami_occupancy_check(const struct node_state *n);

/* Quota use of the pod's HAMi containers on n, in cores (100 = one GPU):
 * per vGPU the larger of its cores and its share of the GPU's memory. */
int64_t hami_quota_cores(const struct pod_info *p, const struct node_state *n);

/* `,"hami":{...}` for /inspect/nodes: usability, handshake, every device by
 * index and UUID with memory in MiB and its pods (MIG-mode devices with
 * their profiles, instances in use and fragmentation), and unattributed use.
 * Nothing for other nodes. */
void hami_occupancy_json(struct strbuf *sb, const struct node_state *n, int64_t now_ns);

#endif

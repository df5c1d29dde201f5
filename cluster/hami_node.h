/*
 * hami_node.h - what a HAMi node offers: its vGPU devices and handshake.
 *
 * Owns the node side of the protocol HAMi's device plugin speaks
 * (docs/hami.md): the registration annotation hami.io/node-nvidia-register
 * in its three forms (7-field entries of older plugins, 9-field entries with
 * index and mode, and the JSON array newer plugins write), the handshake
 * annotations (hami.io/node-handshake, hami.io/node-handshake-nvidia) and
 * the settings of the HAMi family (memory scaling, default split count,
 * handshake mode, defaults of requests). A node carrying the registration
 * annotation is a HAMi node: nvidia.com/gpu counts vGPUs there.
 *
 * A registration that does not parse makes the node's HAMi devices
 * unusable, with the reason in hami_node.error, and never fails the node.
 * Pure parsing: no I/O, no locks. hami_set_config is called once at
 * start-up, before any object is parsed; readers never see it change.
 */
#ifndef GQA_HAMI_NODE_H
#define GQA_HAMI_NODE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mig_gpu; /* cluster/mig_place.h */

#define HAMI_REGISTER_ANNOTATION "hami.io/node-nvidia-register"
#define HAMI_HANDSHAKE_ANNOTATION "hami.io/node-handshake"
#define HAMI_HANDSHAKE_NVIDIA_ANNOTATION "hami.io/node-handshake-nvidia"
#define HAMI_NODE_LOCK_ANNOTATION "hami.io/mutex.lock"
/* HAMi v2.10: UUIDs (comma-separated, entries trimmed) of devices that take no new task. */
#define HAMI_DEVICE_CORDON_ANNOTATION "hami.io/device-cordon"
#define HAMI_VENDOR "NVIDIA" /* the device type keyword of allocation entries */

/* At most this many devices of one node are used (a bit mask per container). */
#define HAMI_MAX_DEVICES 64
#define HAMI_MAX_SPLIT 1024
#define HAMI_MAX_MEMORY_MIB 16777216LL /* 16 TiB: HAMi's field is a 32-bit MiB count */
#define HAMI_MAX_DEVICE_CORES 10000    /* devcore is 100 x the plugin's core scaling */
#define HAMI_MAX_INDEX 4095
#define HAMI_MAX_MEMORY_FACTOR 1048576 /* HAMi's memoryFactor is an int32; 1 MiB units up to TiB */
#define HAMI_MAX_TEXT 256              /* UUID and type strings */

enum hami_mode { HAMI_MODE_HAMI_CORE = 0, HAMI_MODE_MIG, HAMI_MODE_MPS };

/* What the handshake annotations say (the most alive of the two keys). */
enum hami_handshake {
    HAMI_HS_NONE = 0,   /* no handshake annotation */
    HAMI_HS_REPORTED,   /* the plugin answered (Reported_..., or any value not read as a request) */
    HAMI_HS_REQUESTING, /* Requesting_<time> written by a scheduler, not answered yet */
    HAMI_HS_DELETED     /* Deleted_<time>: a scheduler dropped the devices */
};

/* --hami-handshake: ignore the annotations, honour them, or also write the
 * requests (only where HAMi's own scheduler process no longer runs;
 * extender/live/hamihandshake.h). */
enum hami_handshake_mode { HAMI_HANDSHAKE_OFF = 0, HAMI_HANDSHAKE_OBSERVE, HAMI_HANDSHAKE_WRITE };

struct hami_config {
    double memory_scaling;      /* registered memory x this (1: as registered) */
    int default_split;          /* tasks per GPU when a registration gives 0 or none */
    int64_t default_memory_mib; /* per vGPU without gpumem/gpumem-percentage; 0: the whole GPU */
    int default_cores;          /* gpucores when not given */
    int memory_factor;          /* gpumem is counted in units of this many MiB (HAMi's memoryFactor; 1: MiB) */
    enum hami_handshake_mode handshake;
    int64_t handshake_timeout_ns;  /* an unanswered Requesting_ older than this drops the devices */
    int64_t handshake_interval_ns; /* write mode: how often requests are written */
    int64_t lock_timeout_ns;       /* a hami.io/mutex.lock older than this may be taken over */
};

/* HAMi's documented defaults: scaling 1, split 10, whole-GPU memory, 0
 * cores, observe, 60 s handshake timeout, requests every 15 s, 5 min node
 * lock timeout. */
void hami_config_defaults(struct hami_config *cfg);
void hami_set_config(const struct hami_config *cfg);
const struct hami_config *hami_get_config(void);
/* "off", "observe", "write": 0, or -1. */
int hami_handshake_mode_parse(const char *text, enum hami_handshake_mode *out);
const char *hami_mode_name(enum hami_mode mode);

struct hami_device {
    char *uuid;
    char *type;         /* as registered, e.g. "NVIDIA-Tesla V100-PCIE-32GB" */
    char *type_upper;   /* upper case, for nvidia.com/use-gputype matching */
    int index;          /* the registered index (9 fields, JSON), else the position */
    int split;          /* tasks it may hold at once */
    int64_t memory_mib; /* registered memory x --hami-memory-scaling */
    int cores;          /* 100 = the whole GPU */
    int numa;           /* -1 when unknown */
    bool healthy;
    bool cordoned; /* listed in the node's hami.io/device-cordon: no new task */
    enum hami_mode mode;
    int topo; /* its GPU in the node's topology annotation, -1 when none */
    /* MIG mode (HAMi v2.10 dynamic MIG, docs/mig.md): the profiles and
     * placements of the entry's "migProfiles" (ninuse 0), or NULL when the
     * entry has none (colon forms, older HAMi) or they are unusable, then
     * with the reason in mig_error (NULL when there simply are none). */
    struct mig_gpu *mig;
    char *mig_error;
    /* 1/split, 1/memory, 1/cores (0 when cores is 0): the fit scores every
     * device of every HAMi node per request, without dividing */
    double inv_split, inv_memory, inv_cores;
};

struct hami_pair_scores; /* cluster/hami_topology.h */

/* What the filter reads of every HAMi node comes first (one cache line). */
struct hami_node {
    int count;       /* 0 when error is set */
    bool advertised; /* the node's allocatable nvidia.com/gpu is above 0 */
    enum hami_handshake handshake;
    uint64_t usable; /* bit i: devices[i] may take vGPUs at all (healthy, not cordoned; MIG mode only with profiles) */
    char *error;     /* why the registration is unusable, or NULL */
    struct hami_device *devices;
    int64_t handshake_ns;  /* time of a Requesting_/Deleted_ value (Unix ns), 0 if unreadable */
    char *handshake_value; /* the value read (for reasons and /inspect), or NULL */
    char *lock_value;      /* hami.io/mutex.lock as the watch last showed it, or NULL (extender/decide) */
    /* hami.io/node-nvidia-score on the devices, NULL when absent or
     * unreadable: attached by hami_topology_read and freed by nodespec.c
     * (cluster/hami_topology.h), never by hami_node_free */
    struct hami_pair_scores *pair_scores;
};

/* The HAMi part of a Node: *out stays NULL when the annotations (may be
 * NULL) carry no registration. allocatable_gpus is the node's nvidia.com/gpu.
 * 0, or -1 when memory ran out. Parse problems land in (*out)->error. */
int hami_node_from_annotations(const cJSON *annotations, int64_t allocatable_gpus, const char *node,
                               struct hami_node **out);
void hami_node_free(struct hami_node *h);

/* Parse a registration value alone (any of the three forms). 0 with
 * devices and count, or -1 with *err (malloc'd; NULL if memory ran out). */
int hami_parse_register(const char *text, struct hami_device **devices, int *count, char **err);
void hami_devices_free(struct hami_device *devices, int count);

/* Why the node's HAMi devices cannot be used at now_ns (registration or
 * handshake), written to buf; NULL when they can. */
const char *hami_node_unusable(const struct hami_node *h, int64_t now_ns, char *buf, size_t size);

/* "Requesting_<time>" in HAMi's layout (2006-01-02 15:04:05, local time),
 * for a scheduler that writes the handshake. */
void hami_handshake_request_value(int64_t now_ns, char *buf, size_t size);
/* Does a scheduler in write mode need to write a request now? (HAMi writes
 * one whenever the annotation does not already hold a Requesting_ value.) */
bool hami_handshake_due(const struct hami_node *h);
/* Read "2006-01-02 15:04:05" or "2006.01.02 15:04:05" (older plugins) as
 * local time: Unix ns, or -1. */
int64_t hami_parse_handshake_time(const char *text);

/* Does the node have a MIG-mode device with profiles (what the MIG fit,
 * occupancy and gauge look at)? */
bool hami_node_has_mig(const struct hami_node *h);

/* "GPU-0fc3…": the UUID shortened for reasons (at most size bytes). */
void hami_short_uuid(const char *uuid, char *buf, size_t size);

#endif

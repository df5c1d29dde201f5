/*
 * mig.h - MIG profiles, and what NVIDIA's device plugin says of them.
 *
 * Owns three family-independent readings (docs/mig.md):
 *  - a MIG profile name ("1g.10gb", "1c.3g.20gb", "1g.10gb+me") parsed into
 *    compute slices, GPU-instance slices, memory and attributes, with the
 *    grammar of NVIDIA's go-nvlib (parseMigProfile) and range checks;
 *  - a node's MIG inventory from NVIDIA's device plugin and GPU Feature
 *    Discovery: nvidia.com/mig-<profile> in status.capacity/allocatable
 *    (mixed strategy), nvidia.com/gpu with a product label ending in
 *    -MIG-<profile> (single strategy), and the labels
 *    nvidia.com/mig-<profile>.{count,memory,multiprocessors,slices.gi,...};
 *  - the nvidia.com/mig-<profile> amounts of a container's resources, one
 *    name/quantity pair at a time, for the request parser.
 *
 * Everything read here is untrusted (a node or a pod creator writes it):
 * numbers are range-checked, a bad entry is skipped with a reason, never
 * fatal. Pure functions on caller-owned memory: no I/O, no locks, no global
 * state; every function may run on any thread.
 */
#ifndef GQA_MIG_H
#define GQA_MIG_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_RESOURCE_PREFIX "nvidia.com/mig-"
#define MIG_GPU_RESOURCE "nvidia.com/gpu"
#define MIG_STRATEGY_LABEL "nvidia.com/mig.strategy"
#define MIG_PRODUCT_LABEL "nvidia.com/gpu.product"
#define MIG_GPU_COUNT_LABEL "nvidia.com/gpu.count"
#define MIG_CAPABLE_LABEL "nvidia.com/mig.capable"

#define MIG_MAX_SLICES 8         /* GPU-instance slices of the largest profile NVML names (8_SLICE) */
#define MIG_MAX_MEMORY_GB 4096   /* the "gb" figure of a profile name */
#define MIG_MAX_ATTRS 4          /* attributes after '+' ("me") */
#define MIG_MAX_ATTR_LEN 15      /* one attribute's characters */
#define MIG_NAME_MAX 48          /* a canonical profile name, with its NUL */
#define MIG_MAX_NODE_PROFILES 32 /* distinct profiles kept per node */
#define MIG_MAX_INSTANCES 4096   /* instances of one profile on one node (a count, capacity, allocatable) */
#define MIG_MAX_REQUEST 64       /* instances of one profile one container may ask for */
#define MIG_MAX_REQ_PROFILES 8   /* distinct profiles one container may ask for */
#define MIG_MAX_REASONS 8        /* skipped-entry reasons kept (the count goes on) */
#define MIG_REASON_MAX 128
#define MIG_PRODUCT_MAX 128

enum mig_attr { MIG_ATTR_ME = 1u << 0 }; /* media extensions (GI profile *_REV1) */

/* A parsed profile name. canonical is go-nvlib's String() form ("1g.10gb",
 * "1c.3g.20gb", "1g.10gb+me"); resource is the device plugin's form, '+' made
 * '.' ("1g.10gb.me"). */
struct mig_profile_name {
    int compute;    /* compute-instance slices (c); equals slices when the name has no "Nc." */
    int slices;     /* GPU-instance slices (g), 1..MIG_MAX_SLICES */
    int memory_gb;  /* 1..MIG_MAX_MEMORY_GB */
    unsigned attrs; /* enum mig_attr bits of the known attributes */
    int nattrs;     /* attributes given, known or not */
    char canonical[MIG_NAME_MAX];
    char resource[MIG_NAME_MAX];
};

/* Parse a profile name as go-nvlib writes it: "[<c>c.]<g>g.<gb>gb[+a[,b...]]".
 * Attributes are letters and digits, begin with a letter, are unique. 0, or
 * -1 with the reason in why (at most why_size bytes). */
int mig_profile_parse(const char *text, size_t len, struct mig_profile_name *out, char *why, size_t why_size);

/* The <profile> of a resource or label name after "nvidia.com/mig-", as the
 * device plugin spells it: '+' became '.', so "1g.10gb.me" is "1g.10gb+me".
 * Attributes may follow "gb" after '.', or after '+' as in a profile name. */
int mig_profile_parse_resource(const char *text, size_t len, struct mig_profile_name *out, char *why, size_t why_size);

/* Write a reason into why (at most why_size bytes; none when why is NULL),
 * non-printable bytes made '?' (a reason may quote untrusted text); -1. */
int mig_fail(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- a node under NVIDIA's device plugin and GFD ----------------------------- */

enum mig_strategy {
    MIG_STRATEGY_ABSENT = 0, /* no nvidia.com/mig.strategy label */
    MIG_STRATEGY_NONE,
    MIG_STRATEGY_SINGLE,
    MIG_STRATEGY_MIXED,
    MIG_STRATEGY_OTHER /* a value GFD does not write */
};

const char *mig_strategy_name(enum mig_strategy s);

/* One profile of a node. Numbers a label does not give are -1. */
struct mig_node_profile {
    struct mig_profile_name profile;
    bool single;         /* nvidia.com/gpu backed by this profile (single strategy) */
    int64_t capacity;    /* status.capacity of the resource, -1 when absent */
    int64_t allocatable; /* status.allocatable (0 when the node has allocatable without it), else capacity, else -1 */
    int64_t label_count; /* <resource>.count */
    int64_t memory_mib;  /* <resource>.memory (MiB) */
    int multiprocessors; /* <resource>.multiprocessors */
    int slices_gi, slices_ci;
    int engines_copy, engines_decoder, engines_encoder, engines_jpeg, engines_ofa;
    char product[MIG_PRODUCT_MAX]; /* <resource>.product, "" when absent */
};

struct mig_node {
    enum mig_strategy strategy;
    bool single;                   /* the single strategy is in force: nvidia.com/gpu is MIG instances */
    bool single_invalid;           /* GFD labelled the product -MIG-INVALID (single strategy refused) */
    char product[MIG_PRODUCT_MAX]; /* the parent GPU's model (nvidia.com/gpu.product, -MIG-... removed) */
    int64_t gpu_count;             /* nvidia.com/gpu.count, -1 when absent */
    int nprofiles;
    struct mig_node_profile profiles[MIG_MAX_NODE_PROFILES];
    int nskipped;                                  /* entries skipped, all of them */
    char skipped[MIG_MAX_REASONS][MIG_REASON_MAX]; /* the first MIG_MAX_REASONS reasons */
};

/* Read a node's MIG inventory from its labels, status.capacity and
 * status.allocatable (each may be NULL). Never fails: bad entries are skipped
 * with a reason. A node without MIG has nprofiles 0. */
void mig_node_read(const cJSON *labels, const cJSON *capacity, const cJSON *allocatable, struct mig_node *out);

/* The profile of a node by canonical or resource name, or NULL. */
const struct mig_node_profile *mig_node_find(const struct mig_node *node, const char *name);

/* ---- a container's request --------------------------------------------------- */

struct mig_request_item {
    struct mig_profile_name profile;
    int64_t count;
};

struct mig_request {
    int n;
    struct mig_request_item items[MIG_MAX_REQ_PROFILES];
};

/* Feed one resource of a container (name, quantity text). 1 when it is a
 * nvidia.com/mig-<profile> amount and was added (a second mention of a
 * profile replaces the first, as a ResourceList key is unique), 0 when the
 * name is no MIG resource, -1 (reason in why) when it is one but the profile
 * or the quantity is unusable (not a whole number 0..MIG_MAX_REQUEST, too
 * many profiles). A quantity of 0 is accepted and not listed. */
int mig_request_add(struct mig_request *req, const char *name, const char *quantity, char *why, size_t why_size);

#endif

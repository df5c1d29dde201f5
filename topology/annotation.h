/*
 * topology/annotation.h - the node annotation `gpu-admission.io/topology`.
 *
 * Owns parsing, validation and serialisation of the compact JSON that
 * describes a node's GPUs and the links between them (design.md section 5):
 *
 *   {"version":1,
 *    "gpus":[{"index":0,"minor":0,"uuid":"GPU-...","model":"NVIDIA A100-SXM4-80GB",
 *             "memoryMiB":81920,"numa":0}, ...],
 *    "links":[["X","NV12",...], ...]}
 *
 * links[i][j] uses nvidia-smi topo -m's vocabulary: X (self), NV<n> (n bonded
 * NVLinks, 1..64, no leading zeros), PIX, PXB, PHB, NODE, SYS. The matrix must
 * be square with the GPU count, "X" exactly on the diagonal, and symmetric in
 * link class and NVLink count. Without "links" every pair is SYS (nothing is
 * assumed). Numbers must be integral and within int range (1.5 and 1e10 are rejected);
 * JSON null counts as absent, duplicate keys are errors, unknown keys are
 * ignored so newer producers stay readable.
 */
#ifndef GQA_TOPOLOGY_ANNOTATION_H
#define GQA_TOPOLOGY_ANNOTATION_H

#include <cjson/cJSON.h>
#include <stdint.h>

#define TOPOLOGY_ANNOTATION "gpu-admission.io/topology"
#define TOPOLOGY_MAX_GPUS 64

/* Link classes, ordered by bandwidth: a larger value is a better link.
 * NVLink keeps its bond count separately (struct topo_link.nvlinks). */
enum topo_link_class {
    TOPO_LINK_SELF = 0, /* "X" */
    TOPO_LINK_SYS,
    TOPO_LINK_NODE,
    TOPO_LINK_PHB,
    TOPO_LINK_PXB,
    TOPO_LINK_PIX,
    TOPO_LINK_NV
};

struct topo_link {
    uint8_t cls;     /* enum topo_link_class */
    uint8_t nvlinks; /* bonded NVLink count when cls == TOPO_LINK_NV, else 0 */
};

struct topo_gpu {
    int index;
    int minor;          /* device minor (/dev/nvidiaN) */
    char *uuid;         /* may be NULL; no control characters (refused when parsed) */
    char *model;        /* may be NULL; no control characters (refused when parsed) */
    int64_t memory_mib; /* 0 when unknown */
    int numa;           /* -1 when unknown */
};

struct gpu_topology {
    int version;
    int count;
    struct topo_gpu *gpus;   /* count entries, gpus[i].index == i */
    struct topo_link *links; /* count*count, row-major: links[i*count+j] */
};

/* Parse and validate an annotation value (a JSON text). Returns NULL on error
 * with *err set to a malloc'd message that names the offending field, e.g.
 * "links[2][5]: unknown link \"NV\"" or "gpus[3].minor: must be a non-negative integer".
 * err may be NULL; *err is NULL on success, and also if even the message could
 * not be allocated. */
struct gpu_topology *topology_parse(const char *text, char **err);
/* The same from an already parsed JSON value. */
struct gpu_topology *topology_from_json(const cJSON *value, char **err);
/* Compact JSON text of the annotation (malloc'd through cJSON's hooks, i.e.
 * free() by default), NULL on allocation failure or an empty topology. */
char *topology_serialize(const struct gpu_topology *topo);
/* JSON value of the annotation, for embedding in /inspect answers. */
cJSON *topology_to_json(const struct gpu_topology *topo);
void topology_free(struct gpu_topology *topo);

/* Parse one link token ("X", "NV12", "PIX", ...). 0 on success, -1 if unknown. */
int topology_parse_link(const char *token, struct topo_link *out);
/* Write a link token into buf (at least 8 bytes). */
void topology_format_link(struct topo_link link, char *buf, size_t size);

static inline struct topo_link topology_link(const struct gpu_topology *t, int i, int j)
{
    return t->links[i * t->count + j];
}

#endif

/*
 * mig_hami.h - the MIG parts of HAMi's protocol (dynamic MIG, v2.10).
 *
 * Owns, for HAMi's NVIDIA devices registered with "mode":"mig":
 *  - the "migProfiles" array of a JSON registration entry
 *    (hami.io/node-nvidia-register): [{"name","memoryMB","core",
 *    "sliceCount","placements":[{"start","size"}]}] into a mig_gpu's
 *    templates, and the MIG entries of a whole registration value;
 *  - the pod annotation hami.io/vgpu-mig-allocations its scheduler writes and
 *    its device plugin reads: a JSON array of {"containerIndex",
 *    "deviceIndex","gpuUUID","profile","placement":{"start","size"}} and,
 *    once the plugin realised it, "migUUID","gpuInstanceID",
 *    "computeInstanceID"; encoded byte for byte as Go's json.Marshal writes
 *    it, decoded with the checks of HAMi's DecodeMigAllocations.
 *
 * Field names, types and Go's decoding rules (missing key = zero value,
 * a fraction or an out-of-range number fails the whole value) are in
 * docs/mig.md. Pure parsing: no I/O, no locks.
 */
#ifndef GQA_MIG_HAMI_H
#define GQA_MIG_HAMI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/mig_place.h"

#define MIG_HAMI_ALLOCATIONS_ANNOTATION "hami.io/vgpu-mig-allocations"
#define MIG_HAMI_PREFERENCE_ANNOTATION "nvidia.com/mig-profile-preference"
#define MIG_HAMI_MAX_ALLOCATIONS 256
#define MIG_HAMI_MAX_INDEX 4095 /* container and device indices */
#define MIG_HAMI_UUID_MAX 256
#define MIG_HAMI_MAX_GPUS 64

/* Parse a registration entry's "migProfiles" (a JSON array; NULL or null
 * gives no template) into gpu->templates (ninuse untouched). Each profile:
 * name 1..47 printable characters, unique; memoryMB 0..2^31-1 (int32);
 * core 0..10000; sliceCount 0..16; placements with start and size inside
 * MIG_MAX_SLOTS. A missing number is 0 as Go decodes it; a name that is no
 * MIG profile name ("1g.10gb") is accepted when sliceCount is given, since
 * HAMi matches names as text. 0, or -1 with *err (malloc'd; NULL if memory
 * ran out). */
int mig_hami_parse_profiles(const cJSON *profiles, struct mig_gpu *gpu, char **err);

/* One MIG-mode device of a registration. */
struct mig_hami_device {
    char uuid[MIG_HAMI_UUID_MAX];
    int index;
    struct mig_gpu gpu;
};

/* The MIG-mode devices of a JSON registration value (other modes are
 * skipped; the colon forms carry no profiles and give 0 devices). *out is
 * malloc'd (free() it), *count its entries. 0, or -1 with *err. */
int mig_hami_parse_register(const char *text, struct mig_hami_device **out, int *count, char **err);

/* One entry of hami.io/vgpu-mig-allocations. */
struct mig_hami_allocation {
    int container_index; /* init containers first, then the app containers (HAMi's device plugin) */
    int device_index;    /* the vGPU within the container */
    char gpu_uuid[MIG_HAMI_UUID_MAX];
    char profile[MIG_NAME_MAX];
    struct mig_placement placement;
    bool runtime; /* the plugin filled migUUID, gpuInstanceID, computeInstanceID */
    char mig_uuid[MIG_HAMI_UUID_MAX];
    uint32_t gpu_instance_id, compute_instance_id;
};

/* Decode the annotation value. "" gives 0 entries (HAMi: nil). Any entry
 * incomplete (negative index, empty UUID or profile, size 0), with a partial
 * runtime identity, or repeating a (container, device) pair makes the whole
 * value unusable, as in HAMi; beyond HAMi, indices above 4095, placements
 * outside MIG_MAX_SLOTS, more than 256 entries and non-printable strings are
 * refused too. *out is malloc'd (NULL when 0 entries). 0, or -1 with *err. */
int mig_hami_decode_allocations(const char *text, struct mig_hami_allocation **out, int *count, char **err);

/* Charge decoded allocations to the devices they name (by gpuUUID) as
 * instances in use: what pods HAMi placed, read back. Allocations on GPUs
 * not in devs are skipped (another node's, or a device gone); one that does
 * not fit its GPU (overlap, full) is skipped with its reason in why (the
 * first such). Returns how many were charged. */
int mig_hami_charge(struct mig_hami_device *devs, int ndevs, const struct mig_hami_allocation *a, int n, char *why,
                    size_t why_size);

/* Encode entries as HAMi's scheduler writes them (runtime fields omitted,
 * compact JSON, Go's key order and escaping). NULL when n is 0 (HAMi then
 * writes no annotation) or memory ran out; *err says which (NULL for n 0). */
char *mig_hami_encode_allocations(const struct mig_hami_allocation *a, int n, char **err);

#endif

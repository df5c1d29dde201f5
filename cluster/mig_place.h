/*
 * mig_place.h - where a MIG instance goes on one GPU.
 *
 * Owns the geometry of one MIG-mode GPU: the profiles it can cut (name,
 * memory, cores, slice count and the placements NVML allows, as HAMi's
 * registration carries them, or NVIDIA's documented A100/H100 tables), the
 * instances in use, and the choice of a profile and placement for a vGPU
 * request:
 *  - the profile as HAMi's selectMigCandidate picks it: the profiles by
 *    memory, then slice count, ascending; the first whose memory covers the
 *    request and that still has a free placement;
 *  - the placement either as HAMi's selectMigPlacement (1g.* and 3g.* from
 *    the highest start down, the others from the lowest up, first free), or
 *    fragmentation-aware: among the free placements of that profile, the one
 *    that leaves the largest placements possible (docs/mig.md), with a reason
 *    for explain.
 * And the fragmentation figure of a GPU: 1 - (slots of the largest
 * placement still free) / (free slots); 0 on an empty or full GPU.
 *
 * Placements are in NVML's units (GpuInstancePlacement start/size: memory
 * slices; 8 on A100/H100, so 7g is size 8). Pure functions on caller-owned
 * structs: no allocation, no I/O, no locks.
 */
#ifndef GQA_MIG_PLACE_H
#define GQA_MIG_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/mig.h"

#define MIG_MAX_SLOTS 16      /* placement units of one GPU (8 on A100/H100) */
#define MIG_MAX_PLACEMENTS 16 /* placements of one profile */
#define MIG_MAX_TEMPLATES 16  /* profiles of one GPU */
#define MIG_MAX_INUSE 16      /* instances on one GPU */
#define MIG_MAX_MEMORY_MIB 16777216LL
#define MIG_MAX_CORES 10000
#define MIG_EXPLAIN_MAX 256

struct mig_placement {
    int start, size; /* slots [start, start+size) */
};

/* One profile a GPU can cut (HAMi's MigProfile). */
struct mig_template {
    char name[MIG_NAME_MAX]; /* as registered, e.g. "1g.10gb" */
    int64_t memory_mib;      /* what an instance gives (and HAMi charges) */
    int cores;               /* HAMi's Core of the profile (charged as gpucores) */
    int slices;              /* GPU-instance slices (sliceCount) */
    int nplacements;
    struct mig_placement placements[MIG_MAX_PLACEMENTS];
};

struct mig_instance {
    char profile[MIG_NAME_MAX];
    struct mig_placement at;
};

struct mig_gpu {
    int ntemplates;
    struct mig_template templates[MIG_MAX_TEMPLATES];
    int ninuse;
    struct mig_instance inuse[MIG_MAX_INUSE];
};

enum mig_policy {
    MIG_POLICY_HAMI = 0,    /* HAMi's own choice, placement for placement */
    MIG_POLICY_KEEP_LARGEST /* fragmentation-aware placement (the profile is still HAMi's) */
};

struct mig_choice {
    int template_index; /* into gpu->templates */
    struct mig_placement at;
    bool differs_from_hami;       /* KEEP_LARGEST chose another placement than HAMi would */
    struct mig_placement hami_at; /* HAMi's placement for the same profile */
    char reason[MIG_EXPLAIN_MAX]; /* "placed 2g.10gb at slice 4: keeps 4g.20gb and 3g.20gb possible" */
};

/* Check a GPU's geometry and use: placements inside MIG_MAX_SLOTS, sizes >= 1,
 * unique template names, in-use instances of size >= 1 inside the slots and
 * not overlapping. 0, or -1 with why. (Templates are filled by the caller or
 * by mig_hami_parse_profiles / mig_builtin_geometry.) */
int mig_gpu_check(const struct mig_gpu *gpu, char *why, size_t why_size);

/* Record an instance in use (a choice just made, or one read back). 0, or -1
 * with why when the GPU holds MIG_MAX_INUSE instances, the placement is out
 * of the slots, or it overlaps one in use. */
int mig_gpu_add_inuse(struct mig_gpu *gpu, const char *profile, struct mig_placement at, char *why, size_t why_size);

/* The slots in use, one bit per slot. */
uint32_t mig_gpu_used_slots(const struct mig_gpu *gpu);

/* Choose a profile and placement for a vGPU of memory_mib (already resolved:
 * gpumem, or the percentage of the GPU's memory). cores is not used to pick
 * the profile (HAMi's choice is by memory; its Fit checks cores on the whole
 * device); it is kept for the reason text only. 0 with *out, or -1 with
 * out->reason saying why nothing fits. */
int mig_choose(const struct mig_gpu *gpu, int64_t memory_mib, int cores, enum mig_policy policy,
               struct mig_choice *out);

/* Slots of the largest placement that fits the free slots (0: none), and
 * the name of its profile in largest_name (may be NULL). */
int mig_largest_placeable(const struct mig_gpu *gpu, const char **largest_name);

/* 1 - largest placeable / free slots, in [0, 1]; 0 when no slot is free or
 * the GPU has no template. free_slots counts the slots some template's
 * placement covers and no instance uses. */
double mig_fragmentation(const struct mig_gpu *gpu);

/* NVIDIA's documented geometry (MIG user guide, "Supported MIG profiles")
 * for a product name containing "A100" with 40GB or 80GB, or "H100" with
 * 80GB: templates with nominal memory (GB x 1024 MiB; a registration's own
 * figures are better), cores 0, placements in NVML units. 0, or -1 when the
 * product is none of those. ninuse is left 0. */
int mig_builtin_geometry(const char *product, struct mig_gpu *out);

#endif

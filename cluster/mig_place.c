/*
 * mig_place.c - profile and placement of a MIG instance on one GPU, and the
 * GPU's fragmentation (mig_place.h; the rules in docs/mig.md).
 */
#include "cluster/mig_place.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint32_t mask_of(struct mig_placement p)
{
    if (p.size <= 0 || p.start < 0 || p.start + p.size > MIG_MAX_SLOTS)
        return 0;
    return (uint32_t)(((1ull << p.size) - 1) << p.start);
}

static bool placement_valid(struct mig_placement p)
{
    return p.start >= 0 && p.size >= 1 && p.start < MIG_MAX_SLOTS && p.size <= MIG_MAX_SLOTS - p.start;
}

uint32_t mig_gpu_used_slots(const struct mig_gpu *gpu)
{
    uint32_t used = 0;
    for (int i = 0; i < gpu->ninuse; i++)
        used |= mask_of(gpu->inuse[i].at);
    return used;
}

/* Every slot some template's placement covers. */
static uint32_t span_slots(const struct mig_gpu *gpu)
{
    uint32_t span = 0;
    for (int t = 0; t < gpu->ntemplates; t++)
        for (int k = 0; k < gpu->templates[t].nplacements; k++)
            span |= mask_of(gpu->templates[t].placements[k]);
    return span;
}

int mig_gpu_check(const struct mig_gpu *gpu, char *why, size_t why_size)
{
    if (gpu->ntemplates < 0 || gpu->ntemplates > MIG_MAX_TEMPLATES || gpu->ninuse < 0 || gpu->ninuse > MIG_MAX_INUSE)
        return mig_fail(why, why_size, "template or instance count out of range");
    for (int t = 0; t < gpu->ntemplates; t++) {
        const struct mig_template *tp = &gpu->templates[t];
        if (tp->nplacements < 0 || tp->nplacements > MIG_MAX_PLACEMENTS)
            return mig_fail(why, why_size, "profile %s: placement count out of range", tp->name);
        for (int k = 0; k < tp->nplacements; k++)
            if (!placement_valid(tp->placements[k]))
                return mig_fail(why, why_size, "profile %s: placement %d+%d is not inside slots 0..%d", tp->name,
                                tp->placements[k].start, tp->placements[k].size, MIG_MAX_SLOTS - 1);
        for (int u = 0; u < t; u++)
            if (strcmp(gpu->templates[u].name, tp->name) == 0)
                return mig_fail(why, why_size, "profile %s is listed twice", tp->name);
    }
    uint32_t used = 0;
    for (int i = 0; i < gpu->ninuse; i++) {
        struct mig_placement p = gpu->inuse[i].at;
        if (!placement_valid(p))
            return mig_fail(why, why_size, "instance %s at %d+%d is not inside slots 0..%d", gpu->inuse[i].profile,
                            p.start, p.size, MIG_MAX_SLOTS - 1);
        if (used & mask_of(p))
            return mig_fail(why, why_size, "instance %s at %d+%d overlaps another instance", gpu->inuse[i].profile,
                            p.start, p.size);
        used |= mask_of(p);
    }
    return 0;
}

int mig_gpu_add_inuse(struct mig_gpu *gpu, const char *profile, struct mig_placement at, char *why, size_t why_size)
{
    if (!placement_valid(at))
        return mig_fail(why, why_size, "placement %d+%d is not inside slots 0..%d", at.start, at.size,
                        MIG_MAX_SLOTS - 1);
    if (mig_gpu_used_slots(gpu) & mask_of(at))
        return mig_fail(why, why_size, "placement %d+%d overlaps an instance in use", at.start, at.size);
    if (gpu->ninuse >= MIG_MAX_INUSE)
        return mig_fail(why, why_size, "more than %d MIG instances on one GPU", MIG_MAX_INUSE);
    struct mig_instance *in = &gpu->inuse[gpu->ninuse++];
    snprintf(in->profile, sizeof(in->profile), "%s", profile ? profile : "");
    in->at = at;
    return 0;
}

/* ---- HAMi's order ---------------------------------------------------------------- */

/* HAMi's preferHighMigPlacement: 1g.* and 3g.* fill from the top. */
static bool prefer_high(const char *name)
{
    return strncmp(name, "1g.", 3) == 0 || strncmp(name, "3g.", 3) == 0;
}

/* The placements of tp in the order HAMi tries them (a stable sort by start). */
static int hami_order(const struct mig_template *tp, int order[MIG_MAX_PLACEMENTS])
{
    int n = tp->nplacements < MIG_MAX_PLACEMENTS ? tp->nplacements : MIG_MAX_PLACEMENTS;
    bool high = prefer_high(tp->name);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) { /* insertion sort: stable, n <= 16 */
        int v = order[i], j = i - 1;
        while (j >= 0) {
            int a = tp->placements[order[j]].start, b = tp->placements[v].start;
            if (high ? a >= b : a <= b)
                break;
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    return n;
}

/* The templates in HAMi's candidate order: memory, then slices, ascending (stable). */
static int profile_order(const struct mig_gpu *gpu, int order[MIG_MAX_TEMPLATES])
{
    int n = gpu->ntemplates < MIG_MAX_TEMPLATES ? gpu->ntemplates : MIG_MAX_TEMPLATES;
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i - 1;
        while (j >= 0) {
            const struct mig_template *a = &gpu->templates[order[j]], *b = &gpu->templates[v];
            if (a->memory_mib < b->memory_mib || (a->memory_mib == b->memory_mib && a->slices <= b->slices))
                break;
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    return n;
}

static bool fits(struct mig_placement p, uint32_t used)
{
    uint32_t m = mask_of(p);
    return m != 0 && (m & used) == 0;
}

/* ---- what a placement leaves -------------------------------------------------------- */

/* For each size from the largest down, how many template placements of that
 * size still fit: compared lexicographically, more is better. */
struct leftover {
    int count[MIG_MAX_SLOTS + 1];
};

static void leftover_of(const struct mig_gpu *gpu, uint32_t used, struct leftover *out)
{
    memset(out, 0, sizeof(*out));
    for (int t = 0; t < gpu->ntemplates; t++)
        for (int k = 0; k < gpu->templates[t].nplacements; k++) {
            struct mig_placement p = gpu->templates[t].placements[k];
            if (fits(p, used))
                out->count[p.size]++;
        }
}

static int leftover_cmp(const struct leftover *a, const struct leftover *b)
{
    for (int s = MIG_MAX_SLOTS; s >= 1; s--)
        if (a->count[s] != b->count[s])
            return a->count[s] > b->count[s] ? 1 : -1;
    return 0;
}

/* The largest placement that fits `used`: its size, and up to three names of
 * profiles of that size that fit, as "a", "a and b", "a, b and c". */
static int largest_names(const struct mig_gpu *gpu, uint32_t used, char *buf, size_t size)
{
    int best = 0;
    for (int t = 0; t < gpu->ntemplates; t++)
        for (int k = 0; k < gpu->templates[t].nplacements; k++) {
            struct mig_placement p = gpu->templates[t].placements[k];
            if (fits(p, used) && p.size > best)
                best = p.size;
        }
    const char *names[3];
    int n = 0;
    for (int t = 0; t < gpu->ntemplates && n < 3 && best > 0; t++)
        for (int k = 0; k < gpu->templates[t].nplacements; k++) {
            struct mig_placement p = gpu->templates[t].placements[k];
            if (p.size == best && fits(p, used)) {
                names[n++] = gpu->templates[t].name;
                break;
            }
        }
    if (buf && size) {
        buf[0] = '\0';
        if (n == 1)
            snprintf(buf, size, "%s", names[0]);
        else if (n == 2)
            snprintf(buf, size, "%s and %s", names[0], names[1]);
        else if (n == 3)
            snprintf(buf, size, "%s, %s and %s", names[0], names[1], names[2]);
    }
    return best;
}

int mig_largest_placeable(const struct mig_gpu *gpu, const char **largest_name)
{
    uint32_t used = mig_gpu_used_slots(gpu);
    int best = 0;
    const char *name = NULL;
    for (int t = 0; t < gpu->ntemplates; t++)
        for (int k = 0; k < gpu->templates[t].nplacements; k++) {
            struct mig_placement p = gpu->templates[t].placements[k];
            if (fits(p, used) && p.size > best) {
                best = p.size;
                name = gpu->templates[t].name;
            }
        }
    if (largest_name)
        *largest_name = name;
    return best;
}

double mig_fragmentation(const struct mig_gpu *gpu)
{
    uint32_t free_slots = span_slots(gpu) & ~mig_gpu_used_slots(gpu);
    int nfree = __builtin_popcount(free_slots);
    if (nfree == 0)
        return 0.0;
    int largest = mig_largest_placeable(gpu, NULL);
    double f = 1.0 - (double)largest / (double)nfree;
    return f < 0 ? 0 : f;
}

/* ---- the choice ------------------------------------------------------------------ */

static void explain_choice(const struct mig_gpu *gpu, uint32_t used, const struct mig_template *tp,
                           struct mig_choice *out)
{
    char keeps[128], would[128];
    int kept = largest_names(gpu, used | mask_of(out->at), keeps, sizeof(keeps));
    int n = kept ? snprintf(out->reason, sizeof(out->reason), "placed %s at slice %d: keeps %s possible", tp->name,
                            out->at.start, keeps)
                 : snprintf(out->reason, sizeof(out->reason), "placed %s at slice %d: no other profile fits after it",
                            tp->name, out->at.start);
    if (!out->differs_from_hami || n < 0 || (size_t)n >= sizeof(out->reason))
        return;
    int other = largest_names(gpu, used | mask_of(out->hami_at), would, sizeof(would));
    if (other)
        snprintf(out->reason + n, sizeof(out->reason) - (size_t)n, " (slice %d would keep at most %s)",
                 out->hami_at.start, would);
    else
        snprintf(out->reason + n, sizeof(out->reason) - (size_t)n, " (slice %d would leave no profile possible)",
                 out->hami_at.start);
}

/* The placement of template tp under policy, given the slots in use; -1 when none is free. */
static int choose_placement(const struct mig_gpu *gpu, const struct mig_template *tp, uint32_t used,
                            enum mig_policy policy, struct mig_choice *out)
{
    int order[MIG_MAX_PLACEMENTS];
    int n = hami_order(tp, order);
    int first = -1, best = -1;
    struct leftover best_left = {{0}}, left;
    for (int i = 0; i < n; i++) {
        struct mig_placement p = tp->placements[order[i]];
        if (!fits(p, used))
            continue;
        if (first < 0)
            first = order[i];
        if (policy != MIG_POLICY_KEEP_LARGEST)
            break;
        leftover_of(gpu, used | mask_of(p), &left);
        if (best < 0 || leftover_cmp(&left, &best_left) > 0) { /* ties keep HAMi's earlier one */
            best = order[i];
            best_left = left;
        }
    }
    if (first < 0)
        return -1;
    out->hami_at = tp->placements[first];
    out->at = tp->placements[best >= 0 ? best : first];
    out->differs_from_hami = best >= 0 && best != first;
    return 0;
}

int mig_choose(const struct mig_gpu *gpu, int64_t memory_mib, int cores, enum mig_policy policy, struct mig_choice *out)
{
    memset(out, 0, sizeof(*out));
    out->template_index = -1;
    char why[MIG_EXPLAIN_MAX - 32];
    if (mig_gpu_check(gpu, why, sizeof(why)) != 0) {
        snprintf(out->reason, sizeof(out->reason), "MIG geometry unusable: %s", why);
        return -1;
    }
    if (memory_mib < 0 || memory_mib > MIG_MAX_MEMORY_MIB) {
        snprintf(out->reason, sizeof(out->reason), "memory %lld MiB is out of range", (long long)memory_mib);
        return -1;
    }
    uint32_t used = mig_gpu_used_slots(gpu);
    int order[MIG_MAX_TEMPLATES];
    int n = profile_order(gpu, order);
    bool any_large = false;
    for (int i = 0; i < n; i++) {
        const struct mig_template *tp = &gpu->templates[order[i]];
        if (tp->memory_mib < memory_mib)
            continue;
        any_large = true;
        if (choose_placement(gpu, tp, used, policy, out) != 0)
            continue;
        out->template_index = order[i];
        explain_choice(gpu, used, tp, out);
        return 0;
    }
    if (!any_large)
        snprintf(out->reason, sizeof(out->reason), "no MIG profile of this GPU has %lld MiB", (long long)memory_mib);
    else
        snprintf(out->reason, sizeof(out->reason),
                 "no free placement for a MIG profile of %lld MiB or more (%d instance%s in use)",
                 (long long)memory_mib, gpu->ninuse, gpu->ninuse == 1 ? "" : "s");
    (void)cores;
    return -1;
}

/* ---- NVIDIA's documented geometries ------------------------------------------------ */

struct builtin_profile {
    int slices, gb_of_unit; /* gb: multiple of the GPU's unit (5 GB on A100-40GB, 10 GB on the 80 GB parts) */
    const char *suffix;
    int size; /* placement size in NVML slots */
    int starts[MIG_MAX_PLACEMENTS];
    int nstarts;
};

/* MIG user guide, "A100/H100 MIG profiles": 8 memory slots; 7g covers all 8. */
static const struct builtin_profile builtin_profiles[] = {
    {1, 1, "", 1, {0, 1, 2, 3, 4, 5, 6}, 7},
    {1, 1, "+me", 1, {0, 1, 2, 3, 4, 5, 6}, 7},
    {1, 2, "", 2, {0, 2, 4, 6}, 4},
    {2, 2, "", 2, {0, 2, 4}, 3},
    {3, 4, "", 4, {0, 4}, 2},
    {4, 4, "", 4, {0}, 1},
    {7, 8, "", 8, {0}, 1},
};

int mig_builtin_geometry(const char *product, struct mig_gpu *out)
{
    memset(out, 0, sizeof(*out));
    if (!product)
        return -1;
    int unit;
    if (strstr(product, "A100") && strstr(product, "40GB"))
        unit = 5;
    else if ((strstr(product, "A100") || strstr(product, "H100")) && strstr(product, "80GB"))
        unit = 10;
    else
        return -1;
    for (size_t i = 0; i < sizeof(builtin_profiles) / sizeof(builtin_profiles[0]); i++) {
        const struct builtin_profile *b = &builtin_profiles[i];
        struct mig_template *tp = &out->templates[out->ntemplates++];
        int gb = b->gb_of_unit * unit;
        snprintf(tp->name, sizeof(tp->name), "%dg.%dgb%s", b->slices, gb, b->suffix);
        tp->memory_mib = (int64_t)gb * 1024;
        tp->slices = b->slices;
        tp->nplacements = b->nstarts;
        for (int k = 0; k < b->nstarts; k++)
            tp->placements[k] = (struct mig_placement){b->starts[k], b->size};
    }
    return 0;
}

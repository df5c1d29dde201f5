/* fuzz_mig.c - the MIG readers (cluster/mig.c, mig_place.c, mig_hami.c):
 * profile names, a node's labels and resources, HAMi's registration with
 * the placement choice and fragmentation on every MIG device, and the
 * hami.io/vgpu-mig-allocations annotation. The first byte picks the reader.
 * Checked: every value read is inside its documented range, every choice
 * fits the GPU, and an annotation decoded, encoded and decoded again gives
 * the same entries. */
#include "fuzz_common.h"
#include "cluster/mig.h"
#include "cluster/mig_hami.h"
#include "cluster/mig_place.h"

#include <cjson/cJSON.h>

static void check_name(const struct mig_profile_name *p)
{
    if (p->slices < 1 || p->slices > MIG_MAX_SLICES || p->compute < 1 || p->compute > p->slices ||
        p->memory_gb < 1 || p->memory_gb > MIG_MAX_MEMORY_GB || p->nattrs < 0 || p->nattrs > MIG_MAX_ATTRS)
        abort();
    struct mig_profile_name again;
    char why[128];
    /* the canonical form parses to itself */
    if (mig_profile_parse(p->canonical, strlen(p->canonical), &again, why, sizeof(why)) != 0 ||
        strcmp(again.canonical, p->canonical) != 0)
        abort();
}

static void names(const uint8_t *data, size_t size)
{
    char *exact = fuzz_exact(data, size);
    struct mig_profile_name p;
    char why[128];
    if (exact && mig_profile_parse(exact, size, &p, why, sizeof(why)) == 0)
        check_name(&p);
    if (exact && mig_profile_parse_resource(exact, size, &p, why, sizeof(why)) == 0)
        check_name(&p);
    free(exact);
}

static void node(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    struct mig_node n;
    mig_node_read(cJSON_GetObjectItem(j, "labels"), cJSON_GetObjectItem(j, "capacity"),
                  cJSON_GetObjectItem(j, "allocatable"), &n);
    if (n.nprofiles < 0 || n.nprofiles > MIG_MAX_NODE_PROFILES || n.nskipped < 0)
        abort();
    for (int i = 0; i < n.nprofiles; i++) {
        const struct mig_node_profile *p = &n.profiles[i];
        check_name(&p->profile);
        if (p->capacity < -1 || p->capacity > MIG_MAX_INSTANCES || p->allocatable < -1 ||
            p->allocatable > MIG_MAX_INSTANCES || p->label_count < -1 || p->memory_mib < -1 ||
            p->memory_mib > 16777216LL)
            abort();
    }
    struct mig_request req = {0};
    for (const cJSON *it = j ? j->child : NULL; it; it = it->next) {
        char why[128];
        if (cJSON_IsString(it))
            (void)mig_request_add(&req, it->string, it->valuestring, why, sizeof(why));
    }
    if (req.n < 0 || req.n > MIG_MAX_REQ_PROFILES)
        abort();
    for (int i = 0; i < req.n; i++)
        if (req.items[i].count < 1 || req.items[i].count > MIG_MAX_REQUEST)
            abort();
    cJSON_Delete(j);
}

static void choose_all(struct mig_gpu *g)
{
    char why[128];
    if (mig_gpu_check(g, why, sizeof(why)) != 0)
        return;
    static const int64_t mems[] = {0, 1, 4000, 10000, 20000, 40000, 80000};
    for (size_t m = 0; m < sizeof(mems) / sizeof(mems[0]); m++)
        for (int policy = 0; policy < 2; policy++) {
            struct mig_choice c;
            if (mig_choose(g, mems[m], 0, (enum mig_policy)policy, &c) != 0)
                continue;
            if (c.template_index < 0 || c.template_index >= g->ntemplates ||
                g->templates[c.template_index].memory_mib < mems[m])
                abort();
            struct mig_gpu after = *g;
            if (mig_gpu_add_inuse(&after, g->templates[c.template_index].name, c.at, why, sizeof(why)) != 0 &&
                g->ninuse < MIG_MAX_INUSE)
                abort(); /* a choice always fits */
        }
    double f = mig_fragmentation(g);
    if (f < 0 || f > 1)
        abort();
}

static void hami(const char *text)
{
    struct mig_hami_device *d = NULL;
    int n = 0;
    char *err = NULL;
    if (mig_hami_parse_register(text, &d, &n, &err) != 0) {
        free(err);
        return;
    }
    for (int i = 0; i < n; i++) {
        /* fill the GPU greedily, checking each step */
        for (int k = 0; k < 8; k++) {
            struct mig_choice c;
            char why[128];
            choose_all(&d[i].gpu);
            if (mig_choose(&d[i].gpu, 1, 0, MIG_POLICY_KEEP_LARGEST, &c) != 0 ||
                mig_gpu_add_inuse(&d[i].gpu, "x", c.at, why, sizeof(why)) != 0)
                break;
        }
    }
    free(d);
}

static void allocations(const char *text)
{
    struct mig_hami_allocation *a = NULL, *b = NULL;
    int n = 0, m = 0;
    char *err = NULL;
    if (mig_hami_decode_allocations(text, &a, &n, &err) != 0) {
        free(err);
        return;
    }
    for (int i = 0; i < n; i++)
        if (a[i].container_index < 0 || a[i].container_index > MIG_HAMI_MAX_INDEX || a[i].device_index < 0 ||
            a[i].device_index > MIG_HAMI_MAX_INDEX || a[i].placement.size < 1 ||
            a[i].placement.start + a[i].placement.size > MIG_MAX_SLOTS)
            abort();
    char *out = mig_hami_encode_allocations(a, n, &err);
    if (n > 0 && !out && err)
        abort();
    if (out) {
        if (mig_hami_decode_allocations(out, &b, &m, &err) != 0 || m != n)
            abort();
        for (int i = 0; i < n; i++)
            if (a[i].container_index != b[i].container_index || a[i].device_index != b[i].device_index ||
                strcmp(a[i].gpu_uuid, b[i].gpu_uuid) != 0 || strcmp(a[i].profile, b[i].profile) != 0 ||
                a[i].placement.start != b[i].placement.start || a[i].placement.size != b[i].placement.size)
                abort();
    }
    free(err);
    free(out);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    if (mode == 0) {
        names(data, size);
        return 0;
    }
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    if (mode == 1)
        node(text);
    else if (mode == 2)
        hami(text);
    else
        allocations(text);
    free(text);
    return 0;
}

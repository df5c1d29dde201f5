/*
 * mig_hami.c - HAMi's MIG registration profiles and the
 * hami.io/vgpu-mig-allocations annotation (mig_hami.h, docs/mig.md).
 */
#include "cluster/mig_hami.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"

#define INT32_MAXV 2147483647.0
#define UINT32_MAXV 4294967295.0

/* Go's encoding/json matches keys without regard to case: so does this. */
static const cJSON *field(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItem(obj, key);
}

/* A whole JSON number in [min, max]: 0 with *out; 1 when absent or null
 * (Go's zero value); -1 when of another type, a fraction or out of range
 * (Go's Unmarshal fails the whole value then). */
static int number(const cJSON *obj, const char *key, double min, double max, int64_t *out)
{
    const cJSON *v = field(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = 0;
        return 1;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min || v->valuedouble > max)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* Printable ASCII of 1..max-1 bytes (a UUID or profile name). */
static bool clean_text(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* A string field: 1 when absent or null (Go's ""), 0 with *out, -1 when not a string. */
static int string_field(const cJSON *obj, const char *key, const char **out)
{
    const cJSON *v = field(obj, key);
    *out = "";
    if (!v || cJSON_IsNull(v))
        return 1;
    if (!cJSON_IsString(v) || !v->valuestring)
        return -1;
    *out = v->valuestring;
    return 0;
}

static int parse_placement(const cJSON *obj, struct mig_placement *out)
{
    int64_t start = 0, size = 0;
    if (obj && !cJSON_IsNull(obj) && !cJSON_IsObject(obj))
        return -1;
    if (number(obj, "start", 0, UINT32_MAXV, &start) < 0 || number(obj, "size", 0, UINT32_MAXV, &size) < 0)
        return -1;
    out->start = start > MIG_MAX_SLOTS ? MIG_MAX_SLOTS + 1 : (int)start; /* checked by the caller */
    out->size = size > MIG_MAX_SLOTS ? MIG_MAX_SLOTS + 1 : (int)size;
    return 0;
}

static int parse_profile(const cJSON *p, int i, struct mig_template *tp, char **err)
{
    const char *name;
    int64_t mem = 0, core = 0, slices = 0;
    if (!cJSON_IsObject(p))
        return strbuf_set_error(err, "migProfiles[%d] is not an object", i);
    if (string_field(p, "name", &name) < 0 || !clean_text(name, MIG_NAME_MAX))
        return strbuf_set_error(err, "migProfiles[%d]: name must be 1..%d printable characters", i, MIG_NAME_MAX - 1);
    if (number(p, "memoryMB", 0, INT32_MAXV, &mem) < 0 || mem > MIG_MAX_MEMORY_MIB)
        return strbuf_set_error(err, "migProfiles[%d] (%s): memoryMB must be a MiB count in 0..%lld", i, name,
                                (long long)MIG_MAX_MEMORY_MIB);
    if (number(p, "core", 0, MIG_MAX_CORES, &core) < 0)
        return strbuf_set_error(err, "migProfiles[%d] (%s): core must be an integer in 0..%d", i, name, MIG_MAX_CORES);
    if (number(p, "sliceCount", 0, MIG_MAX_SLOTS, &slices) < 0)
        return strbuf_set_error(err, "migProfiles[%d] (%s): sliceCount must be an integer in 0..%d", i, name,
                                MIG_MAX_SLOTS);
    snprintf(tp->name, sizeof(tp->name), "%s", name);
    tp->memory_mib = mem;
    tp->cores = (int)core;
    tp->slices = (int)slices;
    if (slices == 0) { /* HAMi sorts on sliceCount; fall back on the name's g when it parses */
        struct mig_profile_name pn;
        char why[64];
        if (mig_profile_parse(name, strlen(name), &pn, why, sizeof(why)) == 0)
            tp->slices = pn.slices;
    }
    const cJSON *pl = field(p, "placements");
    tp->nplacements = 0;
    if (!pl || cJSON_IsNull(pl))
        return 0;
    if (!cJSON_IsArray(pl))
        return strbuf_set_error(err, "migProfiles[%d] (%s): placements is not an array", i, name);
    int k = 0;
    for (const cJSON *e = pl->child; e; e = e->next, k++) {
        struct mig_placement at;
        if (k >= MIG_MAX_PLACEMENTS)
            return strbuf_set_error(err, "migProfiles[%d] (%s): more than %d placements", i, name, MIG_MAX_PLACEMENTS);
        if (parse_placement(e, &at) != 0 || at.size < 1 || at.start + at.size > MIG_MAX_SLOTS)
            return strbuf_set_error(err, "migProfiles[%d] (%s): placement %d must have size >= 1 within slots 0..%d", i,
                                    name, k, MIG_MAX_SLOTS - 1);
        tp->placements[tp->nplacements++] = at;
    }
    return 0;
}

int mig_hami_parse_profiles(const cJSON *profiles, struct mig_gpu *gpu, char **err)
{
    *err = NULL;
    gpu->ntemplates = 0;
    if (!profiles || cJSON_IsNull(profiles))
        return 0;
    if (!cJSON_IsArray(profiles))
        return strbuf_set_error(err, "migProfiles is not an array");
    int i = 0;
    for (const cJSON *p = profiles->child; p; p = p->next, i++) {
        if (i >= MIG_MAX_TEMPLATES)
            return strbuf_set_error(err, "more than %d migProfiles", MIG_MAX_TEMPLATES);
        if (parse_profile(p, i, &gpu->templates[i], err) != 0)
            return -1;
        for (int u = 0; u < i; u++)
            if (strcmp(gpu->templates[u].name, gpu->templates[i].name) == 0)
                return strbuf_set_error(err, "migProfiles[%d]: %s is listed twice", i, gpu->templates[i].name);
        gpu->ntemplates = i + 1;
    }
    return 0;
}

static int register_entry(const cJSON *e, int k, struct mig_hami_device *d, char **err)
{
    const char *id;
    int64_t index = 0;
    if (string_field(e, "id", &id) < 0 || !clean_text(id, MIG_HAMI_UUID_MAX))
        return strbuf_set_error(err, "entry %d: id must be 1..%d printable characters", k, MIG_HAMI_UUID_MAX - 1);
    if (number(e, "index", 0, MIG_HAMI_MAX_INDEX, &index) < 0)
        return strbuf_set_error(err, "entry %d: index must be an integer in 0..%d", k, MIG_HAMI_MAX_INDEX);
    memset(d, 0, sizeof(*d));
    snprintf(d->uuid, sizeof(d->uuid), "%s", id);
    d->index = (int)index;
    char *sub = NULL;
    if (mig_hami_parse_profiles(field(e, "migProfiles"), &d->gpu, &sub) != 0) {
        if (!sub)
            return (*err = NULL), -1;
        int rc = strbuf_set_error(err, "entry %d (%s): %s", k, id, sub);
        free(sub);
        return rc;
    }
    return 0;
}

int mig_hami_parse_register(const char *text, struct mig_hami_device **out, int *count, char **err)
{
    *out = NULL;
    *count = 0;
    *err = NULL;
    const char *p = text ? text : "";
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p != '[')
        return 0; /* the colon forms: no MIG profiles */
    cJSON *root = cJSON_Parse(p);
    if (!root || !cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return strbuf_set_error(err, "the registration is not a JSON array");
    }
    int n = cJSON_GetArraySize(root), rc = 0, k = 0, got = 0;
    struct mig_hami_device *devs = NULL;
    if (n > MIG_HAMI_MAX_GPUS)
        rc = strbuf_set_error(err, "the registration lists %d devices; at most %d are read", n, MIG_HAMI_MAX_GPUS);
    else if (n > 0 && !(devs = calloc((size_t)n, sizeof(*devs))))
        rc = -1;
    for (const cJSON *e = root->child; rc == 0 && e; e = e->next, k++) {
        const char *mode;
        if (!cJSON_IsObject(e))
            rc = strbuf_set_error(err, "entry %d is not an object", k);
        else if (string_field(e, "mode", &mode) < 0)
            rc = strbuf_set_error(err, "entry %d: mode is not a string", k);
        else if (strcmp(mode, "mig") == 0)
            rc = register_entry(e, k, &devs[got++], err);
    }
    cJSON_Delete(root);
    if (rc != 0 || got == 0) {
        free(devs);
        return rc;
    }
    *out = devs;
    *count = got;
    return 0;
}

/* ---- hami.io/vgpu-mig-allocations -------------------------------------------------- */

static int decode_entry(const cJSON *e, int i, struct mig_hami_allocation *a, char **err)
{
    const char *uuid, *profile, *mig_uuid;
    int64_t ci = 0, di = 0, gi_id = 0, ci_id = 0;
    if (!cJSON_IsObject(e))
        return strbuf_set_error(err, "MIG allocation %d is not an object", i);
    const cJSON *gi = field(e, "gpuInstanceID"), *cid = field(e, "computeInstanceID");
    /* Go's int: any whole number fits; a negative one is refused by HAMi below */
    if (number(e, "containerIndex", -9007199254740992.0, 9007199254740992.0, &ci) < 0 ||
        number(e, "deviceIndex", -9007199254740992.0, 9007199254740992.0, &di) < 0 ||
        string_field(e, "gpuUUID", &uuid) < 0 || string_field(e, "profile", &profile) < 0 ||
        string_field(e, "migUUID", &mig_uuid) < 0 || number(e, "gpuInstanceID", 0, UINT32_MAXV, &gi_id) < 0 ||
        number(e, "computeInstanceID", 0, UINT32_MAXV, &ci_id) < 0 ||
        parse_placement(field(e, "placement"), &a->placement) != 0)
        return strbuf_set_error(err, "MIG allocation %d: a field of the wrong type or range", i);
    if (ci < 0 || di < 0 || !*uuid || !*profile || a->placement.size == 0)
        return strbuf_set_error(err, "MIG allocation %d is incomplete", i);
    int runtime = (*mig_uuid != '\0') + (gi && !cJSON_IsNull(gi)) + (cid && !cJSON_IsNull(cid));
    if (runtime != 0 && runtime != 3)
        return strbuf_set_error(err, "MIG allocation %d has partial runtime identity", i);
    if (ci > MIG_HAMI_MAX_INDEX || di > MIG_HAMI_MAX_INDEX)
        return strbuf_set_error(err, "MIG allocation %d: container or device index above %d", i, MIG_HAMI_MAX_INDEX);
    if (!clean_text(uuid, MIG_HAMI_UUID_MAX) || !clean_text(profile, MIG_NAME_MAX) ||
        (runtime && !clean_text(mig_uuid, MIG_HAMI_UUID_MAX)))
        return strbuf_set_error(err, "MIG allocation %d: a UUID or profile that is not short printable text", i);
    if (a->placement.start + a->placement.size > MIG_MAX_SLOTS)
        return strbuf_set_error(err, "MIG allocation %d: placement outside slots 0..%d", i, MIG_MAX_SLOTS - 1);
    a->container_index = (int)ci;
    a->device_index = (int)di;
    snprintf(a->gpu_uuid, sizeof(a->gpu_uuid), "%s", uuid);
    snprintf(a->profile, sizeof(a->profile), "%s", profile);
    a->runtime = runtime == 3;
    if (a->runtime) {
        snprintf(a->mig_uuid, sizeof(a->mig_uuid), "%s", mig_uuid);
        a->gpu_instance_id = (uint32_t)gi_id;
        a->compute_instance_id = (uint32_t)ci_id;
    }
    return 0;
}

int mig_hami_decode_allocations(const char *text, struct mig_hami_allocation **out, int *count, char **err)
{
    *out = NULL;
    *count = 0;
    *err = NULL;
    if (!text || !*text)
        return 0;
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return strbuf_set_error(err, "%s is not valid JSON", MIG_HAMI_ALLOCATIONS_ANNOTATION);
    int rc = 0, n = cJSON_IsArray(root) ? cJSON_GetArraySize(root) : -1;
    struct mig_hami_allocation *a = NULL;
    if (cJSON_IsNull(root))
        n = 0; /* Go: null into a slice is nil */
    else if (n < 0)
        rc = strbuf_set_error(err, "%s is not a JSON array", MIG_HAMI_ALLOCATIONS_ANNOTATION);
    else if (n > MIG_HAMI_MAX_ALLOCATIONS)
        rc = strbuf_set_error(err, "%s lists %d allocations; at most %d are read", MIG_HAMI_ALLOCATIONS_ANNOTATION, n,
                              MIG_HAMI_MAX_ALLOCATIONS);
    else if (n > 0 && !(a = calloc((size_t)n, sizeof(*a))))
        rc = -1;
    int i = 0;
    for (const cJSON *e = n > 0 ? root->child : NULL; rc == 0 && e; e = e->next, i++) {
        rc = decode_entry(e, i, &a[i], err);
        for (int j = 0; rc == 0 && j < i; j++)
            if (a[j].container_index == a[i].container_index && a[j].device_index == a[i].device_index)
                rc = strbuf_set_error(err, "duplicate MIG allocation for container %d device %d", a[i].container_index,
                                      a[i].device_index);
    }
    cJSON_Delete(root);
    if (rc != 0 || n <= 0) {
        free(a);
        return rc;
    }
    *out = a;
    *count = n;
    return 0;
}

int mig_hami_charge(struct mig_hami_device *devs, int ndevs, const struct mig_hami_allocation *a, int n, char *why,
                    size_t why_size)
{
    int charged = 0;
    bool reported = false;
    if (why && why_size)
        why[0] = '\0';
    for (int i = 0; i < n; i++)
        for (int d = 0; d < ndevs; d++) {
            if (strcmp(devs[d].uuid, a[i].gpu_uuid) != 0)
                continue;
            char reason[128];
            if (mig_gpu_add_inuse(&devs[d].gpu, a[i].profile, a[i].placement, reason, sizeof(reason)) == 0)
                charged++;
            else if (!reported && why && why_size) {
                snprintf(why, why_size, "%s on %s (container %d, device %d): %s", a[i].profile, a[i].gpu_uuid,
                         a[i].container_index, a[i].device_index, reason);
                reported = true;
            }
            break;
        }
    return charged;
}

/* A string as Go's json.Marshal writes printable ASCII: \" \\ and the HTML
 * characters as \u003c \u003e \u0026. */
static void go_string(struct strbuf *sb, const char *s)
{
    strbuf_putc(sb, '"');
    for (; *s; s++) {
        switch (*s) {
        case '"':
            strbuf_puts(sb, "\\\"");
            break;
        case '\\':
            strbuf_puts(sb, "\\\\");
            break;
        case '<':
            strbuf_puts(sb, "\\u003c");
            break;
        case '>':
            strbuf_puts(sb, "\\u003e");
            break;
        case '&':
            strbuf_puts(sb, "\\u0026");
            break;
        default:
            strbuf_putc(sb, *s);
        }
    }
    strbuf_putc(sb, '"');
}

char *mig_hami_encode_allocations(const struct mig_hami_allocation *a, int n, char **err)
{
    *err = NULL;
    if (n <= 0)
        return NULL;
    for (int i = 0; i < n; i++)
        if (a[i].container_index < 0 || a[i].device_index < 0 || !clean_text(a[i].gpu_uuid, MIG_HAMI_UUID_MAX) ||
            !clean_text(a[i].profile, MIG_NAME_MAX) || a[i].placement.size < 1 || a[i].placement.start < 0) {
            strbuf_set_error(err, "MIG allocation %d is incomplete", i);
            return NULL;
        }
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "[");
    for (int i = 0; i < n; i++) {
        strbuf_printf(&sb, "%s{\"containerIndex\":%d,\"deviceIndex\":%d,\"gpuUUID\":", i ? "," : "",
                      a[i].container_index, a[i].device_index);
        go_string(&sb, a[i].gpu_uuid);
        strbuf_printf(&sb, ",\"profile\":");
        go_string(&sb, a[i].profile);
        strbuf_printf(&sb, ",\"placement\":{\"start\":%d,\"size\":%d}}", a[i].placement.start, a[i].placement.size);
    }
    strbuf_printf(&sb, "]");
    if (strbuf_failed(&sb)) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

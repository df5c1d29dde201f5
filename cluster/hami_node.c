/* hami_node.c - HAMi registration and handshake. See hami_node.h. */
#include "cluster/hami_node.h"
#include "cluster/mig_hami.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* HAMi's documented defaults (docs/hami.md), for the flags and for code that
 * runs before options are applied (unit tests). */
#define HAMI_CONFIG_DEFAULTS                                                                                         \
    {                                                                                                                \
        .memory_scaling = 1.0, .default_split = 10, .default_memory_mib = 0, .default_cores = 0, .memory_factor = 1, \
        .handshake = HAMI_HANDSHAKE_OBSERVE, .handshake_timeout_ns = 60 * NS_PER_S,                                  \
        .handshake_interval_ns = 15 * NS_PER_S, .lock_timeout_ns = 300 * NS_PER_S,                                   \
    }

static struct hami_config config = HAMI_CONFIG_DEFAULTS;

void hami_config_defaults(struct hami_config *cfg)
{
    *cfg = (struct hami_config)HAMI_CONFIG_DEFAULTS;
}

void hami_set_config(const struct hami_config *cfg)
{
    config = *cfg;
}

const struct hami_config *hami_get_config(void)
{
    return &config;
}

int hami_handshake_mode_parse(const char *text, enum hami_handshake_mode *out)
{
    static const char *const names[] = {"off", "observe", "write"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = (enum hami_handshake_mode)i;
            return 0;
        }
    return -1;
}

const char *hami_mode_name(enum hami_mode mode)
{
    return mode == HAMI_MODE_MIG ? "mig" : mode == HAMI_MODE_MPS ? "mps" : "hami-core";
}

void hami_short_uuid(const char *uuid, char *buf, size_t size)
{
    size_t n = strlen(uuid);
    if (n <= 8)
        snprintf(buf, size, "%s", uuid);
    else
        snprintf(buf, size, "%.8s\xe2\x80\xa6", uuid); /* U+2026 HORIZONTAL ELLIPSIS */
}

/* ---- fields ---------------------------------------------------------------- */

/* A decimal integer in [min, max]: optional '-', digits, nothing else. */
static int parse_bounded(const char *s, size_t len, int64_t min, int64_t max, int64_t *out)
{
    size_t i = 0;
    bool neg = len > 0 && s[0] == '-';
    if (neg)
        i++;
    if (i == len)
        return -1;
    int64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    v = neg ? -v : v;
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Go's strconv.ParseBool, which HAMi's scheduler uses for the health field. */
static int parse_go_bool(const char *s, size_t len, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strlen(yes[i]) == len && memcmp(s, yes[i], len) == 0)
            return (*out = true), 0;
        if (strlen(no[i]) == len && memcmp(s, no[i], len) == 0)
            return (*out = false), 0;
    }
    return -1;
}

static int parse_mode(const char *s, size_t len, enum hami_mode *out)
{
    static const char *const names[] = {"hami-core", "mig", "mps"};
    for (int i = 0; i < 3; i++)
        if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0) {
            *out = (enum hami_mode)i;
            return 0;
        }
    return -1;
}

/* UUIDs and types travel inside ','/':'/';'-separated annotations, so they
 * may hold none of those, nor control characters. */
static bool clean_text(const char *s, size_t len, bool separators_allowed)
{
    if (len == 0 || len >= HAMI_MAX_TEXT)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (!separators_allowed && (c == ',' || c == ':' || c == ';'))
            return false;
    }
    return true;
}

static char *upper_dup(const char *s)
{
    char *u = strdup(s);
    for (char *p = u; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return u;
}

void hami_devices_free(struct hami_device *devices, int count)
{
    for (int i = 0; devices && i < count; i++) {
        free(devices[i].uuid);
        free(devices[i].type);
        free(devices[i].type_upper);
        free(devices[i].mig);
        free(devices[i].mig_error);
    }
    free(devices);
}

/* The registered memory as the scheduler sees it: HAMi's plugin already
 * scales what it registers; this is the extender's own factor on top. MIG
 * instances have fixed sizes and are never scaled. */
static int64_t scaled_memory(int64_t mib, enum hami_mode mode)
{
    if (mode == HAMI_MODE_MIG || config.memory_scaling == 1.0)
        return mib;
    double v = floor((double)mib * config.memory_scaling);
    return v < 1 ? 1 : (int64_t)v;
}

static int set_strings(struct hami_device *d, const char *uuid, size_t ulen, const char *type, size_t tlen)
{
    d->uuid = strndup(uuid, ulen);
    d->type = strndup(type, tlen);
    d->type_upper = d->type ? upper_dup(d->type) : NULL;
    return d->uuid && d->type && d->type_upper ? 0 : -1;
}

/* ---- the colon form ---------------------------------------------------------- */

struct span {
    const char *p;
    size_t n;
};

/* Split s[0..len) at ','; at most max fields (more: returns max + 1). */
static int split_fields(const char *s, size_t len, struct span *f, int max)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ',')
            continue;
        if (n == max)
            return max + 1;
        f[n++] = (struct span){s + start, i - start};
        start = i + 1;
    }
    return n;
}

static int field_error(char **err, int entry, const char *what, struct span f, const char *expected)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "entry %d: %s ", entry, what);
    strbuf_json_string_n(&sb, f.p, f.n > 64 ? 64 : f.n);
    strbuf_printf(&sb, " is not %s", expected);
    *err = strbuf_detach(&sb, NULL);
    return -1;
}

/* The numeric fields of a device, range-checked by the parser of either
 * registration form; a split count of 0 takes --hami-default-split. */
static void set_numbers(struct hami_device *d, int64_t split, int64_t mem, int64_t cores, int64_t numa, int64_t index)
{
    d->split = split > 0 ? (int)split : split == 0 ? config.default_split : 0;
    d->memory_mib = scaled_memory(mem, d->mode);
    d->cores = (int)cores;
    d->numa = (int)numa;
    d->index = (int)index;
    d->topo = -1;
}

static int parse_colon_entry(const char *s, size_t len, int entry, struct hami_device *d, char **err)
{
    struct span f[10];
    int n = split_fields(s, len, f, 9);
    if (n != 7 && n != 9) {
        *err = strbuf_format("entry %d has %s%d fields; expected 7 (UUID,split,memoryMiB,cores,type,numa,healthy) or "
                             "9 (... ,index,mode)",
                             entry, n > 9 ? "more than " : "", n > 9 ? 9 : n);
        return -1;
    }
    int64_t split = 0, mem = 0, cores = 0, numa = 0, index = entry;
    d->mode = HAMI_MODE_HAMI_CORE;
    if (!clean_text(f[0].p, f[0].n, false))
        return field_error(err, entry, "UUID", f[0], "1..255 printable characters");
    if (f[1].n > 0 && parse_bounded(f[1].p, f[1].n, 0, HAMI_MAX_SPLIT, &split) != 0)
        return field_error(err, entry, "split count", f[1], "an integer in 0..1024");
    if (parse_bounded(f[2].p, f[2].n, 1, HAMI_MAX_MEMORY_MIB, &mem) != 0)
        return field_error(err, entry, "memory", f[2], "a MiB count in 1..16777216");
    if (parse_bounded(f[3].p, f[3].n, 0, HAMI_MAX_DEVICE_CORES, &cores) != 0)
        return field_error(err, entry, "cores", f[3], "an integer in 0..10000");
    if (!clean_text(f[4].p, f[4].n, false))
        return field_error(err, entry, "type", f[4], "1..255 printable characters");
    if (parse_bounded(f[5].p, f[5].n, -1, HAMI_MAX_INDEX, &numa) != 0)
        return field_error(err, entry, "NUMA node", f[5], "an integer in -1..4095");
    if (parse_go_bool(f[6].p, f[6].n, &d->healthy) != 0)
        return field_error(err, entry, "health", f[6], "true or false");
    if (n == 9 && parse_bounded(f[7].p, f[7].n, 0, HAMI_MAX_INDEX, &index) != 0)
        return field_error(err, entry, "index", f[7], "an integer in 0..4095");
    if (n == 9 && parse_mode(f[8].p, f[8].n, &d->mode) != 0)
        return field_error(err, entry, "mode", f[8], "hami-core, mig or mps");
    set_numbers(d, split, mem, cores, numa, index);
    return set_strings(d, f[0].p, f[0].n, f[4].p, f[4].n) == 0 ? 0 : (*err = NULL, -1);
}

static int count_entries(const char *text)
{
    int n = 0;
    for (const char *p = text;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        n += len > 0;
        if (!end)
            return n;
        p = end;
    }
}

static int parse_colon(const char *text, struct hami_device **out, int *count, char **err)
{
    int n = count_entries(text);
    if (n == 0)
        return strbuf_set_error(err, "it lists no device");
    if (n > HAMI_MAX_DEVICES)
        return strbuf_set_error(err, "it lists %d devices; at most %d are supported", n, HAMI_MAX_DEVICES);
    struct hami_device *devs = calloc((size_t)n, sizeof(*devs));
    if (!devs)
        return -1;
    int k = 0;
    for (const char *p = text;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && parse_colon_entry(p, len, k, &devs[k], err) != 0) {
            hami_devices_free(devs, k + 1);
            return -1;
        }
        k += len > 0;
        if (!end)
            break;
        p = end;
    }
    *out = devs;
    *count = n;
    return 0;
}

/* ---- the JSON form ------------------------------------------------------------ */

static int json_int(const cJSON *obj, const char *key, int64_t min, int64_t max, bool required, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return required ? -1 : 1;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)min ||
        v->valuedouble > (double)max)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* A MIG-mode entry's "migProfiles" (HAMi v2.10): the device keeps its
 * templates, or none with the reason when they do not read (the device is
 * then not used; the rest of the registration is). 0, or -1 when memory ran
 * out. */
static int read_mig_profiles(const cJSON *e, struct hami_device *d, char **err)
{
    const cJSON *profiles = cJSON_GetObjectItem(e, "migProfiles"); /* Go matches keys without case */
    if (!profiles || cJSON_IsNull(profiles))
        return 0;
    if (!(d->mig = calloc(1, sizeof(*d->mig))))
        return (*err = NULL), -1;
    char *why = NULL;
    if (mig_hami_parse_profiles(profiles, d->mig, &why) == 0 && d->mig->ntemplates > 0)
        return 0;
    free(d->mig);
    d->mig = NULL;
    d->mig_error = why ? why : strdup("migProfiles lists no profile");
    return d->mig_error ? 0 : ((*err = NULL), -1);
}

static int json_entry(const cJSON *e, int entry, struct hami_device *d, char **err)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
    const cJSON *health = cJSON_GetObjectItemCaseSensitive(e, "health");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(e, "mode");
    /* HAMi's DeviceInfo tags every field omitempty and its scheduler reads
     * the array with a plain json.Unmarshal (UnMarshalNodeDevices): a
     * missing key is Go's zero value. So numa and index default to 0, devcore
     * to 0, type to "", and a missing count is 0 tasks: HAMi's Fit then never
     * places a vGPU there (Count <= Used). split -1 marks that here. */
    int64_t split = 0, mem = 0, cores = 0, numa = 0, index = 0;
    if (!cJSON_IsObject(e))
        return strbuf_set_error(err, "entry %d is not an object", entry);
    if (!cJSON_IsString(id) || !clean_text(id->valuestring, strlen(id->valuestring), false))
        return strbuf_set_error(err, "entry %d: id must be 1..255 printable characters", entry);
    const char *type_text = cJSON_IsString(type) ? type->valuestring : "";
    if ((type && !cJSON_IsNull(type) && !cJSON_IsString(type)) ||
        (*type_text && !clean_text(type_text, strlen(type_text), true)))
        return strbuf_set_error(err, "entry %d: type must be at most 255 printable characters", entry);
    if (json_int(e, "count", 0, HAMI_MAX_SPLIT, false, &split) < 0)
        return strbuf_set_error(err, "entry %d: count must be an integer in 0..1024", entry);
    if (split == 0)
        split = -1; /* Go's zero value: a device of no tasks */
    if (json_int(e, "devmem", 1, HAMI_MAX_MEMORY_MIB, true, &mem) < 0)
        return strbuf_set_error(err, "entry %d: devmem must be a MiB count in 1..16777216", entry);
    if (json_int(e, "devcore", 0, HAMI_MAX_DEVICE_CORES, false, &cores) < 0)
        return strbuf_set_error(err, "entry %d: devcore must be an integer in 0..10000", entry);
    if (json_int(e, "numa", -1, HAMI_MAX_INDEX, false, &numa) < 0)
        return strbuf_set_error(err, "entry %d: numa must be an integer in -1..4095", entry);
    if (json_int(e, "index", 0, HAMI_MAX_INDEX, false, &index) < 0)
        return strbuf_set_error(err, "entry %d: index must be an integer in 0..4095", entry);
    if (health && !cJSON_IsBool(health) && !cJSON_IsNull(health))
        return strbuf_set_error(err, "entry %d: health must be true or false", entry);
    d->mode = HAMI_MODE_HAMI_CORE;
    if (mode && !cJSON_IsNull(mode) &&
        (!cJSON_IsString(mode) || parse_mode(mode->valuestring, strlen(mode->valuestring), &d->mode) != 0))
        return strbuf_set_error(err, "entry %d: mode must be hami-core, mig or mps", entry);
    d->healthy = cJSON_IsTrue(health); /* absent reads as false, as Go's decoder does */
    set_numbers(d, split, mem, cores, numa, index);
    if (set_strings(d, id->valuestring, strlen(id->valuestring), type_text, strlen(type_text)) != 0)
        return (*err = NULL), -1;
    return d->mode == HAMI_MODE_MIG ? read_mig_profiles(e, d, err) : 0;
}

static int parse_json(const char *text, struct hami_device **out, int *count, char **err)
{
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return strbuf_set_error(err, "it starts with '[' but is not valid JSON");
    int n = cJSON_IsArray(root) ? cJSON_GetArraySize(root) : -1;
    int rc = 0;
    struct hami_device *devs = NULL;
    if (n < 0)
        rc = strbuf_set_error(err, "its JSON is not an array");
    else if (n == 0)
        rc = strbuf_set_error(err, "it lists no device");
    else if (n > HAMI_MAX_DEVICES)
        rc = strbuf_set_error(err, "it lists %d devices; at most %d are supported", n, HAMI_MAX_DEVICES);
    else if (!(devs = calloc((size_t)n, sizeof(*devs))))
        rc = -1;
    int k = 0;
    for (const cJSON *e = root->child; rc == 0 && e; e = e->next, k++)
        rc = json_entry(e, k, &devs[k], err);
    cJSON_Delete(root);
    if (rc != 0) {
        hami_devices_free(devs, k);
        return -1;
    }
    *out = devs;
    *count = n;
    return 0;
}

/* Two entries for one GPU (or one index) would let two tasks believe they
 * own the same capacity. */
static int check_unique(const struct hami_device *d, int n, char **err)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (strcmp(d[i].uuid, d[j].uuid) == 0)
                return strbuf_set_error(err, "entries %d and %d register the same UUID", i, j);
            if (d[i].index == d[j].index)
                return strbuf_set_error(err, "entries %d and %d register the same index %d", i, j, d[i].index);
        }
    return 0;
}

int hami_parse_register(const char *text, struct hami_device **devices, int *count, char **err)
{
    *devices = NULL;
    *count = 0;
    *err = NULL;
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    int rc = *p == '[' ? parse_json(p, devices, count, err) : parse_colon(text, devices, count, err);
    if (rc == 0 && check_unique(*devices, *count, err) != 0) {
        hami_devices_free(*devices, *count);
        *devices = NULL;
        *count = 0;
        return -1;
    }
    for (int i = 0; rc == 0 && i < *count; i++) {
        struct hami_device *d = &(*devices)[i];
        d->inv_split = d->split > 0 ? 1.0 / d->split : 0; /* a split of 0 never passes the fit */
        d->inv_memory = 1.0 / (double)d->memory_mib;
        d->inv_cores = d->cores > 0 ? 1.0 / d->cores : 0;
    }
    return rc;
}

/* ---- handshake --------------------------------------------------------------- */

int64_t hami_parse_handshake_time(const char *text)
{
    int y, mo, d, h, mi, s, used = 0;
    char a, b;
    if (sscanf(text, "%4d%c%2d%c%2d %2d:%2d:%2d%n", &y, &a, &mo, &b, &d, &h, &mi, &s, &used) != 8 ||
        text[used] != '\0' || a != b || (a != '-' && a != '.') || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
        h > 23 || mi > 59 || s > 60)
        return -1;
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s, .tm_isdst = -1};
    time_t t = mktime(&tm);
    /* Nanoseconds end in 2262: a later year (HAMi writes local time, any
     * node may write any year) is unreadable, not an overflow. */
    if (t < 0 || (int64_t)t > INT64_MAX / NS_PER_S)
        return -1;
    return (int64_t)t * NS_PER_S;
}

void hami_handshake_request_value(int64_t now_ns, char *buf, size_t size)
{
    time_t t = (time_t)(now_ns / NS_PER_S);
    struct tm tm;
    localtime_r(&t, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, size, "Requesting_%s", when);
}

bool hami_handshake_due(const struct hami_node *h)
{
    return h->handshake != HAMI_HS_REQUESTING;
}

static enum hami_handshake read_state(const char *value, int64_t *when)
{
    *when = 0;
    if (strncmp(value, "Requesting_", 11) == 0) {
        int64_t t = hami_parse_handshake_time(value + 11);
        *when = t > 0 ? t : 0; /* unreadable: never expires, as HAMi documents */
        return HAMI_HS_REQUESTING;
    }
    if (strncmp(value, "Deleted_", 8) == 0) {
        int64_t t = hami_parse_handshake_time(value + 8);
        *when = t > 0 ? t : 0;
        return HAMI_HS_DELETED;
    }
    return HAMI_HS_REPORTED;
}

/* How alive a state is: an answer anywhere beats a pending request, which
 * beats a deletion. */
static int liveness(enum hami_handshake s)
{
    static const int rank[] = {
        [HAMI_HS_NONE] = 0, [HAMI_HS_DELETED] = 1, [HAMI_HS_REQUESTING] = 2, [HAMI_HS_REPORTED] = 3};
    return rank[s];
}

static int read_handshake(struct hami_node *h, const cJSON *annotations)
{
    static const char *const keys[] = {HAMI_HANDSHAKE_NVIDIA_ANNOTATION, HAMI_HANDSHAKE_ANNOTATION};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(annotations, keys[i]);
        if (!cJSON_IsString(v))
            continue;
        int64_t when;
        enum hami_handshake s = read_state(v->valuestring, &when);
        bool better = liveness(s) > liveness(h->handshake) ||
                      (s == h->handshake && s == HAMI_HS_REQUESTING && when > h->handshake_ns);
        if (!better)
            continue;
        free(h->handshake_value);
        if (!(h->handshake_value = strdup(v->valuestring)))
            return -1;
        h->handshake = s;
        h->handshake_ns = when;
    }
    return 0;
}

/* ---- the node ---------------------------------------------------------------- */

void hami_node_free(struct hami_node *h)
{
    if (!h)
        return;
    hami_devices_free(h->devices, h->count);
    free(h->error);
    free(h->handshake_value);
    free(h->lock_value);
    free(h);
}

/* HAMi v2.10's hami.io/device-cordon (CordonedDevices): the UUIDs of
 * devices that take no new task, separated by ',', each trimmed, empty
 * entries skipped. Devices already holding tasks keep them (their use is
 * still counted). A UUID of no device of the node changes nothing. */
static void mark_cordoned(struct hami_node *h, const cJSON *annotations)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_DEVICE_CORDON_ANNOTATION);
    if (!cJSON_IsString(v))
        return;
    for (const char *p = v->valuestring; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t n = len;
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        for (int i = 0; n > 0 && i < h->count; i++)
            if (strlen(h->devices[i].uuid) == n && memcmp(h->devices[i].uuid, p, n) == 0)
                h->devices[i].cordoned = true;
        p += len;
        if (*p == ',')
            p++;
    }
}

/* The node lock's value as written (a string; anything else is left out,
 * as the bind's own read of the Node decides what it means). 0, or -1. */
static int read_lock(struct hami_node *h, const cJSON *annotations)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_NODE_LOCK_ANNOTATION);
    return !cJSON_IsString(v) || (h->lock_value = strdup(v->valuestring)) ? 0 : -1;
}

int hami_node_from_annotations(const cJSON *annotations, int64_t allocatable_gpus, const char *node,
                               struct hami_node **out)
{
    *out = NULL;
    const cJSON *reg = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_REGISTER_ANNOTATION);
    if (!reg)
        return 0;
    struct hami_node *h = calloc(1, sizeof(*h));
    if (!h)
        return -1;
    h->advertised = allocatable_gpus > 0;
    char *err = NULL;
    if (!cJSON_IsString(reg)) {
        if (!(h->error = strdup("the annotation is not a string")))
            goto oom;
    } else if (hami_parse_register(reg->valuestring, &h->devices, &h->count, &err) != 0) {
        if (!err)
            goto oom;
        h->error = err;
    }
    if (h->error)
        log_warn("node %s: %s is unusable, its HAMi devices are not used: %s", node, HAMI_REGISTER_ANNOTATION,
                 h->error);
    mark_cordoned(h, annotations);
    for (int i = 0; i < h->count; i++) {
        const struct hami_device *d = &h->devices[i];
        if (d->mode == HAMI_MODE_MIG && d->mig_error)
            log_warn("node %s: HAMi MIG device %s is not used: its migProfiles are unusable: %s", node, d->uuid,
                     d->mig_error);
        if (d->healthy && !d->cordoned && (d->mode != HAMI_MODE_MIG || d->mig))
            h->usable |= 1ULL << i;
    }
    if (read_handshake(h, annotations) != 0 || read_lock(h, annotations) != 0)
        goto oom;
    *out = h;
    return 0;
oom:
    hami_node_free(h);
    return -1;
}

bool hami_node_has_mig(const struct hami_node *h)
{
    for (int i = 0; h && i < h->count; i++)
        if (h->devices[i].mode == HAMI_MODE_MIG && h->devices[i].mig)
            return true;
    return false;
}

static void quoted(struct strbuf *sb, const char *value)
{
    size_t n = strlen(value);
    strbuf_json_string_n(sb, value, n > 64 ? 64 : n);
}

const char *hami_node_unusable(const struct hami_node *h, int64_t now_ns, char *buf, size_t size)
{
    struct strbuf sb;
    if (h->error) {
        snprintf(buf, size, "the HAMi registration (%s) is unusable: %s", HAMI_REGISTER_ANNOTATION, h->error);
        return buf;
    }
    if (config.handshake == HAMI_HANDSHAKE_OFF || h->advertised)
        return NULL;
    bool expired = h->handshake == HAMI_HS_REQUESTING && h->handshake_ns > 0 &&
                   now_ns - h->handshake_ns > config.handshake_timeout_ns;
    if (!expired && h->handshake != HAMI_HS_DELETED)
        return NULL;
    strbuf_init(&sb);
    if (expired)
        strbuf_printf(
            &sb, "HAMi's device plugin has not answered the handshake for %" PRId64 "s (timeout %" PRId64 "s): ",
            (int64_t)((now_ns - h->handshake_ns) / NS_PER_S), (int64_t)(config.handshake_timeout_ns / NS_PER_S));
    else
        strbuf_puts(&sb, "a HAMi scheduler dropped this node's devices: ");
    strbuf_puts(&sb, "the handshake is ");
    quoted(&sb, h->handshake_value);
    strbuf_printf(&sb, " and the node advertises no %s", "nvidia.com/gpu");
    snprintf(buf, size, "%s", strbuf_failed(&sb) ? "the HAMi handshake is unanswered" : sb.data);
    strbuf_free(&sb);
    return buf;
}

/* annotation.c - the `gpu-admission.io/topology` node annotation; see annotation.h. */
#include "topology/annotation.h"

#include "lib/strbuf.h"
#include "lib/termtext.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* H100 (NVLink 4) bonds 18 links between a pair; 64 leaves headroom for
 * future parts while staying far below what uint8_t can hold. */
#define TOPO_MAX_NVLINKS 64

/* Long enough to show a mistyped token, short enough that a hostile
 * annotation cannot blow up log lines and Kubernetes events. */
#define TOKEN_ECHO_MAX 32

/* ---------------------------------------------------------------- errors */

static int out_of_memory(char **err)
{
    return strbuf_set_error(err, "out of memory");
}

static const char *plural(int n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* ------------------------------------------------------------ link tokens */

static const struct {
    const char *token;
    enum topo_link_class cls;
} fixed_links[] = {
    {"X", TOPO_LINK_SELF},  {"SYS", TOPO_LINK_SYS}, {"NODE", TOPO_LINK_NODE},
    {"PHB", TOPO_LINK_PHB}, {"PXB", TOPO_LINK_PXB}, {"PIX", TOPO_LINK_PIX},
};

#define FIXED_LINK_COUNT (sizeof(fixed_links) / sizeof(fixed_links[0]))

/* "NV<n>": exactly one spelling per count (no sign, no leading zero), so
 * parse and format are inverse and a matrix compares equal token by token. */
static int parse_nvlink(const char *token, struct topo_link *out)
{
    if (strncmp(token, "NV", 2) != 0)
        return -1;
    const char *p = token + 2;
    if (*p < '1' || *p > '9')
        return -1;
    int n = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (*p - '0');
        if (n > TOPO_MAX_NVLINKS)
            return -1;
    }
    out->cls = TOPO_LINK_NV;
    out->nvlinks = (uint8_t)n;
    return 0;
}

int topology_parse_link(const char *token, struct topo_link *out)
{
    if (!token || !out)
        return -1;
    for (size_t i = 0; i < FIXED_LINK_COUNT; i++) {
        if (strcmp(token, fixed_links[i].token) == 0) {
            out->cls = (uint8_t)fixed_links[i].cls;
            out->nvlinks = 0;
            return 0;
        }
    }
    return parse_nvlink(token, out);
}

void topology_format_link(struct topo_link link, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    if (link.cls == TOPO_LINK_NV) {
        snprintf(buf, size, "NV%u", (unsigned)link.nvlinks);
        return;
    }
    /* "?" for a corrupt class: visible in output, and rejected by the
     * parser, so a broken structure can never round-trip into a valid one. */
    const char *token = "?";
    for (size_t i = 0; i < FIXED_LINK_COUNT; i++)
        if (link.cls == fixed_links[i].cls)
            token = fixed_links[i].token;
    snprintf(buf, size, "%s", token);
}

/* ------------------------------------------------------- member access */

/* Looks `key` up in obj; JSON null counts as absent. cJSON keeps duplicate
 * keys and would silently return the first, hiding a conflicting second
 * value, so a duplicate is an error. `prefix` is the path of obj including
 * a trailing dot ("" for the root, "gpus[2]." for a GPU). */
static int member(const cJSON *obj, const char *prefix, const char *key, const cJSON **out, char **err)
{
    const cJSON *found = NULL;
    const cJSON *child;
    cJSON_ArrayForEach(child, obj)
    {
        if (!child->string || strcmp(child->string, key) != 0)
            continue;
        if (found)
            return strbuf_set_error(err, "%s%s: duplicate key", prefix, key);
        found = child;
    }
    *out = cJSON_IsNull(found) ? NULL : found;
    return 0;
}

/* JSON numbers are doubles: accept only integral values in [min, INT_MAX],
 * so 1.5 and 1e10 are rejected instead of being truncated or wrapped. */
static int json_to_int(const cJSON *item, int min, int *out)
{
    if (!cJSON_IsNumber(item))
        return -1;
    double d = item->valuedouble;
    if (!(d >= (double)min && d <= (double)INT_MAX))
        return -1; /* the negated form also rejects NaN */
    int v = (int)d;
    if ((double)v != d)
        return -1;
    *out = v;
    return 0;
}

/* Reads an integer member. 1 when read, 0 when absent (*out untouched), -1
 * on error. `expect` completes "must be ..." in the message. */
static int field_int(const cJSON *obj, const char *prefix, const char *key, int min, const char *expect, int *out,
                     char **err)
{
    const cJSON *item = NULL;
    if (member(obj, prefix, key, &item, err) < 0)
        return -1;
    if (!item)
        return 0;
    if (json_to_int(item, min, out) < 0)
        return strbuf_set_error(err, "%s%s: must be %s", prefix, key, expect);
    return 1;
}

static char *dup_string(const char *s)
{
    size_t len = strlen(s) + 1;
    char *copy = malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}

/* Reads an optional string member into a malloc'd copy (NULL if absent). */
static int field_string(const cJSON *obj, const char *prefix, const char *key, char **out, char **err)
{
    const cJSON *item = NULL;
    if (member(obj, prefix, key, &item, err) < 0)
        return -1;
    if (!item)
        return 0;
    if (!cJSON_IsString(item))
        return strbuf_set_error(err, "%s%s: must be a string", prefix, key);
    /* The model and UUID reach terminals (kubectl gpu), metrics labels and
     * logs: a node writer may not put escapes there (issue 22). */
    if (!term_text_clean(item->valuestring)) {
        char *shown = term_text_escape(item->valuestring);
        int rc = strbuf_set_error(err, "%s%s: control characters or invalid UTF-8 in \"%.64s\"", prefix, key,
                                  shown ? shown : "");
        free(shown);
        return rc;
    }
    *out = dup_string(item->valuestring);
    return *out ? 1 : out_of_memory(err);
}

/* ------------------------------------------------------------- version */

static int parse_version(const cJSON *root, struct gpu_topology *t, char **err)
{
    int rc = field_int(root, "", "version", INT_MIN, "an integer", &t->version, err);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return strbuf_set_error(err, "version: required");
    if (t->version != 1)
        return strbuf_set_error(err, "version: unsupported version %d (expected 1)", t->version);
    return 0;
}

/* ---------------------------------------------------------------- gpus */

static int parse_gpu_index(const cJSON *obj, const char *prefix, int pos, char **err)
{
    int index;
    int rc = field_int(obj, prefix, "index", INT_MIN, "an integer", &index, err);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return strbuf_set_error(err, "%sindex: required", prefix);
    /* gpus[i].index == i is what lets callers index gpus[] directly. */
    if (index != pos)
        return strbuf_set_error(err, "%sindex: must be %d (its position in gpus), got %d", prefix, pos, index);
    return 0;
}

static int parse_gpu_numbers(const cJSON *obj, const char *prefix, struct topo_gpu *gpu, char **err)
{
    gpu->minor = gpu->index; /* the common case: minor numbers follow the index */
    gpu->numa = -1;
    int memory = 0;
    if (field_int(obj, prefix, "minor", 0, "a non-negative integer", &gpu->minor, err) < 0 ||
        field_int(obj, prefix, "memoryMiB", 0, "a non-negative integer", &memory, err) < 0 ||
        field_int(obj, prefix, "numa", -1, "an integer >= -1", &gpu->numa, err) < 0)
        return -1;
    gpu->memory_mib = memory;
    return 0;
}

static int parse_gpu(const cJSON *obj, int pos, struct topo_gpu *gpu, char **err)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "gpus[%d].", pos);
    if (!cJSON_IsObject(obj))
        return strbuf_set_error(err, "gpus[%d]: must be an object", pos);
    if (parse_gpu_index(obj, prefix, pos, err) < 0)
        return -1;
    gpu->index = pos;
    if (parse_gpu_numbers(obj, prefix, gpu, err) < 0 || field_string(obj, prefix, "uuid", &gpu->uuid, err) < 0 ||
        field_string(obj, prefix, "model", &gpu->model, err) < 0)
        return -1;
    return 0;
}

/* Two GPUs with one minor would map two allocations onto one /dev/nvidiaN.
 * Quadratic, but count is at most TOPOLOGY_MAX_GPUS. */
static int check_minors_unique(const struct gpu_topology *t, char **err)
{
    for (int i = 1; i < t->count; i++)
        for (int j = 0; j < i; j++)
            if (t->gpus[i].minor == t->gpus[j].minor)
                return strbuf_set_error(err, "gpus[%d].minor: %d is already used by gpus[%d]", i, t->gpus[i].minor, j);
    return 0;
}

/* Sets count before anything can fail, so topology_free() can release a
 * half-parsed structure (calloc leaves every string NULL). */
static int alloc_arrays(struct gpu_topology *t, int count)
{
    t->gpus = calloc((size_t)count, sizeof(*t->gpus));
    t->links = calloc((size_t)count * (size_t)count, sizeof(*t->links));
    t->count = t->gpus ? count : 0;
    return t->gpus && t->links ? 0 : -1;
}

static int parse_gpus(const cJSON *root, struct gpu_topology *t, char **err)
{
    const cJSON *gpus = NULL;
    if (member(root, "", "gpus", &gpus, err) < 0)
        return -1;
    if (!gpus)
        return strbuf_set_error(err, "gpus: required");
    if (!cJSON_IsArray(gpus))
        return strbuf_set_error(err, "gpus: must be an array");
    int n = cJSON_GetArraySize(gpus);
    if (n == 0)
        return strbuf_set_error(err, "gpus: must not be empty");
    if (n > TOPOLOGY_MAX_GPUS)
        return strbuf_set_error(err, "gpus: %d entries, at most %d are supported", n, TOPOLOGY_MAX_GPUS);
    if (alloc_arrays(t, n) < 0)
        return out_of_memory(err);
    int i = 0;
    const cJSON *gpu;
    cJSON_ArrayForEach(gpu, gpus)
    {
        if (parse_gpu(gpu, i, &t->gpus[i], err) < 0)
            return -1;
        i++;
    }
    return check_minors_unique(t, err);
}

/* --------------------------------------------------------------- links */

/* Without a matrix we know nothing about the interconnect, and SYS (the
 * worst class) keeps placement from preferring pairs on mere assumption. */
static void default_links(struct gpu_topology *t)
{
    for (int i = 0; i < t->count; i++)
        for (int j = 0; j < t->count; j++)
            t->links[i * t->count + j] =
                (struct topo_link){.cls = (uint8_t)(i == j ? TOPO_LINK_SELF : TOPO_LINK_SYS), .nvlinks = 0};
}

static int parse_link_cell(const cJSON *cell, int i, int j, struct topo_link *out, char **err)
{
    if (!cJSON_IsString(cell))
        return strbuf_set_error(err, "links[%d][%d]: must be a string", i, j);
    if (topology_parse_link(cell->valuestring, out) < 0)
        return strbuf_set_error(err, "links[%d][%d]: unknown link \"%.*s\"", i, j, TOKEN_ECHO_MAX, cell->valuestring);
    if (i == j && out->cls != TOPO_LINK_SELF)
        return strbuf_set_error(err, "links[%d][%d]: must be \"X\" on the diagonal", i, j);
    if (i != j && out->cls == TOPO_LINK_SELF)
        return strbuf_set_error(err, "links[%d][%d]: \"X\" is only allowed on the diagonal", i, j);
    return 0;
}

static int parse_link_row(const cJSON *row, int i, struct gpu_topology *t, char **err)
{
    if (!cJSON_IsArray(row))
        return strbuf_set_error(err, "links[%d]: must be an array", i);
    int n = cJSON_GetArraySize(row);
    if (n != t->count)
        return strbuf_set_error(err, "links[%d]: %d %s for %d %s", i, n, plural(n, "entry", "entries"), t->count,
                                plural(t->count, "GPU", "GPUs"));
    int j = 0;
    const cJSON *cell;
    cJSON_ArrayForEach(cell, row)
    {
        if (parse_link_cell(cell, i, j, &t->links[i * t->count + j], err) < 0)
            return -1;
        j++;
    }
    return 0;
}

/* Links are physical and undirected; an asymmetric matrix means the
 * producer is broken, and placement would score a pair differently
 * depending on which GPU it considered first. */
static int check_symmetry(const struct gpu_topology *t, char **err)
{
    for (int i = 0; i < t->count; i++) {
        for (int j = i + 1; j < t->count; j++) {
            struct topo_link a = topology_link(t, i, j), b = topology_link(t, j, i);
            if (a.cls == b.cls && a.nvlinks == b.nvlinks)
                continue;
            char ta[8], tb[8];
            topology_format_link(a, ta, sizeof ta);
            topology_format_link(b, tb, sizeof tb);
            return strbuf_set_error(err,
                                    "links[%d][%d] is %s but links[%d][%d] is %s: "
                                    "the matrix must be symmetric",
                                    i, j, ta, j, i, tb);
        }
    }
    return 0;
}

static int parse_links(const cJSON *root, struct gpu_topology *t, char **err)
{
    const cJSON *links = NULL;
    if (member(root, "", "links", &links, err) < 0)
        return -1;
    if (!links) {
        default_links(t);
        return 0;
    }
    if (!cJSON_IsArray(links))
        return strbuf_set_error(err, "links: must be an array");
    int rows = cJSON_GetArraySize(links);
    if (rows != t->count)
        return strbuf_set_error(err, "links: %d %s for %d %s", rows, plural(rows, "row", "rows"), t->count,
                                plural(t->count, "GPU", "GPUs"));
    int i = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, links)
    {
        if (parse_link_row(row, i, t, err) < 0)
            return -1;
        i++;
    }
    return check_symmetry(t, err);
}

/* --------------------------------------------------------------- parse */

struct gpu_topology *topology_from_json(const cJSON *value, char **err)
{
    if (err)
        *err = NULL;
    if (!value) {
        strbuf_set_error(err, "annotation: missing");
        return NULL;
    }
    if (!cJSON_IsObject(value)) {
        strbuf_set_error(err, "annotation: must be a JSON object");
        return NULL;
    }
    struct gpu_topology *t = calloc(1, sizeof(*t));
    if (!t) {
        out_of_memory(err);
        return NULL;
    }
    /* Unknown keys are ignored so that a newer agent can add fields
     * without breaking older extenders; incompatible changes bump version. */
    if (parse_version(value, t, err) < 0 || parse_gpus(value, t, err) < 0 || parse_links(value, t, err) < 0) {
        topology_free(t);
        return NULL;
    }
    return t;
}

struct gpu_topology *topology_parse(const char *text, char **err)
{
    if (err)
        *err = NULL;
    if (!text) {
        strbuf_set_error(err, "annotation: missing");
        return NULL;
    }
    /* ParseWithOpts reports the error position through `end` rather than
     * cJSON's global error pointer, which is not thread-safe. */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        strbuf_set_error(err, "annotation: not valid JSON (at byte %td)", end ? end - text : (ptrdiff_t)0);
        return NULL;
    }
    struct gpu_topology *t = topology_from_json(root, err);
    cJSON_Delete(root);
    return t;
}

void topology_free(struct gpu_topology *topo)
{
    if (!topo)
        return;
    for (int i = 0; topo->gpus && i < topo->count; i++) {
        free(topo->gpus[i].uuid);
        free(topo->gpus[i].model);
    }
    free(topo->gpus);
    free(topo->links);
    free(topo);
}

/* ----------------------------------------------------------- serialise */

/* Takes ownership of item in every case, so callers need no cleanup path
 * of their own: cJSON_AddItemToArray leaves a rejected item with us. */
static int append(cJSON *array, cJSON *item)
{
    if (!item)
        return -1;
    if (!cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* Adds a string member unless s is NULL (absent fields are omitted). */
static int add_opt_string(cJSON *obj, const char *key, const char *s)
{
    return !s || cJSON_AddStringToObject(obj, key, s) ? 0 : -1;
}

/* Key order matches the documented format, which keeps annotations written
 * by us byte-identical to those written by the node agent. */
static int fill_gpu(cJSON *obj, const struct topo_gpu *gpu)
{
    if (!cJSON_AddNumberToObject(obj, "index", gpu->index) || !cJSON_AddNumberToObject(obj, "minor", gpu->minor) ||
        add_opt_string(obj, "uuid", gpu->uuid) < 0 || add_opt_string(obj, "model", gpu->model) < 0 ||
        !cJSON_AddNumberToObject(obj, "memoryMiB", (double)gpu->memory_mib) ||
        !cJSON_AddNumberToObject(obj, "numa", gpu->numa))
        return -1;
    return 0;
}

static int add_gpus(cJSON *root, const struct gpu_topology *t)
{
    cJSON *gpus = cJSON_AddArrayToObject(root, "gpus");
    if (!gpus)
        return -1;
    for (int i = 0; i < t->count; i++) {
        cJSON *obj = cJSON_CreateObject();
        if (append(gpus, obj) < 0 || fill_gpu(obj, &t->gpus[i]) < 0)
            return -1;
    }
    return 0;
}

static int add_link_row(cJSON *links, const struct gpu_topology *t, int i)
{
    cJSON *row = cJSON_CreateArray();
    if (append(links, row) < 0)
        return -1;
    for (int j = 0; j < t->count; j++) {
        char token[8];
        topology_format_link(topology_link(t, i, j), token, sizeof token);
        if (append(row, cJSON_CreateString(token)) < 0)
            return -1;
    }
    return 0;
}

static int add_links(cJSON *root, const struct gpu_topology *t)
{
    cJSON *links = cJSON_AddArrayToObject(root, "links");
    if (!links)
        return -1;
    for (int i = 0; i < t->count; i++)
        if (add_link_row(links, t, i) < 0)
            return -1;
    return 0;
}

cJSON *topology_to_json(const struct gpu_topology *topo)
{
    if (!topo || topo->count <= 0 || !topo->gpus || !topo->links)
        return NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    /* Everything hangs off root as soon as it is created, so one delete
     * cleans up after a failure at any depth. */
    if (!cJSON_AddNumberToObject(root, "version", topo->version) || add_gpus(root, topo) < 0 ||
        add_links(root, topo) < 0) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

char *topology_serialize(const struct gpu_topology *topo)
{
    cJSON *root = topology_to_json(topo);
    if (!root)
        return NULL;
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

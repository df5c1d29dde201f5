/* support.c - fixtures, cache setup and builders for the unit tests. See support.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/support.h"
#include "lib/strbuf.h"

char *q(const char *text)
{
    char *json = strdup(text);
    assert_non_null(json);
    for (char *c = json; *c; c++)
        if (*c == '\'')
            *c = '"';
    return json;
}

cJSON *json_of(const char *fixture)
{
    char *text = q(fixture);
    cJSON *v = cJSON_Parse(text);
    if (!v)
        fail_msg("fixture is not JSON: %s", text);
    free(text);
    return v;
}

void fmt(char *buf, size_t size, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, size, f, ap);
    va_end(ap);
    if (n <= 0 || (size_t)n >= size)
        fail_msg("fixture does not fit in %zu bytes: %s", size, f);
}

int cache_setup(void **state)
{
    struct cluster_cache *c = malloc(sizeof(*c));
    struct cache_config cfg = {.assume_ttl_ns = 60 * SEC};
    if (!c || cache_init(c, &cfg) != 0) {
        free(c);
        return -1;
    }
    *state = c;
    return 0;
}

int cache_teardown(void **state)
{
    cache_destroy(*state);
    free(*state);
    return 0;
}

struct pod_info *pod_of(const char *fixture)
{
    cJSON *obj = json_of(fixture);
    char *err = (char *)"untouched";
    struct pod_info *p = pod_info_from_json(obj, &err);
    if (!p)
        fail_msg("pod_info_from_json: %s", err ? err : "(null)");
    assert_null(err);
    cJSON_Delete(obj);
    return p;
}

void add_node(struct cluster_cache *c, const char *fixture)
{
    cJSON *obj = json_of(fixture);
    char *err = NULL;
    struct node_spec *spec = node_spec_from_json(obj, &err);
    if (!spec)
        fail_msg("node_spec_from_json: %s", err ? err : "(null)");
    cJSON_Delete(obj);
    assert_int_equal(cache_apply_node(c, spec), 0);
}

void add_pod(struct cluster_cache *c, const char *fixture, int64_t now)
{
    assert_int_equal(cache_apply_pod(c, pod_of(fixture), now), 0);
}

static void add_shared_node(struct cluster_cache *c, const char *name, const char *core, const char *mem, int gpus,
                            int mem_per_gpu)
{
    char buf[512];
    fmt(buf, sizeof(buf), "{'kind':'Node','metadata':{'name':'%s'},'status':{'allocatable':{'%s':'%d','%s':'%d'}}}",
        name, core, gpus * 100, mem, gpus * mem_per_gpu);
    add_node(c, buf);
}

void add_vcuda_node(struct cluster_cache *c, const char *name, int gpus, int mem_per_gpu)
{
    add_shared_node(c, name, RES_VCUDA_CORE, RES_VCUDA_MEMORY, gpus, mem_per_gpu);
}

void add_mps_node(struct cluster_cache *c, const char *name, int gpus, int mem_per_gpu)
{
    add_shared_node(c, name, RES_MPS_CORE, RES_MPS_MEMORY, gpus, mem_per_gpu);
}

char *source_text(const char *relpath)
{
    const char *root = getenv("GQA_SOURCE_DIR");
    char path[4096];
    fmt(path, sizeof(path), "%s/%s", root ? root : ".", relpath);
    struct strbuf sb;
    strbuf_init(&sb);
    if (strbuf_read_file(&sb, path) != 0)
        fail_msg("%s is not readable (set GQA_SOURCE_DIR to the repository root)", path);
    char *text = strbuf_detach(&sb, NULL);
    if (!text)
        fail_msg("%s: out of memory", path);
    return text;
}

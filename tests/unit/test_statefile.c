/* test_statefile.c - unit tests for extender/statefile.c: the bundled demo
 * state, the streaming JSON path, and the error messages of bad files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "family_names.h"
#include "cluster/cache.h"
#include "cluster/statefile.h"
#include "lib/yamljson.h"

static int setup(void **state)
{
    struct cluster_cache *c = malloc(sizeof(*c));
    struct cache_config cfg = {.assume_ttl_ns = 60LL * 1000000000LL};
    if (!c || cache_init(c, &cfg) != 0)
        return -1;
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    cache_destroy(*state);
    free(*state);
    return 0;
}

static char *demo_path(void)
{
    const char *root = getenv("GQA_SOURCE_DIR");
    if (!root)
        root = ".";
    size_t n = strlen(root) + 64;
    char *path = malloc(n);
    assert_non_null(path);
    snprintf(path, n, "%s/examples/demo-state.yaml", root);
    if (access(path, R_OK) != 0)
        fail_msg("%s is not readable (set GQA_SOURCE_DIR to the repository root)", path);
    return path;
}

/* A temporary file with the given content; the caller unlinks and frees it. */
static char *temp_file(const char *suffix, const char *content, size_t len)
{
    char *path = malloc(64);
    assert_non_null(path);
    snprintf(path, 64, "/tmp/gqa-statefile-XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(content, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void remove_temp(char *path)
{
    unlink(path);
    free(path);
}

/* Load text from a temp file into c; returns statefile_load's result. */
static int load_text(struct cluster_cache *c, const char *suffix, const char *text, struct state_counts *counts,
                     char **err, char **path_out)
{
    char *path = temp_file(suffix, text, strlen(text));
    *err = NULL;
    int rc = statefile_load(c, path, counts, err);
    if (path_out)
        *path_out = path;
    else
        remove_temp(path);
    return rc;
}

/* ---- inspect-style reads -------------------------------------------------- */

static const struct node_state *node_of(struct cluster_cache *c, const char *name)
{
    const struct node_state *n = cache_find_node(c, name);
    if (!n)
        fail_msg("node %s is not in the cache", name);
    assert_true(n->present);
    return n;
}

/* The pods /inspect lists for a GPU slot (or, slot -1, as unattributed), joined by ",". */
static void pods_on(const struct node_state *n, int slot, char *out, size_t size)
{
    out[0] = '\0';
    /* Sorted so that the order of the charged list does not matter. */
    const char *keys[64];
    int count = 0;
    for (const struct pod_entry *e = n->charged; e; e = e->node_next) {
        bool hit = slot < 0 && e->unattributed.pods > 0;
        for (int i = 0; i < e->nslots && slot >= 0; i++)
            hit = hit || e->slots[i].slot == slot;
        if (hit && count < 64)
            keys[count++] = e->info->key;
    }
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    for (int i = 0; i < count; i++) {
        strncat(out, i ? "," : "", size - strlen(out) - 1);
        strncat(out, keys[i], size - strlen(out) - 1);
    }
}

static void expect_gpu(struct cluster_cache *c, const char *node, int slot, int64_t cores, int64_t mem_used,
                       int64_t mem_total, const char *pods)
{
    const struct node_state *n = node_of(c, node);
    assert_true(slot < n->gpu_count);
    const struct gpu_state *g = &n->gpus[slot];
    bool mps = node_spec_offer(n->spec, GPU_FAMILY_VCUDA) == 0 && node_spec_offer(n->spec, GPU_FAMILY_MPS) > 0;
    int64_t used = mps ? g->mem_used[POOL_MPS] : g->mem_used[POOL_VCUDA], total = mps ? g->mem_total[POOL_MPS] : g->mem_total[POOL_VCUDA];
    char list[512];
    pods_on(n, slot, list, sizeof(list));
    if (g->core_used != cores || used != mem_used || total != mem_total || strcmp(list, pods) != 0)
        fail_msg("%s GPU %d: coreUsed %" PRId64 " memory %" PRId64 "/%" PRId64 " pods [%s]; expected %" PRId64
                 " %" PRId64 "/%" PRId64 " [%s]",
                 node, slot, g->core_used, used, total, list, cores, mem_used, mem_total, pods);
}

static void expect_demo_occupancy(struct cluster_cache *c)
{
    assert_int_equal(c->present_nodes, 4);
    assert_int_equal(dict_size(&c->nodes), 4);
    assert_int_equal(dict_size(&c->pods), 7);
    assert_int_equal(dict_size(&c->configmaps), 1);
    assert_non_null(dict_get(&c->configmaps, "kube-public/cf-crl-gpu-manager-vcuda-core"));

    /* gpu-a100-0: 8 GPUs of 80 GiB = 320 blocks each. */
    const struct node_state *a100 = node_of(c, "gpu-a100-0");
    assert_int_equal(a100->gpu_count, 8);
    assert_non_null(a100->spec->topology);
    expect_gpu(c, "gpu-a100-0", 0, 80, 140, 320, "team-a/inference-1,team-a/notebook-1");
    expect_gpu(c, "gpu-a100-0", 1, 0, 0, 320, "");
    expect_gpu(c, "gpu-a100-0", 2, 100, 320, 320, "team-b/trainer-1");
    expect_gpu(c, "gpu-a100-0", 3, 100, 320, 320, "team-b/trainer-1");
    for (int s = 4; s < 8; s++)   /* GPU 7 was finished-1's: Succeeded holds nothing */
        expect_gpu(c, "gpu-a100-0", s, 0, 0, 320, "");
    assert_int_equal(a100->unattributed.cores, 20);
    assert_int_equal(a100->unattributed.mem[POOL_VCUDA], 20);
    assert_int_equal(a100->unattributed.mem[POOL_MPS], 0);
    assert_int_equal(a100->unattributed.pods, 1);
    char list[256];
    pods_on(a100, -1, list, sizeof(list));
    assert_string_equal(list, "team-c/legacy-1");
    assert_int_equal(a100->charged_count, 4);
    const struct pod_entry *fin = cache_find_pod(c, "team-a/finished-1");
    assert_non_null(fin);
    assert_true(fin->info->terminal);
    assert_null(fin->node);

    /* gpu-t4-0: MPS, 60 units over 4 GPUs. */
    const struct node_state *t4 = node_of(c, "gpu-t4-0");
    assert_int_equal(t4->gpu_count, 4);
    expect_gpu(c, "gpu-t4-0", 0, 0, 0, 15, "");
    expect_gpu(c, "gpu-t4-0", 1, 50, 8, 15, "team-b/mps-worker-1");
    expect_gpu(c, "gpu-t4-0", 2, 0, 0, 15, "");
    expect_gpu(c, "gpu-t4-0", 3, 0, 0, 15, "");
    assert_int_equal(t4->unattributed.pods, 0);
    assert_int_equal(t4->gpus[2].numa, 1);

    /* gpu-v100-0: whole GPUs 0 and 3. */
    const struct node_state *v100 = node_of(c, "gpu-v100-0");
    assert_int_equal(v100->gpu_count, 8);
    for (int s = 0; s < 8; s++)
        expect_gpu(c, "gpu-v100-0", s, s == 0 || s == 3 ? 100 : 0, 0, 0, s == 0 || s == 3 ? "team-b/resnet-1" : "");
    assert_int_equal(v100->unattributed.pods, 0);

    /* cpu-0: no GPUs. */
    const struct node_state *cpu = node_of(c, "cpu-0");
    assert_int_equal(cpu->gpu_count, 0);
    assert_null(cpu->charged);
}

static void test_demo_yaml(void **state)
{
    struct cluster_cache *c = *state;
    char *path = demo_path();
    struct state_counts counts;
    char *err = NULL;
    if (statefile_load(c, path, &counts, &err) != 0)
        fail_msg("load failed: %s", err ? err : "(null)");
    assert_null(err);
    assert_int_equal(counts.nodes, 4);
    assert_int_equal(counts.pods, 7);
    assert_int_equal(counts.configmaps, 1);
    assert_int_equal(counts.skipped, 0);
    expect_demo_occupancy(c);
    free(path);
}

/* The demo converted to a JSON List goes through the streaming path. */
static char *demo_as_json(bool pretty)
{
    char *path = demo_path();
    size_t len;
    char *err = NULL;
    char *yaml = read_whole_file(path, &len, &err);
    assert_non_null(yaml);
    cJSON *v = yaml_to_json(yaml, len, &err);
    if (!v)
        fail_msg("demo YAML: %s", err);
    char *json = pretty ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
    assert_non_null(json);
    cJSON_Delete(v);
    free(yaml);
    free(path);
    return json;
}

static void test_demo_json_stream(void **state)
{
    struct cluster_cache *c = *state;
    for (int pretty = 0; pretty < 2; pretty++) {
        char *json = demo_as_json(pretty);
        assert_int_equal(json[0], '{');
        struct state_counts counts;
        char *err;
        if (load_text(c, ".json", json, &counts, &err, NULL) != 0)
            fail_msg("load failed: %s", err ? err : "(null)");
        assert_null(err);
        assert_int_equal(counts.nodes, 4);
        assert_int_equal(counts.pods, 7);
        assert_int_equal(counts.configmaps, 1);
        assert_int_equal(counts.skipped, 0);
        /* Loading the same state twice (pretty after compact) counts nothing twice. */
        expect_demo_occupancy(c);
        free(json);
    }
}

static void test_demo_json_items_first(void **state)
{
    struct cluster_cache *c = *state;
    /* items before kind/metadata, with more keys after: still streamed. */
    char *json = demo_as_json(false);
    cJSON *v = cJSON_Parse(json);
    free(json);
    cJSON *items = cJSON_DetachItemFromObjectCaseSensitive(v, "items");
    char *items_text = cJSON_PrintUnformatted(items);
    size_t n = strlen(items_text) + 128;
    char *text = malloc(n);
    snprintf(text, n, " \n{\"items\": %s, \"kind\": \"List\", \"metadata\": {\"x\": [1, {}]}}\n", items_text);
    struct state_counts counts;
    char *err;
    if (load_text(c, ".json", text, &counts, &err, NULL) != 0)
        fail_msg("load failed: %s", err ? err : "(null)");
    assert_int_equal(counts.pods, 7);
    expect_demo_occupancy(c);
    free(text);
    free(items_text);
    cJSON_Delete(items);
    cJSON_Delete(v);
}

/* ---- other shapes --------------------------------------------------------- */

static const char NODE_YAML[] = "apiVersion: v1\n"
                                "kind: Node\n"
                                "metadata:\n"
                                "  name: solo\n"
                                "status:\n"
                                "  capacity:\n"
                                "    nvidia.com/gpu: 2\n";

static void test_single_object_and_documents(void **state)
{
    struct cluster_cache *c = *state;
    struct state_counts counts;
    char *err;
    assert_int_equal(load_text(c, ".yaml", NODE_YAML, &counts, &err, NULL), 0);
    assert_int_equal(counts.nodes, 1);
    assert_int_equal(node_of(c, "solo")->gpu_count, 2);

    /* Several documents, one of them a PodList, one empty. */
    const char *docs = "---\n"
                       "kind: Pod\n"
                       "metadata: {name: a, namespace: t}\n"
                       "spec:\n"
                       "  nodeName: solo\n"
                       "  containers:\n"
                       "  - name: c\n"
                       "    resources: {limits: {nvidia.com/gpu: 1}}\n"
                       "---\n"
                       "---\n"
                       "kind: PodList\n"
                       "items:\n"
                       "- kind: Pod\n"
                       "  metadata: {name: b, namespace: t, annotations: {gpu-admission.io/gpu-idx-0: '1'}}\n"
                       "  spec: {nodeName: solo, containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
                       "- kind: Secret\n"
                       "  metadata: {name: s}\n";
    assert_int_equal(load_text(c, ".yaml", docs, &counts, &err, NULL), 0);
    assert_int_equal(counts.nodes, 0);
    assert_int_equal(counts.pods, 2);
    assert_int_equal(counts.skipped, 1);
    const struct node_state *n = node_of(c, "solo");
    assert_int_equal(n->gpus[1].core_used, 100);
    assert_int_equal(n->unattributed.cores, 100);

    /* A single JSON object and a JSON array of objects. */
    assert_int_equal(load_text(c, ".json",
                               "{\"kind\":\"Node\",\"metadata\":{\"name\":\"j1\"},"
                               "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"1\"}}}",
                               &counts, &err, NULL),
                     0);
    assert_int_equal(counts.nodes, 1);
    assert_int_equal(load_text(c, ".json",
                               "[{\"kind\":\"Node\",\"metadata\":{\"name\":\"j2\"}},"
                               "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"namespace\":\"x\"}}]",
                               &counts, &err, NULL),
                     0);
    assert_int_equal(counts.nodes, 1);
    assert_int_equal(counts.configmaps, 1);
    assert_int_equal(c->present_nodes, 3);
}

static void test_unknown_kinds_skipped(void **state)
{
    struct cluster_cache *c = *state;
    const char *yaml = "kind: List\n"
                       "items:\n"
                       "- kind: Service\n"
                       "  metadata: {name: s}\n"
                       "- kind: Node\n"
                       "  metadata: {name: node1}\n"
                       "- kind: Deployment\n"
                       "  metadata: {name: d}\n"
                       "- metadata: {name: nokind}\n";
    struct state_counts counts;
    char *err;
    assert_int_equal(load_text(c, ".yaml", yaml, &counts, &err, NULL), 0);
    assert_int_equal(counts.nodes, 1);
    assert_int_equal(counts.pods, 0);
    assert_int_equal(counts.configmaps, 0);
    assert_int_equal(counts.skipped, 3);
    assert_int_equal(dict_size(&c->nodes), 1);

    const char *json = "{\"kind\":\"List\",\"items\":[{\"kind\":\"Event\",\"metadata\":{\"name\":\"e\"}},"
                       "{\"kind\":\"Lease\"}]}";
    assert_int_equal(load_text(c, ".json", json, &counts, &err, NULL), 0);
    assert_int_equal(counts.skipped, 2);
    assert_int_equal(counts.nodes + counts.pods + counts.configmaps, 0);
}

/* ---- errors --------------------------------------------------------------- */

static void expect_load_error(struct cluster_cache *c, const char *suffix, const char *text, const char *message)
{
    struct state_counts counts;
    char *err, *path;
    if (load_text(c, suffix, text, &counts, &err, &path) == 0)
        fail_msg("accepted: %s", text);
    assert_non_null(err);
    char expected[512];
    snprintf(expected, sizeof(expected), "%s: %s", path, message);
    if (strcmp(err, expected) != 0)
        fail_msg("error: %s\nexpected: %s", err, expected);
    free(err);
    remove_temp(path);
}

static void test_bad_item(void **state)
{
    struct cluster_cache *c = *state;
    expect_load_error(c, ".yaml",
                      "kind: List\n"
                      "items:\n"
                      "- kind: Node\n"
                      "  metadata: {name: ok}\n"
                      "- kind: Service\n"
                      "  metadata: {name: s}\n"
                      "- kind: Pod\n"
                      "  metadata: {namespace: t}\n",
                      "item 2 (Pod): pod has no metadata.name");
    expect_load_error(c, ".json",
                      "{\"kind\":\"List\",\"items\":[{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}},"
                      "{\"kind\":\"Node\",\"metadata\":{}}]}",
                      "item 1 (Node): node has no metadata.name");
    expect_load_error(c, ".json", "[{\"kind\":\"ConfigMap\",\"metadata\":{}}]",
                      "item 0 (ConfigMap): configmap has no metadata.name");
    /* Items counted across documents. */
    expect_load_error(c, ".yaml",
                      "kind: Node\nmetadata: {name: a}\n---\nkind: List\nitems:\n- kind: Node\n  metadata: {name: b}\n"
                      "- kind: Node\n",
                      "item 2 (Node): node has no metadata.name");
    expect_load_error(c, ".yaml", "- 1\n- 2\n", "expected a Kubernetes object or a kind: List");
}

static void test_syntax_errors(void **state)
{
    struct cluster_cache *c = *state;
    struct state_counts counts;
    char *err, *path;
    assert_int_equal(load_text(c, ".yaml", "kind: List\nitems:\n- kind: Node\n  metadata: {name: [x}\n", &counts,
                               &err, &path),
                     -1);
    assert_non_null(err);
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%s: line 4, column ", path);
    if (strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("error: %s", err);
    free(err);
    remove_temp(path);

    assert_int_equal(load_text(c, ".yaml", "kind: List\n  bad: indent\n", &counts, &err, &path), -1);
    snprintf(prefix, sizeof(prefix), "%s: line 2, column ", path);
    if (strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("error: %s", err);
    free(err);
    remove_temp(path);

    /* JSON broken inside the items: the byte offset. */
    const char *json = "{\"kind\":\"List\",\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}},{\"kind\":}]}";
    expect_load_error(c, ".json", json, "malformed JSON at byte 72: expected a value");
    expect_load_error(c, ".json", "{\"kind\":\"List\",\"items\":[]} trailing",
                      "malformed JSON at byte 27: unexpected data after the top-level value");
    expect_load_error(c, ".json", "{\"kind\":\"Node\",", "malformed JSON at byte 15: unexpected end of input");

    /* A missing file. */
    err = NULL;
    assert_int_equal(statefile_load(c, "/nonexistent/state.yaml", &counts, &err), -1);
    assert_string_equal(err, "/nonexistent/state.yaml: No such file or directory");
    free(err);
}

static void test_parse_object_text(void **state)
{
    (void)state;
    char *err = NULL;
    cJSON *v = parse_object_text("{\"kind\":\"Pod\"}", 14, &err);
    assert_non_null(v);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(v, "kind")->valuestring, "Pod");
    cJSON_Delete(v);
    v = parse_object_text("kind: Pod\nmetadata:\n  name: x\n", 29, &err);
    assert_non_null(v);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "metadata"), "name")->valuestring, "x");
    cJSON_Delete(v);
    err = NULL;
    assert_null(parse_object_text("{\"kind\":", 8, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "malformed JSON (and not YAML either: line "));
    free(err);
    err = NULL;
    v = parse_object_text("{kind: Pod, metadata: {name: flow}}", 35, &err);
    assert_non_null(v);   /* flow-style YAML starts like JSON */
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "metadata"), "name")->valuestring, "flow");
    cJSON_Delete(v);
    assert_null(parse_object_text("a: [\n", 5, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "line "));
    free(err);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_demo_yaml),
        T(test_demo_json_stream),
        T(test_demo_json_items_first),
        T(test_single_object_and_documents),
        T(test_unknown_kinds_skipped),
        T(test_bad_item),
        T(test_syntax_errors),
        T(test_parse_object_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

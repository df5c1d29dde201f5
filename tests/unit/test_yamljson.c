/*
 * test_yamljson.c - YAML to cJSON conversion, checked against what
 * sigs.k8s.io/yaml produces for the same Kubernetes YAML.
 */
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/yamljson.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static cJSON *parse_ok(const char *yaml)
{
    char *err = NULL;
    cJSON *j = yaml_to_json(yaml, strlen(yaml), &err);
    if (!j)
        fail_msg("unexpected error: %s", err ? err : "(no message)");
    assert_null(err);
    return j;
}

/* Returns the malloc'd error message; the conversion must have failed. */
static char *parse_err(const char *yaml)
{
    char *err = NULL;
    cJSON *j = yaml_to_json(yaml, strlen(yaml), &err);
    if (j) {
        char *s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        fail_msg("expected an error, got %s", s ? s : "?");
    }
    assert_non_null(err);
    return err;
}

static void expect_error(const char *yaml, const char *message)
{
    char *err = parse_err(yaml);
    assert_string_equal(err, message);
    free(err);
}

/* Walk a path of member names; "#N" selects element N of an array. */
static const cJSON *at(const cJSON *node, ...)
{
    va_list ap;
    va_start(ap, node);
    for (const char *step = va_arg(ap, const char *); step; step = va_arg(ap, const char *)) {
        const cJSON *next = step[0] == '#'
            ? cJSON_GetArrayItem(node, atoi(step + 1))
            : cJSON_GetObjectItemCaseSensitive(node, step);
        if (!next)
            fail_msg("no '%s' in path", step);
        node = next;
    }
    va_end(ap);
    return node;
}

static void is_str(const cJSON *node, const char *want)
{
    assert_non_null(node);
    if (!cJSON_IsString(node))
        fail_msg("expected string \"%s\", got type %d", want, node->type);
    assert_string_equal(node->valuestring, want);
}

static void is_num(const cJSON *node, double want)
{
    assert_non_null(node);
    if (!cJSON_IsNumber(node))
        fail_msg("expected number %.17g, got type %d", want, node->type);
    if (node->valuedouble != want)
        fail_msg("expected %.17g, got %.17g", want, node->valuedouble);
}

static void is_bool(const cJSON *node, int want)
{
    assert_non_null(node);
    assert_true(want ? cJSON_IsTrue(node) : cJSON_IsFalse(node));
}

/* ------------------------------------------------------------------------ */
/* kubectl get nodes,pods,configmaps -A -o yaml                              */

static const char kubectl_list[] =
    "apiVersion: v1\n"
    "items:\n"
    "- apiVersion: v1\n"
    "  kind: Node\n"
    "  metadata:\n"
    "    annotations:\n"
    "      gqa.example.com/gpu-topology: '{\"gpus\":[{\"index\":0,\"numa\":0,\"nvlink\":[1,2,3]},"
    "{\"index\":1,\"numa\":1,\"nvlink\":[0]}],\"version\":2}'\n"
    "      node.alpha.kubernetes.io/ttl: \"0\"\n"
    "      volumes.kubernetes.io/controller-managed-attach-detach: \"true\"\n"
    "    creationTimestamp: \"2024-05-01T10:00:00Z\"\n"
    "    labels:\n"
    "      kubernetes.io/hostname: gpu-node-1\n"
    "      nvidia.com/gpu.count: \"8\"\n"
    "      nvidia.com/gpu.present: \"true\"\n"
    "    name: gpu-node-1\n"
    "    resourceVersion: \"123456789\"\n"
    "    uid: 6f1c2a3e-0b1d-4c5e-9f00-1234567890ab\n"
    "  spec:\n"
    "    podCIDR: 10.244.1.0/24\n"
    "    taints:\n"
    "    - effect: NoSchedule\n"
    "      key: nvidia.com/gpu\n"
    "      value: present\n"
    "    unschedulable: false\n"
    "  status:\n"
    "    allocatable:\n"
    "      cpu: 63500m\n"
    "      ephemeral-storage: \"1798509083246\"\n"
    "      memory: 515879Mi\n"
    "      nvidia.com/gpu: \"8\"\n"
    "      pods: \"110\"\n"
    "    capacity:\n"
    "      cpu: \"64\"\n"
    "      memory: 528352448Ki\n"
    "      nvidia.com/gpu: \"8\"\n"
    "    conditions:\n"
    "    - lastHeartbeatTime: \"2024-05-02T08:00:00Z\"\n"
    "      message: kubelet is posting ready status\n"
    "      reason: KubeletReady\n"
    "      status: \"True\"\n"
    "      type: Ready\n"
    "    nodeInfo:\n"
    "      kubeletVersion: v1.29.4\n"
    "- apiVersion: v1\n"
    "  kind: Pod\n"
    "  metadata:\n"
    "    annotations:\n"
    "      gqa.example.com/assigned-gpus: '[0,1,2,3,4,5,6,7]'\n"
    "      kubectl.kubernetes.io/last-applied-configuration: |\n"
    "        {\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"trainer-0\","
    "\"namespace\":\"ml\"},\"spec\":{\"containers\":[{\"image\":\"trainer:1.4\",\"name\":\"trainer\"}]}}\n"
    "    creationTimestamp: \"2024-05-02T07:59:00Z\"\n"
    "    labels:\n"
    "      app: trainer\n"
    "      team: \"42\"\n"
    "    name: trainer-0\n"
    "    namespace: ml\n"
    "    ownerReferences:\n"
    "    - apiVersion: batch/v1\n"
    "      blockOwnerDeletion: true\n"
    "      controller: true\n"
    "      kind: Job\n"
    "      name: trainer\n"
    "  spec:\n"
    "    containers:\n"
    "    - args:\n"
    "      - --epochs=10\n"
    "      - --lr\n"
    "      - \"0.001\"\n"
    "      env:\n"
    "      - name: WORLD_SIZE\n"
    "        value: \"8\"\n"
    "      image: registry.example.com/trainer:1.4\n"
    "      name: trainer\n"
    "      ports:\n"
    "      - containerPort: 8080\n"
    "        protocol: TCP\n"
    "      resources:\n"
    "        limits:\n"
    "          cpu: 500m\n"
    "          memory: 1Gi\n"
    "          nvidia.com/gpu: 8\n"
    "        requests:\n"
    "          cpu: 250m\n"
    "          memory: 512Mi\n"
    "          nvidia.com/gpu: 8\n"
    "      securityContext:\n"
    "        runAsNonRoot: true\n"
    "        runAsUser: 1000\n"
    "    enableServiceLinks: true\n"
    "    hostNetwork: false\n"
    "    nodeName: gpu-node-1\n"
    "    nodeSelector:\n"
    "      nvidia.com/gpu.present: \"true\"\n"
    "    priority: 0\n"
    "    schedulerName: gpu-quota-scheduler\n"
    "    terminationGracePeriodSeconds: 30\n"
    "    tolerations:\n"
    "    - effect: NoExecute\n"
    "      key: node.kubernetes.io/not-ready\n"
    "      operator: Exists\n"
    "      tolerationSeconds: 300\n"
    "    volumes:\n"
    "    - configMap:\n"
    "        defaultMode: 420\n"
    "        name: trainer-config\n"
    "      name: config\n"
    "  status:\n"
    "    containerStatuses:\n"
    "    - name: trainer\n"
    "      ready: true\n"
    "      restartCount: 0\n"
    "    hostIP: 192.168.10.21\n"
    "    phase: Running\n"
    "    podIP: 10.244.1.17\n"
    "- apiVersion: v1\n"
    "  data:\n"
    "    config.yaml: |\n"
    "      epochs: 10\n"
    "      learning_rate: 0.001\n"
    "    motd: >\n"
    "      GPU quota is\n"
    "      enforced.\n"
    "    ratio: \"1.5\"\n"
    "    threshold: '0.75'\n"
    "  kind: ConfigMap\n"
    "  metadata:\n"
    "    name: trainer-config\n"
    "    namespace: ml\n"
    "    resourceVersion: \"987\"\n"
    "kind: List\n"
    "metadata:\n"
    "  resourceVersion: \"\"\n";

static void test_kubectl_list_top_level(void **state)
{
    (void)state;
    cJSON *list = parse_ok(kubectl_list);
    is_str(at(list, "apiVersion", NULL), "v1");
    is_str(at(list, "kind", NULL), "List");
    is_str(at(list, "metadata", "resourceVersion", NULL), "");
    assert_int_equal(cJSON_GetArraySize(at(list, "items", NULL)), 3);
    is_str(at(list, "items", "#0", "kind", NULL), "Node");
    is_str(at(list, "items", "#1", "kind", NULL), "Pod");
    is_str(at(list, "items", "#2", "kind", NULL), "ConfigMap");
    /* Members keep document order. */
    assert_string_equal(list->child->string, "apiVersion");
    assert_string_equal(list->child->next->string, "items");
    cJSON_Delete(list);
}

static void test_kubectl_list_node(void **state)
{
    (void)state;
    cJSON *list = parse_ok(kubectl_list);
    const cJSON *node = at(list, "items", "#0", NULL);
    const cJSON *ann = at(node, "metadata", "annotations", NULL);
    is_str(at(ann, "node.alpha.kubernetes.io/ttl", NULL), "0");
    is_str(at(ann, "volumes.kubernetes.io/controller-managed-attach-detach", NULL), "true");
    /* A JSON document inside an annotation arrives intact and parses. */
    const cJSON *topo_text = at(ann, "gqa.example.com/gpu-topology", NULL);
    assert_true(cJSON_IsString(topo_text));
    cJSON *topo = cJSON_Parse(topo_text->valuestring);
    assert_non_null(topo);
    is_num(at(topo, "gpus", "#0", "nvlink", "#2", NULL), 3);
    is_num(at(topo, "gpus", "#1", "numa", NULL), 1);
    is_num(at(topo, "version", NULL), 2);
    cJSON_Delete(topo);

    is_str(at(node, "metadata", "labels", "nvidia.com/gpu.count", NULL), "8");
    is_str(at(node, "metadata", "labels", "nvidia.com/gpu.present", NULL), "true");
    is_str(at(node, "metadata", "creationTimestamp", NULL), "2024-05-01T10:00:00Z");
    is_str(at(node, "metadata", "resourceVersion", NULL), "123456789");
    is_str(at(node, "metadata", "uid", NULL), "6f1c2a3e-0b1d-4c5e-9f00-1234567890ab");
    is_str(at(node, "spec", "podCIDR", NULL), "10.244.1.0/24");
    is_str(at(node, "spec", "taints", "#0", "key", NULL), "nvidia.com/gpu");
    is_bool(at(node, "spec", "unschedulable", NULL), 0);
    const cJSON *alloc = at(node, "status", "allocatable", NULL);
    is_str(at(alloc, "cpu", NULL), "63500m");
    is_str(at(alloc, "memory", NULL), "515879Mi");
    is_str(at(alloc, "ephemeral-storage", NULL), "1798509083246");
    is_str(at(alloc, "nvidia.com/gpu", NULL), "8");
    is_str(at(alloc, "pods", NULL), "110");
    is_str(at(node, "status", "capacity", "cpu", NULL), "64");
    is_str(at(node, "status", "capacity", "memory", NULL), "528352448Ki");
    is_str(at(node, "status", "conditions", "#0", "status", NULL), "True");
    is_str(at(node, "status", "conditions", "#0", "message", NULL),
                  "kubelet is posting ready status");
    is_str(at(node, "status", "nodeInfo", "kubeletVersion", NULL), "v1.29.4");
    cJSON_Delete(list);
}

static void test_kubectl_list_pod(void **state)
{
    (void)state;
    cJSON *list = parse_ok(kubectl_list);
    const cJSON *pod = at(list, "items", "#1", NULL);
    const cJSON *ann = at(pod, "metadata", "annotations", NULL);
    is_str(at(ann, "gqa.example.com/assigned-gpus", NULL), "[0,1,2,3,4,5,6,7]");
    const cJSON *applied = at(ann, "kubectl.kubernetes.io/last-applied-configuration", NULL);
    assert_true(cJSON_IsString(applied));
    /* A literal block keeps its final newline. */
    assert_int_equal(applied->valuestring[strlen(applied->valuestring) - 1], '\n');
    cJSON *inner = cJSON_Parse(applied->valuestring);
    assert_non_null(inner);
    is_str(at(inner, "spec", "containers", "#0", "image", NULL), "trainer:1.4");
    cJSON_Delete(inner);

    is_str(at(pod, "metadata", "labels", "team", NULL), "42");
    is_bool(at(pod, "metadata", "ownerReferences", "#0", "controller", NULL), 1);
    const cJSON *c = at(pod, "spec", "containers", "#0", NULL);
    is_str(at(c, "args", "#0", NULL), "--epochs=10");
    is_str(at(c, "args", "#2", NULL), "0.001");
    is_str(at(c, "env", "#0", "value", NULL), "8");
    is_str(at(c, "image", NULL), "registry.example.com/trainer:1.4");
    is_num(at(c, "ports", "#0", "containerPort", NULL), 8080);
    is_str(at(c, "resources", "limits", "cpu", NULL), "500m");
    is_str(at(c, "resources", "limits", "memory", NULL), "1Gi");
    is_num(at(c, "resources", "limits", "nvidia.com/gpu", NULL), 8);
    is_str(at(c, "resources", "requests", "memory", NULL), "512Mi");
    is_num(at(c, "resources", "requests", "nvidia.com/gpu", NULL), 8);
    is_bool(at(c, "securityContext", "runAsNonRoot", NULL), 1);
    is_num(at(c, "securityContext", "runAsUser", NULL), 1000);
    const cJSON *spec = at(pod, "spec", NULL);
    is_bool(at(spec, "enableServiceLinks", NULL), 1);
    is_bool(at(spec, "hostNetwork", NULL), 0);
    is_str(at(spec, "nodeSelector", "nvidia.com/gpu.present", NULL), "true");
    is_num(at(spec, "priority", NULL), 0);
    is_num(at(spec, "terminationGracePeriodSeconds", NULL), 30);
    is_num(at(spec, "tolerations", "#0", "tolerationSeconds", NULL), 300);
    is_num(at(spec, "volumes", "#0", "configMap", "defaultMode", NULL), 420);
    is_bool(at(pod, "status", "containerStatuses", "#0", "ready", NULL), 1);
    is_num(at(pod, "status", "containerStatuses", "#0", "restartCount", NULL), 0);
    is_str(at(pod, "status", "hostIP", NULL), "192.168.10.21");
    is_str(at(pod, "status", "podIP", NULL), "10.244.1.17");
    cJSON_Delete(list);
}

static void test_kubectl_list_configmap(void **state)
{
    (void)state;
    cJSON *list = parse_ok(kubectl_list);
    const cJSON *data = at(list, "items", "#2", "data", NULL);
    is_str(at(data, "config.yaml", NULL), "epochs: 10\nlearning_rate: 0.001\n");
    is_str(at(data, "motd", NULL), "GPU quota is enforced.\n");
    is_str(at(data, "ratio", NULL), "1.5");
    is_str(at(data, "threshold", NULL), "0.75");
    is_str(at(list, "items", "#2", "metadata", "resourceVersion", NULL), "987");
    cJSON_Delete(list);
}

/* ------------------------------------------------------------------------ */
/* Scalar typing                                                            */

enum want { W_NULL, W_TRUE, W_FALSE, W_NUM, W_STR };

struct scalar_case {
    const char *yaml; /* the value, as written after "v: " */
    enum want want;
    double num;       /* for W_NUM */
    const char *str;  /* for W_STR */
};

static const struct scalar_case scalar_cases[] = {
    /* null */
    { "", W_NULL, 0, NULL },
    { "~", W_NULL, 0, NULL },
    { "null", W_NULL, 0, NULL },
    { "Null", W_NULL, 0, NULL },
    { "NULL", W_NULL, 0, NULL },
    /* booleans, YAML 1.1 style as go-yaml v2 reads them */
    { "true", W_TRUE, 0, NULL },
    { "True", W_TRUE, 0, NULL },
    { "TRUE", W_TRUE, 0, NULL },
    { "false", W_FALSE, 0, NULL },
    { "False", W_FALSE, 0, NULL },
    { "FALSE", W_FALSE, 0, NULL },
    { "yes", W_TRUE, 0, NULL },
    { "Yes", W_TRUE, 0, NULL },
    { "no", W_FALSE, 0, NULL },
    { "NO", W_FALSE, 0, NULL },
    { "on", W_TRUE, 0, NULL },
    { "On", W_TRUE, 0, NULL },
    { "off", W_FALSE, 0, NULL },
    { "OFF", W_FALSE, 0, NULL },
    { "y", W_TRUE, 0, NULL },
    { "n", W_FALSE, 0, NULL },
    /* integers */
    { "0", W_NUM, 0, NULL },
    { "8", W_NUM, 8, NULL },
    { "-17", W_NUM, -17, NULL },
    { "+5", W_NUM, 5, NULL },
    { "1_000", W_NUM, 1000, NULL },
    { "0x1F", W_NUM, 31, NULL },
    { "0o17", W_NUM, 15, NULL },
    { "0644", W_NUM, 420, NULL },
    { "0b101", W_NUM, 5, NULL },
    { "08", W_NUM, 8, NULL },
    { "9007199254740992", W_NUM, 9007199254740992.0, NULL },
    { "-9007199254740992", W_NUM, -9007199254740992.0, NULL },
    /* floats */
    { "1.5", W_NUM, 1.5, NULL },
    { "-2.25", W_NUM, -2.25, NULL },
    { ".5", W_NUM, 0.5, NULL },
    { "-.5", W_NUM, -0.5, NULL },
    { "1.", W_NUM, 1.0, NULL },
    { "1e3", W_NUM, 1000, NULL },
    { "6.02E+23", W_NUM, 6.02e23, NULL },
    { "1.20", W_NUM, 1.2, NULL },
    /* strings */
    { "500m", W_STR, 0, "500m" },
    { "1Gi", W_STR, 0, "1Gi" },
    { "1.2.3", W_STR, 0, "1.2.3" },
    { "10.0.0.1", W_STR, 0, "10.0.0.1" },
    { "2024-05-01", W_STR, 0, "2024-05-01" },
    { "2024-05-01T10:00:00Z", W_STR, 0, "2024-05-01T10:00:00Z" },
    { "v1", W_STR, 0, "v1" },
    { "tRUE", W_STR, 0, "tRUE" },
    { "nUll", W_STR, 0, "nUll" },
    { "0x", W_STR, 0, "0x" },
    { "+", W_STR, 0, "+" },
    { "-x", W_STR, 0, "-x" },
    { "1e", W_STR, 0, "1e" },
    { "1:20", W_STR, 0, "1:20" },
    { "hello world", W_STR, 0, "hello world" },
    /* no JSON number for these: kept as written */
    { ".inf", W_STR, 0, ".inf" },
    { "-.Inf", W_STR, 0, "-.Inf" },
    { ".NaN", W_STR, 0, ".NaN" },
    { "1e999", W_STR, 0, "1e999" },
    /* integers a double cannot hold exactly */
    { "9007199254740993", W_STR, 0, "9007199254740993" },
    { "-9007199254740993", W_STR, 0, "-9007199254740993" },
    { "18446744073709551616", W_STR, 0, "18446744073709551616" },
    { "0x20000000000001", W_STR, 0, "0x20000000000001" },
    /* quoted scalars are always strings */
    { "\"8\"", W_STR, 0, "8" },
    { "'true'", W_STR, 0, "true" },
    { "\"null\"", W_STR, 0, "null" },
    { "'~'", W_STR, 0, "~" },
    { "\"\"", W_STR, 0, "" },
    { "'1.5'", W_STR, 0, "1.5" },
    { "\"tab\\there\"", W_STR, 0, "tab\there" },
    { "'it''s'", W_STR, 0, "it's" },
    /* tags */
    { "!!str 8", W_STR, 0, "8" },
    { "!!str true", W_STR, 0, "true" },
    { "!!str", W_STR, 0, "" },
    { "! 12", W_STR, 0, "12" },
    { "!custom 5", W_STR, 0, "5" },
    { "!!binary aGVsbG8=", W_STR, 0, "aGVsbG8=" },
    { "!!float 1", W_NUM, 1, NULL },
    { "!!int \"42\"", W_NUM, 42, NULL },
    { "!!bool yes", W_TRUE, 0, NULL },
    { "!!null ~", W_NULL, 0, NULL },
};

/* Checks one case, naming it in the failure message. */
static void check_scalar_case(const struct scalar_case *c)
{
    static const char *const names[] = { "null", "true", "false", "number", "string" };
    char yaml[256];
    snprintf(yaml, sizeof yaml, "v: %s\n", c->yaml);
    cJSON *doc = parse_ok(yaml);
    const cJSON *v = at(doc, "v", NULL);
    int ok;
    switch (c->want) {
    case W_NULL: ok = cJSON_IsNull(v); break;
    case W_TRUE: ok = cJSON_IsTrue(v); break;
    case W_FALSE: ok = cJSON_IsFalse(v); break;
    case W_NUM: ok = cJSON_IsNumber(v) && v->valuedouble == c->num; break;
    default: ok = cJSON_IsString(v) && strcmp(v->valuestring, c->str) == 0; break;
    }
    if (!ok) {
        char *got = cJSON_PrintUnformatted(v);
        fail_msg("v: %s -> %s, expected %s %s", c->yaml, got ? got : "?", names[c->want],
                 c->str ? c->str : "");
    }
    cJSON_Delete(doc);
}

static void test_scalar_typing_table(void **state)
{
    (void)state;
    size_t n = sizeof scalar_cases / sizeof scalar_cases[0];
    assert_true(n >= 20);
    for (size_t i = 0; i < n; i++)
        check_scalar_case(&scalar_cases[i]);
}

static void test_scalar_root_and_sequence_items(void **state)
{
    (void)state;
    cJSON *j = parse_ok("42");
    is_num(j, 42);
    cJSON_Delete(j);
    j = parse_ok("- 1\n- one\n- ~\n- 'no'\n- no\n");
    is_num(at(j, "#0", NULL), 1);
    is_str(at(j, "#1", NULL), "one");
    assert_true(cJSON_IsNull(at(j, "#2", NULL)));
    is_str(at(j, "#3", NULL), "no");
    is_bool(at(j, "#4", NULL), 0);
    cJSON_Delete(j);
}

static void test_mapping_keys_are_text(void **state)
{
    (void)state;
    cJSON *j = parse_ok("8: eight\ntrue: yes\non: x\n0x10: why\n~: z\n1.50: f\n\"\": e\n"
                        "!!str 9: nine\n");
    is_str(at(j, "8", NULL), "eight");
    is_bool(at(j, "true", NULL), 1);
    is_str(at(j, "on", NULL), "x");
    is_str(at(j, "0x10", NULL), "why");
    is_str(at(j, "~", NULL), "z");
    is_str(at(j, "1.50", NULL), "f");
    is_str(at(j, "", NULL), "e");
    is_str(at(j, "9", NULL), "nine");
    assert_int_equal(cJSON_GetArraySize(j), 8);
    cJSON_Delete(j);
}

static void test_tag_mismatch_is_error(void **state)
{
    (void)state;
    expect_error("a: 1\nb: !!int abc\n", "line 2, column 4: cannot decode `abc` as !!int");
    expect_error("!!bool maybe: 1\n", "line 1, column 1: cannot decode `maybe` as !!bool");
    expect_error("x: !!null 0\n", "line 1, column 4: cannot decode `0` as !!null");
}

/* ------------------------------------------------------------------------ */
/* Block scalars, flow style, line endings                                  */

static void test_block_scalars(void **state)
{
    (void)state;
    cJSON *j = parse_ok(
        "literal: |\n"
        "  line 1\n"
        "    indented\n"
        "  line 3\n"
        "folded: >\n"
        "  one\n"
        "  two\n"
        "\n"
        "  three\n"
        "strip: |-\n"
        "  no newline\n"
        "keep: |+\n"
        "  kept\n"
        "\n"
        "number_looking: |\n"
        "  8\n"
        "indicator: |2\n"
        "    four spaces\n"
        "last: end\n");
    is_str(at(j, "literal", NULL), "line 1\n  indented\nline 3\n");
    is_str(at(j, "folded", NULL), "one two\nthree\n");
    is_str(at(j, "strip", NULL), "no newline");
    is_str(at(j, "keep", NULL), "kept\n\n");
    is_str(at(j, "number_looking", NULL), "8\n");
    is_str(at(j, "indicator", NULL), "  four spaces\n");
    is_str(at(j, "last", NULL), "end");
    cJSON_Delete(j);
}

static void test_flow_style_and_crlf(void **state)
{
    (void)state;
    cJSON *j = parse_ok("{\"kind\": \"Pod\", spec: {replicas: 3, tags: [a, 'b', 1.5]}}");
    is_str(at(j, "kind", NULL), "Pod");
    is_num(at(j, "spec", "replicas", NULL), 3);
    is_str(at(j, "spec", "tags", "#1", NULL), "b");
    is_num(at(j, "spec", "tags", "#2", NULL), 1.5);
    cJSON_Delete(j);
    j = parse_ok("a: 1\r\nb: two\r\nc:\r\n- x\r\n");
    is_num(at(j, "a", NULL), 1);
    is_str(at(j, "b", NULL), "two");
    is_str(at(j, "c", "#0", NULL), "x");
    cJSON_Delete(j);
    /* Empty containers stay containers. */
    j = parse_ok("a: {}\nb: []\n");
    assert_true(cJSON_IsObject(at(j, "a", NULL)));
    assert_null(at(j, "a", NULL)->child);
    assert_true(cJSON_IsArray(at(j, "b", NULL)));
    assert_int_equal(cJSON_GetArraySize(at(j, "b", NULL)), 0);
    cJSON_Delete(j);
}

/* ------------------------------------------------------------------------ */
/* Multi-document streams                                                   */

static void test_multi_document(void **state)
{
    (void)state;
    cJSON *j = parse_ok("apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Pod\n"
                        "---\n- 1\n- 2\n");
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 3);
    is_str(at(j, "#0", "kind", NULL), "ConfigMap");
    is_str(at(j, "#1", "kind", NULL), "Pod");
    is_num(at(j, "#2", "#1", NULL), 2);
    assert_null(at(j, "#0", NULL)->string);
    cJSON_Delete(j);
}

static void test_multi_document_skips_empty(void **state)
{
    (void)state;
    /* Leading, repeated and trailing separators and comment-only documents
     * leave one document, which is returned as itself. */
    cJSON *j = parse_ok("---\n---\n# nothing here\n---\nkind: Pod\n---\n# trailing\n");
    assert_true(cJSON_IsObject(j));
    is_str(at(j, "kind", NULL), "Pod");
    cJSON_Delete(j);
    /* An explicit null is a document, not an empty one. */
    j = parse_ok("--- ~\n--- 1\n---\n...\n");
    assert_int_equal(cJSON_GetArraySize(j), 2);
    assert_true(cJSON_IsNull(at(j, "#0", NULL)));
    is_num(at(j, "#1", NULL), 1);
    cJSON_Delete(j);
    j = parse_ok("--- ''\n");
    is_str(j, "");
    cJSON_Delete(j);
}

static void test_empty_input(void **state)
{
    (void)state;
    expect_error("", "line 1, column 1: empty document");
    expect_error("   \n\n", "line 3, column 1: empty document");
    expect_error("# only a comment\n", "line 2, column 1: empty document");
    expect_error("---\n---\n", "line 3, column 1: empty document");
    char *err = NULL;
    assert_null(yaml_to_json(NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "empty document"));
    free(err);
}

/* ------------------------------------------------------------------------ */
/* Anchors and aliases                                                      */

static void test_anchors_and_aliases(void **state)
{
    (void)state;
    cJSON *j = parse_ok(
        "defaults: &res\n"
        "  limits: {cpu: 500m, nvidia.com/gpu: 2}\n"
        "  tags: [a, b]\n"
        "gpu: &g 8\n"
        "first: *res\n"
        "second: *res\n"
        "count: *g\n"
        "list: [*g, *res]\n");
    const cJSON *first = at(j, "first", NULL);
    const cJSON *second = at(j, "second", NULL);
    is_str(at(first, "limits", "cpu", NULL), "500m");
    is_num(at(second, "limits", "nvidia.com/gpu", NULL), 2);
    is_str(at(second, "tags", "#1", NULL), "b");
    is_num(at(j, "count", NULL), 8);
    is_num(at(j, "list", "#0", NULL), 8);
    is_str(at(j, "list", "#1", "limits", "cpu", NULL), "500m");
    /* Copies are independent, and array elements carry no member name. */
    assert_ptr_not_equal(first, second);
    assert_ptr_not_equal(at(first, "limits", NULL), at(second, "limits", NULL));
    assert_null(at(j, "list", "#1", NULL)->string);
    cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)at(first, "limits", NULL), "cpu",
                                           cJSON_CreateString("1"));
    is_str(at(second, "limits", "cpu", NULL), "500m");
    is_str(at(j, "defaults", "limits", "cpu", NULL), "500m");
    cJSON_Delete(j);
}

static void test_anchor_edge_cases(void **state)
{
    (void)state;
    /* A redefined anchor refers to the newest node; quoted stays string. */
    cJSON *j = parse_ok("a: &x 1\nb: &x \"2\"\nc: *x\n");
    is_str(at(j, "c", NULL), "2");
    cJSON_Delete(j);
    /* An anchored key can be used as a key or as a value. */
    j = parse_ok("&k name: 1\nother: *k\nm: {*k : 2}\n");
    is_str(at(j, "other", NULL), "name");
    is_num(at(j, "m", "name", NULL), 2);
    cJSON_Delete(j);
    expect_error("a: &a [1, *a]\n", "line 1, column 11: unknown anchor 'a' referenced");
    expect_error("a: *missing\n", "line 1, column 4: unknown anchor 'missing' referenced");
    expect_error("--- &a 1\n--- *a\n", "line 2, column 5: unknown anchor 'a' referenced");
    expect_error("a: &m {x: 1}\n*m : 2\n", "line 2, column 1: mapping keys must be scalars");
}

static void test_alias_bomb_rejected(void **state)
{
    (void)state;
    char *err = parse_err(
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
        "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
        "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n");
    assert_string_equal(err, "line 7, column 8: aliases expand to more than 1000000 nodes");
    free(err);
}

static void test_alias_below_cap_accepted(void **state)
{
    (void)state;
    cJSON *j = parse_ok(
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n");
    is_str(at(j, "c", "#8", "#8", "#8", NULL), "lol");
    assert_int_equal(cJSON_GetArraySize(at(j, "c", NULL)), 9);
    cJSON_Delete(j);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */

static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n"
                 "    app: x\n    tier: gpu\n    app: y\n",
                 "line 8, column 5: duplicate mapping key \"app\"");
    expect_error("{a: 1, b: 2, a: 3}", "line 1, column 14: duplicate mapping key \"a\"");
    /* Keys compare as text, whatever their quoting or tag. */
    expect_error("8: a\n\"8\": b\n", "line 2, column 1: duplicate mapping key \"8\"");
    expect_error("&k x: 1\n*k : 2\n", "line 2, column 1: duplicate mapping key \"x\"");
    /* Same key in sibling mappings is fine. */
    cJSON *j = parse_ok("- name: a\n- name: b\n");
    is_str(at(j, "#1", "name", NULL), "b");
    cJSON_Delete(j);
}

/* Large mappings switch to a hash set: duplicates are still found. */
static void test_duplicate_key_in_large_mapping(void **state)
{
    (void)state;
    size_t cap = 64 * 1024, off = 0;
    char *yaml = malloc(cap);
    assert_non_null(yaml);
    for (int i = 0; i < 2000; i++)
        off += (size_t)snprintf(yaml + off, cap - off, "key%d: %d\n", i, i);
    cJSON *j = parse_ok(yaml);
    assert_int_equal(cJSON_GetArraySize(j), 2000);
    is_num(at(j, "key1999", NULL), 1999);
    cJSON_Delete(j);
    snprintf(yaml + off, cap - off, "key17: again\n");
    expect_error(yaml, "line 2001, column 1: duplicate mapping key \"key17\"");
    free(yaml);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_error("key: value: other\n",
                 "line 1, column 11: mapping values are not allowed in this context");
    expect_error("metadata:\n  name: a\n labels: {}\n",
                 "line 3, column 2: did not find expected key "
                 "(while parsing a block mapping at line 1, column 1)");
    expect_error("items: [1, 2\nnext: 3\n",
                 "line 2, column 5: did not find expected ',' or ']' "
                 "(while parsing a flow sequence at line 1, column 8)");
    expect_error("a: \"unterminated\n",
                 "line 2, column 1: found unexpected end of stream "
                 "(while scanning a quoted scalar at line 1, column 4)");
    expect_error("a: 1\nb: \xff\n", "line 2, column 4: invalid leading UTF-8 octet (#xFF)");
}

static void test_merge_key_rejected(void **state)
{
    (void)state;
    expect_error("base: &b {cpu: 1}\nderived:\n  <<: *b\n  memory: 1Gi\n",
                 "line 3, column 3: merge keys (<<) are not supported");
    /* A quoted "<<" is an ordinary key, and "<<" as a value is a string. */
    cJSON *j = parse_ok("\"<<\": x\ny: <<\n");
    is_str(at(j, "<<", NULL), "x");
    is_str(at(j, "y", NULL), "<<");
    cJSON_Delete(j);
}

static void test_unsupported_constructs(void **state)
{
    (void)state;
    expect_error("? [a, b]\n: 1\n", "line 1, column 3: mapping keys must be scalars");
    expect_error("a: \"x\\0y\"\n", "line 1, column 4: NUL characters in scalars are not supported");
}

static char *nested(int levels, const char *inner)
{
    size_t n = (size_t)levels * 2 + strlen(inner) + 1;
    char *s = malloc(n);
    assert_non_null(s);
    memset(s, '[', (size_t)levels);
    strcpy(s + levels, inner);
    memset(s + levels + strlen(inner), ']', (size_t)levels);
    s[n - 1] = '\0';
    return s;
}

static void test_nesting_limit(void **state)
{
    (void)state;
    char *ok = nested(512, "1");
    cJSON *j = parse_ok(ok);
    assert_true(cJSON_IsArray(j));
    cJSON_Delete(j);
    free(ok);
    char *deep = nested(513, "1");
    expect_error(deep, "line 1, column 513: nesting deeper than 512 levels");
    free(deep);
    /* An alias may not smuggle depth past the limit either. */
    char *anchored = nested(300, "x");
    char *user = nested(250, "*a");
    size_t n = strlen(anchored) + strlen(user) + 32;
    char *yaml = malloc(n);
    assert_non_null(yaml);
    snprintf(yaml, n, "a: &a %s\nb: %s\n", anchored, user);
    char *err = parse_err(yaml);
    assert_string_equal(err, "line 2, column 254: nesting deeper than 512 levels");
    free(err);
    free(yaml);
    free(user);
    free(anchored);
}

/* ------------------------------------------------------------------------ */
/* Big integers                                                             */

static void test_big_integers_preserved(void **state)
{
    (void)state;
    cJSON *j = parse_ok(
        "resourceVersion: 18446744073709551615\n"
        "generation: 9223372036854775807\n"
        "neg: -9223372036854775808\n"
        "huge: 123456789012345678901234567890\n"
        "grouped: 1_000_000_000_000_000_000\n"
        "fits: 9007199254740991\n"
        "float: 12345678901234567890.5\n");
    is_str(at(j, "resourceVersion", NULL), "18446744073709551615");
    is_str(at(j, "generation", NULL), "9223372036854775807");
    is_str(at(j, "neg", NULL), "-9223372036854775808");
    is_str(at(j, "huge", NULL), "123456789012345678901234567890");
    is_str(at(j, "grouped", NULL), "1_000_000_000_000_000_000");
    is_num(at(j, "fits", NULL), 9007199254740991.0);
    /* A float is a float: inexact by nature, so it stays a number. */
    is_num(at(j, "float", NULL), 12345678901234567890.5);
    cJSON_Delete(j);
}

/* ------------------------------------------------------------------------ */
/* API details                                                              */

static void test_text_looks_like_json(void **state)
{
    (void)state;
    assert_true(text_looks_like_json("{\"a\":1}", 7));
    assert_true(text_looks_like_json(" \t\r\n[1]", 7));
    assert_false(text_looks_like_json("a: 1", 4));
    assert_false(text_looks_like_json("# {x}\n{}", 8));
    assert_false(text_looks_like_json("---\n{}", 6));
    assert_false(text_looks_like_json("   ", 3));
    assert_false(text_looks_like_json("", 0));
    assert_false(text_looks_like_json(NULL, 0));
    /* Only len bytes are looked at. */
    assert_false(text_looks_like_json("  {", 2));
    /* A BOM sends the text down the YAML path, which accepts it. */
    const char bom_json[] = "\xEF\xBB\xBF{\"a\": [1, \"x\"]}";
    assert_false(text_looks_like_json(bom_json, strlen(bom_json)));
    cJSON *j = parse_ok(bom_json);
    is_num(at(j, "a", "#0", NULL), 1);
    is_str(at(j, "a", "#1", NULL), "x");
    cJSON_Delete(j);
}

static void test_err_pointer_optional(void **state)
{
    (void)state;
    cJSON *j = yaml_to_json("a: 1", 4, NULL);
    assert_non_null(j);
    cJSON_Delete(j);
    assert_null(yaml_to_json("a: [", 4, NULL));
    /* len bounds the input even without a terminating NUL. */
    char *err = (char *)"stale";
    j = yaml_to_json("a: 12345", 5, &err);
    assert_null(err);
    is_num(at(j, "a", NULL), 12);
    cJSON_Delete(j);
}

/* strtod follows LC_NUMERIC; a comma-decimal locale must not change typing. */
static void test_numbers_under_comma_locale(void **state)
{
    (void)state;
    const char *names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8" };
    const char *found = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !found; i++)
        found = setlocale(LC_NUMERIC, names[i]);
    if (!found)
        skip();
    cJSON *j = yaml_to_json("x: 1.5", 6, NULL);
    setlocale(LC_NUMERIC, "C");
    assert_non_null(j);
    is_num(at(j, "x", NULL), 1.5);
    cJSON_Delete(j);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures: fail the Nth cJSON allocation for every N until the  */
/* conversion succeeds; each failure must report and leak nothing (ASan and */
/* valgrind check the leaks).                                               */

static long allocations_left;

static void *failing_malloc(size_t n)
{
    if (allocations_left == 0)
        return NULL;
    allocations_left--;
    return malloc(n);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    size_t cap = 8192, off = 0;
    char *yaml = malloc(cap);
    assert_non_null(yaml);
    off += (size_t)snprintf(yaml, cap, "base: &b {cpu: 500m, gpu: 8, tags: [a, b]}\n"
                                       "copy: *b\n&k key: v\nalias: *k\nbig:\n");
    for (int i = 0; i < 20; i++)
        off += (size_t)snprintf(yaml + off, cap - off, "  k%d: %d\n", i, i);
    snprintf(yaml + off, cap - off, "---\n- x\n- {y: true}\n");

    cJSON_Hooks hooks = { failing_malloc, free };
    long failures = 0;
    for (long n = 0;; n++) {
        char *err = NULL;
        allocations_left = n;
        cJSON_InitHooks(&hooks);
        cJSON *j = yaml_to_json(yaml, strlen(yaml), &err);
        cJSON_InitHooks(NULL);
        if (j) {
            is_str(at(j, "#0", "copy", "cpu", NULL), "500m");
            is_num(at(j, "#0", "big", "k19", NULL), 19);
            cJSON_Delete(j);
            assert_null(err);
            break;
        }
        assert_non_null(err);
        assert_non_null(strstr(err, "out of memory"));
        free(err);
        failures++;
    }
    assert_true(failures > 40);
    free(yaml);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubectl_list_top_level),
        cmocka_unit_test(test_kubectl_list_node),
        cmocka_unit_test(test_kubectl_list_pod),
        cmocka_unit_test(test_kubectl_list_configmap),
        cmocka_unit_test(test_scalar_typing_table),
        cmocka_unit_test(test_scalar_root_and_sequence_items),
        cmocka_unit_test(test_mapping_keys_are_text),
        cmocka_unit_test(test_tag_mismatch_is_error),
        cmocka_unit_test(test_block_scalars),
        cmocka_unit_test(test_flow_style_and_crlf),
        cmocka_unit_test(test_multi_document),
        cmocka_unit_test(test_multi_document_skips_empty),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_anchors_and_aliases),
        cmocka_unit_test(test_anchor_edge_cases),
        cmocka_unit_test(test_alias_bomb_rejected),
        cmocka_unit_test(test_alias_below_cap_accepted),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_duplicate_key_in_large_mapping),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_merge_key_rejected),
        cmocka_unit_test(test_unsupported_constructs),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_big_integers_preserved),
        cmocka_unit_test(test_text_looks_like_json),
        cmocka_unit_test(test_err_pointer_optional),
        cmocka_unit_test(test_numbers_under_comma_locale),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * gqa_bench.c - load benchmark of gpu-quota-admission's extender verbs.
 *
 * For each cluster size N and each device family (GPU-Manager vcuda, HAMi
 * vGPUs) it generates N nodes x 8 GPUs (realistic Node objects of about 5.6
 * KB with a gpu-admission.io/topology annotation; HAMi nodes also carry
 * hami.io/node-nvidia-register) and 8 bound pods of the family per node,
 * writes them as a JSON `kind: List`, starts the
 * real server binary on that file (--state-file, HTTP on 127.0.0.1) and
 * drives it over HTTP with libcurl (keep-alive, one easy handle per client
 * thread) in both ExtenderArgs forms: NodeNames, and Nodes (every full Node
 * object, about 28 MB at N = 5000).
 *
 * Printed per N, family, placement mode, verb and form: request and answer sizes,
 * p50/p99/max latency of sequential requests, throughput with 2 client
 * threads, the server's VmRSS/VmHWM after the run, and the time cJSON_Parse
 * needs in this process for the same Nodes-form body. Targets are printed
 * next to the figures with PASS/MISS; they never change the exit status.
 * Every answer is checked (the first of each kind in full with cJSON, the
 * rest against it or cheaply); a wrong answer, a server that does not start
 * or does not stop cleanly makes the run exit 1.
 *
 * Then (issue 15) the server's own share of a request (round trip minus the
 * /healthz round trip on the same connection) for vcuda, MPS and whole-GPU
 * pods under both --gpu-policy values, the Nodes form against cJSON, a
 * 20,000-node cluster synced from the API simulator, watch events applied
 * in-process, and one summary table (README.md).
 */
#include "lib/strbuf.h"
#include "tests/bench/events_core.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GPUS_PER_NODE 8
#define MAX_SIZES 8
#define MAX_NODES 99999
#define MAX_REQUESTS 100000
#define MAX_PARSE_RUNS 25
#define CLIENT_THREADS 2
#define SERIAL_DIGITS 9
#define START_ATTEMPTS 3
#define READY_TIMEOUT_MS 180000
#define STOP_TIMEOUT_MS 30000
#define POLL_MS 20
#define TARGET_N 5000
#define TARGET_NAMES_P50_MS 2.0
#define TARGET_NAMES_P99_MS 10.0
/* The Nodes-form round trip (the answer now carries the kept nodes' bytes)
 * against cJSON_Parse of the same body, measured in the same run. */
#define TARGET_NODES_PARSE_RATIO 0.35
#define TARGET_RSS_BYTES 200e6
#define VERIFY_MSG 320

static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "gqa-bench: message" to stderr; returns -1 for `return fail(...)`. */
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);
    fputs("gqa-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
    return -1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- deterministic fake identifiers ------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* `digits` hex characters derived from seed (ids, digests, serials). */
static void put_hex(struct strbuf *sb, uint64_t seed, int digits)
{
    static const char hex[] = "0123456789abcdef";
    char buf[64];
    int n = digits < (int)sizeof(buf) ? digits : (int)sizeof(buf);
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (i % 16 == 0)
            v = mix64(seed * 131 + (uint64_t)i);
        buf[i] = hex[v & 15];
        v >>= 4;
    }
    strbuf_append(sb, buf, (size_t)n);
}

static void put_uuid(struct strbuf *sb, uint64_t seed)
{
    static const int groups[] = {8, 4, 4, 4, 12};
    for (int g = 0; g < 5; g++) {
        if (g)
            strbuf_putc(sb, '-');
        put_hex(sb, mix64(seed) + (uint64_t)g, groups[g]);
    }
}

/* The device families a cluster is made of. */
enum family { FAM_VCUDA = 0, FAM_HAMI, FAM_COUNT };
static const char *const FAMILY_NAME[] = {"vcuda", "hami"};
static const char *const FAMILY_TITLE[] = {"GPU-Manager vcuda shares", "HAMi vGPUs"};

/* What the pending pod of a GPU-Manager (vcuda family) cluster asks for:
 * a vcuda share, an MPS share, or one whole GPU (nvidia.com/gpu). */
enum pod_kind { KIND_VCUDA = 0, KIND_MPS, KIND_WHOLE, KIND_COUNT };
static const char *const KIND_NAME[] = {"vcuda", "mps", "whole"};

static void node_name(char *buf, size_t size, size_t i)
{
    snprintf(buf, size, "gpu-a100-%05u", (unsigned)(i % 100000));
}

/* ---- Node objects --------------------------------------------------------- */

static const char *const ZONES[] = {"eu-central-1a", "eu-central-1b", "eu-central-1c"};

static void put_labels(struct strbuf *sb, const char *name, size_t i)
{
    const char *zone = ZONES[i % 3];
    strbuf_printf(sb,
                  "\"labels\":{\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/hostname\":\"%s\",\"kubernetes.io/os\":"
                  "\"linux\",\"node.kubernetes.io/instance-type\":\"p4de.24xlarge\",\"nvidia.com/gpu.count\":"
                  "\"8\",\"nvidia.com/gpu.present\":\"true\",\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\","
                  "\"tkestack.io/gpu-model\":\"A100\",\"tkestack.io/gpu-pool\":\"public\","
                  "\"topology.kubernetes.io/region\":\"eu-central-1\",\"topology.kubernetes.io/zone\":\"%s\"},",
                  name, zone);
}

/* The UUID of GPU g of node i (the topology annotation and HAMi's
 * registration and allocations name the same ones). */
static void put_gpu_uuid(struct strbuf *sb, size_t i, int g)
{
    strbuf_puts(sb, "GPU-");
    put_uuid(sb, i * 64 + (uint64_t)g + 7);
}

/* The topology annotation's compact JSON: 8 A100s behind NVSwitch. */
static void put_topology_json(struct strbuf *t, size_t i)
{
    strbuf_puts(t, "{\"version\":1,\"gpus\":[");
    for (int g = 0; g < GPUS_PER_NODE; g++) {
        strbuf_printf(t, "%s{\"index\":%d,\"minor\":%d,\"uuid\":\"", g ? "," : "", g, g);
        put_gpu_uuid(t, i, g);
        strbuf_printf(t, "\",\"model\":\"NVIDIA A100-SXM4-80GB\",\"memoryMiB\":81920,\"numa\":%d}",
                      g / (GPUS_PER_NODE / 2));
    }
    strbuf_puts(t, "],\"links\":[");
    for (int r = 0; r < GPUS_PER_NODE; r++) {
        strbuf_puts(t, r ? ",[" : "[");
        for (int c = 0; c < GPUS_PER_NODE; c++)
            strbuf_printf(t, "%s\"%s\"", c ? "," : "", r == c ? "X" : "NV12");
        strbuf_putc(t, ']');
    }
    strbuf_puts(t, "]}");
}

/* HAMi's registration, 9-field form: 8 A100 80 GB, split count 10. */
static void put_hami_register(struct strbuf *sb, size_t i)
{
    strbuf_puts(sb, ",\"hami.io/node-nvidia-register\":\"");
    for (int g = 0; g < GPUS_PER_NODE; g++) {
        put_gpu_uuid(sb, i, g);
        strbuf_printf(sb, ",10,81920,100,NVIDIA-NVIDIA A100-SXM4-80GB,%d,true,%d,hami-core:", g / (GPUS_PER_NODE / 2),
                      g);
    }
    strbuf_puts(sb, "\",\"hami.io/node-handshake\":\"Reported_2025-11-20 10:00:00\"");
}

static void put_annotations(struct strbuf *sb, size_t i, enum family fam)
{
    struct strbuf topo;
    strbuf_init(&topo);
    put_topology_json(&topo, i);
    strbuf_puts(sb, "\"annotations\":{\"gpu-admission.io/topology\":");
    if (strbuf_failed(&topo))
        sb->failed = 1;
    else
        strbuf_json_string(sb, topo.data);
    strbuf_free(&topo);
    if (fam == FAM_HAMI)
        put_hami_register(sb, i);
    strbuf_puts(sb, ",\"kubeadm.alpha.kubernetes.io/cri-socket\":\"unix:///run/containerd/containerd.sock\","
                    "\"node.alpha.kubernetes.io/ttl\":\"0\","
                    "\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"}");
}

static void put_node_metadata(struct strbuf *sb, const char *name, size_t i, enum family fam)
{
    strbuf_printf(sb, "\"metadata\":{\"name\":\"%s\",\"uid\":\"", name);
    put_uuid(sb, i * 8 + 2);
    strbuf_printf(sb, "\",\"resourceVersion\":\"%zu\",\"creationTimestamp\":\"2025-03-01T08:%02zu:%02zuZ\",",
                  81234567 + i * 7, i / 60 % 60, i % 60);
    put_labels(sb, name, i);
    put_annotations(sb, i, fam);
    strbuf_putc(sb, '}');
}

static void put_node_spec(struct strbuf *sb, size_t i)
{
    unsigned a = (unsigned)(i >> 8 & 255), b = (unsigned)(i & 255);
    strbuf_printf(sb, "\"spec\":{\"podCIDR\":\"10.%u.%u.0/24\",\"podCIDRs\":[\"10.%u.%u.0/24\"],"
                      "\"providerID\":\"aws:///%s/i-0", 128 + a % 128, b, 128 + a % 128, b, ZONES[i % 3]);
    put_hex(sb, i * 8 + 1, 16);
    strbuf_puts(sb, "\"}");
}

/* vcuda: 8 x (100 cores, 320 blocks), and the same 8 GPUs also offered as
 * MPS shares (8 x 100 cores, 320 units) and whole GPUs (nvidia.com/gpu), so
 * one cluster serves the vcuda, MPS and whole-GPU request pods; HAMi: 80
 * vGPUs (8 GPUs x split 10). */
static void put_amounts(struct strbuf *sb, const char *key, bool allocatable, enum family fam)
{
    strbuf_printf(sb,
                  "\"%s\":{\"cpu\":\"%s\",\"ephemeral-storage\":\"%s\",\"hugepages-1Gi\":\"0\","
                  "\"hugepages-2Mi\":\"0\",\"memory\":\"%s\",\"pods\":\"110\",%s}",
                  key, allocatable ? "95690m" : "96", allocatable ? "1814512490302" : "1968873668Ki",
                  allocatable ? "1164873840Ki" : "1176604272Ki",
                  fam == FAM_HAMI ? "\"nvidia.com/gpu\":\"80\""
                                  : "\"tencent.com/vcuda-core\":\"800\",\"tencent.com/vcuda-memory\":\"2560\","
                                    "\"nvidia.com/mps-core\":\"800\",\"nvidia.com/mps-memory\":\"2560\","
                                    "\"nvidia.com/gpu\":\"8\"");
}

static const char *const CONDITIONS[][4] = {
    {"NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"},
    {"MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
    {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
    {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
    {"Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"},
};

static void put_conditions(struct strbuf *sb, size_t i)
{
    strbuf_puts(sb, "\"conditions\":[");
    for (size_t c = 0; c < sizeof(CONDITIONS) / sizeof(CONDITIONS[0]); c++)
        strbuf_printf(sb,
                      "%s{\"type\":\"%s\",\"status\":\"%s\",\"lastHeartbeatTime\":\"2025-11-20T10:%02zu:%02zuZ\","
                      "\"lastTransitionTime\":\"2025-03-01T08:%02zu:%02zuZ\",\"reason\":\"%s\",\"message\":\"%s\"}",
                      c ? "," : "", CONDITIONS[c][0], CONDITIONS[c][1], (i + c) / 7 % 60, (i * 13 + c) % 60,
                      i / 60 % 60, (i + 31) % 60, CONDITIONS[c][2], CONDITIONS[c][3]);
    strbuf_puts(sb, "],");
}

static void put_addresses(struct strbuf *sb, const char *name, size_t i)
{
    unsigned a = (unsigned)(i >> 8 & 255), b = (unsigned)(i & 255);
    strbuf_printf(sb,
                  "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.%u.%u\"},{\"type\":\"InternalDNS\","
                  "\"address\":\"ip-10-0-%u-%u.eu-central-1.compute.internal\"},{\"type\":\"Hostname\","
                  "\"address\":\"%s\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},",
                  a, b, a, b, name);
}

static void put_node_info(struct strbuf *sb, size_t i)
{
    strbuf_puts(sb, "\"nodeInfo\":{\"machineID\":\"");
    put_hex(sb, i * 8 + 3, 32);
    strbuf_puts(sb, "\",\"systemUUID\":\"");
    put_uuid(sb, i * 8 + 4);
    strbuf_puts(sb, "\",\"bootID\":\"");
    put_uuid(sb, i * 8 + 5);
    strbuf_puts(sb, "\",\"kernelVersion\":\"5.15.0-1066-aws\",\"osImage\":\"Ubuntu 22.04.4 LTS\","
                    "\"containerRuntimeVersion\":\"containerd://1.7.13\",\"kubeletVersion\":\"v1.29.6\","
                    "\"kubeProxyVersion\":\"v1.29.6\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"},");
}

static const struct {
    const char *repo, *tag;
    long long size;
} IMAGES[] = {
    {"nvcr.io/nvidia/pytorch", "24.03-py3", 9743186754LL},
    {"nvcr.io/nvidia/tritonserver", "24.03-py3", 7419283115LL},
    {"registry.example.com/ml/train", "2025.11.3", 6120349812LL},
    {"nvcr.io/nvidia/dcgm-exporter", "3.3.5-3.4.1-ubuntu22.04", 343562211LL},
    {"docker.io/tkestack/gpu-manager", "v1.1.5", 287345120LL},
    {"docker.io/calico/node", "v3.27.3", 116943204LL},
    {"public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver", "v1.30.0", 32651021LL},
    {"registry.k8s.io/kube-proxy", "v1.29.6", 28420160LL},
    {"docker.io/calico/cni", "v3.27.3", 94352214LL},
    {"registry.k8s.io/pause", "3.9", 321520LL},
};

/* The first image was pulled from a registry (tag and digest); the others
 * were preloaded into the node image, so only their tag is known. */
static void put_images(struct strbuf *sb)
{
    strbuf_puts(sb, "\"images\":[");
    for (size_t k = 0; k < sizeof(IMAGES) / sizeof(IMAGES[0]); k++) {
        strbuf_printf(sb, "%s{\"names\":[\"", k ? "," : "");
        if (k == 0) {
            strbuf_printf(sb, "%s@sha256:", IMAGES[k].repo);
            put_hex(sb, 1000 + k, 64);
            strbuf_puts(sb, "\",\"");
        }
        strbuf_printf(sb, "%s:%s\"],\"sizeBytes\":%lld}", IMAGES[k].repo, IMAGES[k].tag, IMAGES[k].size);
    }
    strbuf_putc(sb, ']');
}

static void put_node(struct strbuf *sb, size_t i, enum family fam)
{
    char name[32];
    node_name(name, sizeof(name), i);
    strbuf_puts(sb, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",");
    put_node_metadata(sb, name, i, fam);
    strbuf_putc(sb, ',');
    put_node_spec(sb, i);
    strbuf_puts(sb, ",\"status\":{");
    put_amounts(sb, "capacity", false, fam);
    strbuf_putc(sb, ',');
    put_amounts(sb, "allocatable", true, fam);
    strbuf_putc(sb, ',');
    put_conditions(sb, i);
    put_addresses(sb, name, i);
    put_node_info(sb, i);
    put_images(sb);
    strbuf_puts(sb, "}}");
}

/* ---- bound pods ------------------------------------------------------------ */

/* Mixed shares per GPU; memory is 3 blocks per core, so every GPU keeps at
 * least 30 cores and 110 of its 320 memory blocks free. */
static const int SHARE_CORES[GPUS_PER_NODE] = {10, 20, 25, 30, 40, 50, 60, 70};

/* HAMi: GPU k of node i holds a vGPU of 10..70 cores and 768 MiB per core
 * (at most 53760 of 81920 MiB), by its allocation annotation. */
static void put_bound_hami_pod(struct strbuf *sb, size_t node, int gpu)
{
    char name[32];
    node_name(name, sizeof(name), node);
    int cores = SHARE_CORES[(node + (size_t)gpu) % GPUS_PER_NODE], mem = cores * 768;
    strbuf_printf(sb, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"job-%05zu-%d\","
                      "\"namespace\":\"team-%c\",\"uid\":\"", node, gpu, (char)('a' + (node + (size_t)gpu) % 4));
    put_uuid(sb, node * 64 + (uint64_t)gpu + 1000003);
    strbuf_printf(sb, "\",\"labels\":{\"app\":\"job-%05zu-%d\"},\"annotations\":{"
                      "\"hami.io/bind-phase\":\"success\",\"hami.io/bind-time\":\"1763700000\","
                      "\"hami.io/vgpu-devices-allocated\":\"", node, gpu);
    put_gpu_uuid(sb, node, gpu);
    strbuf_printf(sb, ",NVIDIA,%d,%d:;\",\"hami.io/vgpu-devices-to-allocate\":\";\",\"hami.io/vgpu-node\":\"%s\","
                      "\"hami.io/vgpu-time\":\"1763700000\"}},\"spec\":{\"nodeName\":\"%s\","
                      "\"schedulerName\":\"default-scheduler\",\"containers\":[{\"name\":\"worker\",\"image\":"
                      "\"nvcr.io/nvidia/pytorch:24.03-py3\",\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":"
                      "\"32Gi\",\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"%d\",\"nvidia.com/gpucores\":\"%d\"},"
                      "\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"1\"}}}]},"
                      "\"status\":{\"phase\":\"Running\"}}",
                  mem, cores, name, name, mem, cores);
}

/* On every fourth node (idle_gpu_node) pod 7 shares GPU 6 with 10 cores
 * (GPU 6 then holds at most 80), so GPU 7 stays idle: a whole-GPU pod fits
 * on those nodes only, and is refused with a reason on the others. */
static bool idle_gpu_node(size_t node)
{
    return node % 4 == 0;
}

static void put_bound_pod(struct strbuf *sb, size_t node, int gpu_slot)
{
    char name[32];
    node_name(name, sizeof(name), node);
    bool moved = idle_gpu_node(node) && gpu_slot == GPUS_PER_NODE - 1;
    int gpu = moved ? GPUS_PER_NODE - 2 : gpu_slot;
    int cores = moved ? 10 : SHARE_CORES[(node + (size_t)gpu) % GPUS_PER_NODE], mem = cores * 3;
    strbuf_printf(sb, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"job-%05zu-%d\","
                      "\"namespace\":\"team-%c\",\"uid\":\"", node, gpu_slot, (char)('a' + (node + (size_t)gpu_slot) % 4));
    put_uuid(sb, node * 64 + (uint64_t)gpu_slot + 1000003);
    strbuf_printf(sb,
                  "\",\"labels\":{\"app\":\"job-%05zu-%d\"},\"annotations\":{\"tencent.com/gpu-assigned\":\"true\","
                  "\"tencent.com/predicate-gpu-idx-0\":\"%d\",\"tencent.com/predicate-node\":\"%s\","
                  "\"tencent.com/predicate-time\":\"1763700000000000000\"}},\"spec\":{\"nodeName\":\"%s\","
                  "\"schedulerName\":\"default-scheduler\",\"containers\":[{\"name\":\"worker\",\"image\":"
                  "\"nvcr.io/nvidia/pytorch:24.03-py3\",\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":"
                  "\"32Gi\",\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":\"%d\"},\"requests\":"
                  "{\"cpu\":\"4\",\"memory\":\"32Gi\",\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":"
                  "\"%d\"}}}]},\"status\":{\"phase\":\"Running\"}}",
                  node, gpu_slot, gpu, name, name, cores, mem, cores, mem);
}

/* ---- the generated cluster -------------------------------------------------- */

struct dataset {
    size_t n;
    enum family family;
    struct strbuf items;    /* the n Node objects, comma-separated */
    struct strbuf names;    /* the n names as JSON strings, comma-separated */
    size_t state_bytes;
};

static void dataset_free(struct dataset *d)
{
    strbuf_free(&d->items);
    strbuf_free(&d->names);
}

static int dataset_build(struct dataset *d, size_t n, enum family fam)
{
    memset(d, 0, sizeof(*d));
    d->n = n;
    d->family = fam;
    strbuf_init(&d->items);
    strbuf_init(&d->names);
    strbuf_reserve(&d->items, n * 5800);
    strbuf_reserve(&d->names, n * 20);
    for (size_t i = 0; i < n && !strbuf_failed(&d->items); i++) {
        char name[32];
        node_name(name, sizeof(name), i);
        if (i) {
            strbuf_putc(&d->items, ',');
            strbuf_putc(&d->names, ',');
        }
        put_node(&d->items, i, fam);
        strbuf_json_string(&d->names, name);
    }
    if (strbuf_failed(&d->items) || strbuf_failed(&d->names)) {
        dataset_free(d);
        return fail("out of memory generating %zu nodes", n);
    }
    return 0;
}

static int write_pods(FILE *f, const struct dataset *d)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = 0;
    for (size_t i = 0; i < d->n && rc == 0; i++) {
        strbuf_reset(&sb);
        for (int g = 0; g < GPUS_PER_NODE; g++) {
            strbuf_putc(&sb, ',');
            (d->family == FAM_HAMI ? put_bound_hami_pod : put_bound_pod)(&sb, i, g);
        }
        if (strbuf_failed(&sb))
            rc = fail("out of memory generating pods");
        else if (fwrite(sb.data, 1, sb.len, f) != sb.len)
            rc = -1;
    }
    strbuf_free(&sb);
    return rc;
}

static int write_state_file(struct dataset *d, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return fail("cannot create %s: %s", path, strerror(errno));
    fputs("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"},\"items\":[", f);
    fwrite(d->items.data, 1, d->items.len, f);
    int rc = write_pods(f, d);
    fputs("]}\n", f);
    long size = ftell(f);
    if (ferror(f))
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    d->state_bytes = size > 0 ? (size_t)size : 0;
    return rc == 0 ? 0 : fail("cannot write %s", path);
}

/* ---- request bodies ---------------------------------------------------------- */

enum verb { VERB_FILTER = 0, VERB_PRIORITIZE };
enum form { FORM_NAMES = 0, FORM_NODES };
enum mode { MODE_BIND = 0, MODE_FILTER };

static const char *const VERB_NAME[] = {"filter", "prioritize"};
static const char *const VERB_PATH[] = {"/scheduler/predicates", "/scheduler/priorities"};
static const char *const FORM_NAME[] = {"NodeNames", "Nodes"};
static const char *const MODE_NAME[] = {"bind", "filter"};

struct body {
    struct strbuf text;
    size_t serial_off[2];   /* where the pod name's and uid's serial digits are */
};

/* The pending pod's GPU limits: vcuda cores and 256 MiB blocks, or one
 * HAMi vGPU of `cores` percent and `memory` MiB. */
static void put_request_limits(struct strbuf *sb, enum family fam, enum pod_kind kind, int cores, int memory)
{
    if (fam != FAM_HAMI && kind == KIND_MPS)
        strbuf_printf(sb, "\"nvidia.com/mps-core\":\"%d\",\"nvidia.com/mps-memory\":\"%d\"", cores, memory);
    else if (fam != FAM_HAMI && kind == KIND_WHOLE)
        strbuf_puts(sb, "\"nvidia.com/gpu\":\"1\"");
    else if (fam == FAM_HAMI)
        strbuf_printf(sb, "\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"%d\",\"nvidia.com/gpucores\":\"%d\"", memory,
                      cores);
    else
        strbuf_printf(sb, "\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":\"%d\"", cores, memory);
}

/* A pending pod as kube-scheduler sends it, with a 9-digit serial in its name
 * and uid that body_set_serial() rewrites in place. spread_nodes: the pod
 * asks HAMi's node policy for spread, so decisions recorded one after the
 * other go to different nodes (binpack would fill one node's split counts). */
static void put_request_pod(struct strbuf *sb, enum family fam, enum pod_kind kind, int cores, int memory,
                            bool spread_nodes,
                            size_t off[2])
{
    static const char zeros[] = "000000000";
    strbuf_puts(sb, "{\"metadata\":{\"name\":\"bench-pod-");
    off[0] = sb->len;
    strbuf_puts(sb, zeros);
    strbuf_puts(sb, "\",\"namespace\":\"bench\",\"uid\":\"b3c4d5e6-0000-4000-8000-000");
    off[1] = sb->len;
    strbuf_puts(sb, zeros);
    strbuf_puts(sb, "\",\"resourceVersion\":\"4711\",\"creationTimestamp\":\"2025-11-20T10:00:00Z\",\"labels\":"
                    "{\"app\":\"bench\"}");
    if (spread_nodes)
        strbuf_puts(sb, ",\"annotations\":{\"hami.io/node-scheduler-policy\":\"spread\"}");
    strbuf_puts(sb, "},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":"
                    "\"registry.example.com/app:1\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"2Gi\",");
    put_request_limits(sb, fam, kind, cores, memory);
    strbuf_puts(sb, "},\"requests\":{\"cpu\":\"1\",\"memory\":\"2Gi\",");
    put_request_limits(sb, fam, kind, cores, memory);
    strbuf_puts(sb, "}}}],\"restartPolicy\":\"Always\",\"schedulerName\":\"default-scheduler\",\"priority\":0},"
                    "\"status\":{\"phase\":\"Pending\",\"qosClass\":\"Guaranteed\"}}");
}

/* ExtenderArgs as Go's encoding/json writes it: Pod, Nodes, NodeNames. */
static int body_build(struct body *b, const struct dataset *d, enum form form, enum pod_kind kind, int cores,
                      int memory, bool spread_nodes)
{
    const struct strbuf *list = form == FORM_NAMES ? &d->names : &d->items;
    strbuf_init(&b->text);
    strbuf_reserve(&b->text, list->len + 2048);
    strbuf_puts(&b->text, "{\"Pod\":");
    put_request_pod(&b->text, d->family, kind, cores, memory, spread_nodes, b->serial_off);
    strbuf_puts(&b->text, form == FORM_NAMES ? ",\"Nodes\":null,\"NodeNames\":["
                                             : ",\"Nodes\":{\"metadata\":{},\"items\":[");
    strbuf_append(&b->text, list->data, list->len);
    strbuf_puts(&b->text, form == FORM_NAMES ? "]}" : "]},\"NodeNames\":null}");
    if (strbuf_failed(&b->text)) {
        strbuf_free(&b->text);
        return fail("out of memory building a %s request body", FORM_NAME[form]);
    }
    return 0;
}

static void body_set_serial(struct body *b, unsigned long serial)
{
    char digits[SERIAL_DIGITS];
    for (int k = SERIAL_DIGITS - 1; k >= 0; k--, serial /= 10)
        digits[k] = (char)('0' + serial % 10);
    for (int k = 0; k < 2; k++)
        memcpy(b->text.data + b->serial_off[k], digits, SERIAL_DIGITS);
}

/* ---- HTTP client --------------------------------------------------------------- */

struct client {
    CURL *curl;
    struct curl_slist *headers;
    struct strbuf answer;
    int port;
    char url[128];
    char error[CURL_ERROR_SIZE];
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct strbuf *sb = user;
    size_t n = size * nmemb;
    strbuf_append(sb, ptr, n);
    return strbuf_failed(sb) ? 0 : n;
}

static void client_free(struct client *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    strbuf_free(&c->answer);
    c->curl = NULL;
    c->headers = NULL;
}

static int client_options(struct client *c)
{
    CURL *h = c->curl;
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024 * 1024) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, &c->answer) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->error) != CURLE_OK;
    return bad ? -1 : 0;
}

/* One keep-alive connection to 127.0.0.1:port. Bodies are JSON; "Expect:"
 * stops libcurl from waiting for 100-continue on large bodies (kube-scheduler
 * does not send it either). */
static int client_init(struct client *c, int port)
{
    memset(c, 0, sizeof(*c));
    strbuf_init(&c->answer);
    c->port = port;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    c->headers = h2 ? h2 : h;
    c->curl = curl_easy_init();
    if (!c->curl || !h2 || client_options(c) != 0) {
        client_free(c);
        return fail("cannot set up a libcurl handle");
    }
    return 0;
}

/* POST body (GET when body is NULL) to path; the answer lands in c->answer. */
static int client_request(struct client *c, const char *path, const char *body, size_t len, long *status)
{
    snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%d%s", c->port, path);
    strbuf_reset(&c->answer);
    c->error[0] = '\0';
    *status = 0;
    curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
    if (body) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK) {
        if (!c->error[0])
            snprintf(c->error, sizeof(c->error), "%s", curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

/* ---- the server process --------------------------------------------------------- */

struct server {
    pid_t pid;
    int port;
    char log_path[512];
};

/* A port the kernel just handed out on 127.0.0.1 (free a moment ago). */
static int pick_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof(sa);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port > 0 ? port : fail("cannot find a free port on 127.0.0.1");
}

/* Child side of spawn_server: only async-signal-safe calls. The server gets
 * SIGTERM if the benchmark dies, so it is never left behind. */
static void exec_server(pid_t parent, char *const argv[], const char *log_path)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(126);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    execv(argv[0], argv);
    _exit(127);
}

/* Start argv[0] (a path) with stdout and stderr in log_path. */
static int spawn(pid_t *out, char *const argv[], const char *log_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0)
        exec_server(parent, argv, log_path);
    *out = pid;
    return 0;
}

static int spawn_server(struct server *s, const char *binary, const char *state, enum mode mode,
                        const char *gpu_policy)
{
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    /* spread starts only with vcuda shares refused (their answers are Errors either way) */
    bool spread = gpu_policy && strcmp(gpu_policy, "spread") == 0;
    char *argv[] = {(char *)binary, "--state-file", (char *)state, "--listen-http", listen,
                    "--placement", (char *)MODE_NAME[mode], "--log-level", "warn", "--gpu-policy",
                    (char *)(gpu_policy ? gpu_policy : "binpack"), "--vcuda-shares", spread ? "refuse" : "place",
                    NULL};
    return spawn(&s->pid, argv, s->log_path);
}

/* waitpid without blocking, retried on EINTR: the pid, 0, or -1. */
static pid_t reap(pid_t pid, int *status, int flags)
{
    pid_t w;
    do
        w = waitpid(pid, status, flags);
    while (w < 0 && errno == EINTR);
    return w;
}

static void print_log_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char tail[2048];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof(tail) - 1 ? size - (long)sizeof(tail) + 1 : 0, SEEK_SET);
    size_t n = fread(tail, 1, sizeof(tail) - 1, f);
    fclose(f);
    tail[n] = '\0';
    fprintf(stderr, "gqa-bench: end of the server log %s:\n%s\n", path, tail);
}

/* 0 once /readyz answers 200, 1 if the server exited first, -1 otherwise. */
static int wait_ready(struct server *s, struct client *c)
{
    for (int waited = 0; waited < READY_TIMEOUT_MS; waited += POLL_MS) {
        if (g_interrupted)
            return fail("interrupted");
        int st = 0;
        if (reap(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            fail("the server exited before it was ready (%s %d)", WIFEXITED(st) ? "status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            return 1;
        }
        long status = 0;
        if (client_request(c, "/readyz", NULL, 0, &status) == 0 && status == 200)
            return 0;
        sleep_ms(POLL_MS);
    }
    return fail("the server was not ready after %d s", READY_TIMEOUT_MS / 1000);
}

/* SIGTERM, then wait (bounded); SIGKILL as the last resort. The server must
 * drain and exit 0. */
static int stop_server(struct server *s)
{
    if (s->pid <= 0)
        return 0;
    kill(s->pid, SIGTERM);
    int st = 0;
    pid_t w = 0;
    for (int waited = 0; waited < STOP_TIMEOUT_MS && (w = reap(s->pid, &st, WNOHANG)) == 0; waited += POLL_MS)
        sleep_ms(POLL_MS);
    if (w != s->pid) {
        kill(s->pid, SIGKILL);
        reap(s->pid, &st, 0);
        s->pid = 0;
        return fail("the server did not stop within %d s of SIGTERM and was killed", STOP_TIMEOUT_MS / 1000);
    }
    s->pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        print_log_tail(s->log_path);
        return fail("the server did not exit cleanly after SIGTERM (%s %d)", WIFEXITED(st) ? "status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
    return 0;
}

/* VmRSS and VmHWM of pid, in kB as the kernel prints them. */
static int read_memory(pid_t pid, long *rss_kb, long *hwm_kb)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail("cannot read %s: %s", path, strerror(errno));
    *rss_kb = *hwm_kb = -1;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "VmRSS: %ld", rss_kb);
        sscanf(line, "VmHWM: %ld", hwm_kb);
    }
    fclose(f);
    return *rss_kb >= 0 && *hwm_kb >= 0 ? 0 : fail("no VmRSS/VmHWM in %s", path);
}

/* ---- one server run: phases and their results ----------------------------------- */

struct run {
    struct server srv;
    struct client clients[CLIENT_THREADS];
    int nclients;
    atomic_ulong serial;    /* filter mode: the next distinct pod */
    enum mode mode;
    const char *gpu_policy; /* --gpu-policy (NULL: the default, binpack) */
    double ready_ms;
};

struct phase {
    enum verb verb;
    enum form form;
    enum mode mode;
    size_t n;
    int count;
    struct body *bodies[CLIENT_THREADS];    /* per client thread (the same one in bind mode) */
    struct strbuf reference;                /* bind mode: the first answer, verified in full */
    enum pod_kind kind;                     /* what the request pod asks for (vcuda family) */
    size_t rotate;                          /* the bodies' names begin with node `rotate` (NodeNames) */
};

struct result {
    size_t request_len, answer_len;
    int count;
    double p50, p99, max;
    int tp_count;
    double tp_rps;
};

static void free_clients(struct run *r)
{
    for (int k = 0; k < r->nclients; k++)
        client_free(&r->clients[k]);
    r->nclients = 0;
}

static int init_clients(struct run *r)
{
    for (int k = 0; k < CLIENT_THREADS; k++) {
        if (client_init(&r->clients[k], r->srv.port) != 0) {
            free_clients(r);
            return -1;
        }
        r->nclients = k + 1;
    }
    return 0;
}

static int try_start(struct run *r, const char *binary, const char *state)
{
    int port = pick_port();
    if (port < 0)
        return -1;
    r->srv.port = port;
    if (init_clients(r) != 0)
        return -1;
    double t0 = now_ms();
    if (spawn_server(&r->srv, binary, state, r->mode, r->gpu_policy) != 0) {
        free_clients(r);
        return -1;
    }
    int rc = wait_ready(&r->srv, &r->clients[0]);
    r->ready_ms = now_ms() - t0;
    if (rc != 0) {
        if (rc < 0)
            stop_server(&r->srv);
        print_log_tail(r->srv.log_path);
        free_clients(r);
    }
    return rc;
}

static int start_run(struct run *r, const char *binary, const char *state, const char *dir, enum mode mode,
                     const char *gpu_policy)
{
    memset(r, 0, sizeof(*r));
    r->mode = mode;
    r->gpu_policy = gpu_policy;
    atomic_init(&r->serial, 1);
    snprintf(r->srv.log_path, sizeof(r->srv.log_path), "%s/server-%s.log", dir, MODE_NAME[mode]);
    int rc = 1;
    for (int attempt = 0; attempt < START_ATTEMPTS && rc == 1; attempt++)
        rc = try_start(r, binary, state);
    if (rc == 0)
        return 0;
    unlink(r->srv.log_path);
    return fail("could not start %s", binary);
}

static int finish_run(struct run *r, long *rss_kb, long *hwm_kb)
{
    int rc = read_memory(r->srv.pid, rss_kb, hwm_kb);
    free_clients(r);
    if (stop_server(&r->srv) != 0)
        rc = -1;
    unlink(r->srv.log_path);
    return rc;
}

/* ---- answer checks ---------------------------------------------------------------- */

static int check_name(size_t i, const char *got, char *why)
{
    char want[32];
    node_name(want, sizeof(want), i);
    if (got && strcmp(got, want) == 0)
        return 0;
    snprintf(why, VERIFY_MSG, "node %zu is \"%.40s\", expected \"%s\"", i, got ? got : "(not a string)", want);
    return -1;
}

static int check_error_field(const cJSON *root, char *why)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "Error");
    if (!cJSON_IsString(e))
        snprintf(why, VERIFY_MSG, "the answer has no Error string");
    else if (e->valuestring[0])
        snprintf(why, VERIFY_MSG, "the server answered Error: %.200s", e->valuestring);
    else
        return 0;
    return -1;
}

static const char *kept_name(const cJSON *item, enum form form)
{
    if (form == FORM_NAMES)
        return cJSON_IsString(item) ? item->valuestring : NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(item, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    return cJSON_IsString(name) ? name->valuestring : NULL;
}

/* The kept nodes in the request's form; the other form must be null. */
static const cJSON *kept_list(const cJSON *root, enum form form, char *why)
{
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "Nodes");
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(root, "NodeNames");
    const cJSON *list = form == FORM_NAMES ? names : cJSON_GetObjectItemCaseSensitive(nodes, "items");
    const cJSON *other = form == FORM_NAMES ? nodes : names;
    if (!cJSON_IsArray(list) || !cJSON_IsNull(other)) {
        snprintf(why, VERIFY_MSG, "the answer is not in the %s form", FORM_NAME[form]);
        return NULL;
    }
    return list;
}

static int count_members(const cJSON *root, const char *field, int *count, char *why)
{
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, field);
    if (!cJSON_IsObject(obj)) {
        snprintf(why, VERIFY_MSG, "%s is not an object", field);
        return -1;
    }
    *count = cJSON_GetArraySize(obj);
    return 0;
}

/* Bind placement: every node fits and is kept, in the request's order. */
static int verify_filter_all(const struct phase *ph, const cJSON *root, char *why)
{
    const cJSON *list = kept_list(root, ph->form, why);
    int failed = 0, unresolvable = 0;
    if (!list || count_members(root, "FailedNodes", &failed, why) ||
        count_members(root, "FailedAndUnresolvableNodes", &unresolvable, why))
        return -1;
    size_t i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++)
        if (i >= ph->n || check_name((ph->rotate + i) % ph->n, kept_name(it, ph->form), why) != 0)
            break;
    if (i != ph->n || failed || unresolvable) {
        if (!why[0])
            snprintf(why, VERIFY_MSG, "%d nodes kept, %d failed, %d unresolvable; expected all %zu kept",
                     cJSON_GetArraySize(list), failed, unresolvable, ph->n);
        return -1;
    }
    return 0;
}

/* Bind placement, one whole GPU: kept are exactly the nodes with an idle
 * GPU (idle_gpu_node), in order; every other node failed, resolvably. */
static int verify_filter_idle(const struct phase *ph, const cJSON *root, char *why)
{
    const cJSON *list = kept_list(root, ph->form, why);
    int failed = 0, unresolvable = 0;
    if (!list || count_members(root, "FailedNodes", &failed, why) ||
        count_members(root, "FailedAndUnresolvableNodes", &unresolvable, why))
        return -1;
    size_t i = 0, kept = 0;
    for (const cJSON *it = list->child; it; it = it->next, i += 4, kept++)
        if (i >= ph->n || !idle_gpu_node(i) || check_name(i, kept_name(it, ph->form), why) != 0)
            break;
    size_t want = (ph->n + 3) / 4;
    if (kept != want || (size_t)failed != ph->n - want || unresolvable) {
        if (!why[0])
            snprintf(why, VERIFY_MSG, "%zu nodes kept, %d failed, %d unresolvable; expected %zu, %zu and 0", kept,
                     failed, unresolvable, want, ph->n - want);
        return -1;
    }
    return 0;
}

static bool is_node_name(const char *s, size_t n)
{
    unsigned idx = 0;
    char tail = 0;
    if (!s || sscanf(s, "gpu-a100-%5u%c", &idx, &tail) != 1 || idx >= n)
        return false;
    char want[32];
    node_name(want, sizeof(want), idx);
    return strcmp(s, want) == 0;
}

/* Filter placement: exactly one node kept; every other one failed with
 * "pod assigned to node <kept>", or, once the decisions so far have filled
 * it (binpack fills the first nodes with the one-core pods, about 400 per
 * node), with its own capacity refusal. */
static int verify_filter_one(const struct phase *ph, const cJSON *root, char *why)
{
    const cJSON *list = kept_list(root, ph->form, why);
    if (!list)
        return -1;
    const char *kept = cJSON_GetArraySize(list) == 1 ? kept_name(list->child, ph->form) : NULL;
    if (!is_node_name(kept, ph->n)) {
        snprintf(why, VERIFY_MSG, "%d nodes kept, expected exactly one of the requested", cJSON_GetArraySize(list));
        return -1;
    }
    char reason[64];
    snprintf(reason, sizeof(reason), "pod assigned to node %s", kept);
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(root, "FailedNodes");
    size_t count = 0;
    for (const cJSON *f = failed ? failed->child : NULL; f; f = f->next, count++) {
        bool full = cJSON_IsString(f) && strncmp(f->valuestring, "container \"", 11) == 0 &&
                    strstr(f->valuestring, "vcuda-core on one GPU; the freest");
        if (!is_node_name(f->string, ph->n) || strcmp(f->string, kept) == 0 || !cJSON_IsString(f) ||
            (strcmp(f->valuestring, reason) != 0 && !full)) {
            snprintf(why, VERIFY_MSG, "FailedNodes[\"%.40s\"] is unexpected: %.120s", f->string ? f->string : "",
                     cJSON_IsString(f) ? f->valuestring : "(not a string)");
            return -1;
        }
    }
    int unresolvable = 0;
    if (count_members(root, "FailedAndUnresolvableNodes", &unresolvable, why) != 0)
        return -1;
    if (count + 1 == ph->n && unresolvable == 0)
        return 0;
    snprintf(why, VERIFY_MSG, "%zu failed and %d unresolvable nodes, expected %zu and 0", count, unresolvable,
             ph->n - 1);
    return -1;
}

/* Whether got is the name of requested node i. */
static bool names_node(size_t i, const char *got)
{
    char want[32];
    node_name(want, sizeof(want), i);
    return got && strcmp(got, want) == 0;
}

/* HostPriorityList: requested nodes in the request's order, each with a
 * score 1..10, the ones left out at 0 (the answer is relative to the
 * request's lowest score, docs/design.md). */
static int verify_priorities(const struct phase *ph, const cJSON *root, char *why)
{
    if (!cJSON_IsArray(root)) {
        snprintf(why, VERIFY_MSG, "the answer is not a HostPriorityList array");
        return -1;
    }
    size_t next = 0; /* the first requested node an entry may name */
    for (const cJSON *it = root->child; it; it = it->next) {
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(it, "Host");
        const cJSON *score = cJSON_GetObjectItemCaseSensitive(it, "Score");
        const char *name = cJSON_IsString(host) ? host->valuestring : NULL;
        while (next < ph->n && !names_node((ph->rotate + next) % ph->n, name))
            next++;
        if (next == ph->n) {
            snprintf(why, VERIFY_MSG, "host \"%.40s\" is not a requested node after the previous one",
                     name ? name : "(not a string)");
            return -1;
        }
        next++;
        if (!cJSON_IsNumber(score) || score->valuedouble < 1 || score->valuedouble > 10 ||
            score->valuedouble != (double)score->valueint) {
            snprintf(why, VERIFY_MSG, "host %s has Score outside 1..10", name);
            return -1;
        }
    }
    return 0;
}

/* The bytes of the items array: after "items":[ up to the "]}" that the
 * NodeNames field follows. NULL when text is not shaped so. */
static const char *items_section(const char *text, size_t len, size_t *out_len)
{
    static const char open[] = "\"items\":[", close[] = "]},\"NodeNames\":null";
    const char *a = memmem(text, len, open, sizeof(open) - 1);
    if (!a)
        return NULL;
    a += sizeof(open) - 1;
    const char *b = memmem(a, len - (size_t)(a - text), close, sizeof(close) - 1);
    if (!b)
        return NULL;
    *out_len = (size_t)(b - a);
    return a;
}

/* nodeCacheCapable: false: kube-scheduler keeps the Node objects it gets
 * back, so every kept item must be the request's item, byte for byte. In
 * bind mode every node is kept in order (the two sections are equal); in
 * filter mode the one kept item must be a whole item of the request. */
static int verify_items_bytes(const struct phase *ph, const struct strbuf *answer, char *why)
{
    const struct strbuf *req = &ph->bodies[0]->text;
    size_t rl = 0, al = 0;
    const char *r = items_section(req->data, req->len, &rl);
    const char *a = items_section(answer->data, answer->len, &al);
    if (!r || !a) {
        snprintf(why, VERIFY_MSG, "no Nodes.items array in the %s", r ? "answer" : "request");
        return -1;
    }
    if (ph->mode == MODE_BIND) {
        if (al == rl && memcmp(a, r, rl) == 0)
            return 0;
        snprintf(why, VERIFY_MSG, "the answer's items (%zu bytes) are not the request's items (%zu bytes)", al, rl);
        return -1;
    }
    const char *at = al ? memmem(r, rl, a, al) : NULL;
    bool whole = at && (at == r || at[-1] == ',') && (at + al == r + rl || at[al] == ',');
    if (whole && a[0] == '{' && a[al - 1] == '}')
        return 0;
    snprintf(why, VERIFY_MSG, "the kept item (%zu bytes) is not one of the request's items as sent", al);
    return -1;
}

static int verify_full(const struct phase *ph, const struct strbuf *answer, char *why)
{
    cJSON *root = answer->len ? cJSON_ParseWithLength(answer->data, answer->len) : NULL;
    if (!root) {
        snprintf(why, VERIFY_MSG, "the answer (%zu bytes) is not JSON (or out of memory)", answer->len);
        return -1;
    }
    int rc;
    if (ph->verb == VERB_PRIORITIZE)
        rc = verify_priorities(ph, root, why);
    else if (check_error_field(root, why) != 0)
        rc = -1;
    else
        rc = ph->mode != MODE_BIND   ? verify_filter_one(ph, root, why)
             : ph->kind == KIND_WHOLE ? verify_filter_idle(ph, root, why)
                                      : verify_filter_all(ph, root, why);
    if (rc == 0 && ph->verb == VERB_FILTER && ph->form == FORM_NODES)
        rc = verify_items_bytes(ph, answer, why);
    cJSON_Delete(root);
    return rc;
}

/* Bind mode answers identically every time; filter mode must end with an
 * empty Error (checked in full in the latency phase). */
static int verify_quick(const struct phase *ph, const struct strbuf *answer, char *why)
{
    static const char tail[] = "\"Error\":\"\"}";
    size_t tl = sizeof(tail) - 1;
    if (ph->mode == MODE_BIND) {
        if (answer->len == ph->reference.len && memcmp(answer->data, ph->reference.data, answer->len) == 0)
            return 0;
        snprintf(why, VERIFY_MSG, "the answer differs from the first (verified) one");
        return -1;
    }
    if (answer->len >= tl && memcmp(answer->data + answer->len - tl, tail, tl) == 0)
        return 0;
    snprintf(why, VERIFY_MSG, "the answer does not end with an empty Error: ...%.120s",
             answer->len > 120 ? answer->data + answer->len - 120 : (answer->data ? answer->data : ""));
    return -1;
}

static int check_answer(const struct phase *ph, const struct strbuf *answer, bool full)
{
    char why[VERIFY_MSG] = "";
    int rc = full ? verify_full(ph, answer, why) : verify_quick(ph, answer, why);
    if (rc == 0)
        return 0;
    return fail("placement %s, %s %s, N=%zu: wrong answer: %s", MODE_NAME[ph->mode], VERB_NAME[ph->verb],
                FORM_NAME[ph->form], ph->n, why);
}

/* ---- measuring ---------------------------------------------------------------------- */

static int send_one(struct run *r, const struct phase *ph, int slot, double *ms)
{
    struct client *c = &r->clients[slot];
    struct body *b = ph->bodies[slot];
    if (ph->mode == MODE_FILTER)
        body_set_serial(b, atomic_fetch_add(&r->serial, 1));
    long status = 0;
    double t0 = now_ms();
    int rc = client_request(c, VERB_PATH[ph->verb], b->text.data, b->text.len, &status);
    *ms = now_ms() - t0;
    if (rc != 0)
        return fail("POST %s: %s", VERB_PATH[ph->verb], c->error);
    if (status != 200)
        return fail("POST %s answered HTTP %ld: %.200s", VERB_PATH[ph->verb], status,
                    c->answer.data ? c->answer.data : "");
    return 0;
}

/* One request outside the figures; in bind mode its answer is the reference. */
static int warm_up(struct run *r, struct phase *ph)
{
    double ms;
    const struct strbuf *answer = &r->clients[0].answer;
    if (send_one(r, ph, 0, &ms) != 0 || check_answer(ph, answer, true) != 0)
        return -1;
    if (ph->mode != MODE_BIND)
        return 0;
    strbuf_reset(&ph->reference);
    strbuf_append(&ph->reference, answer->data, answer->len);
    return strbuf_failed(&ph->reference) ? fail("out of memory keeping the reference answer") : 0;
}

static int compare_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted[0..n). */
static double percentile(const double *sorted, int n, int pct)
{
    int rank = (pct * n + 99) / 100;
    return sorted[rank < 1 ? 0 : rank - 1];
}

static int run_latency(struct run *r, struct phase *ph, struct result *res)
{
    double *ms = calloc((size_t)ph->count, sizeof(*ms));
    if (!ms)
        return fail("out of memory");
    int rc = warm_up(r, ph);
    for (int i = 0; rc == 0 && i < ph->count; i++) {
        rc = g_interrupted ? fail("interrupted") : send_one(r, ph, 0, &ms[i]);
        if (rc == 0)
            rc = check_answer(ph, &r->clients[0].answer, ph->mode == MODE_FILTER);
    }
    if (rc == 0) {
        qsort(ms, (size_t)ph->count, sizeof(*ms), compare_ms);
        res->count = ph->count;
        res->p50 = percentile(ms, ph->count, 50);
        res->p99 = percentile(ms, ph->count, 99);
        res->max = ms[ph->count - 1];
        res->answer_len = r->clients[0].answer.len;
    }
    free(ms);
    return rc;
}

struct worker {
    struct run *run;
    struct phase *phase;
    int slot;
    atomic_int *next;
    atomic_int *failed;
};

static void *throughput_worker(void *arg)
{
    struct worker *w = arg;
    for (int done = 0; done < w->phase->count; done++) {
        double ms;
        if (atomic_load(w->failed) || g_interrupted || atomic_fetch_add(w->next, 1) >= w->phase->count)
            break;
        if (send_one(w->run, w->phase, w->slot, &ms) != 0 ||
            check_answer(w->phase, &w->run->clients[w->slot].answer, false) != 0) {
            atomic_store(w->failed, 1);
            break;
        }
    }
    return NULL;
}

/* ph->count requests shared by CLIENT_THREADS threads, each on its own handle. */
static int run_throughput(struct run *r, struct phase *ph, struct result *res)
{
    atomic_int next = 0, failed = 0;
    struct worker w[CLIENT_THREADS];
    pthread_t tid[CLIENT_THREADS];
    int started = 0;
    double t0 = now_ms();
    for (int k = 0; k < CLIENT_THREADS; k++) {
        w[k] = (struct worker){r, ph, k, &next, &failed};
        if (pthread_create(&tid[k], NULL, throughput_worker, &w[k]) != 0) {
            atomic_store(&failed, 1);
            fail("cannot start a client thread");
            break;
        }
        started++;
    }
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    double wall = now_ms() - t0;
    if (atomic_load(&failed) || g_interrupted)
        return -1;
    res->tp_count = ph->count;
    res->tp_rps = wall > 0 ? ph->count / (wall / 1e3) : 0;
    return 0;
}

/* ---- printing --------------------------------------------------------------------------- */

static void format_bytes(char *buf, size_t size, double bytes)
{
    if (bytes >= 1e6)
        snprintf(buf, size, "%.1f MB", bytes / 1e6);
    else
        snprintf(buf, size, "%.1f kB", bytes / 1e3);
}

static void print_table_header(void)
{
    printf("    %-10s  %-9s  %9s  %9s  %5s  %8s  %8s  %8s  %6s  %9s\n", "verb", "form", "request", "answer", "reqs",
           "p50 ms", "p99 ms", "max ms", "2cl n", "2cl req/s");
}

static void print_row(const struct phase *ph, const struct result *res)
{
    char req[24], ans[24];
    format_bytes(req, sizeof(req), (double)res->request_len);
    format_bytes(ans, sizeof(ans), (double)res->answer_len);
    printf("    %-10s  %-9s  %9s  %9s  %5d  %8.3f  %8.3f  %8.3f  %6d  %9.1f\n", VERB_NAME[ph->verb],
           FORM_NAME[ph->form], req, ans, res->count, res->p50, res->p99, res->max, res->tp_count, res->tp_rps);
    fflush(stdout);
}

/* ---- a size ------------------------------------------------------------------------------- */

struct bench_opts {
    const char *binary;
    size_t sizes[MAX_SIZES];
    int nsizes;
    bool families[FAM_COUNT];
    int requests;           /* NodeNames form */
    int nodes_requests;     /* Nodes form */
    int parse_runs;
    int decision_pods;      /* decision throughput against the API simulator; 0: skip */
    int decision_callers;
    int patch_delay_ms;
    const char *apisim;     /* tests/apisim/apisim.py */
    const char *python;
    size_t share_size;      /* the server-share cluster; 0: skip */
    size_t scale_size;      /* the large cluster synced from the simulator; 0: skip */
    int event_pods;         /* watch events in-process; 0: skip */
};

/* What the N = 5000 targets are judged on. */
struct size_report {
    enum family family;
    struct result names_filter, nodes_filter;
    double parse_ms;
    long rss_kb, hwm_kb;
};

static int measure_phase(struct run *r, struct phase *ph, struct result *out)
{
    struct result res = {0};
    res.request_len = ph->bodies[0]->text.len;
    strbuf_init(&ph->reference);
    int rc = run_latency(r, ph, &res);
    if (rc == 0)
        rc = run_throughput(r, ph, &res);
    strbuf_free(&ph->reference);
    if (rc == 0)
        print_row(ph, &res);
    if (out)
        *out = res;
    return rc;
}

static int build_bodies(struct body bodies[CLIENT_THREADS], int count, const struct dataset *d, enum form form,
                        enum mode mode)
{
    /* Bind mode: a share every node takes; filter mode: a tiny one, so the
     * recorded decisions never exhaust a node. */
    int cores = mode == MODE_BIND ? 10 : 1;
    int memory = d->family == FAM_HAMI ? (mode == MODE_BIND ? 8192 : 100) : (mode == MODE_BIND ? 32 : 1);
    for (int k = 0; k < count; k++) {
        if (body_build(&bodies[k], d, form, KIND_VCUDA, cores, memory, d->family == FAM_HAMI && mode == MODE_FILTER) !=
            0) {
            while (k-- > 0)
                strbuf_free(&bodies[k].text);
            return -1;
        }
    }
    return 0;
}

static int measure_cjson(const struct strbuf *body, int runs, double *median_ms)
{
    double t[MAX_PARSE_RUNS];
    for (int i = 0; i < runs; i++) {
        double t0 = now_ms();
        cJSON *v = cJSON_ParseWithLength(body->data, body->len);
        t[i] = now_ms() - t0;
        if (!v)
            return fail("cJSON_ParseWithLength failed on the Nodes-form body (invalid JSON or out of memory)");
        cJSON_Delete(v);
    }
    qsort(t, (size_t)runs, sizeof(t[0]), compare_ms);
    *median_ms = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    return 0;
}

/* Every verb measured for one request form: filter, plus prioritize for
 * NodeNames in bind mode. In filter mode each client thread patches its own
 * body with fresh pod serials. */
static int measure_form(struct run *r, const struct bench_opts *o, const struct dataset *d, enum form form,
                        struct size_report *rep)
{
    struct body bodies[CLIENT_THREADS];
    int nbodies = r->mode == MODE_FILTER ? CLIENT_THREADS : 1;
    if (build_bodies(bodies, nbodies, d, form, r->mode) != 0)
        return -1;
    struct phase ph = {VERB_FILTER, form, r->mode, d->n, form == FORM_NAMES ? o->requests : o->nodes_requests,
                       {&bodies[0], &bodies[nbodies - 1]}, {0}, KIND_VCUDA, 0};
    bool main_figures = r->mode == MODE_BIND;
    int rc = measure_phase(r, &ph, main_figures ? (form == FORM_NAMES ? &rep->names_filter : &rep->nodes_filter)
                                                : NULL);
    if (rc == 0 && main_figures && form == FORM_NAMES) {
        ph.verb = VERB_PRIORITIZE;
        rc = measure_phase(r, &ph, NULL);
    }
    if (rc == 0 && main_figures && form == FORM_NODES)
        rc = measure_cjson(&bodies[0].text, o->parse_runs, &rep->parse_ms);
    for (int k = 0; k < nbodies; k++)
        strbuf_free(&bodies[k].text);
    return rc;
}

static int measure_mode(const struct bench_opts *o, const struct dataset *d, const char *state, const char *dir,
                        enum mode mode, struct size_report *rep)
{
    struct run r;
    if (start_run(&r, o->binary, state, dir, mode, NULL) != 0)
        return -1;
    printf("  placement %s%s: server ready %.2f s after start\n", MODE_NAME[mode],
           mode == MODE_BIND ? " (evaluation only, nothing recorded)"
                             : " (default; a distinct 1-core pod per request, each decision recorded)",
           r.ready_ms / 1e3);
    print_table_header();
    int rc = measure_form(&r, o, d, FORM_NAMES, rep);
    if (rc == 0)
        rc = measure_form(&r, o, d, FORM_NODES, rep);
    long rss = 0, hwm = 0;
    if (finish_run(&r, &rss, &hwm) != 0)
        rc = -1;
    if (rc == 0)
        printf("    server memory after the run: VmRSS %.1f MB, VmHWM %.1f MB\n", rss / 1e3, hwm / 1e3);
    if (mode == MODE_BIND) {
        rep->rss_kb = rss;
        rep->hwm_kb = hwm;
    }
    return rc;
}

static void print_target(const char *label, double value, const char *unit, bool pass)
{
    printf("    %-44s %10.3f %-3s %s\n", label, value, unit, pass ? "PASS" : "MISS");
}

static void print_targets(const struct size_report *rep)
{
    double rss = rep->rss_kb * 1e3, hwm = rep->hwm_kb * 1e3;
    char label[96];
    printf("  targets (N=%d, %s, placement bind):\n", TARGET_N, FAMILY_TITLE[rep->family]);
    snprintf(label, sizeof(label), "filter NodeNames p50 <= %.0f ms", TARGET_NAMES_P50_MS);
    print_target(label, rep->names_filter.p50, "ms", rep->names_filter.p50 <= TARGET_NAMES_P50_MS);
    snprintf(label, sizeof(label), "filter NodeNames p99 <= %.0f ms", TARGET_NAMES_P99_MS);
    print_target(label, rep->names_filter.p99, "ms", rep->names_filter.p99 <= TARGET_NAMES_P99_MS);
    double ratio = rep->parse_ms > 0 ? rep->nodes_filter.p50 / rep->parse_ms : 0;
    snprintf(label, sizeof(label), "filter Nodes p50 / cJSON_Parse <= %.2f", TARGET_NODES_PARSE_RATIO);
    print_target(label, ratio, "", rep->parse_ms > 0 && ratio <= TARGET_NODES_PARSE_RATIO);
    print_target("server VmRSS after the run <= 200 MB", rss / 1e6, "MB", rss <= TARGET_RSS_BYTES);
    print_target("server VmHWM (peak) <= 200 MB", hwm / 1e6, "MB", hwm <= TARGET_RSS_BYTES);
}

static void print_parse(const struct size_report *rep, size_t body_len)
{
    char size[24];
    format_bytes(size, sizeof(size), (double)body_len);
    printf("  cJSON_Parse of the same Nodes-form body (%s) in this process: median %.3f ms (%.0f MB/s)\n", size,
           rep->parse_ms, rep->parse_ms > 0 ? (double)body_len / 1e3 / rep->parse_ms : 0);
    printf("  server filter p50, Nodes form / cJSON_Parse time = %.3f (target <= %.2f)\n",
           rep->parse_ms > 0 ? rep->nodes_filter.p50 / rep->parse_ms : 0, TARGET_NODES_PARSE_RATIO);
}

static int bench_size(const struct bench_opts *o, size_t n, enum family fam, const char *dir)
{
    struct dataset d;
    char state[512], size[24];
    if (dataset_build(&d, n, fam) != 0)
        return -1;
    snprintf(state, sizeof(state), "%s/state-%s-%zu.json", dir, FAMILY_NAME[fam], n);
    int rc = write_state_file(&d, state);
    format_bytes(size, sizeof(size), (double)d.state_bytes);
    if (rc == 0)
        printf("\n== N = %zu nodes x %d GPUs, %s, %zu bound pods; Node objects %.2f kB each on average; state file "
               "%s\n",
               n, GPUS_PER_NODE, FAMILY_TITLE[fam], n * GPUS_PER_NODE, (double)d.items.len / (double)n / 1e3, size);
    struct size_report rep = {.family = fam};
    if (rc == 0)
        rc = measure_mode(o, &d, state, dir, MODE_BIND, &rep);
    if (rc == 0)
        print_parse(&rep, rep.nodes_filter.request_len);
    if (rc == 0 && n == TARGET_N)
        print_targets(&rep);
    if (rc == 0)
        rc = measure_mode(o, &d, state, dir, MODE_FILTER, &rep);
    unlink(state);
    dataset_free(&d);
    return rc;
}

/* ---- decision throughput against the API simulator ------------------------------------------ */

/* Filter-mode decisions written to tests/apisim with every pod PATCH delayed,
 * by several concurrent callers as kube-scheduler's retries and profiles
 * would send them: pods decided per second, each answer checked, and every
 * decision found on its pod in the API server afterwards. */

#define DECISION_NODES 10
#define DECISION_TARGET_PER_S 200.0
#define MAX_CALLERS 64
#define MAX_DECISION_PODS 8000 /* 1 core each on 10 nodes x 8 GPUs */
#define SIM_TOKEN "bench-token"

struct sim {
    pid_t pid;
    int port;
    char dir[256], log_path[320], pki[320], state[320], kubeconfig[320], port_file[320], ca[340];
};

static void decision_node_name(char *buf, size_t size, int i)
{
    snprintf(buf, size, "dn-%02d", i);
}

static void put_decision_pod(struct strbuf *sb, int i)
{
    strbuf_printf(sb,
                  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d-%06d\",\"namespace\":\"bench\","
                  "\"uid\":\"00000000-0000-4000-8000-%012d\"},\"spec\":{\"schedulerName\":\"default-scheduler\","
                  "\"containers\":[{\"name\":\"app\",\"image\":\"registry.example.com/app:1\",\"resources\":{"
                  "\"limits\":{\"tencent.com/vcuda-core\":\"1\",\"tencent.com/vcuda-memory\":\"1\"}}}]},"
                  "\"status\":{\"phase\":\"Pending\"}}",
                  i, i);
}

static int write_sim_state(const char *path, int pods)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
    for (int i = 0; i < DECISION_NODES; i++) {
        char name[16];
        decision_node_name(name, sizeof(name), i);
        strbuf_printf(&sb,
                      "%s{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":{"
                      "\"kubernetes.io/hostname\":\"%s\"}},\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":"
                      "\"256Gi\",\"tencent.com/vcuda-core\":\"800\",\"tencent.com/vcuda-memory\":\"%d\"}}}",
                      i ? "," : "", name, name, GPUS_PER_NODE * 64);
    }
    for (int i = 0; i < pods; i++) {
        strbuf_putc(&sb, ',');
        put_decision_pod(&sb, i);
    }
    strbuf_puts(&sb, "]}\n");
    FILE *f = strbuf_failed(&sb) ? NULL : fopen(path, "w");
    int rc = f && fwrite(sb.data, 1, sb.len, f) == sb.len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    strbuf_free(&sb);
    return rc == 0 ? 0 : fail("cannot write %s", path);
}

/* Run argv to completion; its exit status, or -1. */
static int run_child(char *const argv[], const char *log_path)
{
    pid_t pid;
    if (spawn(&pid, argv, log_path) != 0)
        return -1;
    int st = 0;
    if (reap(pid, &st, 0) != pid)
        return fail("waitpid: %s", strerror(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int read_port_file(const char *path)
{
    FILE *f = fopen(path, "r");
    int port = 0;
    if (f) {
        if (fscanf(f, "%d", &port) != 1)
            port = 0;
        fclose(f);
    }
    return port;
}

/* One request to the simulator over HTTPS (its own CA): status, or -1. */
static long sim_request(const struct sim *sim, const char *method, const char *path, const char *body,
                        struct strbuf *answer)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *auth = hdr ? curl_slist_append(hdr, "Authorization: Bearer " SIM_TOKEN) : NULL;
    char url[256];
    long status = -1;
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", sim->port, path);
    if (h && auth) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_CAINFO, sim->ca);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, auth);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body)
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_slist_free_all(auth ? auth : hdr);
    if (h)
        curl_easy_cleanup(h);
    return status;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void sim_cleanup(struct sim *sim)
{
    if (sim->dir[0])
        nftw(sim->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* TLS material, the objects (the decision cluster, or `cluster` with its
 * bound pods when given), then the simulator itself with the PATCH delay. */
static int start_sim(struct sim *sim, const struct bench_opts *o, const char *dir, struct dataset *cluster)
{
    memset(sim, 0, sizeof(*sim));
    snprintf(sim->dir, sizeof(sim->dir), "%s/apisim", dir);
    snprintf(sim->pki, sizeof(sim->pki), "%s/pki", sim->dir);
    snprintf(sim->ca, sizeof(sim->ca), "%s/ca.crt", sim->pki);
    snprintf(sim->log_path, sizeof(sim->log_path), "%s/apisim.log", sim->dir);
    snprintf(sim->state, sizeof(sim->state), "%s/state.json", sim->dir);
    snprintf(sim->kubeconfig, sizeof(sim->kubeconfig), "%s/kubeconfig.json", sim->dir);
    snprintf(sim->port_file, sizeof(sim->port_file), "%s/port", sim->dir);
    if (mkdir(sim->dir, 0700) != 0)
        return fail("cannot create %s: %s", sim->dir, strerror(errno));
    char *gen[] = {(char *)o->python, (char *)o->apisim, "--gen-pki", sim->pki, NULL};
    if (run_child(gen, sim->log_path) != 0) {
        print_log_tail(sim->log_path);
        return fail("%s %s --gen-pki failed (needs python3 and openssl)", o->python, o->apisim);
    }
    if ((cluster ? write_state_file(cluster, sim->state) : write_sim_state(sim->state, o->decision_pods)) != 0)
        return -1;
    char crt[340], key[340];
    snprintf(crt, sizeof(crt), "%s/server.crt", sim->pki);
    snprintf(key, sizeof(key), "%s/server.key", sim->pki);
    char *argv[] = {(char *)o->python, (char *)o->apisim, "--port", "0", "--port-file", sim->port_file,
                    "--tls-cert", crt, "--tls-key", key, "--token", SIM_TOKEN, "--state", sim->state,
                    "--kubeconfig-out", sim->kubeconfig, "--kubeconfig-ca", sim->ca, "--history", "100000", NULL};
    if (spawn(&sim->pid, argv, sim->log_path) != 0)
        return -1;
    for (int waited = 0; !(sim->port = read_port_file(sim->port_file)); waited += POLL_MS) {
        int st;
        if (g_interrupted || waited > READY_TIMEOUT_MS || reap(sim->pid, &st, WNOHANG) == sim->pid) {
            print_log_tail(sim->log_path);
            return fail("the API simulator did not start");
        }
        sleep_ms(POLL_MS);
    }
    char delay[96];
    snprintf(delay, sizeof(delay), "{\"op\":\"delay\",\"ms\":%d,\"method\":\"PATCH\"}", o->patch_delay_ms);
    struct strbuf answer;
    strbuf_init(&answer);
    long status = sim_request(sim, "POST", "/_sim/faults", delay, &answer);
    strbuf_free(&answer);
    return status == 200 ? 0 : fail("the simulator refused the delay rule (HTTP %ld)", status);
}

static void stop_sim(struct sim *sim)
{
    if (sim->pid > 0) {
        kill(sim->pid, SIGTERM);
        int st;
        reap(sim->pid, &st, 0);
        sim->pid = 0;
    }
}

struct caller {
    struct client c;
    const struct strbuf *bodies;
    int first, step, count;
    double *ms;
    atomic_int *failed;
    char why[VERIFY_MSG];
};

/* A decision answers exactly one of the offered nodes, and no Error. */
static int check_decision(const struct strbuf *answer, char *why)
{
    cJSON *root = cJSON_ParseWithLength(answer->data ? answer->data : "", answer->len);
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(root, "NodeNames");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "Error");
    int rc = 0;
    if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != 1 || (cJSON_IsString(err) && err->valuestring[0])) {
        snprintf(why, VERIFY_MSG, "not one node without Error: %.200s", answer->data ? answer->data : "");
        rc = -1;
    }
    cJSON_Delete(root);
    return rc;
}

static void *caller_main(void *arg)
{
    struct caller *k = arg;
    for (int i = k->first; i < k->count && !atomic_load(k->failed) && !g_interrupted; i += k->step) {
        long status = 0;
        double t0 = now_ms();
        int rc = client_request(&k->c, "/scheduler/filter", k->bodies[i].data, k->bodies[i].len, &status);
        k->ms[i] = now_ms() - t0;
        if (rc != 0 || status != 200)
            snprintf(k->why, sizeof(k->why), "HTTP %ld: %s", status, k->c.error);
        else if (check_decision(&k->c.answer, k->why) == 0)
            continue;
        atomic_store(k->failed, 1);
    }
    return NULL;
}

static int build_decision_bodies(struct strbuf *bodies, int n)
{
    for (int i = 0; i < n; i++) {
        struct strbuf *b = &bodies[i];
        strbuf_init(b);
        strbuf_puts(b, "{\"Pod\":");
        put_decision_pod(b, i);
        strbuf_puts(b, ",\"Nodes\":null,\"NodeNames\":[");
        for (int k = 0; k < DECISION_NODES; k++) {
            char name[16];
            decision_node_name(name, sizeof(name), k);
            strbuf_printf(b, "%s\"%s\"", k ? "," : "", name);
        }
        strbuf_puts(b, "]}");
        if (strbuf_failed(b))
            return fail("out of memory");
    }
    return 0;
}

/* Run the callers; the wall time from their start to the last answer. */
static int run_callers(const struct bench_opts *o, int port, const struct strbuf *bodies, double *ms, double *wall)
{
    int n = o->decision_callers;
    struct caller *k = calloc((size_t)n, sizeof(*k));
    pthread_t *tid = calloc((size_t)n, sizeof(*tid));
    atomic_int failed = 0;
    int ready = 0, started = 0, rc = 0;
    if (!k || !tid) {
        free(k);
        free(tid);
        return fail("out of memory");
    }
    for (; ready < n; ready++) { /* connections set up before the clock starts */
        k[ready] = (struct caller){.bodies = bodies, .first = ready, .step = n, .count = o->decision_pods, .ms = ms,
                                   .failed = &failed};
        if (client_init(&k[ready].c, port) != 0)
            break;
    }
    double t0 = now_ms();
    for (; started < ready; started++)
        if (pthread_create(&tid[started], NULL, caller_main, &k[started]) != 0)
            break;
    if (started < n) {
        atomic_store(&failed, 1); /* the ones running stop at their next decision */
        rc = fail("cannot start %d caller threads", n);
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    *wall = now_ms() - t0;
    for (int i = 0; i < started && rc == 0; i++)
        if (k[i].why[0])
            rc = fail("decision answer: %s", k[i].why);
    for (int i = 0; i < ready; i++)
        client_free(&k[i].c);
    free(k);
    free(tid);
    return rc == 0 && (atomic_load(&failed) || g_interrupted) ? fail("decisions failed or interrupted") : rc;
}

/* Every pod carries its decision in the API server. */
static int check_recorded(const struct sim *sim, int pods)
{
    struct strbuf answer;
    strbuf_init(&answer);
    long status = sim_request(sim, "GET", "/api/v1/namespaces/bench/pods", NULL, &answer);
    cJSON *list = status == 200 ? cJSON_ParseWithLength(answer.data, answer.len) : NULL;
    const cJSON *item;
    int recorded = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(list, "items"))
    {
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(item, "metadata"),
                                                            "annotations");
        recorded += cJSON_IsString(cJSON_GetObjectItemCaseSensitive(ann, "gpu-admission.io/node"));
    }
    cJSON_Delete(list);
    strbuf_free(&answer);
    return recorded == pods ? 0 : fail("%d of %d pods carry their decision in the API server", recorded, pods);
}

static int start_live_server(struct server *srv, const char *binary, const struct sim *sim, struct client *probe,
                             const char *placement)
{
    snprintf(srv->log_path, sizeof(srv->log_path), "%s/server-live.log", sim->dir);
    if ((srv->port = pick_port()) < 0 || client_init(probe, srv->port) != 0)
        return -1;
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", srv->port);
    char *argv[] = {(char *)binary, "--kubeconfig", (char *)sim->kubeconfig, "--listen-http", listen,
                    "--placement", (char *)placement, "--log-level", "warn", NULL};
    if (spawn(&srv->pid, argv, srv->log_path) != 0)
        return -1;
    if (wait_ready(srv, probe) != 0) {
        print_log_tail(srv->log_path);
        return -1;
    }
    return 0;
}

static void print_decisions(const struct bench_opts *o, double wall_ms, double *ms)
{
    int n = o->decision_pods;
    qsort(ms, (size_t)n, sizeof(*ms), compare_ms);
    double rate = n / (wall_ms / 1e3);
    printf("  %d pods decided by %d concurrent callers in %.2f s = %.0f pods/s; per decision p50 %.1f ms, p99 %.1f "
           "ms, max %.1f ms\n",
           n, o->decision_callers, wall_ms / 1e3, rate, percentile(ms, n, 50), percentile(ms, n, 99), ms[n - 1]);
    printf("  every answer named one node, and every pod carries its decision in the API server\n");
    char label[96];
    snprintf(label, sizeof(label), "decisions/s with %d callers >= %.0f", o->decision_callers, DECISION_TARGET_PER_S);
    print_target(label, rate, "/s", rate >= DECISION_TARGET_PER_S);
}

static int bench_decisions(const struct bench_opts *o, const char *dir)
{
    printf("\n== decision throughput: filter mode against the API simulator (%s), every pod PATCH delayed %d ms; "
           "%d nodes x %d GPUs, %d pending pods\n",
           o->apisim, o->patch_delay_ms, DECISION_NODES, GPUS_PER_NODE, o->decision_pods);
    struct sim sim = {0};
    struct server srv = {0};
    struct client probe = {0};
    struct strbuf *bodies = calloc((size_t)o->decision_pods, sizeof(*bodies));
    double *ms = calloc((size_t)o->decision_pods, sizeof(*ms));
    double wall = 0;
    int rc = bodies && ms ? start_sim(&sim, o, dir, NULL) : fail("out of memory");
    if (rc == 0)
        rc = start_live_server(&srv, o->binary, &sim, &probe, "filter");
    if (rc == 0)
        rc = build_decision_bodies(bodies, o->decision_pods);
    if (rc == 0)
        rc = run_callers(o, srv.port, bodies, ms, &wall);
    if (rc == 0)
        rc = check_recorded(&sim, o->decision_pods);
    if (rc == 0)
        print_decisions(o, wall, ms);
    client_free(&probe);
    if (stop_server(&srv) != 0)
        rc = -1;
    stop_sim(&sim);
    sim_cleanup(&sim);
    for (int i = 0; bodies && i < o->decision_pods; i++)
        strbuf_free(&bodies[i]);
    free(bodies);
    free(ms);
    return rc;
}

/* ---- the server's own share, the large cluster, watch events ----------------------------- */

/* Issue 15's figures. The server's share of a request is its round trip on
 * one keep-alive connection minus the p50 round trip of /healthz on the
 * same connection (sent just before each request): what is left is the
 * server's work for the request (reading the body, deciding, writing the
 * answer), not libcurl's or the loopback's fixed cost. */

#define TARGET_SHARE_P50_MS 0.5
#define TARGET_SHARE_P99_MS 1.5
#define TARGET_SHARE_NODES_RATIO 0.15
#define TARGET_SCALE_SYNC_MS 5000.0
#define TARGET_SCALE_RSS_BYTES 300e6
#define TARGET_SCALE_P50_MS 2.0
#define TARGET_EVENTS_PER_S 150000.0
#define MAX_SCALE_NODES 40000
#define MAX_EVENT_PODS 2000000

enum { POL_BINPACK = 0, POL_SPREAD, POL_COUNT };
static const char *const POLICY_NAME[] = {"binpack", "spread"};

struct share_result {
    bool measured;
    int count;
    double p50, p99, healthz_p50; /* round trips, ms */
    double share_p50, share_p99;  /* minus healthz_p50 */
    size_t request_len, answer_len;
    double cpu_ms; /* the server's CPU time (user + system) per request and its /healthz, mean */
};

/* Everything the closing table prints. */
struct summary {
    size_t share_n;
    struct share_result names[POL_COUNT][KIND_COUNT][2]; /* [policy][kind][verb] */
    struct share_result nodes;                           /* Nodes form, binpack, vcuda */
    struct share_result turned[2];                       /* NodeNames in a new order each request, [verb] */
    double parse_ms;                                     /* cJSON_Parse of the same body */
    long share_rss_kb, share_hwm_kb;
    size_t scale_n;
    double scale_sync_ms;
    double scale_cpu_ms; /* the server's own CPU time (user + system) up to /readyz */
    long scale_rss_kb;
    struct share_result scale_names;
    int event_pods;
    struct events_figure events;
};

/* User + system CPU time of pid so far, in ms (-1 when unreadable). */
static double cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long utime = 0, stime = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

static int healthz_one(struct client *c, double *ms)
{
    long status = 0;
    double t0 = now_ms();
    int rc = client_request(c, "/healthz", NULL, 0, &status);
    *ms = now_ms() - t0;
    if (rc != 0)
        return fail("GET /healthz: %s", c->error);
    return status == 200 ? 0 : fail("GET /healthz answered HTTP %ld", status);
}

/* ph->count requests, each after a /healthz, on client 0 (bind mode: every
 * answer byte-identical to the verified first one). */
/* Requests of phs[0..nphases) in turn, each after a /healthz on the same
 * connection; each phase is warmed up (and its reference kept) first. */
static int run_share(struct run *r, struct phase *const *phs, int nphases, struct share_result *res)
{
    int count = phs[0]->count;
    double *ms = calloc((size_t)count * 2, sizeof(*ms));
    if (!ms)
        return fail("out of memory");
    double *hz = ms + count;
    int rc = 0;
    for (int k = 0; k < nphases; k++)
        strbuf_init(&phs[k]->reference);
    for (int k = 0; k < nphases && rc == 0; k++)
        rc = warm_up(r, phs[k]);
    double cpu0 = cpu_ms(r->srv.pid);
    for (int i = 0; rc == 0 && i < count; i++) {
        struct phase *ph = phs[i % nphases];
        rc = g_interrupted ? fail("interrupted") : healthz_one(&r->clients[0], &hz[i]);
        if (rc == 0)
            rc = send_one(r, ph, 0, &ms[i]);
        if (rc == 0)
            rc = check_answer(ph, &r->clients[0].answer, false);
    }
    if (rc == 0) {
        qsort(ms, (size_t)count, sizeof(*ms), compare_ms);
        qsort(hz, (size_t)count, sizeof(*hz), compare_ms);
        *res = (struct share_result){true,
                                     count,
                                     percentile(ms, count, 50),
                                     percentile(ms, count, 99),
                                     percentile(hz, count, 50),
                                     0,
                                     0,
                                     phs[0]->bodies[0]->text.len,
                                     r->clients[0].answer.len,
                                     0};
        res->share_p50 = res->p50 - res->healthz_p50;
        res->share_p99 = res->p99 - res->healthz_p50;
        res->cpu_ms = (cpu_ms(r->srv.pid) - cpu0) / count;
    }
    for (int k = 0; k < nphases; k++)
        strbuf_free(&phs[k]->reference);
    free(ms);
    return rc;
}

static void print_share_header(void)
{
    printf("    %-8s %-6s %-10s %-9s %9s %9s %5s %8s %8s %9s %9s %9s %8s\n", "policy", "pod", "verb", "form",
           "request", "answer", "reqs", "p50 ms", "p99 ms", "healthz", "share p50", "share p99", "cpu/req");
}

static void print_share_row(const char *policy, enum pod_kind kind, enum verb verb, const char *form,
                            const struct share_result *res)
{
    char req[24], ans[24];
    format_bytes(req, sizeof(req), (double)res->request_len);
    format_bytes(ans, sizeof(ans), (double)res->answer_len);
    printf("    %-8s %-6s %-10s %-9s %9s %9s %5d %8.3f %8.3f %9.3f %9.3f %9.3f %8.3f\n", policy, KIND_NAME[kind],
           VERB_NAME[verb], form, req, ans, res->count, res->p50, res->p99, res->healthz_p50,
           res->share_p50, res->share_p99, res->cpu_ms);
    fflush(stdout);
}

/* A NodeNames body whose names begin with node `first` and wrap around. */
static int body_build_turned(struct body *b, const struct dataset *d, enum pod_kind kind, size_t first)
{
    const char *names = d->names.data, *at = names;
    for (size_t k = 0; k < first && at; k++) /* names hold no commas: the k-th comma ends name k */
        at = strchr(at, ',') ? strchr(at, ',') + 1 : NULL;
    if (!at || first == 0)
        return body_build(b, d, FORM_NAMES, kind, 10, 32, false);
    struct dataset turned = *d; /* read only: its names replaced */
    strbuf_init(&turned.names);
    strbuf_append(&turned.names, at, d->names.len - (size_t)(at - names));
    strbuf_putc(&turned.names, ',');
    strbuf_append(&turned.names, names, (size_t)(at - names) - 1);
    int rc = strbuf_failed(&turned.names) ? fail("out of memory turning the node list")
                                          : body_build(b, &turned, FORM_NAMES, kind, 10, 32, false);
    strbuf_free(&turned.names);
    return rc;
}

/* The vcuda rows again with a new node order every request: the requests
 * alternate between the names in order and the names from the middle on,
 * so neither the server's memo of the last array nor its resolved names
 * apply (kube-scheduler's lists change order from pod to pod). */
static int share_changing_order(struct run *r, const struct bench_opts *o, const struct dataset *d,
                                struct body *in_order, struct summary *sum)
{
    struct body turned;
    if (body_build_turned(&turned, d, KIND_VCUDA, d->n / 2) != 0)
        return -1;
    struct phase a = {VERB_FILTER, FORM_NAMES, MODE_BIND, d->n, o->requests, {in_order, in_order}, {0}, KIND_VCUDA, 0};
    struct phase b = a;
    b.bodies[0] = b.bodies[1] = &turned;
    b.rotate = d->n / 2;
    int rc = 0;
    for (int v = VERB_FILTER; v <= VERB_PRIORITIZE && rc == 0; v++) {
        a.verb = b.verb = (enum verb)v;
        rc = run_share(r, (struct phase *const[]){&a, &b}, 2, &sum->turned[v]);
        if (rc == 0)
            print_share_row(POLICY_NAME[POL_BINPACK], KIND_VCUDA, a.verb, "NodeNames, new order", &sum->turned[v]);
    }
    strbuf_free(&turned.text);
    return rc;
}

/* Filter and prioritize, NodeNames form, for one request pod. */
static int share_kind(struct run *r, const struct bench_opts *o, const struct dataset *d, int pol,
                      enum pod_kind kind, struct summary *sum)
{
    struct body b;
    if (body_build(&b, d, FORM_NAMES, kind, 10, 32, false) != 0)
        return -1;
    struct phase ph = {VERB_FILTER, FORM_NAMES, MODE_BIND, d->n, o->requests, {&b, &b}, {0}, kind, 0};
    int rc = 0;
    for (int v = VERB_FILTER; v <= VERB_PRIORITIZE && rc == 0; v++) {
        ph.verb = (enum verb)v;
        rc = run_share(r, (struct phase *const[]){&ph}, 1, &sum->names[pol][kind][v]);
        if (rc == 0)
            print_share_row(POLICY_NAME[pol], kind, ph.verb, FORM_NAME[FORM_NAMES], &sum->names[pol][kind][v]);
    }
    if (rc == 0 && pol == POL_BINPACK && kind == KIND_VCUDA)
        rc = share_changing_order(r, o, d, &b, sum);
    strbuf_free(&b.text);
    return rc;
}

/* The Nodes form (every Node object, returned byte for byte) and cJSON's
 * parse of the very same body, in this run. */
static int share_nodes_form(struct run *r, const struct bench_opts *o, const struct dataset *d,
                            struct summary *sum)
{
    struct body b;
    if (body_build(&b, d, FORM_NODES, KIND_VCUDA, 10, 32, false) != 0)
        return -1;
    struct phase ph = {VERB_FILTER, FORM_NODES, MODE_BIND, d->n, o->nodes_requests, {&b, &b}, {0}, KIND_VCUDA, 0};
    int rc = run_share(r, (struct phase *const[]){&ph}, 1, &sum->nodes);
    if (rc == 0) {
        print_share_row(POLICY_NAME[POL_BINPACK], KIND_VCUDA, VERB_FILTER, FORM_NAME[FORM_NODES], &sum->nodes);
        rc = measure_cjson(&b.text, o->parse_runs, &sum->parse_ms);
    }
    strbuf_free(&b.text);
    return rc;
}

static int share_policy(const struct bench_opts *o, const struct dataset *d, const char *state, const char *dir,
                        int pol, struct summary *sum)
{
    struct run r;
    if (start_run(&r, o->binary, state, dir, MODE_BIND, POLICY_NAME[pol]) != 0)
        return -1;
    printf("  --gpu-policy %s, placement bind: server ready %.2f s after start\n", POLICY_NAME[pol],
           r.ready_ms / 1e3);
    print_share_header();
    int rc = 0;
    for (int k = 0; k < KIND_COUNT && rc == 0; k++) {
        if (pol == POL_SPREAD && k == KIND_VCUDA)
            printf("    %-8s %-6s (refused by design: vcuda shares need binpack, see README)\n", POLICY_NAME[pol],
                   KIND_NAME[k]);
        else
            rc = share_kind(&r, o, d, pol, (enum pod_kind)k, sum);
    }
    if (rc == 0 && pol == POL_BINPACK)
        rc = share_nodes_form(&r, o, d, sum);
    long rss = 0, hwm = 0;
    if (finish_run(&r, &rss, &hwm) != 0)
        rc = -1;
    if (rc == 0)
        printf("    server memory after the run: VmRSS %.1f MB, VmHWM %.1f MB\n", rss / 1e3, hwm / 1e3);
    if (pol == POL_BINPACK) {
        sum->share_rss_kb = rss;
        sum->share_hwm_kb = hwm;
    }
    return rc;
}

static int bench_share(const struct bench_opts *o, const char *dir, struct summary *sum)
{
    struct dataset d;
    char state[512];
    size_t n = o->share_size;
    if (dataset_build(&d, n, FAM_VCUDA) != 0)
        return -1;
    snprintf(state, sizeof(state), "%s/state-share-%zu.json", dir, n);
    int rc = write_state_file(&d, state);
    if (rc == 0)
        printf("\n== server share: N = %zu nodes x %d GPUs offering vcuda, MPS and whole GPUs, %zu bound vcuda "
               "pods (GPU 7 idle on every 4th node); each request after a /healthz on the same connection, share = "
               "round trip - healthz p50\n",
               n, GPUS_PER_NODE, n * GPUS_PER_NODE);
    sum->share_n = n;
    for (int pol = 0; pol < POL_COUNT && rc == 0; pol++)
        rc = share_policy(o, &d, state, dir, pol, sum);
    if (rc == 0 && sum->parse_ms > 0)
        printf("  cJSON_Parse of the same Nodes-form body in this process: median %.3f ms; Nodes form p50 / parse "
               "= %.3f, share p50 / parse = %.3f\n",
               sum->parse_ms, sum->nodes.p50 / sum->parse_ms, sum->nodes.share_p50 / sum->parse_ms);
    unlink(state);
    dataset_free(&d);
    return rc;
}

/* The large cluster, synced from the API simulator: time from the server's
 * start to /readyz (both lists applied), its RSS, a NodeNames filter. */
static int scale_measure(const struct bench_opts *o, const struct dataset *d, struct run *r, struct summary *sum)
{
    struct body b;
    if (body_build(&b, d, FORM_NAMES, KIND_VCUDA, 10, 32, false) != 0)
        return -1;
    struct phase ph = {VERB_FILTER, FORM_NAMES, MODE_BIND, d->n, o->requests, {&b, &b}, {0}, KIND_VCUDA, 0};
    print_share_header();
    int rc = run_share(r, (struct phase *const[]){&ph}, 1, &sum->scale_names);
    if (rc == 0)
        print_share_row(POLICY_NAME[POL_BINPACK], KIND_VCUDA, VERB_FILTER, FORM_NAME[FORM_NAMES], &sum->scale_names);
    long hwm = 0;
    if (rc == 0 && read_memory(r->srv.pid, &sum->scale_rss_kb, &hwm) == 0)
        printf("    server memory: VmRSS %.1f MB, VmHWM %.1f MB\n", sum->scale_rss_kb / 1e3, hwm / 1e3);
    strbuf_free(&b.text);
    return rc;
}

static int bench_scale(const struct bench_opts *o, const char *dir, struct summary *sum)
{
    struct dataset d;
    size_t n = o->scale_size;
    if (dataset_build(&d, n, FAM_VCUDA) != 0)
        return -1;
    struct sim sim = {0};
    struct run r;
    memset(&r, 0, sizeof(r));
    r.mode = MODE_BIND;
    int rc = start_sim(&sim, o, dir, &d);
    if (rc == 0)
        printf("\n== scale: N = %zu nodes x %d GPUs, %zu bound pods, served by the API simulator (%s); initial sync "
               "= server start to /readyz\n",
               n, GPUS_PER_NODE, n * GPUS_PER_NODE, o->apisim);
    double t0 = now_ms();
    if (rc == 0)
        rc = start_live_server(&r.srv, o->binary, &sim, &r.clients[0], "bind");
    r.nclients = 1;
    sum->scale_sync_ms = now_ms() - t0;
    if (rc == 0) {
        sum->scale_n = n;
        sum->scale_cpu_ms = cpu_ms(r.srv.pid);
        printf("  initial sync: %.2f s (the server's own CPU time meanwhile: %.2f s; the rest is the simulator)\n",
               sum->scale_sync_ms / 1e3, sum->scale_cpu_ms / 1e3);
        rc = scale_measure(o, &d, &r, sum);
    }
    free_clients(&r);
    if (stop_server(&r.srv) != 0)
        rc = -1;
    stop_sim(&sim);
    sim_cleanup(&sim);
    dataset_free(&d);
    return rc;
}

static int bench_events(const struct bench_opts *o, struct summary *sum)
{
    printf("\n== watch events: %d pods x ADDED, MODIFIED, DELETED applied in-process on %d nodes\n", o->event_pods,
           EVENTS_NODES);
    if (events_run(o->event_pods, &sum->events) != 0)
        return fail("applying watch events failed");
    sum->event_pods = o->event_pods;
    printf("  %ld events (%.0f bytes each) in %.3f s = %.0f events/s; cores left charged: %lld\n", sum->events.events,
           sum->events.bytes_per_event, sum->events.seconds, (double)sum->events.events / sum->events.seconds,
           (long long)sum->events.cores_left);
    return sum->events.cores_left == 0 ? 0 : fail("the cache still holds charges after every pod was deleted");
}

static void summary_row(const char *label, const char *value, const char *target, bool pass)
{
    printf("  %-58s %20s  %-12s %s\n", label, value, target, !*target ? "" : pass ? "PASS" : "MISS");
}

static void summary_share_rows(const struct summary *sum)
{
    char label[128], value[48];
    for (int pol = 0; pol < POL_COUNT; pol++)
        for (int k = 0; k < KIND_COUNT; k++)
            for (int v = VERB_FILTER; v <= VERB_PRIORITIZE; v++) {
                const struct share_result *res = &sum->names[pol][k][v];
                if (!res->measured)
                    continue;
                snprintf(label, sizeof(label), "%s NodeNames, %s, %s pod: share p50 / p99", VERB_NAME[v],
                         POLICY_NAME[pol], KIND_NAME[k]);
                snprintf(value, sizeof(value), "%.3f / %.3f ms", res->share_p50, res->share_p99);
                summary_row(label, value, "<= 0.5 / 1.5",
                            res->share_p50 <= TARGET_SHARE_P50_MS && res->share_p99 <= TARGET_SHARE_P99_MS);
            }
    for (int v = VERB_FILTER; v <= VERB_PRIORITIZE; v++) {
        const struct share_result *res = &sum->turned[v];
        if (!res->measured)
            continue;
        snprintf(label, sizeof(label), "%s NodeNames, vcuda pod, new order each request", VERB_NAME[v]);
        snprintf(value, sizeof(value), "%.3f / %.3f ms", res->share_p50, res->share_p99);
        summary_row(label, value, "<= 0.5 / 1.5",
                    res->share_p50 <= TARGET_SHARE_P50_MS && res->share_p99 <= TARGET_SHARE_P99_MS);
    }
}

static void print_summary(const struct summary *sum)
{
    char label[128], value[48];
    printf("\n== summary (issue 15 targets; figures above)\n");
    printf("  %-58s %20s  %-12s %s\n", "figure", "value", "target", "");
    if (sum->share_n) {
        printf("  N = %zu nodes x %d GPUs, %zu pods:\n", sum->share_n, GPUS_PER_NODE, sum->share_n * GPUS_PER_NODE);
        summary_share_rows(sum);
        double ratio = sum->parse_ms > 0 ? sum->nodes.p50 / sum->parse_ms : 0;
        snprintf(value, sizeof(value), "%.3f (%.1f/%.1f)", ratio, sum->nodes.p50, sum->parse_ms);
        summary_row("filter Nodes, binpack, vcuda: p50 / cJSON_Parse of the body", value, "<= 0.15",
                    sum->parse_ms > 0 && ratio <= TARGET_SHARE_NODES_RATIO);
        snprintf(value, sizeof(value), "%.1f / %.1f MB", sum->share_rss_kb / 1e3, sum->share_hwm_kb / 1e3);
        summary_row("server VmRSS / VmHWM (binpack run)", value, "<= 200 MB",
                    sum->share_hwm_kb * 1e3 <= TARGET_RSS_BYTES);
    }
    if (sum->scale_n) {
        printf("  N = %zu nodes x %d GPUs, %zu pods, from the API simulator:\n", sum->scale_n, GPUS_PER_NODE,
               sum->scale_n * GPUS_PER_NODE);
        snprintf(value, sizeof(value), "%.2f s", sum->scale_sync_ms / 1e3);
        summary_row("initial sync (start to /readyz)", value, "< 5 s", sum->scale_sync_ms < TARGET_SCALE_SYNC_MS);
        snprintf(value, sizeof(value), "%.2f s", sum->scale_cpu_ms / 1e3);
        summary_row("  of which the server's own CPU time", value, "", true);
        snprintf(value, sizeof(value), "%.1f MB", sum->scale_rss_kb / 1e3);
        summary_row("server VmRSS", value, "< 300 MB", sum->scale_rss_kb * 1e3 < TARGET_SCALE_RSS_BYTES);
        snprintf(label, sizeof(label), "filter NodeNames, binpack, vcuda pod: share p50");
        snprintf(value, sizeof(value), "%.3f ms", sum->scale_names.share_p50);
        summary_row(label, value, "<= 2 ms", sum->scale_names.share_p50 <= TARGET_SCALE_P50_MS);
    }
    if (sum->event_pods) {
        double rate = (double)sum->events.events / sum->events.seconds;
        snprintf(value, sizeof(value), "%.0f /s", rate);
        summary_row("watch events applied in-process", value, ">= 150000/s", rate >= TARGET_EVENTS_PER_S);
    }
}

/* ---- command line --------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gqa-bench --binary PATH [--sizes N,N,...] [--families LIST] [--requests N] [--nodes-requests N]\n"
            "                 [--parse-runs N] [--decision-pods N] [--decision-callers N] [--patch-delay-ms N]\n"
            "                 [--apisim PATH] [--share-size N] [--scale-size N] [--events N]\n"
            "  --binary PATH        the gpu-quota-admission server binary to start (required)\n"
            "  --sizes LIST         cluster sizes in nodes (default 100,1000,5000; each 1..%d; 0: none)\n"
            "  --families LIST      vcuda (GPU-Manager shares), hami (HAMi vGPUs) or both (default vcuda,hami)\n"
            "  --requests N         measured requests per NodeNames-form row (default 200)\n"
            "  --nodes-requests N   measured requests per Nodes-form row (default 30, at most --requests)\n"
            "  --parse-runs N       cJSON_Parse runs for the median (default 5, at most %d)\n"
            "  --decision-pods N    filter-mode decisions against the API simulator (default 1000, at most %d;\n"
            "                       0 skips them)\n"
            "  --decision-callers N concurrent callers for them (default 8, at most %d)\n"
            "  --patch-delay-ms N   the simulator's delay for every pod PATCH (default 20)\n"
            "  --apisim PATH        the simulator (default %s/tests/apisim/apisim.py)\n"
            "  --python PATH        its interpreter (default /usr/bin/python3)\n"
            "  --share-size N       nodes of the server-share cluster: NodeNames filter and prioritize for vcuda,\n"
            "                       MPS and whole-GPU pods under both --gpu-policy values, the Nodes form against\n"
            "                       cJSON (default 5000, at most %d; 0 skips it)\n"
            "  --scale-size N       nodes of the large cluster synced from the API simulator (default 20000, at\n"
            "                       most %d; 0 skips it)\n"
            "  --events N           pods whose watch events are applied in-process (default 40000, at most %d;\n"
            "                       0 skips them)\n",
            MAX_NODES, MAX_PARSE_RUNS, MAX_DECISION_PODS, MAX_CALLERS, GQA_SOURCE_DIR, MAX_NODES, MAX_SCALE_NODES,
            MAX_EVENT_PODS);
}

static int parse_count(const char *flag, const char *text, long max, long *out)
{
    *out = 0;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > max)
        return fail("%s: expected a number 1..%ld, got \"%s\"", flag, max, text);
    *out = v;
    return 0;
}

static int parse_sizes(struct bench_opts *o, const char *text)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", text);
    o->nsizes = 0;
    if (strcmp(text, "0") == 0)
        return 0; /* no sizes: only the other parts */
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (o->nsizes == MAX_SIZES)
            return fail("--sizes: at most %d sizes", MAX_SIZES);
        if (parse_count("--sizes", tok, MAX_NODES, &v) != 0)
            return -1;
        o->sizes[o->nsizes++] = (size_t)v;
    }
    return o->nsizes ? 0 : fail("--sizes: no size given");
}

/* A number lo..hi. */
static int parse_range(const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return fail("%s: expected a number %ld..%ld, got \"%s\"", flag, lo, hi, text);
    *out = (int)v;
    return 0;
}

/* The decision-throughput flags: 1 when flag is not one of them. */
static int apply_decision_flag(struct bench_opts *o, const char *flag, const char *value)
{
    if (strcmp(flag, "--decision-pods") == 0)
        return parse_range(flag, value, 0, MAX_DECISION_PODS, &o->decision_pods) ? -1 : 0;
    if (strcmp(flag, "--decision-callers") == 0)
        return parse_range(flag, value, 1, MAX_CALLERS, &o->decision_callers) ? -1 : 0;
    if (strcmp(flag, "--patch-delay-ms") == 0)
        return parse_range(flag, value, 0, 10000, &o->patch_delay_ms) ? -1 : 0;
    if (strcmp(flag, "--events") == 0)
        return parse_range(flag, value, 0, MAX_EVENT_PODS, &o->event_pods) ? -1 : 0;
    int size = 0;
    if (strcmp(flag, "--share-size") == 0 || strcmp(flag, "--scale-size") == 0) {
        bool share = strcmp(flag, "--share-size") == 0;
        if (parse_range(flag, value, 0, share ? MAX_NODES : MAX_SCALE_NODES, &size) != 0)
            return -1;
        *(share ? &o->share_size : &o->scale_size) = (size_t)size;
        return 0;
    }
    if (strcmp(flag, "--apisim") == 0 || strcmp(flag, "--python") == 0) {
        *(strcmp(flag, "--apisim") == 0 ? &o->apisim : &o->python) = value;
        return 0;
    }
    return 1;
}

static int parse_families(struct bench_opts *o, const char *text)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", text);
    memset(o->families, 0, sizeof(o->families));
    bool any = false;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int f = 0;
        while (f < FAM_COUNT && strcmp(tok, FAMILY_NAME[f]) != 0)
            f++;
        if (f == FAM_COUNT)
            return fail("--families: \"%s\" is not vcuda or hami", tok);
        o->families[f] = any = true;
    }
    return any ? 0 : fail("--families: no family given");
}

static int apply_flag(struct bench_opts *o, const char *flag, const char *value, bool *nodes_given)
{
    long v;
    if (strcmp(flag, "--families") == 0)
        return parse_families(o, value);
    if (strcmp(flag, "--binary") == 0) {
        o->binary = value;
        return 0;
    }
    int d = apply_decision_flag(o, flag, value);
    if (d <= 0)
        return d;
    if (strcmp(flag, "--sizes") == 0)
        return parse_sizes(o, value);
    if (strcmp(flag, "--parse-runs") == 0) {
        int rc = parse_count(flag, value, MAX_PARSE_RUNS, &v);
        o->parse_runs = (int)v;
        return rc;
    }
    bool requests = strcmp(flag, "--requests") == 0;
    if (!requests && strcmp(flag, "--nodes-requests") != 0)
        return fail("unknown flag %s (see --help)", flag);
    int rc = parse_count(flag, value, MAX_REQUESTS, &v);
    *(requests ? &o->requests : &o->nodes_requests) = (int)v;
    *nodes_given |= !requests;
    return rc;
}

/* 0 to run, 1 after --help, -1 on a bad command line. */
static int parse_args(struct bench_opts *o, int argc, char **argv)
{
    *o = (struct bench_opts){NULL, {100, 1000, 5000}, 3, {true, true}, 200, 30, 5, 1000, 8, 20,
                             GQA_SOURCE_DIR "/tests/apisim/apisim.py", "/usr/bin/python3", 5000, 20000, 40000};
    bool nodes_given = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (i + 1 >= argc)
            return fail("%s needs a value (see --help)", argv[i]);
        if (apply_flag(o, argv[i], argv[i + 1], &nodes_given) != 0)
            return -1;
        i++;
    }
    if (!nodes_given && o->nodes_requests > o->requests)
        o->nodes_requests = o->requests;
    if (!o->binary)
        return fail("--binary PATH is required (see --help)");
    if (access(o->binary, X_OK) != 0)
        return fail("%s is not an executable: %s", o->binary, strerror(errno));
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void read_loadavg(char *buf, size_t size)
{
    FILE *f = fopen("/proc/loadavg", "r");
    snprintf(buf, size, "?");
    if (!f)
        return;
    if (!fgets(buf, (int)size, f))
        snprintf(buf, size, "?");
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

static void print_banner(const struct bench_opts *o)
{
    curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    printf("gqa-bench: server %s, %ld CPUs online (the server uses as many HTTP threads), libcurl %s, cJSON %s\n",
           o->binary, sysconf(_SC_NPROCESSORS_ONLN), cv ? cv->version : "?", cJSON_Version());
    printf("latency: sequential requests on one keep-alive connection after 1 warm-up request, %d per NodeNames "
           "row and %d per Nodes row; 2cl: the same count again over 2 client threads, one connection each\n",
           o->requests, o->nodes_requests);
    char load[64];
    read_loadavg(load, sizeof(load));
    printf("load average before the run: %s (other work on this machine skews the figures)\n", load);
    printf("sizes in decimal units (1 kB = 1000 bytes, 1 MB = 10^6 bytes)\n");
    fflush(stdout);
}

static int run_all(const struct bench_opts *o)
{
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/gqa-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return fail("cannot create a temporary directory in %s: %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
    int rc = 0;
    for (int i = 0; i < o->nsizes && rc == 0; i++)
        for (int f = 0; f < FAM_COUNT && rc == 0; f++)
            if (o->families[f])
                rc = bench_size(o, o->sizes[i], (enum family)f, dir);
    if (rc == 0 && o->decision_pods > 0)
        rc = bench_decisions(o, dir);
    struct summary sum;
    memset(&sum, 0, sizeof(sum));
    if (rc == 0 && o->share_size > 0)
        rc = bench_share(o, dir, &sum);
    if (rc == 0 && o->scale_size > 0)
        rc = bench_scale(o, dir, &sum);
    if (rc == 0 && o->event_pods > 0)
        rc = bench_events(o, &sum);
    if (rc == 0)
        print_summary(&sum);
    if (rmdir(dir) != 0)
        fail("cannot remove %s: %s", dir, strerror(errno));
    return rc;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    int prc = parse_args(&o, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    install_signals();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fail("curl_global_init failed");
        return 1;
    }
    print_banner(&o);
    int rc = run_all(&o);
    curl_global_cleanup();
    char load[64];
    read_loadavg(load, sizeof(load));
    printf("\nload average after the run: %s\n", load);
    printf(rc == 0 ? "\ngqa-bench: done, every answer checked and correct\n" : "\ngqa-bench: FAILED\n");
    return rc == 0 ? 0 : 1;
}

/* perf_jscan.c - jscan vs cJSON_Parse on a kube-scheduler sized ExtenderArgs.
 *
 * Not a unit test: a standalone check that the scanner earns its keep. It
 * builds {"Pod":{...},"Nodes":{"items":[...]}} with 5000 realistic Node
 * objects (~5.6 KB each, ~28 MB in all, compact like Go's encoding/json),
 * then times, best of several runs:
 *   - jscan_skip_value over the whole body (pure validation),
 *   - the extender's walk: every item's metadata span and metadata.name,
 *   - cJSON_Parse of the same text (and cJSON_Delete, reported apart).
 *
 *   build/release/tests/bench/perf_jscan [nodes]   (target perf_jscan)
 * Exit status 1 when the walk is less than 5x faster than cJSON_Parse or the
 * two disagree about the node names.
 */
#include "lib/jscan.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7

/* Templates use ' for JSON's '"' so they stay readable; \\' becomes an
 * escaped quote inside a JSON string (annotations carrying JSON). */
static const char POD_TEMPLATE[] =
    "{'metadata':{'name':'train-job-7f9c-worker-0','namespace':'ml-team','uid':"
    "'5b0d8a4e-2f61-4c1e-9a3b-7d2e6f8c1a90','resourceVersion':'88231907','creationTimestamp':"
    "'2024-05-14T09:12:44Z','labels':{'app':'train-job','job-name':'train-job-7f9c',"
    "'role':'worker','tencent.com/gpu-quota':'team-a'},'annotations':{"
    "'tencent.com/vcuda-core-limit':'50','kubectl.kubernetes.io/last-applied-configuration':"
    "'{\\'apiVersion\\':\\'v1\\',\\'kind\\':\\'Pod\\',\\'metadata\\':{\\'name\\':"
    "\\'train-job-7f9c-worker-0\\'}}\\n'},'ownerReferences':[{'apiVersion':'batch/v1','kind':"
    "'Job','name':'train-job-7f9c','uid':'0c3f7a52-96b4-4d8e-b1a7-3e5d9f2c6b18','controller':"
    "true,'blockOwnerDeletion':true}]},'spec':{'schedulerName':'default-scheduler',"
    "'containers':[{'name':'trainer','image':'registry.example.com/ml/trainer:v2.3.1',"
    "'command':['python','-m','train','--epochs=30','--lr=3e-4'],'env':[{'name':'NCCL_DEBUG',"
    "'value':'INFO'},{'name':'OMP_NUM_THREADS','value':'8'}],'resources':{'limits':{"
    "'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'32','cpu':'8','memory':'32Gi'},"
    "'requests':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'32','cpu':'8',"
    "'memory':'32Gi'}},'volumeMounts':[{'name':'data','mountPath':'/data','readOnly':true}]}],"
    "'volumes':[{'name':'data','persistentVolumeClaim':{'claimName':'imagenet'}}],"
    "'tolerations':[{'key':'nvidia.com/gpu','operator':'Exists','effect':'NoSchedule'}],"
    "'priority':0,'enableServiceLinks':true},'status':{'phase':'Pending','qosClass':"
    "'Guaranteed'}}";

/* Placeholders, in order: name, uid tail, zone digit, internal IP (x2),
 * hostname, pod CIDR octet (x2), provider id, then the condition times. */
static const char NODE_TEMPLATE[] =
    "{'metadata':{'name':'%s','uid':'a3c1e2f4-7b6d-4e8a-9c0b-%012d','resourceVersion':"
    "'%d','creationTimestamp':'2024-03-02T11:%02d:%02dZ','labels':{"
    "'beta.kubernetes.io/arch':'amd64','beta.kubernetes.io/instance-type':'GN10X.8XLARGE160',"
    "'beta.kubernetes.io/os':'linux','cloud.tencent.com/node-instance-id':'ins-%08d',"
    "'failure-domain.beta.kubernetes.io/region':'ap-shanghai',"
    "'failure-domain.beta.kubernetes.io/zone':'20000%d','kubernetes.io/arch':'amd64',"
    "'kubernetes.io/hostname':'%s','kubernetes.io/os':'linux',"
    "'node.kubernetes.io/instance-type':'GN10X.8XLARGE160','nvidia.com/gpu.product':"
    "'Tesla-V100-SXM2-32GB','nvidia.com/gpu.count':'8','nvidia.com/gpu.memory':'32768',"
    "'tencent.com/gpu-pool':'training','tencent.com/vcuda':'true','tencent.com/vcuda-version':"
    "'1.1.5','node.kubernetes.io/exclude-from-external-load-balancers':'','cloud.tencent.com/"
    "auto-scaling-group-id':'asg-8f2k1m3q','node.tke.cloud.tencent.com/cpu-manager-policy':'none',"
    "'topology.kubernetes.io/region':'ap-shanghai','topology.kubernetes.io/zone':'20000%d'},"
    "'annotations':{'node.alpha.kubernetes.io/ttl':'0',"
    "'volumes.kubernetes.io/controller-managed-attach-detach':'true',"
    "'flannel.alpha.coreos.com/backend-data':'{\\'VNI\\':1,\\'VtepMAC\\':\\'9e:21:4c:%02x:%02x:0d\\'}',"
    "'flannel.alpha.coreos.com/backend-type':'vxlan','flannel.alpha.coreos.com/kube-subnet-manager':"
    "'true','flannel.alpha.coreos.com/public-ip':'%s',"
    "'csi.volume.kubernetes.io/nodeid':'{\\'com.tencent.cloud.csi.cbs\\':\\'ins-%08d\\'}',"
    "'tencent.com/gpu-topology':'[[0,1,1,2,2,2,2,1],[1,0,2,1,2,2,1,2],[1,2,0,1,2,1,2,2],"
    "[2,1,1,0,1,2,2,2],[2,2,2,1,0,1,1,2],[2,2,1,2,1,0,2,1],[2,1,2,2,1,2,0,1],[1,2,2,2,2,1,1,0]]',"
    "'tencent.com/note':'owner \\u00e9quipe ML \\u2014 rack r%d\\tslot %d'}},"
    "'spec':{'podCIDR':'172.16.%d.0/24','podCIDRs':['172.16.%d.0/24'],'providerID':"
    "'qcloud:///200001/ins-%08d','taints':[{'key':'nvidia.com/gpu','value':'present',"
    "'effect':'NoSchedule'}]},"
    "'status':{'capacity':{'cpu':'96','ephemeral-storage':'515928148Ki','hugepages-1Gi':'0',"
    "'hugepages-2Mi':'0','memory':'790983252Ki','nvidia.com/gpu':'8','pods':'110',"
    "'tencent.com/vcuda-core':'800','tencent.com/vcuda-memory':'1024'},'allocatable':{"
    "'cpu':'95690m','ephemeral-storage':'475478505254','hugepages-1Gi':'0','hugepages-2Mi':'0',"
    "'memory':'784863316Ki','nvidia.com/gpu':'8','pods':'110','tencent.com/vcuda-core':'800',"
    "'tencent.com/vcuda-memory':'1024'},'conditions':["
    "{'type':'MemoryPressure','status':'False','lastHeartbeatTime':'2024-06-01T08:%02d:%02dZ',"
    "'lastTransitionTime':'2024-03-02T11:20:31Z','reason':'KubeletHasSufficientMemory',"
    "'message':'kubelet has sufficient memory available'},"
    "{'type':'DiskPressure','status':'False','lastHeartbeatTime':'2024-06-01T08:%02d:%02dZ',"
    "'lastTransitionTime':'2024-03-02T11:20:31Z','reason':'KubeletHasNoDiskPressure',"
    "'message':'kubelet has no disk pressure'},"
    "{'type':'PIDPressure','status':'False','lastHeartbeatTime':'2024-06-01T08:%02d:%02dZ',"
    "'lastTransitionTime':'2024-03-02T11:20:31Z','reason':'KubeletHasSufficientPID',"
    "'message':'kubelet has sufficient PID available'},"
    "{'type':'Ready','status':'True','lastHeartbeatTime':'2024-06-01T08:%02d:%02dZ',"
    "'lastTransitionTime':'2024-03-02T11:21:02Z','reason':'KubeletReady',"
    "'message':'kubelet is posting ready status. AppArmor enabled'}],"
    "'addresses':[{'type':'InternalIP','address':'%s'},{'type':'Hostname','address':'%s'}],"
    "'daemonEndpoints':{'kubeletEndpoint':{'Port':10250}},"
    "'nodeInfo':{'machineID':'ec2f5a3c9d0b4e7f8a1b2c3d%08x','systemUUID':"
    "'EC2F5A3C-9D0B-4E7F-8A1B-%012X','bootID':'7d1e3b5a-0c2f-4a6e-9b8d-%012x',"
    "'kernelVersion':'5.4.119-19-0009.11','osImage':'Ubuntu 20.04.6 LTS',"
    "'containerRuntimeVersion':'containerd://1.6.9','kubeletVersion':'v1.26.1',"
    "'kubeProxyVersion':'v1.26.1','operatingSystem':'linux','architecture':'amd64'},"
    "'images':["
    "{'names':['registry.example.com/ml/trainer@sha256:4f6c2a9e1b7d3c5a8e0f2b4d6c8a0e1f3b5d7c9a1e3f5b7d9c1a3e5f7b9d1c3a',"
    "'registry.example.com/ml/trainer:v2.3.1'],'sizeBytes':9876543210},"
    "{'names':['nvcr.io/nvidia/pytorch@sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9',"
    "'nvcr.io/nvidia/pytorch:23.10-py3'],'sizeBytes':8987654321},"
    "{'names':['ccr.ccs.tencentyun.com/tkeimages/gpu-manager@sha256:1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a',"
    "'ccr.ccs.tencentyun.com/tkeimages/gpu-manager:v1.1.5'],'sizeBytes':412345678},"
    "{'names':['quay.io/coreos/flannel@sha256:2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b',"
    "'quay.io/coreos/flannel:v0.22.0'],'sizeBytes':70123456},"
    "{'names':['registry.k8s.io/kube-proxy@sha256:3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c',"
    "'registry.k8s.io/kube-proxy:v1.26.1'],'sizeBytes':65432109},"
    "{'names':['nvcr.io/nvidia/k8s/dcgm-exporter@sha256:4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d',"
    "'nvcr.io/nvidia/k8s/dcgm-exporter:3.1.7-3.1.4-ubuntu20.04'],'sizeBytes':1234567890},"
    "{'names':['registry.k8s.io/pause@sha256:5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e',"
    "'registry.k8s.io/pause:3.9'],'sizeBytes':321234},"
    "{'names':['registry.k8s.io/coredns/coredns@sha256:60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f',"
    "'registry.k8s.io/coredns/coredns:v1.9.3'],'sizeBytes':14837849},"
    "{'names':['ccr.ccs.tencentyun.com/tkeimages/tke-log-agent@sha256:718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60',"
    "'ccr.ccs.tencentyun.com/tkeimages/tke-log-agent:v1.1.12'],'sizeBytes':156723490}],"
    "'volumesAttached':[{'name':'kubernetes.io/csi/com.tencent.cloud.csi.cbs^disk-%08x',"
    "'devicePath':''}],'volumesInUse':['kubernetes.io/csi/com.tencent.cloud.csi.cbs^disk-%08x']}}";

static char *quotes_to_json(const char *tmpl)
{
    char *out = strdup(tmpl);
    if (!out)
        abort();
    for (char *p = out; *p; p++)
        if (*p == '\'')
            *p = '"';
    return out;
}

static void node_name(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "gpu-node-%05d", i);
}

/* One node into buf; returns its length. */
static int format_node(char *buf, size_t cap, const char *fmt, int i)
{
    char name[32], ip[32];
    node_name(name, sizeof name, i);
    snprintf(ip, sizeof ip, "10.%d.%d.%d", 20 + i / 65536, (i / 256) % 256, i % 256);
    int m = i % 60, h = (i * 7) % 60;
    return snprintf(buf, cap, fmt, name, i, 88000000 + i * 13, m, h, 10000000 + i, i % 7,
                    name, i % 7, i % 256, (i * 3) % 256, ip, 10000000 + i, i % 40, i % 16,
                    i % 256, i % 256, 10000000 + i, m, h, m, (h + 1) % 60, m, (h + 2) % 60, m,
                    (h + 3) % 60, ip, name, (unsigned)i, (unsigned)i * 2654435761u,
                    (unsigned)i * 40503u, (unsigned)i, (unsigned)i);
}

static char *build_body(int nodes, size_t *len)
{
    char *node_fmt = quotes_to_json(NODE_TEMPLATE);
    char *pod = quotes_to_json(POD_TEMPLATE);
    size_t cap = strlen(pod) + (size_t)nodes * (strlen(node_fmt) + 256) + 64;
    char *body = malloc(cap);
    if (!body)
        abort();
    size_t n = (size_t)sprintf(body, "{\"Pod\":%s,\"Nodes\":{\"items\":[", pod);
    for (int i = 0; i < nodes; i++) {
        if (i)
            body[n++] = ',';
        n += (size_t)format_node(body + n, cap - n, node_fmt, i);
    }
    n += (size_t)sprintf(body + n, "]},\"NodeNames\":null}");
    free(node_fmt);
    free(pod);
    *len = n;
    return body;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* metadata.name of the object at s->pos; the object is consumed. */
static int metadata_name(struct jscan *s, struct jscan_str *name)
{
    struct jscan_str key;
    int r, found = 0;
    if (jscan_enter_object(s) != 0)
        return -1;
    while ((r = jscan_next_key(s, &key)) == 1) {
        if (jscan_key_is(&key, "name") && jscan_string(s, name) == 0)
            found = 1;
        else if (jscan_skip_value(s) != 0)
            return -1;
    }
    return r == 0 && found ? 0 : -1;
}

/* One Node item: records the span of "metadata" and its name while walking
 * it in place (peek positions at the '{', so pos before/after is the span). */
static int scan_item(struct jscan *s, struct jscan_span *meta, struct jscan_str *name)
{
    struct jscan_str key;
    int r;
    if (jscan_enter_object(s) != 0)
        return -1;
    while ((r = jscan_next_key(s, &key)) == 1) {
        if (jscan_key_is(&key, "metadata") && jscan_peek(s) == JSCAN_OBJECT) {
            meta->ptr = s->pos;
            if (metadata_name(s, name) != 0)
                return -1;
            meta->len = (size_t)(s->pos - meta->ptr);
        } else if (jscan_skip_value(s) != 0) {
            return -1;
        }
    }
    return r;
}

static int scan_items(struct jscan *s, unsigned long *sum)
{
    int count = 0, r;
    if (jscan_enter_array(s) != 0)
        return -1;
    while ((r = jscan_next_element(s)) == 1) {
        struct jscan_span meta = {0};
        struct jscan_str name = {0};
        if (scan_item(s, &meta, &name) != 0)
            return -1;
        *sum += meta.len + name.len + (unsigned char)name.ptr[name.len - 1];
        count++;
    }
    return r == 0 ? count : -1;
}

/* The extender's walk: Pod skipped, every node's metadata span + name. */
static int walk(const char *body, size_t len, unsigned long *sum)
{
    struct jscan s, *sp = &s;
    struct jscan_str key;
    int r, count = -1;
    jscan_init(sp, body, len);
    if (jscan_enter_object(sp) != 0)
        return -1;
    while ((r = jscan_next_key(sp, &key)) == 1) {
        if (jscan_key_is(&key, "Nodes") && jscan_enter_object(sp) == 0) {
            while ((r = jscan_next_key(sp, &key)) == 1) {
                if (jscan_key_is(&key, "items"))
                    count = scan_items(sp, sum);
                else
                    jscan_skip_value(sp);
            }
        } else {
            jscan_skip_value(sp);
        }
    }
    if (r != 0 || jscan_finish(sp) != 0) {
        fprintf(stderr, "walk: %s at %zu\n", sp->error, sp->error_offset);
        return -1;
    }
    return count;
}

static int check_cjson(const cJSON *root, int nodes)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "Nodes"), "items");
    if (cJSON_GetArraySize(items) != nodes)
        return -1;
    char want[32];
    node_name(want, sizeof want, nodes - 1);
    const cJSON *last = cJSON_GetArrayItem(items, nodes - 1);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(last, "metadata"), "name");
    return cJSON_IsString(name) && strcmp(name->valuestring, want) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 5000;
    if (nodes < 1)
        nodes = 5000;
    size_t len;
    char *body = build_body(nodes, &len);
    const char *dump = getenv("PERF_JSCAN_DUMP");  /* write the body, to inspect it */
    FILE *f = dump ? fopen(dump, "w") : NULL;
    if (f) {
        fwrite(body, 1, len, f);
        fclose(f);
    }
    printf("body: %d nodes, %zu bytes (%.2f MB, %.0f bytes/node)\n", nodes, len,
           (double)len / 1e6, (double)len / nodes);

    double best_skip = 1e30, best_walk = 1e30, best_parse = 1e30, best_delete = 1e30;
    unsigned long sum = 0;
    int walked = 0, ok = 1;
    for (int run = 0; run < RUNS; run++) {
        struct jscan s;
        double t0 = now_ms();
        jscan_init(&s, body, len);
        int rs = jscan_skip_value(&s) == 0 && jscan_finish(&s) == 0;
        double t1 = now_ms();
        walked = walk(body, len, &sum);
        double t2 = now_ms();
        cJSON *root = cJSON_Parse(body);
        double t3 = now_ms();
        ok &= rs && root && check_cjson(root, nodes) == 0 && walked == nodes;
        cJSON_Delete(root);
        double t4 = now_ms();
        best_skip = t1 - t0 < best_skip ? t1 - t0 : best_skip;
        best_walk = t2 - t1 < best_walk ? t2 - t1 : best_walk;
        best_parse = t3 - t2 < best_parse ? t3 - t2 : best_parse;
        best_delete = t4 - t3 < best_delete ? t4 - t3 : best_delete;
    }
    double mb = (double)len / 1e6;
    printf("jscan_skip_value : %8.2f ms  (%6.0f MB/s)\n", best_skip, mb / best_skip * 1e3);
    printf("jscan walk       : %8.2f ms  (%6.0f MB/s, %d nodes, checksum %lu)\n", best_walk,
           mb / best_walk * 1e3, walked, sum % 1000003);
    printf("cJSON_Parse      : %8.2f ms  (%6.0f MB/s)  (+ cJSON_Delete %.2f ms)\n", best_parse,
           mb / best_parse * 1e3, best_delete);
    printf("ratio parse/skip : %6.1fx\n", best_parse / best_skip);
    printf("ratio parse/walk : %6.1fx\n", best_parse / best_walk);
    free(body);
    if (!ok) {
        fprintf(stderr, "FAIL: results disagree\n");
        return 1;
    }
    if (best_parse / best_walk < 5.0) {
        fprintf(stderr, "FAIL: walk is less than 5x faster than cJSON_Parse\n");
        return 1;
    }
    return 0;
}

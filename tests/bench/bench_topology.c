/* bench_topology.c - how long topology_best_set takes (run by hand; not a test).
 *
 * For 8-GPU shapes (DGX-1, DGX A100, 8 x PCIe on two sockets) and 16-GPU
 * shapes (two NVSwitch islands of 8 joined by SYS; HGX-2 style all-NV6 on
 * two NUMA nodes; all-NV6 with NUMA unknown), every k, on an empty node
 * and on a 16-GPU node with half its GPUs busy; then the cost of a repeated
 * topology_best_possible (the memo hit the allocator pays per node).
 * Prints the median over batches of the mean time per call.
 *
 *   bench_topology [batches]     (default 31)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "topology/annotation.h"
#include "topology/select.h"

static struct gpu_topology *new_topo(int n)
{
    struct gpu_topology *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->version = 1;
    t->count = n;
    t->gpus = calloc((size_t)n, sizeof(*t->gpus));
    t->links = calloc((size_t)n * (size_t)n, sizeof(*t->links));
    if (!t->gpus || !t->links) {
        topology_free(t);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        t->gpus[i] = (struct topo_gpu){.index = i, .minor = i, .numa = -1};
        for (int j = 0; j < n; j++)
            t->links[i * n + j] = (struct topo_link){
                .cls = (uint8_t)(i == j ? TOPO_LINK_SELF : TOPO_LINK_SYS), .nvlinks = 0};
    }
    return t;
}

static void set_link(struct gpu_topology *t, int i, int j, const char *token)
{
    struct topo_link link;
    if (topology_parse_link(token, &link) < 0) {
        fprintf(stderr, "bad token %s\n", token);
        exit(1);
    }
    t->links[i * t->count + j] = link;
    t->links[j * t->count + i] = link;
}

static struct gpu_topology *from_rows(int n, const char *const *rows, const int *numa)
{
    struct gpu_topology *t = new_topo(n);
    if (!t)
        return NULL;
    for (int i = 0; i < n; i++) {
        char row[512];
        snprintf(row, sizeof row, "%s", rows[i]);
        char *save = NULL;
        char *tok = strtok_r(row, " ", &save);
        for (int j = 0; j < n && tok; j++, tok = strtok_r(NULL, " ", &save))
            if (j > i)
                set_link(t, i, j, tok);
        if (numa)
            t->gpus[i].numa = numa[i];
    }
    return t;
}

/* `groups` groups of `size` GPUs with `inside` links, SYS between; group g
 * on NUMA node g when with_numa (else unknown). */
static struct gpu_topology *grouped(int groups, int size, const char *inside, int with_numa)
{
    struct gpu_topology *t = new_topo(groups * size);
    if (!t)
        return NULL;
    for (int i = 0; i < t->count; i++) {
        for (int j = i + 1; j < t->count; j++)
            if (i / size == j / size)
                set_link(t, i, j, inside);
        t->gpus[i].numa = with_numa ? i / size : -1;
    }
    return t;
}

/* All pairs `token`, NUMA node i / per_node (per_node 0: unknown). */
static struct gpu_topology *uniform(int n, const char *token, int per_node)
{
    struct gpu_topology *t = new_topo(n);
    if (!t)
        return NULL;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++)
            set_link(t, i, j, token);
        t->gpus[i].numa = per_node ? i / per_node : -1;
    }
    return t;
}

static const char *const dgx1_rows[] = {
    "X NV1 NV1 NV2 NV2 SYS SYS SYS", "NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X NV2 SYS SYS NV1 SYS", "NV2 NV1 NV2 X SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X NV1 NV1 NV2", "SYS NV2 SYS SYS NV1 X NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X NV2", "SYS SYS SYS NV1 NV2 NV1 NV2 X",
};
static const char *const pcie_rows[] = {
    "X PIX PXB PXB SYS SYS SYS SYS",   "PIX X PXB PXB SYS SYS SYS SYS",
    "PXB PXB X PIX SYS SYS SYS SYS",   "PXB PXB PIX X SYS SYS SYS SYS",
    "SYS SYS SYS SYS X PIX NODE NODE", "SYS SYS SYS SYS PIX X NODE NODE",
    "SYS SYS SYS SYS NODE NODE X PIX", "SYS SYS SYS SYS NODE NODE PIX X",
};
static const int pcie_numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
static const int a100_numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile uint64_t sink;

/* Median over batches of the mean ns per call; a batch runs for at least
 * ~2 ms so that the clock's resolution does not matter. */
static double time_best_set(const struct gpu_topology *t, uint64_t free_mask, int k, int batches)
{
    int reps = 1;
    for (;;) {
        double start = now_ns();
        for (int r = 0; r < reps; r++)
            sink += topology_best_set(t, free_mask, k, NULL);
        if (now_ns() - start > 2e6 || reps >= 1 << 20)
            break;
        reps *= 2;
    }
    double samples[101];
    if (batches > 101)
        batches = 101;
    for (int b = 0; b < batches; b++) {
        double start = now_ns();
        for (int r = 0; r < reps; r++)
            sink += topology_best_set(t, free_mask, k, NULL);
        samples[b] = (now_ns() - start) / reps;
    }
    qsort(samples, (size_t)batches, sizeof samples[0], cmp_double);
    return samples[batches / 2];
}

static void print_time(double ns)
{
    if (ns < 1e3)
        printf(" %7.0f ns", ns);
    else
        printf(" %7.1f us", ns / 1e3);
}

static void bench_shape(const char *name, const struct gpu_topology *t, uint64_t free_mask, int batches)
{
    int free_count = 0;
    for (uint64_t m = free_mask; m; m &= m - 1)
        free_count++;
    printf("%-44s", name);
    for (int k = 1; k <= free_count; k++) {
        if (k > 1 && (k - 1) % 8 == 0)
            printf("\n%-44s", "");
        printf("  k=%-2d", k);
        print_time(time_best_set(t, free_mask, k, batches));
    }
    printf("\n");
}

static void bench_best_possible(const struct gpu_topology *t, const char *name)
{
    const int reps = 1000000;
    for (int k = 1; k <= t->count; k++)
        sink += (uint64_t)topology_best_possible(t, k);   /* fill the memo */
    double start = now_ns();
    for (int r = 0; r < reps; r++)
        sink += (uint64_t)topology_best_possible(t, 1 + r % t->count);
    printf("%-44s  %.0f ns per call (memo hit)\n", name, (now_ns() - start) / reps);
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 31;
    if (batches < 1)
        batches = 31;
    struct {
        const char *name;
        struct gpu_topology *t;
    } shapes[] = {
        {"DGX-1 V100 (NV1/NV2 cube-mesh)", from_rows(8, dgx1_rows, NULL)},
        {"DGX A100 (NV12, 4 NUMA pairs)", uniform(8, "NV12", 0)},
        {"8 x PCIe, two sockets", from_rows(8, pcie_rows, pcie_numa)},
        {"16: two NV12 islands + SYS, 2 NUMA", grouped(2, 8, "NV12", 1)},
        {"16: HGX-2 all NV6, 2 NUMA", uniform(16, "NV6", 8)},
        {"16: all NV6, NUMA unknown", uniform(16, "NV6", 0)},
        {"16: four NV4 quads + SYS, NUMA unknown", grouped(4, 4, "NV4", 0)},
    };
    size_t nshapes = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < nshapes; s++) {
        if (!shapes[s].t) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
    }
    for (int i = 0; i < 8; i++)
        shapes[1].t->gpus[i].numa = a100_numa[i];

    printf("topology_best_set, median of %d batches, mean per call\n\n", batches);
    for (size_t s = 0; s < nshapes; s++) {
        uint64_t all = ((uint64_t)1 << shapes[s].t->count) - 1;
        bench_shape(shapes[s].name, shapes[s].t, all, batches);
    }
    printf("\nhalf busy (GPUs 0,2,4,...,14 in use; 8 free)\n");
    for (size_t s = 3; s < nshapes; s++) {
        char name[96];
        snprintf(name, sizeof name, "%s", shapes[s].name);
        bench_shape(name, shapes[s].t, 0xAAAA, batches);
    }
    printf("\nhalf busy (GPUs 0-3 and 8-11 in use; 8 free)\n");
    for (size_t s = 3; s < nshapes; s++)
        bench_shape(shapes[s].name, shapes[s].t, 0xF0F0, batches);

    printf("\ntopology_best_possible on repeat\n");
    bench_best_possible(shapes[0].t, shapes[0].name);
    bench_best_possible(shapes[3].t, shapes[3].name);

    for (size_t s = 0; s < nshapes; s++)
        topology_free(shapes[s].t);
    return 0;
}

/* test_topology_smi.c - unit tests for topology/smi.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/annotation.h"
#include "topology/smi.h"
#include "tests/unit/support.h"

/* ------------------------------------------------------------- helpers */

static char *read_fixture(const char *name)
{
    char rel[256];
    fmt(rel, sizeof(rel), "tests/fixtures/nvidia-smi/%s", name);
    return source_text(rel);
}

static struct gpu_topology *from_text_ok(const char *topo, const char *csv, const int *minors)
{
    char *err = (char *)"untouched";
    struct gpu_topology *t = topology_from_smi(topo, csv, minors, &err);
    if (!t)
        fail_msg("unexpected error: %s", err ? err : "(null)");
    assert_null(err);
    return t;
}

/* Parses fixture NAME.topo.txt, with NAME.query.csv when with_csv. */
static struct gpu_topology *fixture_ok(const char *name, int with_csv)
{
    char file[256];
    snprintf(file, sizeof file, "%s.topo.txt", name);
    char *topo = read_fixture(file);
    char *csv = NULL;
    if (with_csv) {
        snprintf(file, sizeof file, "%s.query.csv", name);
        csv = read_fixture(file);
    }
    struct gpu_topology *t = from_text_ok(topo, csv, NULL);
    free(topo);
    free(csv);
    return t;
}

static void expect_error(const char *topo, const char *csv, const char *message)
{
    char *err = NULL;
    struct gpu_topology *t = topology_from_smi(topo, csv, NULL, &err);
    assert_null(t);
    assert_non_null(err);
    assert_string_equal(err, message);
    free(err);
}

static void expect_link(const struct gpu_topology *t, int i, int j, const char *token)
{
    char buf[8];
    topology_format_link(topology_link(t, i, j), buf, sizeof buf);
    if (strcmp(buf, token) != 0)
        fail_msg("links[%d][%d] is %s, expected %s", i, j, buf, token);
}

/* Checks the whole matrix against rows of space-separated tokens. */
static void expect_matrix(const struct gpu_topology *t, const char *const *rows)
{
    for (int i = 0; i < t->count; i++) {
        char row[512];
        snprintf(row, sizeof row, "%s", rows[i]);
        char *save = NULL;
        char *tok = strtok_r(row, " ", &save);
        for (int j = 0; j < t->count; j++, tok = strtok_r(NULL, " ", &save)) {
            assert_non_null(tok);
            expect_link(t, i, j, tok);
        }
        assert_null(tok);
    }
}

static void expect_numa(const struct gpu_topology *t, const int *numa)
{
    for (int i = 0; i < t->count; i++)
        if (t->gpus[i].numa != numa[i])
            fail_msg("gpus[%d].numa is %d, expected %d", i, t->gpus[i].numa, numa[i]);
}

/* Every pair i != j is `token`. */
static void expect_all_links(const struct gpu_topology *t, const char *token)
{
    for (int i = 0; i < t->count; i++)
        for (int j = 0; j < t->count; j++)
            expect_link(t, i, j, i == j ? "X" : token);
}

static void expect_gpus(const struct gpu_topology *t, const char *model, int64_t memory)
{
    for (int i = 0; i < t->count; i++) {
        assert_int_equal(t->gpus[i].index, i);
        assert_int_equal(t->gpus[i].minor, i);
        assert_non_null(t->gpus[i].uuid);
        assert_memory_equal(t->gpus[i].uuid, "GPU-", 4);
        assert_int_equal(strlen(t->gpus[i].uuid), 40);
        assert_string_equal(t->gpus[i].model, model);
        assert_int_equal(t->gpus[i].memory_mib, memory);
    }
}

/* Replaces every tab with spaces, as a terminal copy-and-paste does. */
static char *expand_tabs(const char *text)
{
    size_t n = strlen(text), tabs = 0;
    for (size_t i = 0; i < n; i++)
        tabs += text[i] == '\t';
    char *out = malloc(n + tabs * 7 + 1);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] != '\t') {
            out[o++] = text[i];
            continue;
        }
        memset(out + o, ' ', 8);
        o += 8;
    }
    out[o] = '\0';
    return out;
}

static char *crlf(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(2 * n + 1);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\n')
            out[o++] = '\r';
        out[o++] = text[i];
    }
    out[o] = '\0';
    return out;
}

static void expect_same(const struct gpu_topology *a, const struct gpu_topology *b)
{
    char *ta = topology_serialize(a), *tb = topology_serialize(b);
    assert_non_null(ta);
    assert_non_null(tb);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
}

/* ------------------------------------------------------------ fixtures */

static const char *const dgx1_rows[] = {
    "X NV1 NV1 NV2 NV2 SYS SYS SYS", "NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X NV2 SYS SYS NV1 SYS", "NV2 NV1 NV2 X SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X NV1 NV1 NV2", "SYS NV2 SYS SYS NV1 X NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X NV2", "SYS SYS SYS NV1 NV2 NV1 NV2 X",
};

static void test_dgx1_v100(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("dgx1-v100", 1);
    assert_int_equal(t->version, 1);
    assert_int_equal(t->count, 8);
    expect_matrix(t, dgx1_rows);
    /* R418 prints no NUMA Affinity column: nothing is known. */
    static const int numa[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    expect_numa(t, numa);
    expect_gpus(t, "Tesla V100-SXM2-32GB", 32768);
    assert_string_equal(t->gpus[0].uuid, "GPU-0a7e4c21-93f6-5d1b-2c48-6f0e1d9b3a57");
    assert_string_equal(t->gpus[7].uuid, "GPU-7b3e6a92-c5d1-0f48-a7b9-e2c4f6d08a13");
    topology_free(t);
}

static void test_dgx_a100(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("dgx-a100", 1);
    assert_int_equal(t->count, 8);
    expect_all_links(t, "NV12");
    static const int numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};
    expect_numa(t, numa);
    expect_gpus(t, "NVIDIA A100-SXM4-80GB", 81920);
    topology_free(t);
}

static void test_hgx_h100(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("hgx-h100", 1);
    assert_int_equal(t->count, 8);
    expect_all_links(t, "NV18");
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    expect_numa(t, numa);
    expect_gpus(t, "NVIDIA H100 80GB HBM3", 81559);
    topology_free(t);
}

static void test_pcie_two_sockets(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("pcie8-2socket", 1);
    static const char *const rows[] = {
        "X PIX PXB PXB SYS SYS SYS SYS",       "PIX X PXB PXB SYS SYS SYS SYS",
        "PXB PXB X PIX SYS SYS SYS SYS",       "PXB PXB PIX X SYS SYS SYS SYS",
        "SYS SYS SYS SYS X PIX NODE NODE",     "SYS SYS SYS SYS PIX X NODE NODE",
        "SYS SYS SYS SYS NODE NODE X PIX",     "SYS SYS SYS SYS NODE NODE PIX X",
    };
    expect_matrix(t, rows);
    static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    expect_numa(t, numa);
    expect_gpus(t, "NVIDIA L40S", 46068);
    topology_free(t);
}

/* The whole annotation, byte for byte: what gpu-topology would publish. */
static void test_t4_annotation_text(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("t4x4", 1);
    char *text = topology_serialize(t);
    assert_non_null(text);
    assert_string_equal(
        text,
        "{\"version\":1,\"gpus\":["
        "{\"index\":0,\"minor\":0,\"uuid\":\"GPU-c0de1f27-6e85-1a3b-d4c9-2f8e61b0c5d7\","
        "\"model\":\"Tesla T4\",\"memoryMiB\":15360,\"numa\":0},"
        "{\"index\":1,\"minor\":1,\"uuid\":\"GPU-c0de6248-6e86-1a4e-d4e0-2f8e61b7ccde\","
        "\"model\":\"Tesla T4\",\"memoryMiB\":15360,\"numa\":0},"
        "{\"index\":2,\"minor\":2,\"uuid\":\"GPU-c0dea569-6e87-1a61-d4f7-2f8e61bed3e5\","
        "\"model\":\"Tesla T4\",\"memoryMiB\":15360,\"numa\":1},"
        "{\"index\":3,\"minor\":3,\"uuid\":\"GPU-c0dee88a-6e88-1a74-d50e-2f8e61c5daec\","
        "\"model\":\"Tesla T4\",\"memoryMiB\":15360,\"numa\":1}],"
        "\"links\":[[\"X\",\"PHB\",\"SYS\",\"SYS\"],[\"PHB\",\"X\",\"SYS\",\"SYS\"],"
        "[\"SYS\",\"SYS\",\"X\",\"NODE\"],[\"SYS\",\"SYS\",\"NODE\",\"X\"]]}");
    free(text);
    topology_free(t);
}

/* NUMA comes from "NUMA Affinity" (0..3), not "GPU NUMA ID" (4, 12, ...). */
static void test_grace_hopper_numa(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("gh200x4", 1);
    assert_int_equal(t->count, 4);
    expect_all_links(t, "NV6");
    static const int numa[4] = {0, 1, 2, 3};
    expect_numa(t, numa);
    expect_gpus(t, "NVIDIA GH200 480GB", 97871);
    topology_free(t);
}

/* R375: SOC for the socket-to-socket path (read as SYS), mlx4_0 as a NIC
 * column name, the 3-space "X   = Self" legend; no CSV at all. */
static void test_legacy_soc(void **state)
{
    (void)state;
    struct gpu_topology *t = fixture_ok("p100x4-legacy", 0);
    static const char *const rows[] = {
        "X PHB SYS SYS", "PHB X SYS SYS", "SYS SYS X PHB", "SYS SYS PHB X",
    };
    expect_matrix(t, rows);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t->gpus[i].minor, i);
        assert_null(t->gpus[i].uuid);
        assert_null(t->gpus[i].model);
        assert_int_equal(t->gpus[i].memory_mib, 0);
        assert_int_equal(t->gpus[i].numa, -1);
    }
    topology_free(t);
}

static void test_minors(void **state)
{
    (void)state;
    char *topo = read_fixture("t4x4.topo.txt");
    static const int minors[4] = {3, 2, 1, 0};
    struct gpu_topology *t = from_text_ok(topo, NULL, minors);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t->gpus[i].index, i);
        assert_int_equal(t->gpus[i].minor, 3 - i);
    }
    topology_free(t);
    static const int clash[4] = {0, 1, 1, 2};
    char *err = NULL;
    assert_null(topology_from_smi(topo, NULL, clash, &err));
    assert_string_equal(err, "annotation: gpus[2].minor: 1 is already used by gpus[1]");
    free(err);
    free(topo);
}

/* ------------------------------------------------------------ variants */

/* The same output after a terminal turned tabs into spaces, with CRLF line
 * ends, and with the header underlined by ANSI escapes. */
static void test_layout_variants(void **state)
{
    (void)state;
    static const char *const names[] = {"dgx1-v100", "dgx-a100", "pcie8-2socket", "gh200x4"};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char file[256];
        snprintf(file, sizeof file, "%s.topo.txt", names[n]);
        char *topo = read_fixture(file);
        struct gpu_topology *ref = from_text_ok(topo, NULL, NULL);
        char *spaces = expand_tabs(topo), *dos = crlf(topo);
        struct gpu_topology *a = from_text_ok(spaces, NULL, NULL);
        struct gpu_topology *b = from_text_ok(dos, NULL, NULL);
        expect_same(ref, a);
        expect_same(ref, b);
        topology_free(a);
        topology_free(b);
        topology_free(ref);
        free(spaces);
        free(dos);
        free(topo);
    }
}

static void test_ansi_header_and_blank_lines(void **state)
{
    (void)state;
    struct gpu_topology *t = from_text_ok(
        "\n\n\x1b[4m\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV4\t0-63\t0\t\tN/A\n"
        "GPU1\tNV4\t X \t0-63\t0\t\tN/A",   /* no final newline, no legend */
        NULL, NULL);
    assert_int_equal(t->count, 2);
    expect_link(t, 0, 1, "NV4");
    static const int numa[2] = {0, 0};
    expect_numa(t, numa);
    topology_free(t);
}

/* "N/A" and anything but a plain node number leave NUMA unknown; a row
 * that stops before its value columns is fine. */
static void test_numa_values(void **state)
{
    (void)state;
    struct gpu_topology *t = from_text_ok(
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPHB\tSYS\t0-7\t\tN/A\t\tN/A\n"
        "GPU1\tPHB\t X \tSYS\t0-7\t0-1\t\tN/A\n"
        "GPU2\tSYS\tSYS\t X \t8-15\n",
        NULL, NULL);
    static const int numa[3] = {-1, -1, -1};
    expect_numa(t, numa);
    topology_free(t);
}

/* One GPU and no NIC: the smallest output there is (a single Tesla P4). */
static void test_single_gpu(void **state)
{
    (void)state;
    struct gpu_topology *t = from_text_ok(
        "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \t0-7\t\tN/A\t\tN/A\n"
        "\nLegend:\n\n  X    = Self\n",
        "0, GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90, Tesla P4, 7680 MiB\n", NULL);
    assert_int_equal(t->count, 1);
    expect_link(t, 0, 0, "X");
    assert_string_equal(t->gpus[0].model, "Tesla P4");
    assert_int_equal(t->gpus[0].memory_mib, 7680);
    assert_int_equal(t->gpus[0].numa, -1);
    topology_free(t);
}

static const char two_gpus[] =
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV2\t0-15\t0\n"
    "GPU1\tNV2\t X \t0-15\t0\n";

/* A header line (plain `csv`), `nounits`, bracketed values, blank lines,
 * rows out of index order, CRLF. */
static void test_csv_variants(void **state)
{
    (void)state;
    struct gpu_topology *t = from_text_ok(
        two_gpus,
        "index, uuid, name, memory.total [MiB]\r\n"
        "1, [N/A], NVIDIA A800 80GB PCIe, [N/A]\r\n"
        "\r\n"
        "0, GPU-00000000-1111-2222-3333-444444444444, [Not Supported], 81920\r\n",
        NULL);
    assert_string_equal(t->gpus[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
    assert_null(t->gpus[0].model);
    assert_int_equal(t->gpus[0].memory_mib, 81920);
    assert_null(t->gpus[1].uuid);
    assert_string_equal(t->gpus[1].model, "NVIDIA A800 80GB PCIe");
    assert_int_equal(t->gpus[1].memory_mib, 0);
    topology_free(t);
}

/* -------------------------------------------------------------- errors */

static void test_unknown_links(void **state)
{
    (void)state;
    expect_error("\tGPU0\tGPU1\tCPU Affinity\n"
                 "GPU0\t X \tNV2\t0-7\n"
                 "GPU1\tNV\t X \t0-7\n",
                 NULL, "line 3, column 6: unknown link \"NV\"");
    /* PSB is DCGM's, not nvidia-smi's. */
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\t X \tPSB\n"
                 "GPU1\tPSB\t X \n",
                 NULL, "line 2, column 10: unknown link \"PSB\"");
    /* NIC cells are checked too: a shifted row shows up there. */
    expect_error("\tGPU0\tGPU1\tNIC0\tCPU Affinity\n"
                 "GPU0\t X \tNV2\t0-7\n"
                 "GPU1\tNV2\t X \tPIX\t0-7\n",
                 NULL, "line 2, column 14: unknown link \"0-7\"");
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\t X \tNV0\n"
                 "GPU1\tNV0\t X \n",
                 NULL, "line 2, column 10: unknown link \"NV0\"");
}

static void test_matrix_shape_errors(void **state)
{
    (void)state;
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\t X \tNV2\n"
                 "GPU1\tNV1\t X \n",
                 NULL,
                 "line 3, column 6: GPU1 to GPU0 is NV1 but GPU0 to GPU1 is NV2 (line 2, column 10); "
                 "the matrix must be symmetric");
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\tPIX\tPIX\n"
                 "GPU1\tPIX\t X \n",
                 NULL, "line 2, column 6: GPU0 to itself must be \"X\", got \"PIX\"");
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\t X \tX\n"
                 "GPU1\tX\t X \n",
                 NULL, "line 2, column 10: \"X\" between GPU0 and GPU1 (only the diagonal is X)");
    expect_error("\tGPU0\tGPU1\tCPU Affinity\n"
                 "GPU0\t X \tSYS\t0-7\n"
                 "\n"
                 "Legend:\n",
                 NULL, "line 3: the matrix has no row for GPU1");
    expect_error("\tGPU0\tGPU1\tCPU Affinity\n"
                 "GPU0\t X \tSYS\t0-7\n",
                 NULL, "line 3: the matrix has no row for GPU1");
    expect_error("\tGPU0\tGPU1\n"
                 "GPU1\t X \tSYS\n",
                 NULL, "line 2, column 1: expected the row of GPU0, got GPU1");
    expect_error("\tGPU0\tGPU1\n"
                 "GPU0\t X \tSYS\n"
                 "GPU1\tSYS\t X \n"
                 "GPU0\t X \tSYS\n",
                 NULL, "line 4, column 1: a second row for GPU0 (the first is on line 2)");
    expect_error("\tGPU0\n"
                 "GPU0\t X \n"
                 "GPU1\tSYS\t X \n",
                 NULL, "line 3, column 1: row GPU1, but the header has 1 GPU column");
    expect_error("\tGPU0\tGPU1\tNIC0\n"
                 "GPU0\t X \tSYS\n"
                 "GPU1\tSYS\t X \tPIX\n",
                 NULL, "line 2, column 13: row GPU0 has 2 link entries, the header has 3");
    expect_error("\tGPU0\tGPU1\tCPU Affinity\n"
                 "GPU0\t X \tSYS\t0-7\t0\n"
                 "GPU1\tSYS\t X \t0-7\n",
                 NULL, "line 2, column 18: unexpected \"0\" after the last column");
}

static void test_header_errors(void **state)
{
    (void)state;
    expect_error(NULL, NULL, "topo -m output: missing");
    expect_error("", NULL, "line 1: no header row (expected `nvidia-smi topo -m` output)");
    expect_error("\n \t\n", NULL, "line 3: no header row (expected `nvidia-smi topo -m` output)");
    expect_error("nvidia-smi topo -m\n\tGPU0\n", NULL,
                 "line 1, column 1: expected the header row of `nvidia-smi topo -m` "
                 "(GPU0 GPU1 ... CPU Affinity), got \"nvidia-smi\"");
    expect_error("\tGPU0\tGPU2\n", NULL, "line 1, column 7: expected column GPU1, got \"GPU2\"");
    expect_error("\tGPU0\tCPU Affinity\tGPU1\n", NULL,
                 "line 1, column 20: unexpected column \"GPU1\" after \"CPU Affinity\"");
    expect_error("\tGPU0\tNUMA Affinity\tNUMA Affinity\n", NULL,
                 "line 1, column 21: column \"NUMA Affinity\" appears twice");
}

static void test_too_many_gpus(void **state)
{
    (void)state;
    char header[2048] = "";
    size_t len = 0;
    for (int i = 0; i <= TOPOLOGY_MAX_GPUS; i++)
        len += (size_t)snprintf(header + len, sizeof header - len, "\tGPU%d", i);
    char *err = NULL;
    assert_null(topology_from_smi(header, NULL, NULL, &err));
    assert_string_equal(err, "line 1, column 376: more than 64 GPUs");
    free(err);
}

static void test_csv_errors(void **state)
{
    (void)state;
    static const struct {
        const char *csv;
        const char *message;
    } cases[] = {
        {"0, GPU-a, T4, 15360 MiB\n", "query CSV lists 1 GPU but topo -m shows 2"},
        {"0, GPU-a, T4, 15360 MiB\n1, GPU-b, T4, 15360 MiB\n2, GPU-c, T4, 15360 MiB\n",
         "query CSV lists 3 GPUs but topo -m shows 2"},
        {"0, GPU-a, T4, 15360 MiB\nx, GPU-b, T4, 15360 MiB\n",
         "query CSV line 2, column 1: index must be a number, got \"x\""},
        {"0, GPU-a, T4, 15360 MiB\n  2, GPU-b, T4, 15360 MiB\n",
         "query CSV line 2, column 3: GPU index 2, but topo -m shows 2 GPUs"},
        {"0, GPU-a, T4, 15360 MiB\n0, GPU-b, T4, 15360 MiB\n",
         "query CSV line 2, column 1: GPU index 0 is listed twice (first on line 1)"},
        {"0, GPU-a, T4, 15360 MiB\n1, GPU-b, T4, 15 GiB\n",
         "query CSV line 2, column 15: memory.total must be like \"81920 MiB\", got \"15 GiB\""},
        {"0, GPU-a, T4, 15360 MiB\n1, GPU-b, T4\n",
         "query CSV line 2: 3 fields, expected 4 (index, uuid, name, memory.total)"},
        {"0, GPU-a, T4, 15360 MiB\n1, GPU-b, T4, 15360 MiB, 80\n",
         "query CSV line 2: 5 fields, expected 4 (index, uuid, name, memory.total)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(two_gpus, cases[i].csv, cases[i].message);
}

/* err may be NULL; nothing leaks either way. */
static void test_null_err(void **state)
{
    (void)state;
    assert_null(topology_from_smi("\tGPU0\nGPU0\tPIX\n", NULL, NULL, NULL));
    struct gpu_topology *t = topology_from_smi(two_gpus, NULL, NULL, NULL);
    assert_non_null(t);
    topology_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx1_v100),
        cmocka_unit_test(test_dgx_a100),
        cmocka_unit_test(test_hgx_h100),
        cmocka_unit_test(test_pcie_two_sockets),
        cmocka_unit_test(test_t4_annotation_text),
        cmocka_unit_test(test_grace_hopper_numa),
        cmocka_unit_test(test_legacy_soc),
        cmocka_unit_test(test_minors),
        cmocka_unit_test(test_layout_variants),
        cmocka_unit_test(test_ansi_header_and_blank_lines),
        cmocka_unit_test(test_numa_values),
        cmocka_unit_test(test_single_gpu),
        cmocka_unit_test(test_csv_variants),
        cmocka_unit_test(test_unknown_links),
        cmocka_unit_test(test_matrix_shape_errors),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_too_many_gpus),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_null_err),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* smi.c - nvidia-smi output to the topology annotation; see smi.h.
 *
 * `nvidia-smi topo -m` prints a header row of column names, one row per GPU,
 * one row per NIC, then a legend:
 *
 *   <TAB>GPU0<TAB>GPU1<TAB>NIC0<TAB>CPU Affinity<TAB>NUMA Affinity<TAB>GPU NUMA ID
 *   GPU0<TAB> X <TAB>NV12<TAB>PXB<TAB>48-63,176-191<TAB>3<TAB><TAB>N/A
 *   ...
 *   Legend:
 *     X    = Self
 *   ...
 *   NIC Legend:
 *     NIC0: mlx5_0
 *
 * Drivers pad cells with extra tabs (note the empty cell before "N/A"), so
 * cells are read as whitespace-separated tokens rather than by tab
 * position; no value ever contains blanks. NIC columns are named NIC<n> by
 * current drivers and by their device name (mlx5_0, mlx4_0) by older ones:
 * any header word that is neither GPU<n> nor one of the value columns is a
 * NIC column. NIC rows and everything from the first blank line or
 * "Legend:" on are ignored.
 *
 * Link tokens are the annotation's (X, NV<n>, PIX, PXB, PHB, NODE, SYS) plus
 * SOC, which drivers before NODE existed printed for the path through the
 * SMP link between sockets: read as SYS, the class that replaced it. PSB
 * ("single on-board PCIe switch") appears only in DCGM's `dcgmi topo`
 * legend, never in nvidia-smi's matrix, and is rejected like any other
 * unknown token.
 *
 * NUMA: "NUMA Affinity" is the CPU NUMA node nearest to the GPU, which is
 * what placement cares about (the pod's CPUs and host memory). "GPU NUMA ID"
 * is the node that exposes the GPU's own memory on coherent systems such as
 * Grace Hopper (e.g. 4 while NUMA Affinity is 0) and is not used. A plain
 * integer is the node; "N/A", a list, or no such column leaves it unknown
 * (-1). "CPU Affinity" is not used either.
 *
 * ANSI escape sequences (nvidia-smi underlines the header when writing to a
 * terminal, and captures sometimes keep that) count as blanks. Columns in
 * error messages count bytes from 1, a tab being one column.
 */
#include "topology/smi.h"

#include "lib/strbuf.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPUs, NICs and the three value columns; real machines have a few dozen
 * at most, and a fixed bound keeps the tokenizer allocation-free. */
#define MAX_TOKENS 512
/* Long enough to show a mistyped token, short enough to keep messages to
 * one line whatever the input holds. */
#define ECHO_MAX 32
#define UNKNOWN_NUMA (-1)

/* ----------------------------------------------------------------- lines */

struct line {
    const char *s;
    int len;
    int no; /* 1-based */
};

/* Advances *pos past the next line; false at the end of the text. */
static bool next_line(const char **pos, struct line *ln)
{
    if (!**pos)
        return false;
    const char *end = strchr(*pos, '\n');
    size_t len = end ? (size_t)(end - *pos) : strlen(*pos);
    ln->s = *pos;
    ln->len = len > (size_t)INT_MAX ? INT_MAX : (int)len;
    ln->no++;
    *pos = end ? end + 1 : *pos + len;
    return true;
}

struct token {
    const char *s;
    int len;
    int col; /* 1-based byte column */
};

static bool blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Length of the ANSI CSI sequence at s (ESC '[' parameters final byte),
 * 0 if there is none. */
static int ansi_length(const char *s, int left)
{
    if (left < 2 || s[0] != '\x1b' || s[1] != '[')
        return 0;
    int i = 2;
    while (i < left && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x3f)
        i++;
    return i < left && (unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e ? i + 1 : i;
}

/* Splits a line into tokens; -1 if it has more than `max`. */
static int tokenize(const struct line *ln, struct token *out, int max)
{
    int n = 0, i = 0;
    while (i < ln->len) {
        int skip = ansi_length(ln->s + i, ln->len - i);
        if (skip || blank(ln->s[i])) {
            i += skip ? skip : 1;
            continue;
        }
        int start = i;
        while (i < ln->len && !blank(ln->s[i]) && !ansi_length(ln->s + i, ln->len - i))
            i++;
        if (n == max)
            return -1;
        out[n++] = (struct token){.s = ln->s + start, .len = i - start, .col = start + 1};
    }
    return n;
}

static bool token_is(const struct token *t, const char *word)
{
    size_t len = strlen(word);
    return (size_t)t->len == len && memcmp(t->s, word, len) == 0;
}

static int echo_len(const struct token *t)
{
    return t->len < ECHO_MAX ? t->len : ECHO_MAX;
}

/* Column just past the last token: where a missing cell would have been. */
static int end_column(const struct token *tok, int n)
{
    return n > 0 ? tok[n - 1].col + tok[n - 1].len : 1;
}

/* Non-negative decimal without sign or leading zeros, at most 9 digits
 * (so it fits an int); -1 otherwise. */
static int small_number(const char *s, int len)
{
    if (len < 1 || len > 9 || (len > 1 && s[0] == '0'))
        return -1;
    int v = 0;
    for (int i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* "GPU<n>" -> n, else -1. */
static int gpu_label(const struct token *t)
{
    if (t->len < 4 || memcmp(t->s, "GPU", 3) != 0)
        return -1;
    return small_number(t->s + 3, t->len - 3);
}

/* ---------------------------------------------------------------- matrix */

enum value_column { VALUE_CPU_AFFINITY, VALUE_NUMA_AFFINITY, VALUE_GPU_NUMA_ID };

static const struct {
    const char *words[3];
    int nwords;
    const char *name;
} value_columns[] = {
    [VALUE_CPU_AFFINITY] = {{"CPU", "Affinity"}, 2, "CPU Affinity"},
    [VALUE_NUMA_AFFINITY] = {{"NUMA", "Affinity"}, 2, "NUMA Affinity"},
    [VALUE_GPU_NUMA_ID] = {{"GPU", "NUMA", "ID"}, 3, "GPU NUMA ID"},
};

#define VALUE_COLUMN_COUNT 3

struct matrix {
    int ngpu;
    int ndev;                /* GPU and NIC columns */
    int dev_gpu[MAX_TOKENS]; /* GPU index of a device column, -1 for a NIC */
    int nvalues;
    enum value_column values[VALUE_COLUMN_COUNT];
    int header_line;
    struct topo_link links[TOPOLOGY_MAX_GPUS * TOPOLOGY_MAX_GPUS];
    int cell_col[TOPOLOGY_MAX_GPUS * TOPOLOGY_MAX_GPUS];
    int row_line[TOPOLOGY_MAX_GPUS];
    int numa[TOPOLOGY_MAX_GPUS];
};

/* Number of tokens the value column starting at tok spans, 0 if none does. */
static int value_column_at(const struct token *tok, int left, enum value_column *kind)
{
    for (int c = 0; c < VALUE_COLUMN_COUNT; c++) {
        int n = value_columns[c].nwords;
        if (n > left)
            continue;
        int w = 0;
        while (w < n && token_is(&tok[w], value_columns[c].words[w]))
            w++;
        if (w == n) {
            *kind = (enum value_column)c;
            return n;
        }
    }
    return 0;
}

static int add_value_column(struct matrix *m, const struct line *ln, const struct token *t, enum value_column kind,
                            char **err)
{
    for (int i = 0; i < m->nvalues; i++)
        if (m->values[i] == kind)
            return strbuf_set_error(err, "line %d, column %d: column \"%s\" appears twice", ln->no, t->col,
                                    value_columns[kind].name);
    m->values[m->nvalues++] = kind;
    return 0;
}

static int add_device_column(struct matrix *m, const struct line *ln, const struct token *t, char **err)
{
    if (m->nvalues > 0)
        return strbuf_set_error(err, "line %d, column %d: unexpected column \"%.*s\" after \"%s\"", ln->no, t->col,
                                echo_len(t), t->s, value_columns[m->values[m->nvalues - 1]].name);
    int g = gpu_label(t);
    if (g >= 0 && g != m->ngpu)
        return strbuf_set_error(err, "line %d, column %d: expected column GPU%d, got \"%.*s\"", ln->no, t->col, m->ngpu,
                                echo_len(t), t->s);
    if (g >= 0 && m->ngpu == TOPOLOGY_MAX_GPUS)
        return strbuf_set_error(err, "line %d, column %d: more than %d GPUs", ln->no, t->col, TOPOLOGY_MAX_GPUS);
    if (g >= 0)
        m->ngpu++;
    m->dev_gpu[m->ndev++] = g;
    return 0;
}

static int parse_header(struct matrix *m, const struct line *ln, char **err)
{
    struct token tok[MAX_TOKENS];
    int n = tokenize(ln, tok, MAX_TOKENS);
    if (n < 0)
        return strbuf_set_error(err, "line %d: more than %d columns", ln->no, MAX_TOKENS);
    if (n == 0 || !token_is(&tok[0], "GPU0"))
        return strbuf_set_error(err,
                                "line %d, column %d: expected the header row of `nvidia-smi topo -m` "
                                "(GPU0 GPU1 ... CPU Affinity), got \"%.*s\"",
                                ln->no, n ? tok[0].col : 1, n ? echo_len(&tok[0]) : 0, n ? tok[0].s : "");
    m->header_line = ln->no;
    for (int i = 0; i < n;) {
        enum value_column kind;
        int span = value_column_at(&tok[i], n - i, &kind);
        int rc = span ? add_value_column(m, ln, &tok[i], kind, err) : add_device_column(m, ln, &tok[i], err);
        if (rc < 0)
            return -1;
        i += span ? span : 1;
    }
    return 0;
}

/* A matrix cell: the annotation's vocabulary plus the legacy SOC. */
static int parse_cell(const struct token *t, struct topo_link *out)
{
    char buf[16];
    if (t->len >= (int)sizeof buf)
        return -1;
    memcpy(buf, t->s, (size_t)t->len);
    buf[t->len] = '\0';
    if (strcmp(buf, "SOC") == 0) {
        *out = (struct topo_link){.cls = TOPO_LINK_SYS, .nvlinks = 0};
        return 0;
    }
    return topology_parse_link(buf, out);
}

static int check_diagonal(const struct line *ln, const struct token *t, int g, int j, struct topo_link link, char **err)
{
    if (g == j && link.cls != TOPO_LINK_SELF)
        return strbuf_set_error(err, "line %d, column %d: GPU%d to itself must be \"X\", got \"%.*s\"", ln->no, t->col,
                                g, echo_len(t), t->s);
    if (g != j && link.cls == TOPO_LINK_SELF)
        return strbuf_set_error(err, "line %d, column %d: \"X\" between GPU%d and GPU%d (only the diagonal is X)",
                                ln->no, t->col, g, j);
    return 0;
}

/* Row g is being read; row j < g was read before, so (j, g) is known. */
static int check_symmetry(const struct matrix *m, const struct line *ln, const struct token *t, int g, int j,
                          struct topo_link link, char **err)
{
    if (j >= g)
        return 0;
    struct topo_link other = m->links[j * TOPOLOGY_MAX_GPUS + g];
    if (other.cls == link.cls && other.nvlinks == link.nvlinks)
        return 0;
    char mine[8], theirs[8];
    topology_format_link(link, mine, sizeof mine);
    topology_format_link(other, theirs, sizeof theirs);
    return strbuf_set_error(err,
                            "line %d, column %d: GPU%d to GPU%d is %s but GPU%d to GPU%d is %s "
                            "(line %d, column %d); the matrix must be symmetric",
                            ln->no, t->col, g, j, mine, j, g, theirs, m->row_line[j],
                            m->cell_col[j * TOPOLOGY_MAX_GPUS + g]);
}

static int parse_link_cells(struct matrix *m, const struct line *ln, const struct token *cells, int g, char **err)
{
    for (int d = 0; d < m->ndev; d++) {
        const struct token *t = &cells[d];
        struct topo_link link;
        if (parse_cell(t, &link) < 0)
            return strbuf_set_error(err, "line %d, column %d: unknown link \"%.*s\"", ln->no, t->col, echo_len(t),
                                    t->s);
        int j = m->dev_gpu[d];
        if (j < 0)
            continue; /* GPU to NIC: checked for sense, not kept */
        if (check_diagonal(ln, t, g, j, link, err) < 0 || check_symmetry(m, ln, t, g, j, link, err) < 0)
            return -1;
        m->links[g * TOPOLOGY_MAX_GPUS + j] = link;
        m->cell_col[g * TOPOLOGY_MAX_GPUS + j] = t->col;
    }
    return 0;
}

/* The trailing value cells; missing ones (a shorter row) stay unknown. */
static int parse_values(struct matrix *m, const struct line *ln, const struct token *vals, int n, int g, char **err)
{
    if (n > m->nvalues)
        return strbuf_set_error(err, "line %d, column %d: unexpected \"%.*s\" after the last column", ln->no,
                                vals[m->nvalues].col, echo_len(&vals[m->nvalues]), vals[m->nvalues].s);
    for (int i = 0; i < n; i++)
        if (m->values[i] == VALUE_NUMA_AFFINITY)
            m->numa[g] = small_number(vals[i].s, vals[i].len);
    return 0;
}

/* One row of the table. NIC rows (any label but GPU<n>) are skipped. */
static int parse_row(struct matrix *m, const struct line *ln, const struct token *tok, int n, int *next_gpu, char **err)
{
    int g = gpu_label(&tok[0]);
    if (g < 0)
        return 0;
    if (g >= m->ngpu)
        return strbuf_set_error(err, "line %d, column %d: row GPU%d, but the header has %d GPU %s", ln->no, tok[0].col,
                                g, m->ngpu, m->ngpu == 1 ? "column" : "columns");
    if (g < *next_gpu)
        return strbuf_set_error(err, "line %d, column %d: a second row for GPU%d (the first is on line %d)", ln->no,
                                tok[0].col, g, m->row_line[g]);
    if (g != *next_gpu)
        return strbuf_set_error(err, "line %d, column %d: expected the row of GPU%d, got GPU%d", ln->no, tok[0].col,
                                *next_gpu, g);
    if (n - 1 < m->ndev)
        return strbuf_set_error(err, "line %d, column %d: row GPU%d has %d link %s, the header has %d", ln->no,
                                end_column(tok, n), g, n - 1, n - 1 == 1 ? "entry" : "entries", m->ndev);
    m->row_line[g] = ln->no;
    m->numa[g] = UNKNOWN_NUMA;
    if (parse_link_cells(m, ln, tok + 1, g, err) < 0 ||
        parse_values(m, ln, tok + 1 + m->ndev, n - 1 - m->ndev, g, err) < 0)
        return -1;
    (*next_gpu)++;
    return 0;
}

/* Reads rows up to the first blank line, "Legend:" or the end. */
static int parse_rows(struct matrix *m, const char **pos, struct line *ln, char **err)
{
    int next_gpu = 0;
    int end = ln->no + 1; /* where the table ends: past the last line by default */
    struct token tok[MAX_TOKENS];
    while (next_line(pos, ln)) {
        int n = tokenize(ln, tok, MAX_TOKENS);
        if (n < 0)
            return strbuf_set_error(err, "line %d: more than %d columns", ln->no, MAX_TOKENS);
        end = ln->no + 1;
        if (n == 0 || token_is(&tok[0], "Legend:")) {
            end = ln->no;
            break;
        }
        if (parse_row(m, ln, tok, n, &next_gpu, err) < 0)
            return -1;
    }
    if (next_gpu < m->ngpu)
        return strbuf_set_error(err, "line %d: the matrix has no row for GPU%d", end, next_gpu);
    return 0;
}

static int parse_matrix(struct matrix *m, const char *text, char **err)
{
    const char *pos = text;
    struct line ln = {0};
    bool found = false;
    while (!found && next_line(&pos, &ln)) {
        struct token tok[1];
        found = tokenize(&ln, tok, 1) != 0; /* -1 (more than one) counts too */
    }
    if (!found)
        return strbuf_set_error(err, "line %d: no header row (expected `nvidia-smi topo -m` output)", ln.no + 1);
    if (parse_header(m, &ln, err) < 0)
        return -1;
    return parse_rows(m, &pos, &ln, err);
}

/* ------------------------------------------------------------- query CSV */

struct csv_gpu {
    bool seen;
    int line;
    char *uuid;
    char *model;
    int64_t memory_mib;
};

struct field {
    const char *s;
    int len;
    int col;
};

static struct field trim_field(const struct line *ln, int start, int end)
{
    while (start < end && blank(ln->s[start]))
        start++;
    while (end > start && blank(ln->s[end - 1]))
        end--;
    return (struct field){.s = ln->s + start, .len = end - start, .col = start + 1};
}

/* Splits at commas; returns the field count (up to max are stored). */
static int split_fields(const struct line *ln, struct field *out, int max)
{
    int n = 0, start = 0;
    for (int i = 0; i <= ln->len; i++) {
        if (i < ln->len && ln->s[i] != ',')
            continue;
        if (n < max)
            out[n] = trim_field(ln, start, i);
        n++;
        start = i + 1;
    }
    return n;
}

static bool line_is_blank(const struct line *ln)
{
    for (int i = 0; i < ln->len; i++)
        if (!blank(ln->s[i]))
            return false;
    return true;
}

/* The header line nvidia-smi prints without `noheader`. */
static bool csv_header(const struct line *ln)
{
    struct field f[1];
    split_fields(ln, f, 1);
    return f[0].len == 5 && memcmp(f[0].s, "index", 5) == 0;
}

static int count_csv_rows(const char *csv)
{
    const char *pos = csv;
    struct line ln = {0};
    int rows = 0;
    bool first = true;
    while (next_line(&pos, &ln)) {
        if (line_is_blank(&ln))
            continue;
        if (!(first && csv_header(&ln)))
            rows++;
        first = false;
    }
    return rows;
}

/* nvidia-smi writes every missing value in brackets: [N/A], [Not Supported],
 * [Unknown Error]. */
static bool bracketed(const struct field *f)
{
    return f->len >= 2 && f->s[0] == '[' && f->s[f->len - 1] == ']';
}

/* A malloc'd copy, NULL for an empty or bracketed value; *oom on failure. */
static char *field_text(const struct field *f, bool *oom)
{
    if (f->len == 0 || bracketed(f))
        return NULL;
    char *s = malloc((size_t)f->len + 1);
    if (!s) {
        *oom = true;
        return NULL;
    }
    memcpy(s, f->s, (size_t)f->len);
    s[f->len] = '\0';
    return s;
}

/* "81920 MiB", or "81920" (with `nounits`); bracketed means unknown (0). */
static int parse_memory(const struct field *f, int64_t *out)
{
    if (bracketed(f)) {
        *out = 0;
        return 0;
    }
    int digits = 0;
    while (digits < f->len && f->s[digits] >= '0' && f->s[digits] <= '9')
        digits++;
    int rest = digits;
    while (rest < f->len && blank(f->s[rest]))
        rest++;
    bool unit_ok = rest == f->len || (f->len - rest == 3 && memcmp(f->s + rest, "MiB", 3) == 0);
    int v = small_number(f->s, digits);
    if (v < 0 || !unit_ok)
        return -1;
    *out = v;
    return 0;
}

static int csv_index(const struct line *ln, const struct field *f, struct csv_gpu *gpus, int ngpu, char **err)
{
    int index = small_number(f->s, f->len);
    if (index < 0)
        return strbuf_set_error(err, "query CSV line %d, column %d: index must be a number, got \"%.*s\"", ln->no,
                                f->col, f->len < ECHO_MAX ? f->len : ECHO_MAX, f->s);
    if (index >= ngpu)
        return strbuf_set_error(err, "query CSV line %d, column %d: GPU index %d, but topo -m shows %d %s", ln->no,
                                f->col, index, ngpu, ngpu == 1 ? "GPU" : "GPUs");
    if (gpus[index].seen)
        return strbuf_set_error(err,
                                "query CSV line %d, column %d: GPU index %d is listed twice "
                                "(first on line %d)",
                                ln->no, f->col, index, gpus[index].line);
    return index;
}

static int parse_csv_line(const struct line *ln, struct csv_gpu *gpus, int ngpu, char **err)
{
    struct field f[4];
    int n = split_fields(ln, f, 4);
    if (n != 4)
        return strbuf_set_error(err, "query CSV line %d: %d %s, expected 4 (index, uuid, name, memory.total)", ln->no,
                                n, n == 1 ? "field" : "fields");
    int index = csv_index(ln, &f[0], gpus, ngpu, err);
    if (index < 0)
        return -1;
    struct csv_gpu *g = &gpus[index];
    if (parse_memory(&f[3], &g->memory_mib) < 0)
        return strbuf_set_error(err,
                                "query CSV line %d, column %d: memory.total must be like \"81920 MiB\", "
                                "got \"%.*s\"",
                                ln->no, f[3].col, f[3].len < ECHO_MAX ? f[3].len : ECHO_MAX, f[3].s);
    bool oom = false;
    g->uuid = field_text(&f[1], &oom);
    g->model = field_text(&f[2], &oom);
    if (oom)
        return strbuf_set_error(err, "out of memory");
    g->seen = true;
    g->line = ln->no;
    return 0;
}

static int parse_csv(const char *csv, struct csv_gpu *gpus, int ngpu, char **err)
{
    int rows = count_csv_rows(csv);
    if (rows != ngpu)
        return strbuf_set_error(err, "query CSV lists %d %s but topo -m shows %d", rows, rows == 1 ? "GPU" : "GPUs",
                                ngpu);
    const char *pos = csv;
    struct line ln = {0};
    bool first = true;
    while (next_line(&pos, &ln)) {
        if (line_is_blank(&ln))
            continue;
        bool skip = first && csv_header(&ln);
        first = false;
        if (!skip && parse_csv_line(&ln, gpus, ngpu, err) < 0)
            return -1;
    }
    return 0;
}

static void free_csv(struct csv_gpu *gpus, int n)
{
    for (int i = 0; gpus && i < n; i++) {
        free(gpus[i].uuid);
        free(gpus[i].model);
    }
    free(gpus);
}

/* ----------------------------------------------------------------- build */

/* Moves the strings out of csv (which may be NULL). */
static struct gpu_topology *assemble(const struct matrix *m, struct csv_gpu *csv, const int *minors)
{
    struct gpu_topology *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->version = 1;
    t->gpus = calloc((size_t)m->ngpu, sizeof(*t->gpus));
    t->links = calloc((size_t)m->ngpu * (size_t)m->ngpu, sizeof(*t->links));
    t->count = t->gpus ? m->ngpu : 0; /* topology_free() walks count gpus */
    if (!t->gpus || !t->links) {
        topology_free(t);
        return NULL;
    }
    for (int i = 0; i < m->ngpu; i++) {
        struct topo_gpu *g = &t->gpus[i];
        g->index = i;
        g->minor = minors ? minors[i] : i;
        g->numa = m->numa[i];
        if (csv) {
            g->uuid = csv[i].uuid;
            g->model = csv[i].model;
            g->memory_mib = csv[i].memory_mib;
            csv[i].uuid = csv[i].model = NULL;
        }
        for (int j = 0; j < m->ngpu; j++)
            t->links[i * m->ngpu + j] = m->links[i * TOPOLOGY_MAX_GPUS + j];
    }
    return t;
}

/* The result goes through the annotation's own serialiser and parser, so
 * it obeys exactly the rules the extender will apply to it (unique minors,
 * symmetric links, ...), and what gpu-topology publishes is what it
 * checked. */
static struct gpu_topology *round_trip(struct gpu_topology *t, char **err)
{
    char *text = topology_serialize(t);
    topology_free(t);
    if (!text) {
        strbuf_set_error(err, "out of memory");
        return NULL;
    }
    char *why = NULL;
    struct gpu_topology *parsed = topology_parse(text, &why);
    free(text);
    if (!parsed)
        strbuf_set_error(err, "annotation: %s", why ? why : "out of memory");
    free(why);
    return parsed;
}

struct gpu_topology *topology_from_smi(const char *topo_text, const char *query_csv, const int *minors, char **err)
{
    if (err)
        *err = NULL;
    if (!topo_text) {
        strbuf_set_error(err, "topo -m output: missing");
        return NULL;
    }
    struct matrix *m = calloc(1, sizeof(*m));
    if (!m) {
        strbuf_set_error(err, "out of memory");
        return NULL;
    }
    struct gpu_topology *t = NULL;
    struct csv_gpu *csv = NULL;
    if (parse_matrix(m, topo_text, err) < 0)
        goto done;
    if (query_csv) {
        csv = calloc((size_t)m->ngpu, sizeof(*csv));
        if (!csv) {
            strbuf_set_error(err, "out of memory");
            goto done;
        }
        if (parse_csv(query_csv, csv, m->ngpu, err) < 0)
            goto done;
    }
    t = assemble(m, csv, minors);
    if (!t) {
        strbuf_set_error(err, "out of memory");
        goto done;
    }
    t = round_trip(t, err);
done:
    free_csv(csv, m->ngpu);
    free(m);
    return t;
}

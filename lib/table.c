/* table.c - kubectl-style text tables. See table.h. */
#include "lib/table.h"
#include "lib/grow.h"

#include <stdlib.h>
#include <string.h>

#define COLUMN_GAP 3

struct table {
    int ncols;
    char **cells; /* headers first, then rows, row-major */
    size_t ncells, cap;
};

static int push(struct table *t, const char *s)
{
    char **grown = grow_array(t->cells, &t->cap, t->ncells + 1, sizeof(*grown), 64);
    if (!grown)
        return -1;
    t->cells = grown;
    char *copy = strdup(s ? s : "");
    if (!copy)
        return -1;
    t->cells[t->ncells++] = copy;
    return 0;
}

struct table *table_new(int ncols, const char *const *headers)
{
    struct table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ncols = ncols;
    if (table_add_row(t, headers) != 0) {
        table_free(t);
        return NULL;
    }
    return t;
}

void table_free(struct table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

int table_add_row(struct table *t, const char *const *cells)
{
    size_t before = t->ncells;
    for (int c = 0; c < t->ncols; c++) {
        if (push(t, cells[c]) != 0) {
            while (t->ncells > before) /* no half rows */
                free(t->cells[--t->ncells]);
            return -1;
        }
    }
    return 0;
}

size_t table_text_width(const char *s)
{
    size_t w = 0;
    while (*s) {
        if (*s == '\033' && s[1] == '[') { /* CSI ... final byte in @..~ */
            s += 2;
            while (*s && !(*s >= '@' && *s <= '~'))
                s++;
            if (*s)
                s++;
            continue;
        }
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
        s++;
    }
    return w;
}

void table_print(const struct table *t, FILE *out)
{
    size_t rows = t->ncells / (size_t)t->ncols;
    size_t *width = calloc((size_t)t->ncols, sizeof(*width));
    if (!width)
        return;
    for (size_t i = 0; i < t->ncells; i++) {
        size_t w = table_text_width(t->cells[i]);
        int c = (int)(i % (size_t)t->ncols);
        if (w > width[c])
            width[c] = w;
    }
    for (size_t r = 0; r < rows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * (size_t)t->ncols + (size_t)c];
            fputs(cell, out);
            if (c + 1 < t->ncols)
                fprintf(out, "%*s", (int)(width[c] - table_text_width(cell) + COLUMN_GAP), "");
        }
        fputc('\n', out);
    }
    free(width);
}

/*
 * table.h - text tables the way kubectl prints them.
 *
 * Owns column layout for command-line output: upper-case headers, every
 * column as wide as its widest cell, three spaces between columns, no
 * trailing padding on the last one. Widths count characters, not bytes
 * (UTF-8), and skip ANSI colour sequences, so coloured cells line up.
 * Cells are copied. Not thread-safe (one table, one writer).
 */
#ifndef GQA_TABLE_H
#define GQA_TABLE_H

#include <stdio.h>

struct table;

/* ncols headers; NULL when memory ran out. */
struct table *table_new(int ncols, const char *const *headers);
void table_free(struct table *t);
/* One row of exactly ncols cells (NULL cells print as ""). 0, or -1 when memory ran out. */
int table_add_row(struct table *t, const char *const *cells);
/* Print headers and rows. */
void table_print(const struct table *t, FILE *out);
/* Display width of s: UTF-8 characters, ANSI escape sequences not counted. */
size_t table_text_width(const char *s);

#endif

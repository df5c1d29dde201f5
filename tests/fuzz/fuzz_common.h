/*
 * fuzz_common.h - helpers the libFuzzer targets share.
 *
 * Inputs are copied into heap blocks of exactly their size (no terminating
 * NUL) for APIs that take a length, so AddressSanitizer reports any read
 * past the end; APIs that take a C string get a NUL-terminated copy.
 */
#ifndef GQA_FUZZ_COMMON_H
#define GQA_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Exactly size bytes (one byte for empty input, never read). */
static inline char *fuzz_exact(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (p && size)
        memcpy(p, data, size);
    return p;
}

/* A NUL-terminated copy. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    if (p) {
        memcpy(p, data, size);
        p[size] = '\0';
    }
    return p;
}

/* Parsers log what they reject; at this rate only errors are of interest. */
static inline void fuzz_quiet(void)
{
    static int done;
    if (!done) {
        log_configure(LOG_ERROR, 0);
        done = 1;
    }
}

#endif

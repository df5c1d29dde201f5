/*
 * ascii.h - character classes the parsers share, independent of the locale
 * (ctype.h follows LC_CTYPE, and bytes from a client are not text in it).
 * Header only, no state.
 */
#ifndef GQA_ASCII_H
#define GQA_ASCII_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The value of a hexadecimal digit (0-9, a-f, A-F), or -1. */
static inline int ascii_hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* C0 controls and DEL: never part of a path, a name or a log line. */
static inline bool ascii_is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7F;
}

/* No byte of p[0..n) has its high bit set. Eight bytes at a time, the last
 * eight (or four) overlapping what came before, so that a short name takes
 * two loads. */
static inline bool ascii_only(const char *p, size_t n)
{
    uint64_t high = 0, v;
    uint32_t w;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&v, p + i, sizeof v);
            high |= v;
        }
        memcpy(&v, p + n - 8, sizeof v);
        high |= v;
    } else if (n >= 4) {
        memcpy(&w, p, sizeof w);
        high = w;
        memcpy(&w, p + n - 4, sizeof w);
        high |= w;
    } else {
        for (size_t i = 0; i < n; i++)
            high |= (unsigned char)p[i];
    }
    return (high & UINT64_C(0x8080808080808080)) == 0;
}

#endif

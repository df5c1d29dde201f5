/*
 * ascii.h - character classes the parsers share, independent of the locale
 * (ctype.h follows LC_CTYPE, and bytes from a client are not text in it).
 * Header only, no state.
 */
#ifndef GQA_ASCII_H
#define GQA_ASCII_H

#include <stdbool.h>

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

#endif

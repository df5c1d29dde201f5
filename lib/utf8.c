/* utf8.c - the shared UTF-8 decoder. See utf8.h. */
#include "lib/utf8.h"

size_t utf8_sequence_length(const unsigned char *p, size_t avail)
{
    if (avail == 0)
        return 0;
    unsigned int cp = p[0], min;
    size_t len;
    if ((cp & 0xE0) == 0xC0)
        len = 2, min = 0x80, cp &= 0x1F;
    else if ((cp & 0xF0) == 0xE0)
        len = 3, min = 0x800, cp &= 0x0F;
    else if ((cp & 0xF8) == 0xF0)
        len = 4, min = 0x10000, cp &= 0x07;
    else
        return 0;
    if (len > avail)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

/* base64.c - RFC 4648 base64 over OpenSSL's EVP codec. See base64.h. */
#include "lib/base64.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* in without whitespace, padded with '=' to a multiple of 4 as
 * EVP_DecodeBlock needs; *pad counts the '=' at its end. 0, -1 for text
 * that is not base64 (data after padding, a stray length), -2 on OOM. */
static int normalise(const char *in, char **out, size_t *len, size_t *pad)
{
    char *buf = malloc(strlen(in) + 4);
    if (!buf)
        return -2;
    size_t k = 0, data = 0;
    *pad = 0;
    for (const char *p = in; *p; p++) {
        if (is_space(*p))
            continue;
        if (*p != '=' && *pad) {
            free(buf);
            return -1;
        }
        *pad += *p == '=';
        data += *p != '=';
        buf[k++] = *p;
    }
    if (data % 4 == 1 || *pad > 2 || (*pad && k % 4 != 0)) {
        free(buf);
        return -1;
    }
    while (k % 4) {
        buf[k++] = '=';
        (*pad)++;
    }
    buf[k] = '\0';
    *out = buf;
    *len = k;
    return 0;
}

int base64_decode(const char *in, char **out, size_t *out_len)
{
    char *text = NULL;
    size_t len = 0, pad = 0;
    int rc = normalise(in, &text, &len, &pad);
    if (rc != 0)
        return rc;
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (!buf) {
        free(text);
        return -2;
    }
    /* Rejects any character outside the alphabet; counts padding as zeros. */
    int n = len ? EVP_DecodeBlock(buf, (const unsigned char *)text, (int)len) : 0;
    free(text);
    if (n < 0 || (size_t)n < pad) {
        free(buf);
        return -1;
    }
    *out_len = (size_t)n - pad;
    buf[*out_len] = '\0';
    *out = (char *)buf;
    return 0;
}

void base64_append(struct strbuf *sb, const unsigned char *in, size_t len)
{
    /* EVP_EncodeBlock takes an int length; bodies this large never reach here. */
    if (len > (size_t)1 << 30 || strbuf_reserve(sb, (len + 2) / 3 * 4 + 1) != 0) {
        sb->failed = 1;
        return;
    }
    int n = EVP_EncodeBlock((unsigned char *)sb->data + sb->len, in, (int)len);
    sb->len += (size_t)n;
    sb->data[sb->len] = '\0';
}

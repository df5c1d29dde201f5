/* proof.c - HMAC proof of a decision's annotations. See proof.h. */
#include "cluster/proof.h"
#include "lib/strbuf.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int decision_key_load(struct decision_key *k, const char *path, char **err)
{
    memset(k, 0, sizeof(*k));
    FILE *f = fopen(path, "rb");
    if (!f) {
        *err = strbuf_format("cannot read the decision key file %s: %s", path, strerror(errno));
        return -1;
    }
    /* One byte more than allowed tells a file that is too long. */
    size_t n = fread(k->bytes, 1, sizeof(k->bytes), f);
    int extra = fgetc(f);
    bool failed = ferror(f) != 0;
    fclose(f);
    while (n > 0 && (k->bytes[n - 1] == '\n' || k->bytes[n - 1] == '\r'))
        n--;
    if (failed || extra != EOF || n < DECISION_KEY_MIN) {
        *err = strbuf_format("the decision key file %s must hold %d to %d bytes (32 random bytes, e.g. `openssl rand "
                             "-hex 32`)",
                             path, DECISION_KEY_MIN, DECISION_KEY_MAX);
        OPENSSL_cleanse(k->bytes, sizeof(k->bytes));
        return -1;
    }
    k->len = n;
    return 0;
}

int decision_key_random(struct decision_key *k)
{
    memset(k, 0, sizeof(*k));
    if (RAND_bytes(k->bytes, 32) != 1)
        return -1;
    k->len = 32;
    k->random = true;
    return 0;
}

/* One field: its name, its length and its bytes, so that no value can be
 * read as another's (names, UIDs and devices come from annotations). */
static void field(struct strbuf *sb, const char *name, const char *value)
{
    const char *v = value ? value : "";
    strbuf_printf(sb, "%s:%zu:", name, strlen(v));
    strbuf_append(sb, v, strlen(v));
    strbuf_putc(sb, '\n');
}

/* What the proof covers, in the order written (docs/security.md). */
static char *proof_message(const struct pod_info *pod)
{
    const struct pod_decision *d = &pod->decision;
    struct strbuf sb, idx;
    strbuf_init(&sb);
    strbuf_init(&idx);
    strbuf_puts(&sb, "gqa-decision-v1\n");
    field(&sb, "uid", pod->uid);
    field(&sb, "node", d->node);
    char when[24];
    snprintf(when, sizeof(when), "%lld", (long long)d->time_ns);
    field(&sb, "time", when);
    for (int i = 0; i < d->nidx && d->idx_count; i++) {
        if (i)
            strbuf_putc(&idx, ';');
        for (int j = 0; j < d->idx_count[i] && d->idx && d->idx[i]; j++) {
            if (j)
                strbuf_putc(&idx, ',');
            strbuf_put_i64(&idx, d->idx[i][j]);
        }
    }
    field(&sb, "idx", idx.data ? idx.data : "");
    char *hami = pod->hami && pod->hami->has_alloc ? hami_alloc_encode(&pod->hami->alloc) : NULL;
    bool oom = strbuf_failed(&idx) || (pod->hami && pod->hami->has_alloc && !hami);
    field(&sb, "hami", hami);
    free(hami);
    strbuf_free(&idx);
    if (oom) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

int decision_prove(const struct decision_key *k, const struct pod_info *pod, char *out)
{
    if (!pod->decision.node || pod->decision.time_ns <= 0 || k->len == 0)
        return -1;
    char *msg = proof_message(pod);
    if (!msg)
        return -1;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    bool ok =
        HMAC(EVP_sha256(), k->bytes, (int)k->len, (const unsigned char *)msg, strlen(msg), mac, &len) && len == 32;
    free(msg);
    if (!ok)
        return -1;
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "v1:", 3);
    for (unsigned int i = 0; i < len; i++) {
        out[3 + 2 * i] = hex[mac[i] >> 4];
        out[3 + 2 * i + 1] = hex[mac[i] & 15];
    }
    out[DECISION_PROOF_LEN] = '\0';
    return 0;
}

int decision_sign(const struct decision_key *k, struct pod_info *pod)
{
    char proof[DECISION_PROOF_LEN + 1];
    if (decision_prove(k, pod, proof) != 0)
        return -1;
    char *copy = strdup(proof);
    if (!copy)
        return -1;
    free(pod->decision.proof);
    pod->decision.proof = copy;
    return 0;
}

bool decision_proven(const struct decision_key *k, const struct pod_info *pod)
{
    const char *given = pod->decision.proof;
    char want[DECISION_PROOF_LEN + 1];
    if (!given || strlen(given) != DECISION_PROOF_LEN || decision_prove(k, pod, want) != 0)
        return false;
    return CRYPTO_memcmp(given, want, DECISION_PROOF_LEN) == 0;
}

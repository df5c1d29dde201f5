/* tlspolicy.c - TLS versions, suites and client certificates. See tlspolicy.h. */
#include "extender/tlspolicy.h"
#include "lib/strbuf.h"

#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>

/* Key exchanges and ciphers by GnuTLS priority keyword. */
enum kx { KX_ECDHE_ECDSA = 1, KX_ECDHE_RSA = 2 };

enum cipher { AES_128_GCM = 1, AES_256_GCM = 2, CHACHA20_POLY1305 = 4 };

static const char *const kx_names[] = {"ECDHE-ECDSA", "ECDHE-RSA"};
static const char *const cipher_names[] = {"AES-128-GCM", "AES-256-GCM", "CHACHA20-POLY1305"};

/* Go's names (crypto/tls, as kube-apiserver's --tls-cipher-suites takes
 * them). TLS 1.3 suites have no key exchange of their own (kx 0). */
static const struct suite {
    const char *name;
    unsigned kx, cipher;
} suites[] = {
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", KX_ECDHE_ECDSA, AES_128_GCM},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", KX_ECDHE_ECDSA, AES_256_GCM},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", KX_ECDHE_ECDSA, CHACHA20_POLY1305},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", KX_ECDHE_ECDSA, CHACHA20_POLY1305},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", KX_ECDHE_RSA, AES_128_GCM},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", KX_ECDHE_RSA, AES_256_GCM},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", KX_ECDHE_RSA, CHACHA20_POLY1305},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", KX_ECDHE_RSA, CHACHA20_POLY1305},
    {"TLS_AES_128_GCM_SHA256", 0, AES_128_GCM},
    {"TLS_AES_256_GCM_SHA384", 0, AES_256_GCM},
    {"TLS_CHACHA20_POLY1305_SHA256", 0, CHACHA20_POLY1305},
};

/* Names kube-apiserver accepts that this service does not offer. */
static const char *const refused[] = {
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

bool tls_policy_version_ok(const char *name)
{
    return strcmp(name, "VersionTLS12") == 0 || strcmp(name, "VersionTLS13") == 0;
}

static const struct suite *find_suite(const char *name, size_t len)
{
    for (size_t i = 0; i < COUNT(suites); i++)
        if (strlen(suites[i].name) == len && strncmp(suites[i].name, name, len) == 0)
            return &suites[i];
    return NULL;
}

static bool is_refused(const char *name, size_t len)
{
    for (size_t i = 0; i < COUNT(refused); i++)
        if (strlen(refused[i]) == len && strncmp(refused[i], name, len) == 0)
            return true;
    return false;
}

/* The key exchanges and ciphers a suite list names (all of them for ""). */
static int collect(const char *list, unsigned *kx, unsigned *cipher, char **err)
{
    *kx = *cipher = 0;
    if (!list || !*list) {
        *kx = KX_ECDHE_ECDSA | KX_ECDHE_RSA;
        *cipher = AES_128_GCM | AES_256_GCM | CHACHA20_POLY1305;
        return 0;
    }
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[0] == ' ')
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        const struct suite *s = find_suite(p, len);
        if (!s) {
            const char *why = is_refused(p, len) ? "is not offered: TLS 1.2 suites here are ECDHE with AES-GCM or "
                                                   "ChaCha20-Poly1305 only"
                                                 : "is not a known cipher suite name";
            strbuf_set_error(err, "--tls-cipher-suites: \"%.*s\" %s", (int)len, p, why);
            return -1;
        }
        *kx |= s->kx;
        *cipher |= s->cipher;
        if (!end)
            break;
        p = end + 1;
    }
    if (!*kx) /* TLS 1.3 names only: TLS 1.2 keeps both ECDHE kinds */
        *kx = KX_ECDHE_ECDSA | KX_ECDHE_RSA;
    return 0;
}

int tls_policy_suites_ok(const char *list, char **err)
{
    unsigned kx, cipher;
    return collect(list, &kx, &cipher, err);
}

static void add_bits(struct strbuf *sb, unsigned bits, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bits & (1u << i))
            strbuf_printf(sb, ":+%s", names[i]);
}

char *tls_policy_priorities(const char *min_version, const char *list, char **err)
{
    unsigned kx, cipher;
    if (min_version && !tls_policy_version_ok(min_version)) {
        strbuf_set_error(err, "--tls-min-version: \"%s\" is not VersionTLS12 or VersionTLS13", min_version);
        return NULL;
    }
    if (collect(list, &kx, &cipher, err) != 0)
        return NULL;
    bool tls13_only = min_version && strcmp(min_version, "VersionTLS13") == 0;
    struct strbuf sb;
    strbuf_init(&sb);
    /* The server's order wins (as in Go), TLS 1.3 first. */
    strbuf_puts(&sb, "NORMAL:%SERVER_PRECEDENCE:-VERS-ALL:+VERS-TLS1.3");
    if (!tls13_only)
        strbuf_puts(&sb, ":+VERS-TLS1.2");
    strbuf_puts(&sb, ":-KX-ALL");
    add_bits(&sb, kx, kx_names, COUNT(kx_names));
    strbuf_puts(&sb, ":-CIPHER-ALL");
    add_bits(&sb, cipher, cipher_names, COUNT(cipher_names));
    strbuf_puts(&sb, ":-MAC-ALL:+AEAD:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1");
    char *out = strbuf_detach(&sb, NULL);
    if (!out)
        strbuf_set_error(err, "out of memory");
    return out;
}

/* The leaf's own extended key usage must name clientAuth (or any purpose):
 * a certificate without the extension is no client certificate either. */
static bool leaf_has_client_auth(gnutls_session_t session)
{
    unsigned int n = 0;
    const gnutls_datum_t *chain = gnutls_certificate_get_peers(session, &n);
    gnutls_x509_crt_t crt;
    if (!chain || n == 0 || gnutls_x509_crt_init(&crt) < 0)
        return false;
    bool ok = false;
    if (gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) >= 0) {
        for (unsigned int i = 0; !ok; i++) {
            char oid[128];
            size_t size = sizeof(oid);
            if (gnutls_x509_crt_get_key_purpose_oid(crt, i, oid, &size, NULL) < 0)
                break;
            ok = strcmp(oid, GNUTLS_KP_TLS_WWW_CLIENT) == 0 || strcmp(oid, GNUTLS_KP_ANY) == 0;
        }
    }
    gnutls_x509_crt_deinit(crt);
    return ok;
}

const char *tls_policy_client_refusal(gnutls_session_t session)
{
    unsigned int listed = 0;
    if (!session || !gnutls_certificate_get_peers(session, &listed) || listed == 0)
        return "a client certificate signed by --tls-client-ca is required";
    /* The chain must verify for the clientAuth purpose (intermediates that
     * restrict their key usage must allow it too). */
    gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
    unsigned int status = 0;
    if (gnutls_certificate_verify_peers(session, &purpose, 1, &status) != GNUTLS_E_SUCCESS)
        return "the client certificate could not be verified";
    bool wrong_purpose = status & GNUTLS_CERT_PURPOSE_MISMATCH;
    unsigned int other = status & ~(GNUTLS_CERT_PURPOSE_MISMATCH | GNUTLS_CERT_INVALID);
    if (other || ((status & GNUTLS_CERT_INVALID) && !wrong_purpose))
        return "the client certificate is not signed by --tls-client-ca (or is expired or revoked)";
    if (wrong_purpose || !leaf_has_client_auth(session))
        return "the client certificate does not carry the clientAuth extended key usage";
    return NULL;
}

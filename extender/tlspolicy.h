/*
 * tlspolicy.h - what the HTTPS listener offers and whom it lets in.
 *
 * Owns the TLS policy of Kubernetes components, in GnuTLS terms:
 *  - versions: TLS 1.3 preferred, TLS 1.2 the floor unless
 *    --tls-min-version VersionTLS13 (kube-apiserver's names);
 *  - TLS 1.2 suites: ECDHE key exchange with AEAD ciphers only (AES-GCM,
 *    ChaCha20-Poly1305), optionally narrowed by --tls-cipher-suites with
 *    kube-apiserver's (Go's) suite names; CBC, RC4, 3DES and static-RSA
 *    suites are refused by name. GnuTLS selects by key exchange and cipher,
 *    so the suites offered are every combination of the key exchanges and
 *    ciphers the names mention (and the certificate's key type picks the key
 *    exchange); TLS 1.3 uses the same ciphers;
 *  - groups: X25519, P-256, P-384, P-521 (Go's defaults);
 *  - with --tls-client-ca, a client certificate that verifies against that
 *    CA for the clientAuth purpose and whose own extended key usage names
 *    clientAuth (a serving certificate is not a client certificate).
 * Stateless; safe from any thread.
 */
#ifndef GQA_TLSPOLICY_H
#define GQA_TLSPOLICY_H

#include <gnutls/gnutls.h>
#include <stdbool.h>

#define TLS_MIN_VERSION_DEFAULT "VersionTLS12"

/* "VersionTLS12" or "VersionTLS13". */
bool tls_policy_version_ok(const char *name);
/* A comma-separated list of suite names: 0, or -1 with *err (malloc'd)
 * naming the first unknown or refused suite. "" means the defaults. */
int tls_policy_suites_ok(const char *list, char **err);
/* The GnuTLS priority string for a valid min version and suite list
 * (NULL or "": every default suite). NULL with *err on a bad value. */
char *tls_policy_priorities(const char *min_version, const char *suites, char **err);

/* With --tls-client-ca: has the peer of session presented a client
 * certificate that is acceptable? NULL when it is, else why not (a static
 * string for the 403). */
const char *tls_policy_client_refusal(gnutls_session_t session);

#endif

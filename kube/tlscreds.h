/*
 * tlscreds.h - the HTTPS listener's certificate, reloaded when its files change.
 *
 * Owns the serving certificate chain and private key: loaded at start-up
 * (a bad pair stops the service with a clear error), then checked at every
 * TLS handshake (a stat of both files) and loaded again when either file
 * changed, so a renewed certificate (cert-manager, the gen-certs script) is
 * served without a restart. A pair that fails to load keeps the previous one
 * in service and is logged. Earlier credentials stay allocated until
 * shutdown: handshakes in flight may still use them.
 *
 * GnuTLS's certificate callback carries no user pointer, so there is one
 * process-wide set of credentials (the service has one HTTPS listener).
 */
#ifndef GQA_TLSCREDS_H
#define GQA_TLSCREDS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

/* Load the pair and make it the one served. 0, or -1 with *err (malloc'd). */
int tls_creds_init(const char *cert_file, const char *key_file, char **err);
void tls_creds_shutdown(void);

/* For MHD_OPTION_HTTPS_CERT_CALLBACK. */
int tls_creds_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                       const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                       unsigned int *pcert_length, gnutls_privkey_t *privkey);

#endif

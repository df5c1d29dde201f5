/*
 * test_tlspolicy.c - extender/tlspolicy.c: the GnuTLS priorities built from
 * --tls-min-version and --tls-cipher-suites give exactly the suites,
 * versions and groups of a Kubernetes component (issue 10, item 5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "extender/tlspolicy.h"
#include "lib/strbuf.h"

/* "SUITE VERSION" lines of what the priorities enable, in order. */
static char *enabled(const char *min_version, const char *suites)
{
    char *err = NULL;
    char *prio = tls_policy_priorities(min_version, suites, &err);
    if (!prio)
        fail_msg("tls_policy_priorities: %s", err ? err : "(null)");
    gnutls_priority_t p;
    const char *where = NULL;
    if (gnutls_priority_init(&p, prio, &where) < 0)
        fail_msg("GnuTLS refuses %s at %s", prio, where ? where : "?");
    struct strbuf sb;
    strbuf_init(&sb);
    for (unsigned i = 0;; i++) {
        unsigned idx;
        int rc = gnutls_priority_get_cipher_suite_index(p, i, &idx);
        if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        if (rc < 0)
            continue;
        gnutls_protocol_t ver;
        const char *name = gnutls_cipher_suite_info(idx, NULL, NULL, NULL, NULL, &ver);
        strbuf_printf(&sb, "%s %s\n", name, gnutls_protocol_get_name(ver));
    }
    const unsigned int *list;
    int n = gnutls_priority_protocol_list(p, &list);
    for (int i = 0; i < n; i++)
        strbuf_printf(&sb, "version %s\n", gnutls_protocol_get_name(list[i]));
    n = gnutls_priority_group_list(p, &list);
    for (int i = 0; i < n; i++)
        strbuf_printf(&sb, "group %s\n", gnutls_group_get_name(list[i]));
    gnutls_priority_deinit(p);
    free(prio);
    return strbuf_detach(&sb, NULL);
}

static void test_defaults(void **state)
{
    (void)state;
    char *got = enabled(NULL, NULL);
    assert_string_equal(got, "TLS_AES_128_GCM_SHA256 TLS1.3\n"
                             "TLS_AES_256_GCM_SHA384 TLS1.3\n"
                             "TLS_CHACHA20_POLY1305_SHA256 TLS1.3\n"
                             "TLS_ECDHE_ECDSA_AES_128_GCM_SHA256 TLS1.2\n"
                             "TLS_ECDHE_ECDSA_AES_256_GCM_SHA384 TLS1.2\n"
                             "TLS_ECDHE_ECDSA_CHACHA20_POLY1305 TLS1.2\n"
                             "TLS_ECDHE_RSA_AES_128_GCM_SHA256 TLS1.2\n"
                             "TLS_ECDHE_RSA_AES_256_GCM_SHA384 TLS1.2\n"
                             "TLS_ECDHE_RSA_CHACHA20_POLY1305 TLS1.2\n"
                             "version TLS1.3\n"
                             "version TLS1.2\n"
                             "group X25519\n"
                             "group SECP256R1\n"
                             "group SECP384R1\n"
                             "group SECP521R1\n");
    free(got);
    got = enabled("VersionTLS12", "");
    assert_non_null(strstr(got, "TLS_ECDHE_RSA_AES_128_GCM_SHA256 TLS1.2\n"));
    assert_null(strstr(got, "CBC"));
    assert_null(strstr(got, "TLS_RSA_"));
    assert_null(strstr(got, "TLS_DHE_"));
    assert_null(strstr(got, "CCM"));
    assert_null(strstr(got, "FFDHE"));
    free(got);
}

static void test_tls13_only(void **state)
{
    (void)state;
    char *got = enabled("VersionTLS13", NULL);
    assert_string_equal(got, "TLS_AES_128_GCM_SHA256 TLS1.3\n"
                             "TLS_AES_256_GCM_SHA384 TLS1.3\n"
                             "TLS_CHACHA20_POLY1305_SHA256 TLS1.3\n"
                             "version TLS1.3\n"
                             "group X25519\n"
                             "group SECP256R1\n"
                             "group SECP384R1\n"
                             "group SECP521R1\n");
    free(got);
}

static void test_named_suites(void **state)
{
    (void)state;
    /* One suite: its key exchange and cipher (TLS 1.3 keeps that cipher). */
    char *got = enabled(NULL, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384");
    assert_string_equal(got, "TLS_AES_256_GCM_SHA384 TLS1.3\n"
                             "TLS_ECDHE_RSA_AES_256_GCM_SHA384 TLS1.2\n"
                             "version TLS1.3\n"
                             "version TLS1.2\n"
                             "group X25519\n"
                             "group SECP256R1\n"
                             "group SECP384R1\n"
                             "group SECP521R1\n");
    free(got);
    /* Both ChaCha20 spellings, spaces after commas, a TLS 1.3 name. */
    got = enabled(NULL, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 ,"
                        "TLS_AES_128_GCM_SHA256");
    assert_non_null(strstr(got, "TLS_ECDHE_ECDSA_CHACHA20_POLY1305 TLS1.2\n"));
    assert_non_null(strstr(got, "TLS_ECDHE_RSA_CHACHA20_POLY1305 TLS1.2\n"));
    assert_non_null(strstr(got, "TLS_AES_128_GCM_SHA256 TLS1.3\n"));
    assert_null(strstr(got, "AES_256"));
    free(got);
}

static void test_names_checked(void **state)
{
    (void)state;
    assert_true(tls_policy_version_ok("VersionTLS12"));
    assert_true(tls_policy_version_ok("VersionTLS13"));
    assert_false(tls_policy_version_ok("VersionTLS11"));
    assert_false(tls_policy_version_ok("tls1.2"));
    char *err = NULL;
    assert_int_equal(tls_policy_suites_ok("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", &err), 0);
    const char *bad[][2] = {
        {"TLS_RSA_WITH_AES_128_GCM_SHA256", "is not offered"},
        {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "is not offered"},
        {"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "is not offered"},
        {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,", "is not a known cipher suite name"},
        {"tls_ecdhe_rsa_with_aes_128_gcm_sha256", "is not a known cipher suite name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(tls_policy_suites_ok(bad[i][0], &err), -1);
        assert_non_null(err);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err);
        free(err);
    }
    err = NULL;
    assert_null(tls_policy_priorities("VersionTLS10", NULL, &err));
    assert_non_null(strstr(err, "--tls-min-version"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_tls13_only),
        cmocka_unit_test(test_named_suites),
        cmocka_unit_test(test_names_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

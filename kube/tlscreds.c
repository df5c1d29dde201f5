/* tlscreds.c - reloadable serving certificate. See tlscreds.h. */
#include "kube/tlscreds.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CHAIN 16

struct creds {
    gnutls_pcert_st chain[MAX_CHAIN];
    unsigned int chain_len;
    gnutls_privkey_t key;
    struct creds *older; /* kept until shutdown */
};

struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

static struct {
    pthread_mutex_t lock;
    char *cert_file, *key_file;
    struct file_id cert_id, key_id;
    struct creds *current;
} state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void creds_free(struct creds *c)
{
    while (c) {
        struct creds *older = c->older;
        for (unsigned int i = 0; i < c->chain_len; i++)
            gnutls_pcert_deinit(&c->chain[i]);
        if (c->key)
            gnutls_privkey_deinit(c->key);
        free(c);
        c = older;
    }
}

static int file_id_of(const char *path, struct file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    return 0;
}

static int same_file(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static char *fail(const char *what, const char *path, const char *why)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "%s %s: %s", what, path, why);
    return strbuf_detach(&sb, NULL);
}

static char *read_datum(const char *path, struct strbuf *sb, gnutls_datum_t *d)
{
    strbuf_init(sb);
    if (strbuf_read_file(sb, path) != 0)
        return fail("cannot read", path, strerror(errno));
    d->data = (unsigned char *)sb->data;
    d->size = (unsigned int)sb->len;
    return NULL;
}

/* Does the private key belong to the leaf certificate? */
static int key_matches(struct creds *c)
{
    gnutls_pubkey_t from_key;
    gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
    int same = 0;
    if (gnutls_pubkey_init(&from_key) < 0)
        return 0;
    if (gnutls_pubkey_import_privkey(from_key, c->key, 0, 0) >= 0 &&
        gnutls_pubkey_export2(from_key, GNUTLS_X509_FMT_DER, &a) >= 0 &&
        gnutls_pubkey_export2(c->chain[0].pubkey, GNUTLS_X509_FMT_DER, &b) >= 0)
        same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
    gnutls_free(a.data);
    gnutls_free(b.data);
    gnutls_pubkey_deinit(from_key);
    return same;
}

/* Parse a PEM chain and key into fresh credentials. */
static struct creds *load(const char *cert_file, const char *key_file, char **err)
{
    struct strbuf cert_text, key_text;
    gnutls_datum_t cert, key;
    struct creds *c = calloc(1, sizeof(*c));
    *err = NULL;
    if (!c) {
        *err = strdup("out of memory");
        return NULL;
    }
    if ((*err = read_datum(cert_file, &cert_text, &cert))) {
        free(c);
        return NULL;
    }
    if ((*err = read_datum(key_file, &key_text, &key))) {
        strbuf_free(&cert_text);
        free(c);
        return NULL;
    }
    c->chain_len = MAX_CHAIN;
    int rc = gnutls_pcert_list_import_x509_raw(c->chain, &c->chain_len, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        c->chain_len = 0;
        *err = fail("bad certificate in", cert_file, gnutls_strerror(rc));
    } else if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
               (rc = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        *err = fail("bad private key in", key_file, gnutls_strerror(rc));
    } else if (!key_matches(c)) {
        *err = fail("the private key does not belong to the certificate in", cert_file, "mismatched pair");
    }
    /* The key's text is secret: wipe it before freeing. */
    memset(key_text.data, 0, key_text.len);
    strbuf_free(&key_text);
    strbuf_free(&cert_text);
    if (*err) {
        creds_free(c);
        return NULL;
    }
    return c;
}

int tls_creds_init(const char *cert_file, const char *key_file, char **err)
{
    struct creds *c = load(cert_file, key_file, err);
    if (!c)
        return -1;
    pthread_mutex_lock(&state.lock);
    state.cert_file = strdup(cert_file);
    state.key_file = strdup(key_file);
    file_id_of(cert_file, &state.cert_id);
    file_id_of(key_file, &state.key_id);
    c->older = state.current;
    state.current = c;
    pthread_mutex_unlock(&state.lock);
    if (!state.cert_file || !state.key_file) {
        *err = strdup("out of memory");
        return -1;
    }
    return 0;
}

void tls_creds_shutdown(void)
{
    pthread_mutex_lock(&state.lock);
    creds_free(state.current);
    state.current = NULL;
    free(state.cert_file);
    free(state.key_file);
    state.cert_file = state.key_file = NULL;
    pthread_mutex_unlock(&state.lock);
}

/* Called with the lock held at each handshake: reload when a file changed.
 * Writers replace the two files one after the other; a pair that does not
 * match yet fails to load, and is tried again when a file changes again. */
static void reload_if_changed(void)
{
    struct file_id cert_id, key_id;
    if (file_id_of(state.cert_file, &cert_id) != 0 || file_id_of(state.key_file, &key_id) != 0)
        return;
    if (same_file(&cert_id, &state.cert_id) && same_file(&key_id, &state.key_id))
        return;
    char *err = NULL;
    struct creds *c = load(state.cert_file, state.key_file, &err);
    state.cert_id = cert_id;
    state.key_id = key_id;
    if (!c) {
        log_warn("TLS certificate not reloaded, still serving the previous one: %s", err ? err : "out of memory");
        free(err);
        return;
    }
    c->older = state.current;
    state.current = c;
    log_info("TLS certificate reloaded from %s", state.cert_file);
}

int tls_creds_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                       const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                       unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    pthread_mutex_lock(&state.lock);
    if (state.cert_file)
        reload_if_changed();
    struct creds *c = state.current;
    if (c) {
        *pcert = c->chain;
        *pcert_length = c->chain_len;
        *privkey = c->key;
    }
    pthread_mutex_unlock(&state.lock);
    return c ? 0 : -1;
}

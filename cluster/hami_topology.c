/* hami_topology.c - HAMi's GPU pair scores and topology-aware pick. See hami_topology.h. */
#include "cluster/hami_topology.h"
#include "lib/log.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- parsing ------------------------------------------------------------------------ */

static int refuse(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(char **err, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    *err = strdup(buf);
    return -1;
}

static int device_by_uuid(const struct hami_device *devices, int count, const char *uuid)
{
    for (int i = 0; i < count; i++)
        if (devices[i].uuid && strcmp(devices[i].uuid, uuid) == 0)
            return i;
    return -1;
}

/* Go's encoding/json matches "uuid" and "score" to HAMi's struct fields
 * without regard to case, and a later key overwrites an earlier one. */
static const cJSON *field(const cJSON *entry, const char *name)
{
    const cJSON *found = NULL;
    for (const cJSON *c = entry->child; c; c = c->next)
        if (c->string && strcasecmp(c->string, name) == 0)
            found = c;
    return found;
}

/* A score as Go reads it into an int: an integral number, here bounded. */
static int read_score(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > (double)HAMI_SCORE_MAX_VALUE)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* One array entry; row is the device it names (-1: not on the node, checked only). */
static int read_entry(const cJSON *entry, int n, const struct hami_device *devices, int count, int64_t *matrix,
                      bool *seen, char **err)
{
    if (cJSON_IsNull(entry))
        return 0; /* Go decodes null into an empty entry */
    if (!cJSON_IsObject(entry))
        return refuse(err, "entry %d is not an object", n);
    const cJSON *uuid = field(entry, "uuid"), *score = field(entry, "score");
    if (uuid && !cJSON_IsString(uuid) && !cJSON_IsNull(uuid))
        return refuse(err, "entry %d: \"uuid\" is not a string", n);
    if (score && !cJSON_IsObject(score) && !cJSON_IsNull(score))
        return refuse(err, "entry %d: \"score\" is not an object", n);
    const char *id = cJSON_IsString(uuid) ? uuid->valuestring : "";
    if (strlen(id) > HAMI_MAX_TEXT)
        return refuse(err, "entry %d: uuid longer than %d bytes", n, HAMI_MAX_TEXT);
    int row = device_by_uuid(devices, count, id);
    /* HAMi gives a device the first entry naming it */
    if (row >= 0 && seen[row])
        row = -1;
    if (row >= 0)
        seen[row] = true;
    int members = 0;
    for (const cJSON *c = cJSON_IsObject(score) ? score->child : NULL; c; c = c->next) {
        int64_t v;
        if (++members > HAMI_SCORE_MAX_ENTRIES)
            return refuse(err, "entry %d: more than %d scores", n, HAMI_SCORE_MAX_ENTRIES);
        if (read_score(c, &v) != 0)
            return refuse(err, "entry %d: a score is not an integer within +-%lld", n, HAMI_SCORE_MAX_VALUE);
        int col = row >= 0 && c->string ? device_by_uuid(devices, count, c->string) : -1;
        if (col >= 0)
            matrix[(size_t)row * (size_t)count + (size_t)col] = v;
    }
    return 0;
}

int hami_pair_scores_parse(const char *text, const struct hami_device *devices, int count,
                           struct hami_pair_scores **out, char **err)
{
    *out = NULL;
    *err = NULL;
    if (count < 0 || count > HAMI_MAX_DEVICES)
        return refuse(err, "the node has %d devices (at most %d)", count, HAMI_MAX_DEVICES);
    size_t len = strlen(text);
    if (len > HAMI_SCORE_MAX_BYTES)
        return refuse(err, "%zu bytes (at most %d)", len, HAMI_SCORE_MAX_BYTES);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return refuse(err, "not JSON");
    int rc = -1;
    struct hami_pair_scores *s = calloc(1, sizeof(*s));
    bool seen[HAMI_MAX_DEVICES] = {false};
    if (!s || (count > 0 && !(s->score = calloc((size_t)count * (size_t)count, sizeof(*s->score)))))
        goto done;
    s->count = count;
    if (!cJSON_IsArray(root) && !cJSON_IsNull(root)) {
        refuse(err, "not a JSON array");
        goto done;
    }
    int n = 0;
    for (const cJSON *e = cJSON_IsArray(root) ? root->child : NULL; e; e = e->next, n++) {
        if (n >= HAMI_SCORE_MAX_ENTRIES) {
            refuse(err, "more than %d entries", HAMI_SCORE_MAX_ENTRIES);
            goto done;
        }
        if (read_entry(e, n, devices, count, s->score, seen, err) != 0)
            goto done;
    }
    *out = s;
    s = NULL;
    rc = 0;
done:
    cJSON_Delete(root);
    hami_pair_scores_free(s);
    return rc;
}

void hami_pair_scores_free(struct hami_pair_scores *s)
{
    if (!s)
        return;
    free(s->score);
    free(s);
}

/* ---- logging each bad value once ------------------------------------------------------ */

#define LOGGED_SLOTS 256

static pthread_mutex_t logged_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t logged[LOGGED_SLOTS]; /* FNV-1a of node and value; a ring, so memory stays bounded */
static unsigned logged_next;

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* separator */
}

/* True the first time this node and value are seen (while still in the ring). */
static bool first_time(const char *node, const char *value)
{
    uint64_t h = fnv1a(fnv1a(14695981039346656037ULL, node), value);
    bool first = true;
    pthread_mutex_lock(&logged_lock);
    for (int i = 0; i < LOGGED_SLOTS && first; i++)
        first = logged[i] != h;
    if (first)
        logged[logged_next++ % LOGGED_SLOTS] = h;
    pthread_mutex_unlock(&logged_lock);
    return first;
}

int hami_topology_read(const cJSON *annotations, struct hami_node *h, const char *node)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_SCORE_ANNOTATION);
    if (!v || !h || h->count == 0)
        return 0;
    char *err = NULL;
    if (!cJSON_IsString(v)) {
        if (first_time(node, "(not a string)"))
            log_warn("node %s: annotation %s ignored: not a string", node, HAMI_SCORE_ANNOTATION);
        return 0;
    }
    if (hami_pair_scores_parse(v->valuestring, h->devices, h->count, &h->pair_scores, &err) == 0)
        return 0;
    if (!err)
        return -1;
    if (first_time(node, v->valuestring))
        log_warn("node %s: annotation %s ignored: %s", node, HAMI_SCORE_ANNOTATION, err);
    free(err);
    return 0;
}

/* ---- the pick ------------------------------------------------------------------------ */

static int64_t pair(const struct hami_pair_scores *s, int a, int b)
{
    return s->score[(size_t)a * (size_t)s->count + (size_t)b];
}

/* C(n, k), or limit + 1 once it passes limit. */
static int64_t combinations(int n, int k, int64_t limit)
{
    int64_t c = 1;
    if (k > n - k)
        k = n - k;
    for (int i = 1; i <= k; i++) {
        c = c * (n - k + i) / i; /* exact: c * (n-k+i) is divisible by i at every step */
        if (c > limit)
            return limit + 1;
    }
    return c;
}

/* One vGPU: the candidate whose own scores towards the others sum lowest. */
static uint64_t worst_single(const struct hami_pair_scores *s, const int *cand, int nc)
{
    int worst = -1;
    int64_t worst_sum = 0;
    for (int i = 0; i < nc; i++) {
        int64_t sum = 0;
        for (int j = 0; j < nc; j++)
            if (cand[j] != cand[i])
                sum += pair(s, cand[i], cand[j]);
        if (worst < 0 || sum < worst_sum) {
            worst = i;
            worst_sum = sum;
        }
    }
    return 1ULL << cand[worst];
}

/* Several: every combination in HAMi's order (lexicographic over the
 * candidates), each pair scored by the earlier candidate's entry. */
static uint64_t best_combination(const struct hami_pair_scores *s, const int *cand, int nc, int k)
{
    int idx[HAMI_MAX_DEVICES];
    for (int i = 0; i < k; i++)
        idx[i] = i;
    uint64_t best = 0;
    int64_t best_sum = 0;
    for (;;) {
        int64_t sum = 0;
        uint64_t set = 0;
        for (int a = 0; a < k; a++) {
            set |= 1ULL << cand[idx[a]];
            for (int b = a + 1; b < k; b++)
                sum += pair(s, cand[idx[a]], cand[idx[b]]);
        }
        if (!best || sum > best_sum) {
            best = set;
            best_sum = sum;
        }
        int i = k - 1;
        while (i >= 0 && idx[i] == nc - k + i)
            i--;
        if (i < 0)
            return best;
        idx[i]++;
        for (int j = i + 1; j < k; j++)
            idx[j] = idx[j - 1] + 1;
    }
}

uint64_t hami_topology_choose(const struct hami_pair_scores *s, const int *cand, int nc, int k)
{
    if (!s || k < 1 || nc < k || nc > s->count || nc > HAMI_MAX_DEVICES)
        return 0;
    for (int i = 0; i < nc; i++)
        if (cand[i] < 0 || cand[i] >= s->count)
            return 0;
    if (k == 1)
        return worst_single(s, cand, nc);
    if (combinations(nc, k, HAMI_TOPOLOGY_MAX_COMBINATIONS) > HAMI_TOPOLOGY_MAX_COMBINATIONS)
        return 0;
    return best_combination(s, cand, nc, k);
}

int64_t hami_topology_set_score(const struct hami_pair_scores *s, uint64_t set)
{
    int64_t sum = 0;
    for (int a = 0; s && a < s->count; a++)
        for (int b = a + 1; (set >> a & 1) && b < s->count; b++)
            if (set >> b & 1)
                sum += pair(s, a, b);
    return sum;
}

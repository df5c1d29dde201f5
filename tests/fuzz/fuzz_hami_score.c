/* fuzz_hami_score.c - HAMi's GPU pair scores (cluster/hami_topology.c,
 * hami.io/node-nvidia-score) read against a node of four devices, and the
 * topology-aware pick on what was read: every pick must be k of the
 * candidates, or 0 (never a device outside them). */
#include "fuzz_common.h"
#include "cluster/hami_topology.h"

#define UUIDS(x) "GPU-" x "0000000-0000-0000-0000-000000000000"
static const char reg[] = UUIDS("0") ",10,16384,100,T,0,true,0,hami-core:" UUIDS("1") ",10,16384,100,T,0,true,1,hami-core:" UUIDS(
    "2") ",10,16384,100,T,0,true,2,hami-core:" UUIDS("3") ",10,16384,100,T,0,true,3,hami-core:";

static void check_picks(const struct hami_pair_scores *s)
{
    const int orders[][4] = {{3, 2, 1, 0}, {0, 1, 2, 3}, {2, 0, 3, 1}};
    for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++)
        for (int nc = 1; nc <= 4; nc++) {
            uint64_t allowed = 0;
            for (int i = 0; i < nc; i++)
                allowed |= 1ULL << orders[o][i];
            for (int k = 0; k <= nc + 1; k++) {
                uint64_t got = hami_topology_choose(s, orders[o], nc, k);
                bool in_range = k >= 1 && k <= nc;
                if ((got & ~allowed) || (in_range && __builtin_popcountll(got) != k) || (!in_range && got))
                    abort();
            }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    struct hami_device *devs = NULL;
    int count = 0;
    char *err = NULL;
    if (hami_parse_register(reg, &devs, &count, &err) != 0 || count != 4)
        abort();
    struct hami_pair_scores *s = NULL;
    if (hami_pair_scores_parse(text, devs, count, &s, &err) == 0) {
        if (!s || s->count != 4 || err)
            abort();
        for (int i = 0; i < 16; i++)
            if (s->score[i] > HAMI_SCORE_MAX_VALUE || s->score[i] < -HAMI_SCORE_MAX_VALUE)
                abort();
        check_picks(s);
        hami_pair_scores_free(s);
    } else {
        if (s)
            abort();
        free(err);
    }
    hami_devices_free(devs, count);
    free(text);
    return 0;
}

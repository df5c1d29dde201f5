/* fuzz_watch_event.c - watch event lines ({"type": ..., "object": ...}) for
 * nodes, pods and ConfigMaps, through the informers' feeds into a cluster
 * cache (kube/informer.c, extender/live/feed.c, cluster/ nodespec, podspec and
 * cache). Each input is a fresh cache; each line of it one event, to the
 * informer its first byte picks ('n'odes, 'p'ods, anything else
 * ConfigMaps), so sequences of adds, updates and deletes meet one cache. */
#include "fuzz_common.h"
#include "extender/live/feed.h"
#include "kube/informer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    struct cluster_cache cache;
    struct cache_config cc = {.assume_ttl_ns = 60000000000LL};
    if (cache_init(&cache, &cc) != 0)
        return 0;
    struct feed *feeds[3] = {feed_new(FEED_NODES, &cache, NULL, NULL), feed_new(FEED_PODS, &cache, NULL, NULL),
                             feed_new(FEED_CONFIGMAPS, &cache, "kube-public", NULL)};
    struct informer *infs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        infs[i] = feeds[i] ? informer_new("fuzz", "/api/v1/x", feed_sink(feeds[i]), NULL) : NULL;
    if (infs[0] && infs[1] && infs[2]) {
        const char *p = (const char *)data, *end = p + size;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (len > 1) {
                char *line = fuzz_exact((const uint8_t *)p + 1, len - 1);
                int which = p[0] == 'n' ? 0 : p[0] == 'p' ? 1 : 2;
                if (line)
                    (void)informer_apply_event(infs[which], line, len - 1);
                free(line);
            }
            p += len + 1;
        }
        cache_expire(&cache, INT64_MAX);
    }
    for (int i = 0; i < 3; i++) {
        informer_free(infs[i]);
        feed_free(feeds[i]);
    }
    cache_destroy(&cache);
    return 0;
}

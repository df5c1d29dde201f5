/* fuzz_verbs.c - request bodies through the real endpoints (router.c,
 * handlers.c, webhooks.c, placement, allocator, admission policy) on the
 * bundled demo state, offline, in bind placement mode, where no verb fuzzed
 * here changes the state: the first byte picks the endpoint, the rest is
 * the body. The bind verb records a decision, so its body is fuzzed on its
 * own (fuzz_wire_binding). */
#include "cluster/statefile.h"
#include "extender/app.h"
#include "extender/options.h"
#include "extender/serve/router.h"
#include "fuzz_common.h"

#include <stdio.h>

static const char *const paths[] = {
    "/scheduler/filter", "/scheduler/predicates", "/scheduler/prioritize", "/scheduler/preemption",
    "/inspect/explain",  "/admission/validate",   "/admission/mutate",
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

static struct options opts;
static struct app app;

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {"--state-file", GQA_SOURCE_DIR "/examples/demo-state.yaml", "--placement", "bind", "--log-level",
                    "error"};
    if (options_parse(&opts, CMD_SERVE, (int)(sizeof(args) / sizeof(args[0])), args, stderr) != 0)
        abort();
    log_configure(opts.log_level, 0);
    struct state_counts counts;
    char *err = NULL;
    if (app_init(&app, &opts) != 0 || statefile_load(&app.cache, opts.state_file, &counts, &err) != 0) {
        fprintf(stderr, "fuzz_verbs: cannot load the demo state: %s\n", err ? err : "out of memory");
        abort();
    }
    atomic_store(&app.ready, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *body = fuzz_exact(data + 1, size - 1);
    if (!body)
        return 0;
    struct http_request req = {
        .method = data[0] & 0x80 ? "GET" : "POST", .path = paths[data[0] % NPATHS], .body = body, .body_len = size - 1};
    struct http_response resp = {0};
    (void)router_dispatch(&app, &req, &resp);
    if (resp.status == 0 || !resp.body)
        abort(); /* every request gets an answer */
    free(resp.pieces);
    free(resp.body);
    free(body);
    return 0;
}

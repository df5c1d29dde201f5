/*
 * simulate.c - "where would this pod go, and why not elsewhere", without a
 * server: loads the state, runs the same evaluation as POST /inspect/explain
 * and prints that answer. See simulate.h.
 */
#include "extender/serve/simulate.h"
#include "cluster/statefile.h"
#include "extender/options.h"
#include "extender/serve/handlers.h"
#include "lib/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *read_pod(const char *path)
{
    size_t len = 0;
    char *err = NULL;
    char *text = read_whole_file(path, &len, &err);
    cJSON *pod = text ? parse_object_text(text, len, &err) : NULL;
    if (pod && !cJSON_IsObject(pod)) {
        cJSON_Delete(pod);
        pod = NULL;
        err = strdup("not a Pod object (a YAML or JSON mapping)");
    }
    /* read_whole_file's message already names the file. */
    if (!pod && !text)
        fprintf(stderr, "gpu-quota-admission simulate: %s\n", err ? err : "out of memory");
    else if (!pod)
        fprintf(stderr, "gpu-quota-admission simulate: %s: %s\n", path, err ? err : "out of memory");
    free(err);
    free(text);
    return pod;
}

static int run(struct app *app, const struct options *opts)
{
    struct state_counts counts;
    char *err = NULL;
    if (statefile_load(&app->cache, opts->state_file, &counts, &err) != 0) {
        fprintf(stderr, "gpu-quota-admission simulate: %s\n", err ? err : "out of memory");
        free(err);
        return 2;
    }
    cJSON *pod = read_pod(opts->pod_file);
    if (!pod)
        return 2;
    int fits = 0;
    char *answer = explain_pod(app, pod, &fits, &err);
    cJSON_Delete(pod);
    if (!answer) {
        fprintf(stderr, "gpu-quota-admission simulate: %s\n", err ? err : "out of memory");
        free(err);
        return 2;
    }
    fputs(answer, stdout);
    free(answer);
    return fits ? 0 : 1;
}

int simulate_main(int argc, char **argv)
{
    struct options opts;
    if (options_parse(&opts, CMD_SIMULATE, argc, argv, stderr) != 0)
        return 2;
    if (opts.show_help) {
        options_print_help(stdout);
        options_free(&opts);
        return 0;
    }
    log_configure(opts.log_level > LOG_WARN ? opts.log_level : LOG_WARN, opts.log_format);
    struct app app;
    int rc = 2;
    if (app_init(&app, &opts) == 0) {
        rc = run(&app, &opts);
        app_destroy(&app);
    }
    options_free(&opts);
    return rc;
}

/* fuzz_kubeconfig.c - kubeconfig files (kube/kubeconfig.c), YAML or JSON.
 * The reader takes a path, so each input is written to a file in a private
 * directory (paths it names are only checked with access(), never read). */
#include "fuzz_common.h"
#include "kube/kubeconfig.h"

#include <stdio.h>
#include <unistd.h>

static char dir[] = "/tmp/gqa-fuzz-kubeconfig-XXXXXX";
static char path[64];

static void remove_input(void)
{
    unlink(path);
    rmdir(dir);
}

static const char *input_file(void)
{
    if (!path[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof(path), "%s/config", dir);
        atexit(remove_input);
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(input_file(), "wb");
    if (!f)
        return 0;
    size_t wrote = fwrite(data, 1, size, f);
    fclose(f);
    if (wrote != size)
        return 0;
    char *err = NULL;
    struct kube_config *cfg = kube_config_from_file(path, &err);
    if (!cfg == !err)
        abort(); /* exactly one of a config and a reason */
    kube_config_free(cfg);
    free(err);
    return 0;
}

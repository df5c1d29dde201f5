/* fit.c - the helpers of the fit contract. See fit.h. */
#include "extender/decide/fit.h"

#include <stdio.h>
#include <string.h>

int pack_policy_parse(const char *name, enum pack_policy *out)
{
    if (strcmp(name, "binpack") == 0)
        *out = POLICY_BINPACK;
    else if (strcmp(name, "spread") == 0)
        *out = POLICY_SPREAD;
    else
        return -1;
    return 0;
}

const char *reason_class_name(enum reason_class c)
{
    static const char *const names[REASON_CLASS_COUNT] = {
        "none",        "pod_invalid",     "node_unknown",       "no_gpu",       "no_capacity",
        "gpu_cores",   "gpu_memory",      "whole_gpus",         "unattributed", "quota_pool",
        "quota_model", "quota_exhausted", "assigned_elsewhere", "hami_devices", "hami_quota",
        "instances"};
    return (unsigned)c < REASON_CLASS_COUNT ? names[c] : "none";
}

const char *pack_policy_name(enum pack_policy p)
{
    return p == POLICY_SPREAD ? "spread" : "binpack";
}

bool fit_vrefuse(struct fit_result *fit, bool unresolvable, const char *fmt, va_list ap)
{
    int len = vsnprintf(fit->reason, sizeof(fit->reason), fmt, ap);
    if (len < 0)
        fit->reason[0] = '\0';
    fit->reason_len = len < 0 ? 0 : (size_t)len < sizeof(fit->reason) ? (size_t)len : sizeof(fit->reason) - 1;
    fit->fits = false;
    fit->unresolvable = unresolvable;
    fit->score = 0;
    return false;
}

/*
 * admission/crl.h - CustomResourceLimitation ConfigMaps (design.md section 7).
 *
 * Owns what a CRL is and what it demands: parsing a ConfigMap into a CRL,
 * validating every rule with one clear message per problem, the registry of
 * enabled, valid CRLs built from the ConfigMaps the cache holds (invalid ones
 * listed with their problems), groups formed by the group label, and
 * enforcement on a pod: per container, for each enabled group the container
 * uses, the limits/requests rules, and the defaults a container missing an
 * optional key takes (as values for the filter and as an RFC 6902 JSON patch
 * for the mutating webhook).
 */
#ifndef GQA_ADMISSION_CRL_H
#define GQA_ADMISSION_CRL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRL_LABEL_TYPE "features.alauda.io/type"
#define CRL_LABEL_GROUP "features.alauda.io/group"
#define CRL_LABEL_ENABLED "features.alauda.io/enabled"
#define CRL_TYPE_VALUE "CustomResourceLimitation"
#define CRL_NAME_PREFIX "cf-crl-"

enum crl_limits { CRL_LIMITS_DISABLED, CRL_LIMITS_REQUIRED, CRL_LIMITS_OPTIONAL };

enum crl_requests { CRL_REQUESTS_DISABLED, CRL_REQUESTS_REQUIRED, CRL_REQUESTS_FROM_LIMITS };

struct crl {
    char *name; /* ConfigMap name, cf-crl-<customName>-<keyName> */
    char *group;
    char *key;           /* resource name, e.g. tencent.com/vcuda-core */
    char *default_value; /* as written, NULL when empty */
    enum crl_limits limits;
    enum crl_requests requests;
    bool enabled;
};

/* A list of human messages. Zero-initialise it ({0}); functions append.
 * failed: an allocation failed, so the list is incomplete and must not be
 * taken as "no problem" (answer 500 / exit non-zero instead). */
struct crl_problems {
    char **items;
    size_t count;
    bool failed;
};

void crl_problems_free(struct crl_problems *p);
/* The problems as one message, "; " between them (malloc'd, NULL on allocation failure). */
char *crl_problems_join(const struct crl_problems *p);

/* Does this ConfigMap claim to be a CRL (the type label, or the cf-crl- name
 * prefix in the CRL namespace)? Only those are validated. */
bool crl_is_candidate(const cJSON *configmap, const char *crl_namespace);
/* Parse and validate one ConfigMap on its own (every rule except "a second
 * enabled CRL for a key that already has one", which needs the others).
 * Returns the CRL when there is no problem; otherwise NULL and the problems
 * appended (each message names the rule, e.g. "data.limits: \"sometimes\" is
 * not one of disabled, required, optional"). NULL with problems->failed set:
 * out of memory. Offending values are quoted as JSON string literals.
 * defaultValue may be empty only when limits is not optional: an optional
 * limit is exactly when the default is used, and section 3 relies on it (a
 * shared vcuda container without vcuda-memory takes it). A non-empty
 * defaultValue must parse whatever limits says. ConfigMap values must be
 * strings (JSON null reads as "", as Go's decoder does). */
struct crl *crl_parse(const cJSON *configmap, const char *crl_namespace, struct crl_problems *problems);
void crl_free(struct crl *crl);

/* The enabled, valid CRLs, and the invalid ones with their problems. */
struct crl_invalid {
    char *name; /* namespace/name */
    struct crl_problems problems;
};

struct crl_registry {
    struct crl **crls; /* enabled and valid */
    size_t count;
    struct crl_invalid *invalid;
    size_t invalid_count;
};
/* Build from ConfigMaps (any namespace; those outside crl_namespace or not
 * candidates are ignored). When two enabled CRLs name one key, the first by
 * name wins and the other is invalid ("a second enabled CRL for key K: X
 * already has it"). NULL on allocation failure. */
struct crl_registry *crl_registry_build(const cJSON *const *configmaps, size_t n, const char *crl_namespace);
void crl_registry_free(struct crl_registry *r);
/* Could the registry give a pod a default (crl_check_pod's defaults): an
 * enabled CRL with optional limits and a defaultValue? r may be NULL. */
bool crl_registry_has_defaults(const struct crl_registry *r);
/* The problems a ConfigMap would have if it were created or updated now
 * alongside the registry's CRLs (validation webhook, validate-crl): its own
 * rules plus the duplicate-key rule against others (not itself: same name),
 * judged even when other rules fail. Meant for candidates (crl_is_candidate);
 * r may be NULL (no others). Appends to problems; check problems->failed. */
void crl_validate_against(const struct crl_registry *r, const cJSON *configmap, const char *crl_namespace,
                          struct crl_problems *problems);

/* One default a container takes. */
struct crl_default {
    int container;     /* index in spec.containers */
    const char *key;   /* the CRL's key (owned by the registry) */
    const char *value; /* the CRL's defaultValue (owned by the registry) */
    bool set_request;  /* requests: fromLimits/disabled and the container has no request
                             * for the key: the request is set too, because an extended
                             * resource's request must equal its limit (the API server would
                             * default it from the limit anyway; writing it keeps the pod
                             * the filter sees complete). requests: required: never. */
};

struct crl_defaults {
    struct crl_default *items;
    size_t count;
};

void crl_defaults_free(struct crl_defaults *d);

/* Check a Pod against the registry: violations get one message per problem
 * naming the container, the CRL and the rule ("container \"main\":
 * tencent.com/vcuda-core is required in limits by CustomResourceLimitation
 * cf-crl-gpu-manager-vcuda-core (limits: required)"); defaults the pod would
 * take are listed (in container order). Both lists are appended to (zero-
 * initialise them). Only spec.containers are checked, as the extender only
 * places those. A key's request is compared numerically with its limit, or
 * with the default limit it is about to take. 0, or -1 on allocation failure. */
int crl_check_pod(const struct crl_registry *r, const cJSON *pod, struct crl_problems *violations,
                  struct crl_defaults *defaults);

/* RFC 6902 patch (JSON text) that writes the defaults into the pod: limits
 * (and requests where set_request), creating resources/limits/requests
 * objects when missing (or not objects), only "add" operations, values as
 * strings, '/' in keys escaped as ~1. "[]" when there is nothing to add;
 * NULL on allocation failure. */
char *crl_defaults_patch(const cJSON *pod, const struct crl_defaults *d);

#endif

/*
 * labelsel.h - Kubernetes label selectors (kubectl's -l syntax).
 *
 * Owns parsing and matching of the equality- and set-based selector grammar
 * of k8s.io/apimachinery/pkg/labels: comma-separated requirements, each one
 * of `key`, `!key`, `key=value`, `key==value`, `key!=value`,
 * `key in (v1,v2)` and `key notin (v1,v2)`. Keys and values are checked
 * against the label syntax (values: at most 63 characters of [A-Za-z0-9._-],
 * keys: an optional DNS prefix and "/" before a name of that kind), so a typo
 * is an error rather than a selector that silently matches nothing. The
 * empty selector matches everything. A parsed selector is immutable and may
 * be shared between threads.
 */
#ifndef GQA_LABELSEL_H
#define GQA_LABELSEL_H

#include <stdbool.h>

struct label_selector;

/* Parse text. NULL with *err (malloc'd, naming the position) when it is not
 * a selector, or NULL with *err NULL when memory ran out. */
struct label_selector *label_selector_parse(const char *text, char **err);
void label_selector_free(struct label_selector *s);

/* Does a label set match? get(ctx, key) returns the label's value or NULL. */
typedef const char *(*label_lookup_fn)(const void *ctx, const char *key);
bool label_selector_matches(const struct label_selector *s, label_lookup_fn get, const void *ctx);

#endif

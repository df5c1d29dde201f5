/*
 * yamljson.h - YAML (as kubectl prints and people write it) to cJSON.
 *
 * Owns the conversion of YAML documents into the JSON data model the rest of
 * the service works with, following what sigs.k8s.io/yaml does for
 * Kubernetes objects: mappings -> objects, sequences -> arrays, quoted
 * scalars -> strings, plain scalars typed as YAML 1.1 does (null/~/empty ->
 * null, true/false (and yes/no/on/off) -> bool, integers and floats ->
 * numbers, everything else -> string). Block literals (| and >) are strings.
 * Anchors and aliases are resolved; merge keys (<<) are not supported and are
 * an error. Mapping keys are always strings: the key's text as written.
 *
 * Kept as strings on purpose: integers beyond +-2^53 (a double would round
 * them), .inf/.nan, and floats that overflow a double. Duplicate keys are an
 * error. Limits: 512 levels of nesting; aliases may add at most 1,000,000
 * nodes in total. Object members keep document order. See yamljson.c for the
 * full typing table.
 *
 * Errors name the line and column (1-based) of the problem.
 */
#ifndef GQA_YAMLJSON_H
#define GQA_YAMLJSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Convert the YAML text buf[0..len). A stream with several documents
 * ("---" separated) yields a JSON array of the documents; a single document
 * yields that document's value. Empty documents are skipped.
 * A stream of only empty documents, or empty input, is the error
 * "line L, column C: empty document". Note that a one-document stream whose
 * value is an array looks the same as a multi-document stream.
 * Returns NULL on error and, when err is non-NULL, stores a malloc'd message
 * like "line 4, column 7: mapping values are not allowed in this context"
 * (*err is set to NULL on success; it stays NULL on failure only if the
 * message itself could not be allocated). */
cJSON *yaml_to_json(const char *buf, size_t len, char **err);

/* True when the text looks like JSON (first non-space character is '{' or '[').
 * JSON is also YAML, but the JSON path is much faster for large files. Flow
 * style YAML ("[a, b]") also starts this way, so a caller whose JSON parse
 * fails should fall back to yaml_to_json. A leading BOM means "not JSON". */
int text_looks_like_json(const char *buf, size_t len);

/* The other way, for output (kubectl -o yaml): block-style YAML of a JSON
 * value, two-space indents, sequences at their key's indent as kubectl
 * prints them. Strings are written plain when YAML would read them back as
 * the same string, else double-quoted with JSON escapes (valid YAML). */
struct strbuf;
void json_to_yaml(const cJSON *value, struct strbuf *out);

#endif

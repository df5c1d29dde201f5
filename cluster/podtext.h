/*
 * podtext.h - a watched Pod read straight from its text into a pod_info.
 *
 * Owns the fast reader of the pods that watch events and lists deliver: one
 * scan of the object's text notes where the fields the extender reads are
 * (those of podspec.h's slim form), and the pod_info is built from them
 * through podparts.h, with no cJSON tree in between. A tree cost more than
 * half of applying a watch event: its allocations, its lookups, its frees.
 *
 * It reads only the plain shape the API server writes: every field it reads
 * is of the expected type, named once, a string without escapes, and every
 * GPU quantity parses. Anything else is declined, and the caller reads that
 * pod the cJSON way (pod_slim_from_prefix, then pod_info_from_json), which
 * has every rule and every error message. Whenever this reader answers, its
 * pod_info equals that of the cJSON way; fuzz_podtext checks it. No state,
 * no locks.
 */
#ifndef GQA_PODTEXT_H
#define GQA_PODTEXT_H

#include <stddef.h>

#include "cluster/podspec.h"

/* The Pod object at the start of text (whitespace before it allowed), which
 * need not end the text: its pod_info, with *used set to the bytes up to
 * and including its closing brace. NULL when declined: the text there is
 * not a Pod of the plain shape (or not JSON), or memory ran out; read it
 * the cJSON way then. */
struct pod_info *pod_info_from_text_prefix(const char *text, size_t len, size_t *used);

#endif

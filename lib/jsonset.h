/*
 * jsonset.h - setting a member of a cJSON object whether or not it exists.
 *
 * cJSON adds a duplicate key when asked to add one that is there, and only
 * replaces one that is; the annotation writers and the Lease writer need
 * "set". No state; the object belongs to the caller.
 */
#ifndef GQA_JSONSET_H
#define GQA_JSONSET_H

#include <cjson/cJSON.h>

/* Set obj[key] to item, replacing a member of that name. Takes item (freed
 * on failure). 0, or -1 when item is NULL or out of memory. */
int json_set_item(cJSON *obj, const char *key, cJSON *item);

/* json_set_item with a new string holding a copy of value. */
int json_set_string(cJSON *obj, const char *key, const char *value);

#endif

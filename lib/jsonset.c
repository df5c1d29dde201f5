/* jsonset.c - set-or-replace for cJSON object members (jsonset.h). */
#include "lib/jsonset.h"

#include <stdbool.h>

int json_set_item(cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        return -1;
    bool done = cJSON_GetObjectItemCaseSensitive(obj, key) ? cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item)
                                                           : cJSON_AddItemToObject(obj, key, item);
    if (!done) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

int json_set_string(cJSON *obj, const char *key, const char *value)
{
    return json_set_item(obj, key, cJSON_CreateString(value));
}

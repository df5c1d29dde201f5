/* occupancy.c - readers of one node's occupancy records. See occupancy.h. */
#include "cluster/occupancy.h"

void cache_put_charged_keys(struct strbuf *sb, const struct node_state *n,
                            bool (*holds)(const struct pod_entry *e, int which), int which)
{
    bool first = true;
    strbuf_putc(sb, '[');
    for (const struct pod_entry *e = n->charged; e; e = e->node_next) {
        if (!holds(e, which))
            continue;
        if (!first)
            strbuf_putc(sb, ',');
        strbuf_json_string(sb, e->info->key);
        first = false;
    }
    strbuf_putc(sb, ']');
}

int node_slot_of_minor(const struct node_state *n, int minor)
{
    for (int s = 0; s < n->gpu_count; s++)
        if (n->gpus[s].minor == minor)
            return s;
    return -1;
}

/* nodefit.c - the one-line node summary. See nodefit.h. */
#include "cluster/nodefit.h"
#include "cluster/occupancy.h"

#include <string.h>

static bool unattributed_none(const struct node_usage *u)
{
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        if (u->mem[p] != 0)
            return false;
    return u->cores == 0 && u->pods == 0;
}

/* Fill slot s; false when a value does not fit its field. */
static bool fill_slot(struct node_fit *f, int s, const struct gpu_state *g)
{
    int64_t cores = 100 - g->core_used;
    if (cores < 0 || cores > 100 || g->pods < 0 || g->pods > UINT8_MAX || g->minor < 0 || g->minor > UINT8_MAX)
        return false;
    bool memory_idle = true;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++) {
        int64_t free = g->mem_total[p] - g->mem_used[p];
        if (free < 0 || free > UINT16_MAX)
            return false;
        f->mem_free[p][s] = (uint16_t)free;
        memory_idle &= g->mem_used[p] == 0;
    }
    f->cores_free[s] = (uint8_t)cores;
    f->pods[s] = (uint8_t)g->pods;
    f->minor[s] = (uint8_t)g->minor;
    if (cores == 100 && memory_idle)
        f->idle |= (uint8_t)(1u << s);
    f->cores_used = (uint16_t)(f->cores_used + g->core_used);
    return true;
}

/* best1 and best1_gpus, from what the spec worked out (nodespec.h). */
static void fill_best1(struct node_fit *f, const struct node_state *n)
{
    const struct node_spec *s = n->spec;
    if (!s->shape || s->shape->count != n->gpu_count)
        return; /* the allocator scores no set there: 0 and 0 */
    if (!s->single_exact || s->single_best < 0 || s->single_best >= NODE_FIT_BEST1_UNKNOWN) {
        f->best1 = NODE_FIT_BEST1_UNKNOWN; /* not the two values the line can say */
        return;
    }
    f->best1 = (uint8_t)s->single_best;
    f->best1_gpus = (uint8_t)s->single_gpus; /* at most NODE_FIT_SLOTS GPUs here */
}

void node_fit_refresh(struct node_state *n)
{
    struct node_fit *f = &n->fit;
    memset(f, 0, sizeof(*f));
    if (!n->spec || n->hami || n->gpu_count < 1 || n->gpu_count > NODE_FIT_SLOTS || !n->gpus ||
        !unattributed_none(&n->unattributed))
        return;
    f->count = (uint8_t)n->gpu_count;
    f->offers = (n->spec ? n->spec->offers : 0);
    for (int s = 0; s < n->gpu_count; s++)
        if (!fill_slot(f, s, &n->gpus[s])) {
            memset(f, 0, sizeof(*f));
            return;
        }
    fill_best1(f, n);
    f->usable = 1;
}

bool node_fit_agrees(const struct node_state *n)
{
    struct node_state copy = *n;
    node_fit_refresh(&copy);
    return memcmp(&copy.fit, &n->fit, sizeof(n->fit)) == 0;
}

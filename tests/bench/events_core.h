/*
 * events_core.h - the watch-events figure shared by events-bench and gqa-bench.
 */
#ifndef GQA_EVENTS_CORE_H
#define GQA_EVENTS_CORE_H

#include <stdint.h>

#define EVENTS_NODES 1000

struct events_figure {
    long events;            /* applied: pods x ADDED, MODIFIED, DELETED */
    double seconds;         /* applying them (writing each one is not timed) */
    double bytes_per_event;
    int64_t cores_left;     /* charged after the last DELETED: must be 0 */
};

/* Apply 3 x pods pod events to a fresh cache of EVENTS_NODES nodes x 8 GPUs.
 * 0, or -1 when memory ran out or an event was refused. */
int events_run(int pods, struct events_figure *out);

#endif

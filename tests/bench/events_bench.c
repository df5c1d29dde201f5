/*
 * events_bench.c - how many pod watch events per second the cache applies.
 *
 * Runs events_core.c's figure (ADDED, MODIFIED, DELETED for every pod, in
 * process) and prints events/s; exits 1 unless the cache is empty at the
 * end (every charge taken back).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/bench/events_core.h"

#define TARGET_EVENTS_PER_S 150000.0

int main(int argc, char **argv)
{
    int pods = argc > 1 ? atoi(argv[1]) : 20000;
    struct events_figure f;
    if (pods <= 0 || pods > 10000000 || events_run(pods, &f) != 0)
        return 2;
    double rate = (double)f.events / f.seconds;
    printf("events_bench: %ld pod events (%d pods x ADDED, MODIFIED, DELETED; %.0f bytes/event) on %d nodes\n",
           f.events, pods, f.bytes_per_event, EVENTS_NODES);
    printf("events_bench: applied in %.3f s = %.0f events/s (target >= %.0f/s: %s); cores left charged: %lld\n",
           f.seconds, rate, TARGET_EVENTS_PER_S, rate >= TARGET_EVENTS_PER_S ? "PASS" : "MISS",
           (long long)f.cores_left);
    return f.cores_left == 0 ? 0 : 1;
}

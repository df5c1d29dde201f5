/*
 * simulate.h - the `simulate` subcommand.
 *
 * Owns `gpu-quota-admission simulate --state-file F --pod POD.yaml`: the
 * explain answer for one pod over an offline state, printed; exit 0 when
 * some node fits, 1 when none does, 2 on bad input.
 */
#ifndef GQA_SIMULATE_H
#define GQA_SIMULATE_H

/* argv holds the flags after "simulate". Returns the exit code. */
int simulate_main(int argc, char **argv);

#endif

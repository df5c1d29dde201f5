/*
 * flags.h - a command line of --long flags, with environment twins.
 *
 * Owns the mechanics every binary's flags share: `--name VALUE`,
 * `--name=VALUE` and switches, the exact name only (no abbreviations, so a
 * renamed flag never silently matches another), one-line errors that name
 * the flag ("PROG: invalid value "x" for --name (expected N)"), optional
 * environment variables (PREFIX + the name in upper case with dashes as
 * underscores; switches take true/false), flags limited to some subcommands,
 * and the --help table. What a flag means is the caller's: each has a setter
 * that validates and stores its value into the caller's struct.
 *
 * Precedence: the command line, then the environment, then the caller's
 * defaults (set before flags_parse). No global state.
 */
#ifndef GQA_FLAGS_H
#define GQA_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

/* Store value into target: 0, 1 when the value is invalid, -1 when memory ran out. */
typedef int (*flag_setter)(void *target, const char *value);

struct flag_spec {
    const char *name; /* without the leading "--" */
    const char *arg;  /* what the value looks like ("FILE", "a|b"); NULL for a switch */
    flag_setter set;
    const char *help;
    unsigned scope; /* bits of the commands that accept it (none: every command), | FLAG_NO_ENV */
};

/* Never read from the environment (--help, --version). */
#define FLAG_NO_ENV 0x80000000u

struct flag_parser {
    const char *prog; /* prefix of error lines */
    const struct flag_spec *flags;
    size_t count;
    const char *env_prefix; /* "GQA_", or NULL: no environment */
    unsigned command;       /* the command being parsed (one bit), 0: no subcommands */
    FILE *err;              /* where the one-line error goes */
};

/* Apply the environment, then argv[0..argc) (flags only, no program name).
 * 0, or -1 after printing one line to p->err. */
int flags_parse(const struct flag_parser *p, void *target, int argc, char **argv);
/* The flag table of p's command, one line each, the help column at `width`. */
void flags_print_help(const struct flag_parser *p, FILE *out, int width);

/* Setter helpers. */
int flags_set_string(char **field, const char *value);
int flags_set_nonempty(char **field, const char *value);

#endif

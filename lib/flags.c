/* flags.c - long flags and their environment twins. See flags.h. */
#include "lib/flags.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int flags_set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -1;
    free(*field);
    *field = copy;
    return 0;
}

int flags_set_nonempty(char **field, const char *value)
{
    return *value ? flags_set_string(field, value) : 1;
}

static bool accepted(const struct flag_parser *p, const struct flag_spec *f)
{
    unsigned commands = f->scope & ~FLAG_NO_ENV;
    return !commands || !p->command || (commands & p->command);
}

static const struct flag_spec *find_flag(const struct flag_parser *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->count; i++)
        if (strlen(p->flags[i].name) == len && strncmp(p->flags[i].name, name, len) == 0)
            return &p->flags[i];
    return NULL;
}

/* source: "--" for the command line, else the environment variable's name. */
static int apply(const struct flag_parser *p, const struct flag_spec *f, void *target, const char *value,
                 const char *source)
{
    int rc = f->set(target, value);
    if (rc < 0) {
        fprintf(p->err, "%s: out of memory\n", p->prog);
        return -1;
    }
    if (rc > 0) {
        bool cli = strcmp(source, "--") == 0;
        fprintf(p->err, "%s: invalid value \"%s\" for %s%s (expected %s)\n", p->prog, value, cli ? "--" : "",
                cli ? f->name : source, f->arg ? f->arg : "no value");
        return -1;
    }
    return 0;
}

static bool is_true(const char *v)
{
    return !strcmp(v, "true") || !strcmp(v, "1");
}

static bool is_false(const char *v)
{
    return !strcmp(v, "false") || !strcmp(v, "0") || !*v;
}

static void env_name(const char *prefix, const char *flag, char *out, size_t size)
{
    size_t k = (size_t)snprintf(out, size, "%s", prefix);
    for (const char *c = flag; *c && k + 1 < size; c++)
        out[k++] = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
    out[k < size ? k : size - 1] = '\0';
}

static int apply_environment(const struct flag_parser *p, void *target)
{
    for (size_t i = 0; p->env_prefix && i < p->count; i++) {
        const struct flag_spec *f = &p->flags[i];
        if ((f->scope & FLAG_NO_ENV) || !accepted(p, f))
            continue;
        char env[96];
        env_name(p->env_prefix, f->name, env, sizeof(env));
        const char *value = getenv(env);
        if (!value || (!f->arg && is_false(value)))
            continue;
        if (!f->arg && !is_true(value)) {
            fprintf(p->err, "%s: invalid value \"%s\" for %s (expected true or false)\n", p->prog, value, env);
            return -1;
        }
        if (apply(p, f, target, value, env) != 0)
            return -1;
    }
    return 0;
}

/* The value of flag f at argv[*i] ("--f=v" or "--f v"); NULL after an error. */
static const char *flag_value(const struct flag_parser *p, const struct flag_spec *f, const char *eq, int argc,
                              char **argv, int *i)
{
    if (f->arg && !eq) {
        if (*i + 1 >= argc) {
            fprintf(p->err, "%s: flag --%s needs a value (%s)\n", p->prog, f->name, f->arg);
            return NULL;
        }
        return argv[++*i];
    }
    if (!f->arg && eq) {
        fprintf(p->err, "%s: flag --%s takes no value\n", p->prog, f->name);
        return NULL;
    }
    return eq ? eq + 1 : "";
}

static int apply_arguments(const struct flag_parser *p, void *target, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(p->err, "%s: unexpected argument \"%s\" (flags start with --; see --help)\n", p->prog, a);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        const struct flag_spec *f = find_flag(p, a + 2, len);
        if (!f || !accepted(p, f)) {
            fprintf(p->err, "%s: unknown flag %.*s (see --help)\n", p->prog, (int)(len + 2), a);
            return -1;
        }
        const char *value = flag_value(p, f, eq, argc, argv, &i);
        if (!value || apply(p, f, target, value, "--") != 0)
            return -1;
    }
    return 0;
}

int flags_parse(const struct flag_parser *p, void *target, int argc, char **argv)
{
    return apply_environment(p, target) == 0 && apply_arguments(p, target, argc, argv) == 0 ? 0 : -1;
}

void flags_print_help(const struct flag_parser *p, FILE *out, int width)
{
    for (size_t i = 0; i < p->count; i++) {
        const struct flag_spec *f = &p->flags[i];
        if (!accepted(p, f))
            continue;
        char left[96];
        snprintf(left, sizeof(left), "--%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
        fprintf(out, "  %-*s %s\n", width, left, f->help);
    }
}

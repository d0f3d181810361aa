/* The one command-line parser and --help printer: both read a command's option table
 * (internal/onnxpipe/options.h). `--opt value` and `--opt=value` (cli/main.c splits the
 * second) are the same everywhere; an unknown option, a missing value or one out of
 * bounds is a usage error naming the option. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* Stores v (NULL for a flag) into row r's field of the config at base: 1; or reports: 0. */
static int store(const pp_option *r, const char *v, void *base)
{
    pp_error err = {0};
    if (pp_option_store(r, v, base, &err) == PP_OK) return 1;
    return err.msg[0] ? !cli_usage_error(NULL, "%s", err.msg) : 0;   /* empty: the parser reported it */
}

int cli_options_parse(const cli_options *o, void *base, int argc, char **argv, const char **pos, int max_pos,
                      int *npos)
{
    if (npos) *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_options_help(o, base, stdout);
            return 0;
        }
        if (a[0] != '-' || !a[1]) {
            if (!npos || *npos >= max_pos)
                return cli_usage_error(o->hint, "unexpected argument '%s'", a);
            pos[(*npos)++] = a;
            continue;
        }
        void *at = NULL;
        const pp_option *r = pp_option_find(o->table, a, base, &at);
        if (!r) return cli_usage_error(o->hint, "unknown option '%s'", a);
        const char *v = NULL;
        if (r->type != PP_OPT_FLAG) {
            if (i + 1 >= argc) return cli_usage_error(o->hint, "%s needs a value (%s)", a, r->metavar);
            v = argv[++i];
        }
        if (!store(r, v, at)) return 2;
    }
    return -1;
}

int cli_options_set(const cli_options *o, void *base, const char *name, const char *value)
{
    void *at = NULL;
    const pp_option *r = pp_option_find(o->table, name, base, &at);
    return r && store(r, value, at);
}

void cli_options_free(const cli_options *o, void *base) { pp_options_free(o->table, base); }

/* "(default X)" of row r, whose field is at p in a config holding the defaults (the one
 * being parsed: --help comes before the options it would change), or "" when it shows none. */
static const char *default_text(const pp_option *r, const void *p, char *buf, size_t len)
{
    buf[0] = 0;
    if (r->shown) snprintf(buf, len, " (default %s)", r->shown);
    else if (r->type == PP_OPT_STR && *(const char *const *)p) snprintf(buf, len, " (default %s)", *(const char *const *)p);
    else if (r->type == PP_OPT_INT && pp_option_get_int(r, p))
        snprintf(buf, len, " (default %lld)", (long long)(pp_option_get_int(r, p) / (r->scale ? r->scale : 1)));
    else if (r->type == PP_OPT_REAL && pp_option_get_real(r, p) != 0)
        snprintf(buf, len, " (default %g)", pp_option_get_real(r, p));
    return buf;
}

/* Row r as "  --name META   help", the help's further lines under its first, and its
 * default after the last (on a line of its own when it would pass column 100). */
static void print_row(const pp_option *r, const void *field, FILE *out)
{
    char def[96];
    int w = fprintf(out, "  %s%s%s%s%s", r->alias ? r->alias : "", r->alias ? ", " : "", r->name, r->metavar ? " " : "",
                    r->metavar ? r->metavar : "");
    if (w >= 25) fputc('\n', out), w = 0;
    const char *h = r->help ? r->help : "";
    for (;;) {
        const char *nl = strchr(h, '\n');
        int n = nl ? (int)(nl - h) : (int)strlen(h);
        fprintf(out, "%*s%.*s", 25 - w, "", n, h);
        w = 0;
        if (nl) {
            fputc('\n', out);
            h = nl + 1;
            continue;
        }
        const char *d = default_text(r, field, def, sizeof def);
        if (*d && 25 + n + (int)strlen(d) > 100) fprintf(out, "\n%25s", ""), d++;
        fprintf(out, "%s\n", d);
        return;
    }
}

static int listed(const cli_options *o, const char *group)
{
    for (int g = 0; o->groups[g]; g++)
        if (group && !strcmp(o->groups[g], group)) return 1;
    return 0;
}

/* Prints (out NULL: counts) the rows of table (its sub-tables' too) under heading group
 * (NULL: under none of the command's headings), the config at base; a row another of the
 * command's rows shadows (found first by its name) is not the command's. */
static int print_group(const cli_options *o, const pp_option *table, const char *group, void *base, void *top,
                       FILE *out)
{
    int n = 0;
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        void *at = NULL;
        if (r->type == PP_OPT_TABLE) n += print_group(o, r->sub, group, pp_option_field(r, base), top, out);
        else if (r->name && (group ? r->group && !strcmp(r->group, group) : !listed(o, r->group)) &&
                 pp_option_find(o->table, r->name, top, &at) == r) {
            if (out) print_row(r, pp_option_field(r, base), out);
            n++;
        }
    }
    return n;
}

void cli_options_help(const cli_options *o, void *base, FILE *out)
{
    fputs(o->usage, out);
    for (int g = 0; o->groups[g]; g++)
        if (print_group(o, o->table, o->groups[g], base, base, NULL)) {
            fprintf(out, "\n%s\n", o->groups[g]);
            print_group(o, o->table, o->groups[g], base, base, out);
        }
    if (print_group(o, o->table, NULL, base, base, NULL)) {   /* a row whose heading the command forgot */
        fprintf(out, "\nother options:\n");
        print_group(o, o->table, NULL, base, base, out);
    }
    if (o->epilog) fprintf(out, "\n%s", o->epilog);
}

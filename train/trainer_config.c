/* The trainer's opaque options (trainer.h): a config with the trainer's option table's
 * defaults, set by option name and value through the same rows, parser and bounds as
 * `onnxpipe train`'s command line; the config owns copies of what it was given. */
#include <onnxpipe/options.h>
#include <onnxpipe/trainer_lib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What pp_trainer_config_default hands out: the layout first, then the strings it owns. */
typedef struct config_box {
    pp_trainer_config c;
    char **owned;               /* [nowned] copies of values and names given to setters */
    int nowned;
} config_box;

void pp_trainer_config_init(pp_trainer_config *c)
{
    memset(c, 0, sizeof *c);
    pp_options_defaults(pp_trainer_option_table, c);
}

pp_trainer_config *pp_trainer_config_default(void)
{
    config_box *b = calloc(1, sizeof *b);
    if (b) pp_trainer_config_init(&b->c);
    return b ? &b->c : NULL;
}

void pp_trainer_config_destroy(pp_trainer_config *c)
{
    if (!c) return;
    config_box *b = (config_box *)c;   /* c is its box's first member */
    pp_options_free(pp_trainer_option_table, &b->c);   /* the lists, buckets among them */
    for (int i = 0; i < b->nowned; i++) free(b->owned[i]);
    free(b->owned);
    free(b);
}

/* A copy of s that b frees with itself, or NULL (out of memory). */
static char *own(config_box *b, const char *s)
{
    char **more = realloc(b->owned, (size_t)(b->nowned + 1) * sizeof *more);
    if (!more) return NULL;
    b->owned = more;
    return (b->owned[b->nowned] = strdup(s)) ? b->owned[b->nowned++] : NULL;
}

pp_status pp_trainer_config_set(pp_trainer_config *c, const char *option, const char *value, pp_error *err)
{
    if (!c || !option)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_trainer_config_set: config and option name are required");
    char name[64];
    snprintf(name, sizeof name, "%s%s", strncmp(option, "--", 2) ? "--" : "", option);
    void *at = NULL;
    const pp_option *r = pp_option_find(pp_trainer_option_table, name, c, &at);
    if (!r)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "'%s' is not a trainer option: the trainer's are `onnxpipe train --help`'s layout, "
                            "split, stage, training, mixed precision and checkpoint options (the job's --data, "
                            "--epochs, --logdir, ... are the command's: a custom trainer feeds its own data)", option);
    if (!value && r->type != PP_OPT_FLAG)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s needs a value (%s)", name, r->metavar);
    const char *v = value;
    if (v && r->type == PP_OPT_STR && !(v = own((config_box *)c, value))) return PP_NOMEM(err);
    pp_error mine = {0};
    pp_status st = pp_option_store(r, v, at, &mine);
    if (st != PP_OK) {
        if (!mine.msg[0]) pp_error_set(&mine, st, "%s: bad value '%s'", name, value ? value : "");
        if (err) *err = mine;
    }
    return st;
}

void pp_trainer_config_set_graph(pp_trainer_config *c, const pp_graph *g)
{
    if (c) c->graph = g;
}

pp_status pp_trainer_config_set_buckets(pp_trainer_config *c, const char *dim, const int64_t *lengths, int n,
                                        pp_error *err)
{
    if (!c || n < 0 || (n > 0 && !lengths))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_trainer_config_set_buckets: %d lengths given", n);
    for (int i = 0; i < n; i++)
        if (lengths[i] < 1 || (i > 0 && lengths[i] <= lengths[i - 1]))
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "sequence bucket %d is %lld: the lengths must be >= 1 and ascending", i,
                                (long long)lengths[i]);
    int64_t *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
    const char *d = dim ? own((config_box *)c, dim) : NULL;
    if ((n && !copy) || (dim && !d)) {
        free(copy);
        return PP_NOMEM(err);
    }
    if (n) memcpy(copy, lengths, (size_t)n * sizeof *copy);
    free((void *)c->buckets);
    c->buckets = copy, c->nbuckets = n, c->bucket_dim = d;
    return PP_OK;
}

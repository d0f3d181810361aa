/* Option tables (internal/onnxpipe/options.h): the defaults and the agreement hash they
 * give a config, and storing one option's value (what cli/options.c's parser and the
 * trainer's pp_trainer_config_set share); cli/options.c prints --help from the same rows.
 * In train/, the lowest module that knows every type a row may hold (pp_dim_binding). */
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/options.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pp_options_defaults(const pp_option *table, void *base)
{
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        void *p = pp_option_field(r, base);
        switch (r->type) {
        case PP_OPT_TABLE: pp_options_defaults(r->sub, p); break;
        case PP_OPT_INT:
        case PP_OPT_ENUM: pp_option_set_int(r, p, (int64_t)r->def * (r->scale ? r->scale : 1)); break;
        case PP_OPT_REAL: pp_option_set_real(r, p, r->def); break;
        case PP_OPT_STR:
            if (r->def_str && r->size == sizeof(const char *)) *(const char **)p = r->def_str;
            break;
        default: break;   /* flags, lists and custom fields start at zero */
        }
    }
}

static uint32_t hash_str(uint32_t h, const char *s)
{
    return s ? pp_crc32c(h, s, strlen(s) + 1) : h ^ 0x5a5a5a5au;   /* NULL: unlike any string */
}

uint32_t pp_options_hash(const pp_option *table, const void *base, uint32_t h)
{
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        const char *p = (const char *)base + r->offset;
        if (r->type == PP_OPT_TABLE) {
            if (r->agree) h = pp_options_hash(r->sub, p, h);
            continue;
        }
        if (!r->agree) continue;
        int n = r->count_offset ? *(const int *)((const char *)base + r->count_offset) : 0;
        switch (r->type) {
        case PP_OPT_REAL: {
            double v = pp_option_get_real(r, p);
            h = pp_crc32c(h, &v, sizeof v);
            break;
        }
        case PP_OPT_STR: h = hash_str(h, *(const char *const *)p); break;
        case PP_OPT_INTS:
            h = pp_crc32c(h, &n, sizeof n);
            if (n) h = pp_crc32c(h, *(const int64_t *const *)p, (size_t)n * sizeof(int64_t));
            break;
        case PP_OPT_NAMES:
            h = pp_crc32c(h, &n, sizeof n);
            for (int i = 0; i < n; i++) h = hash_str(h, (*(const char *const *const *)p)[i]);
            break;
        case PP_OPT_DIMS:
            h = pp_crc32c(h, &n, sizeof n);
            for (int i = 0; i < n; i++) {
                const pp_dim_binding *d = &(*(const pp_dim_binding *const *)p)[i];
                h = hash_str(h, d->name);
                h = pp_crc32c(h, &d->value, sizeof d->value);
            }
            break;
        default: {   /* flags, ints, enums and custom fields are integers of their size */
            int64_t v = pp_option_get_int(r, p);
            h = pp_crc32c(h, &v, sizeof v);
            break;
        }
        }
    }
    return h;
}

const pp_option *pp_option_find(const pp_option *table, const char *name, void *base, void **base_out)
{
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        if (r->type == PP_OPT_TABLE) {
            const pp_option *in = pp_option_find(r->sub, name, pp_option_field(r, base), base_out);
            if (in) return in;
        } else if (r->name && (!strcmp(r->name, name) || (r->alias && !strcmp(r->alias, name)))) {
            *base_out = base;
            return r;
        }
    }
    return NULL;
}

pp_status pp_option_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out,
                              pp_error *err)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s expects an integer in %lld..%lld, got '%s'", opt, lo, hi,
                            s ? s : "");
    *out = v;
    return PP_OK;
}

pp_status pp_option_parse_real(const char *opt, const char *s, double lo, double hi, double *out, pp_error *err)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s expects a number in %g..%g, got '%s'", opt, lo, hi,
                            s ? s : "");
    *out = v;
    return PP_OK;
}

pp_status pp_option_parse_ints(const char *opt, const char *s, long long lo, long long hi, int max, int64_t *out,
                               int *n, pp_error *err)
{
    *n = 0;
    for (const char *p = s; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[32];
        long long v = 0;
        if (*n == max) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s has more than %d values", opt, max);
        if (len >= sizeof tok)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: '%.*s' is not an integer", opt, (int)len, p);
        snprintf(tok, sizeof tok, "%.*s", (int)len, p);
        PP_CHECK(pp_option_parse_int(opt, tok, lo, hi, &v, err));
        out[(*n)++] = v;
        p = comma ? comma + 1 : NULL;
    }
    if (*n == 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s needs a comma-separated list of integers (e.g. 1,2,4)", opt);
    return PP_OK;
}

/* Appends n entries of size each to the list field p (its count at *count); the config
 * owns the array (pp_options_free). */
static void *grow(void *p, int *count, int n, size_t size)
{
    void **list = p;
    void *more = realloc(*list, (size_t)(*count + n) * size);
    if (!more) return NULL;
    *list = more;
    return (char *)more + (size_t)*count * size;
}

static pp_status store_list(const pp_option *r, const char *v, void *base, void *p, pp_error *err)
{
    int *count = (int *)((char *)base + r->count_offset);
    if (r->type == PP_OPT_DIMS) {
        const char *eq = strchr(v, '=');
        long long n = 0;
        if (!eq || eq == v)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "%s expects NAME=VALUE, got '%s' (example: %s seq=128)",
                                r->name, v, r->name);
        if (*count >= (int)r->hi)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "at most %d %s options", (int)r->hi, r->name);
        PP_CHECK(pp_option_parse_int(r->name, eq + 1, 1, 1LL << 40, &n, err));
        pp_dim_binding *d = grow(p, count, 1, sizeof *d);
        if (!d || !(d->name = strndup(v, (size_t)(eq - v)))) return PP_NOMEM(err);
        d->value = n;
        (*count)++;
        return PP_OK;
    }
    if (r->type == PP_OPT_INTS) {
        int room = (int)r->hi - *count, k = 0;
        int64_t *e = room > 0 ? grow(p, count, room, sizeof *e) : NULL;
        if (!e) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: at most %d entries", r->name, (int)r->hi);
        PP_CHECK(pp_option_parse_ints(r->name, v, (long long)r->lo, 1LL << 40, room, e, &k, err));
        *count += k;
        return PP_OK;
    }
    char *copy = strdup(v), *save = NULL;
    pp_status st = copy ? PP_OK : PP_NOMEM(err);
    for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; st == PP_OK && tok; tok = strtok_r(NULL, ",", &save)) {
        const char **e = *count < (int)r->hi ? grow(p, count, 1, sizeof *e) : NULL;
        if (e && (*e = strdup(tok))) (*count)++;
        else st = pp_error_set(err, PP_ERR_INVALID_ARG, "%s: at most %d names", r->name, (int)r->hi);
    }
    free(copy);
    if (st == PP_OK && !*count)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s needs a comma-separated list, got '%s'", r->name, v);
    return st;
}

pp_status pp_option_store(const pp_option *r, const char *v, void *base, pp_error *err)
{
    void *p = pp_option_field(r, base);
    switch (r->type) {
    case PP_OPT_FLAG:
        if (v && strcmp(v, "1") && strcmp(v, "0"))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "%s is a flag: its value is 1 or 0, got '%s'", r->name, v);
        *(int *)p = v && !strcmp(v, "0") ? 0 : r->set ? r->set : 1;
        return PP_OK;
    case PP_OPT_INT: {
        long long n = 0;
        PP_CHECK(pp_option_parse_int(r->name, v, (long long)r->lo, (long long)r->hi, &n, err));
        pp_option_set_int(r, p, n * (r->scale ? r->scale : 1));
        return PP_OK;
    }
    case PP_OPT_REAL: {
        double x = 0;
        PP_CHECK(pp_option_parse_real(r->name, v, r->lo, r->hi, &x, err));
        pp_option_set_real(r, p, x);
        return PP_OK;
    }
    case PP_OPT_STR: *(const char **)p = v; return PP_OK;
    case PP_OPT_ENUM:
    case PP_OPT_CUSTOM:
        if (!v) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s needs a value (%s)", r->name, r->metavar);
        if (r->parse(v, p, err)) return PP_OK;
        if (!err->status) err->status = PP_ERR_INVALID_ARG;   /* the parser reported it itself */
        return err->status;
    case PP_OPT_INTS:
    case PP_OPT_NAMES:
    case PP_OPT_DIMS:
        if (!v) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s needs a value (%s)", r->name, r->metavar);
        return store_list(r, v, base, p, err);
    default: return pp_error_set(err, PP_ERR_INVALID_ARG, "%s cannot be set", r->name ? r->name : "option");
    }
}

void pp_options_free(const pp_option *table, void *base)
{
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        void *p = pp_option_field(r, base);
        if (r->type == PP_OPT_TABLE) pp_options_free(r->sub, p);
        if (r->type != PP_OPT_INTS && r->type != PP_OPT_NAMES && r->type != PP_OPT_DIMS) continue;
        int n = *(int *)((char *)base + r->count_offset);
        if (r->type == PP_OPT_NAMES)
            for (int k = 0; k < n; k++) free((char *)(*(const char ***)p)[k]);
        if (r->type == PP_OPT_DIMS)
            for (int k = 0; k < n; k++) free((char *)(*(pp_dim_binding **)p)[k].name);
        free(*(void **)p);
        *(void **)p = NULL;
        *(int *)((char *)base + r->count_offset) = 0;
    }
}

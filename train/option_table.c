/* Option tables (internal/onnxpipe/options.h): the defaults and the agreement hash they
 * give a config; cli/options.c parses and prints --help from the same rows. In train/,
 * the lowest module that knows every type a row may hold (pp_dim_binding). */
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/options.h>

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

/* A small recursive-descent JSON reader: enough for dataset headers, manifests and a
 * model's metadata (objects, arrays, strings with the common escapes, numbers,
 * true/false/null); objects of many keys are indexed for lookups by key. */
#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *s, *p;
    pp_error *err;
    int depth;
} parser;

static pp_status fail(parser *ps, const char *what)
{
    return pp_error_set(ps->err, PP_ERR_PARSE, "JSON: %s at byte %ld", what, (long)(ps->p - ps->s));
}

static void skip_ws(parser *ps)
{
    while (*ps->p && isspace((unsigned char)*ps->p)) ps->p++;
}

static void free_value(pp_jvalue *v)
{
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        free_value(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->order);
}

/* Objects of at least this many keys get an index (pp_jvalue.order). */
#define INDEX_MIN_KEYS 16

typedef struct keyed {
    const char *key;
    int i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);   /* equal keys: the first one first */
}

/* v->order of a complete object of many keys; 0 when out of memory. */
static int index_keys(pp_jvalue *v)
{
    if (v->n < INDEX_MIN_KEYS) return 1;
    keyed *k = malloc((size_t)v->n * sizeof *k);
    if (!k || !(v->order = malloc((size_t)v->n * sizeof *v->order))) {
        free(k);
        return 0;
    }
    for (int i = 0; i < v->n; i++) k[i] = (keyed){v->keys[i], i};
    qsort(k, (size_t)v->n, sizeof *k, cmp_keyed);
    for (int i = 0; i < v->n; i++) v->order[i] = k[i].i;
    free(k);
    return 1;
}

static pp_status parse_string(parser *ps, char **out)
{
    ps->p++;  /* opening quote */
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return fail(ps, "out of memory");
    while (*ps->p && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            char e = *ps->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u':
                if (strlen(ps->p) < 4) { free(buf); return fail(ps, "bad \\u escape"); }
                c = (char)strtol((char[]){ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0}, NULL, 16);
                ps->p += 4;
                break;
            case '"': case '\\': case '/': c = e; break;
            default: free(buf); return fail(ps, "bad escape");
            }
        }
        if (n + 2 > cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); return fail(ps, "out of memory"); }
            buf = b;
        }
        buf[n++] = c;
    }
    if (*ps->p != '"') { free(buf); return fail(ps, "unterminated string"); }
    ps->p++;
    buf[n] = 0;
    *out = buf;
    return PP_OK;
}

static pp_status parse_value(parser *ps, pp_jvalue *v);

static pp_status parse_container(parser *ps, pp_jvalue *v, char close)
{
    int is_obj = close == '}';
    v->type = is_obj ? PP_JOBJ : PP_JARR;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) { ps->p++; return PP_OK; }
    for (;;) {
        skip_ws(ps);
        char *key = NULL;
        if (is_obj) {
            if (*ps->p != '"') return fail(ps, "expected a key");
            PP_CHECK(parse_string(ps, &key));
            skip_ws(ps);
            if (*ps->p != ':') { free(key); return fail(ps, "expected ':'"); }
            ps->p++;
        }
        if (!(v->n & (v->n - 1))) {   /* n a power of two (or 0): double the room */
            const size_t cap = v->n ? 2 * (size_t)v->n : 1;
            pp_jvalue *items = realloc(v->items, cap * sizeof *items);
            char **keys = is_obj ? realloc(v->keys, cap * sizeof *keys) : NULL;
            if (items) v->items = items;
            if (keys) v->keys = keys;
            if (!items || (is_obj && !keys)) { free(key); return fail(ps, "out of memory"); }
        }
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        if (is_obj) v->keys[v->n] = key;
        v->n++;
        PP_CHECK(parse_value(ps, &v->items[v->n - 1]));
        skip_ws(ps);
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) {
            ps->p++;
            return !is_obj || index_keys(v) ? PP_OK : fail(ps, "out of memory");
        }
        return fail(ps, "expected ',' or a closing bracket");
    }
}

static pp_status parse_value(parser *ps, pp_jvalue *v)
{
    if (++ps->depth > 64) return fail(ps, "nested too deeply");
    skip_ws(ps);
    pp_status st = PP_OK;
    char c = *ps->p;
    if (c == '{') st = parse_container(ps, v, '}');
    else if (c == '[') st = parse_container(ps, v, ']');
    else if (c == '"') { v->type = PP_JSTR; st = parse_string(ps, &v->str); }
    else if (!strncmp(ps->p, "true", 4)) { v->type = PP_JBOOL; v->num = 1; ps->p += 4; }
    else if (!strncmp(ps->p, "false", 5)) { v->type = PP_JBOOL; ps->p += 5; }
    else if (!strncmp(ps->p, "null", 4)) { v->type = PP_JNULL; ps->p += 4; }
    else {
        char *end;
        v->num = strtod(ps->p, &end);
        if (end == ps->p) return fail(ps, "unexpected character");
        v->type = PP_JNUM;
        ps->p = end;
    }
    ps->depth--;
    return st;
}

pp_status pp_json_parse(const char *text, pp_jvalue **out, pp_error *err)
{
    *out = NULL;
    pp_jvalue *v = calloc(1, sizeof *v);
    if (!v) return PP_NOMEM(err);
    parser ps = {text, text, err, 0};
    pp_status st = parse_value(&ps, v);
    if (st == PP_OK) {
        skip_ws(&ps);
        if (*ps.p) st = fail(&ps, "trailing characters");
    }
    if (st != PP_OK) {
        pp_json_free(v);
        return st;
    }
    *out = v;
    return PP_OK;
}

void pp_json_free(pp_jvalue *v)
{
    if (!v) return;
    free_value(v);
    free(v);
}

const pp_jvalue *pp_json_get(const pp_jvalue *obj, const char *key)
{
    if (!obj || obj->type != PP_JOBJ) return NULL;
    if (obj->order) {   /* the first index whose key is >= key */
        int lo = 0, hi = obj->n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (strcmp(obj->keys[obj->order[mid]], key) < 0) lo = mid + 1;
            else hi = mid;
        }
        return lo < obj->n && !strcmp(obj->keys[obj->order[lo]], key) ? &obj->items[obj->order[lo]] : NULL;
    }
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

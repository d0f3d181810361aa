/* A streaming JSON writer: keys come out in the caller's order, so output is stable. */
#include "text_internal.h"

#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <math.h>

static void indent(pp_json *j)
{
    if (!j->pretty) return;
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
}

static void write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default: {
            /* controls, C1 and bidi characters as JSON's exact \u00XX escapes; bytes that
             * are not UTF-8, which JSON cannot hold, as the text \xNN that messages show */
            unsigned cp;
            int safe;
            size_t n = text_char(p, 0, &cp, &safe);
            if (!n) fprintf(out, "\\\\x%02x", *p);
            else if (!safe) fprintf(out, "\\u%04x", cp);
            else fwrite(p, 1, n, out);
            if (n > 1) p += n - 1;
        }
        }
    }
    fputc('"', out);
}

/* Separator, indentation and key for the next item at the current depth. */
static void item(pp_json *j, const char *key)
{
    if (!j->first[j->depth]) fputc(',', j->out);
    j->first[j->depth] = 0;
    if (j->depth > 0) indent(j);
    if (key) {
        write_string(j->out, key);
        fputs(j->pretty ? ": " : ":", j->out);
    }
}

void pp_json_init(pp_json *j, FILE *out, int pretty)
{
    j->out = out;
    j->depth = 0;
    j->pretty = pretty;
    for (int i = 0; i < 64; i++) j->first[i] = 1;
}

static void open_(pp_json *j, const char *key, char c)
{
    item(j, key);
    fputc(c, j->out);
    if (j->depth < 63) j->depth++;
    j->first[j->depth] = 1;
}

static void close_(pp_json *j, char c)
{
    int empty = j->first[j->depth];
    if (j->depth > 0) j->depth--;
    if (!empty) indent(j);
    fputc(c, j->out);
}

void pp_json_begin_object(pp_json *j, const char *key) { open_(j, key, '{'); }
void pp_json_end_object(pp_json *j) { close_(j, '}'); }
void pp_json_begin_array(pp_json *j, const char *key) { open_(j, key, '['); }
void pp_json_end_array(pp_json *j) { close_(j, ']'); }

void pp_json_string(pp_json *j, const char *key, const char *value)
{
    item(j, key);
    if (value) write_string(j->out, value);
    else fputs("null", j->out);
}

void pp_json_int(pp_json *j, const char *key, int64_t value)
{
    item(j, key);
    fprintf(j->out, "%lld", (long long)value);
}

void pp_json_double(pp_json *j, const char *key, double value)
{
    item(j, key);
    if (isfinite(value)) fprintf(j->out, "%.10g", value);
    else fputs("null", j->out);
}

void pp_json_bool(pp_json *j, const char *key, int value)
{
    item(j, key);
    fputs(value ? "true" : "false", j->out);
}

void pp_json_null(pp_json *j, const char *key)
{
    item(j, key);
    fputs("null", j->out);
}

void pp_json_finish(pp_json *j)
{
    fputc('\n', j->out);
    fflush(j->out);
}

void pp_json_raw(pp_json *j, const char *key, const char *json)
{
    item(j, key);
    fputs(json, j->out);
}

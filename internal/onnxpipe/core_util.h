/* Helpers the library's modules, the CLI, tests and bench share (internal tier: not
 * installed, not exported): text escaping, checked allocation, CRC32C, human-readable
 * formatting, and a small JSON writer and reader. */
#ifndef ONNXPIPE_CORE_UTIL_H
#define ONNXPIPE_CORE_UTIL_H

#include <onnxpipe/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Text from a model file (a node, tensor or dim name), made safe to print: C0 controls
 * (newline and tab too unless keep_layout), DEL, C1 controls, bidirectional overrides
 * and bytes that are not valid UTF-8 become "\xNN"; other UTF-8 stays. Backslashes stay,
 * so escaping escaped text changes nothing. pp_text_escape writes at most len bytes with
 * the NUL into buf (cut before a whole character or escape) and returns buf;
 * pp_text_fputs writes all of s. s may be NULL (""). Local; thread-safe. */
const char *pp_text_escape(const char *s, int keep_layout, char *buf, size_t len);
void pp_text_fputs(const char *s, int keep_layout, FILE *out);

/* Memory helpers that return NULL on overflow as well as on exhaustion. The caller frees the result with
 * free(). Local; thread-safe. */
void *pp_malloc(size_t n);
void *pp_calloc(size_t count, size_t size);
void *pp_realloc_array(void *p, size_t count, size_t size);
char *pp_strdup(const char *s);

/* CRC32C (Castagnoli), for checkpoint manifests. crc starts at 0. Local; thread-safe. */
uint32_t pp_crc32c(uint32_t crc, const void *data, size_t n);
/* The CRC32C of A followed by B, from crc(A), crc(B) and B's length (no data pass). Local; thread-safe. */
uint32_t pp_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

/* Human-readable byte counts, counts and durations: "1.50 MiB", "12.3M", "1.25 ms" (seconds
 * in the unit that reads best). buf >= 32 bytes (the caller's), returned. Local; thread-safe. */
const char *pp_format_bytes(double bytes, char *buf, size_t len);
const char *pp_format_count(double n, char *buf, size_t len);
const char *pp_format_seconds(double s, char *buf, size_t len);

/* A small streaming JSON writer with stable key order (the caller's order).
 * Strings are escaped; doubles print with %.17g unless pretty-rounding is asked. */
typedef struct pp_json {
    FILE *out;
    int depth;
    int first[64];   /* 1 when nothing has been written at this depth yet */
    int pretty;      /* indent with two spaces per level */
} pp_json;
/* The writer keeps out (borrowed: it must outlive j); j needs no freeing. Local. */
void pp_json_init(pp_json *j, FILE *out, int pretty);
void pp_json_begin_object(pp_json *j, const char *key);  /* key NULL inside arrays / at top */
void pp_json_end_object(pp_json *j);
void pp_json_begin_array(pp_json *j, const char *key);
void pp_json_end_array(pp_json *j);
void pp_json_string(pp_json *j, const char *key, const char *value);
void pp_json_int(pp_json *j, const char *key, int64_t value);
void pp_json_double(pp_json *j, const char *key, double value);
void pp_json_bool(pp_json *j, const char *key, int value);
void pp_json_null(pp_json *j, const char *key);
void pp_json_finish(pp_json *j);  /* newline after the top-level value */
/* A value that is already JSON text (the caller vouches for it), written as is. Local. */
void pp_json_raw(pp_json *j, const char *key, const char *json);

/* A small JSON reader (for dataset headers and manifests): a tree of values. */
typedef enum { PP_JNULL, PP_JBOOL, PP_JNUM, PP_JSTR, PP_JARR, PP_JOBJ } pp_jtype;
typedef struct pp_jvalue {
    pp_jtype type;
    double num;                 /* PP_JNUM, PP_JBOOL (0/1) */
    char *str;                  /* PP_JSTR */
    struct pp_jvalue *items;    /* PP_JARR, PP_JOBJ: n values */
    char **keys;                /* PP_JOBJ: n keys */
    int n;
    int *order;                 /* PP_JOBJ of many keys: item indices in key order, for pp_json_get's
                                   binary search (NULL: a small object, scanned) */
} pp_jvalue;
/* Parses text (thread-safe); errors name the byte offset. The caller frees *out with pp_json_free. Local. */
pp_status pp_json_parse(const char *text, pp_jvalue **out, pp_error *err);
void pp_json_free(pp_jvalue *v);
/* Member of an object (the first of that key), or NULL; owned by obj. A binary search in an
 * object of many keys (a model's per-initializer metadata). Local; thread-safe. */
const pp_jvalue *pp_json_get(const pp_jvalue *obj, const char *key);

#ifdef __cplusplus
}
#endif
#endif

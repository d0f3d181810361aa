/* Option tables: one row per option of a config struct — its command-line name, type,
 * place in the struct, default, bounds, help and whether the ranks of a job must agree
 * on it. A command's table is the one description of its options: pp_options_defaults
 * fills the struct's defaults from it, cli/options.c parses argv and prints --help from
 * it, and pp_options_hash hashes the fields the ranks compare (the trainer's agreement
 * check). Tables nest: a PP_OPT_TABLE row places another table's rows at an offset (the
 * trainer's options inside pp_train_config, the partition's inside the trainer's).
 * The engine is train/option_table.c, the training options' tables train/options.c; a preview command's own in
 * its cli/cmd_*.c. Internal: the library and the CLI. */
#ifndef ONNXPIPE_OPTIONS_H
#define ONNXPIPE_OPTIONS_H

#include <onnxpipe/core.h>

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PP_OPT_END = 0,    /* ends a table */
    PP_OPT_TABLE,      /* the rows of sub at offset */
    PP_OPT_FLAG,       /* an int set to `set` (1 when 0) by the bare option */
    PP_OPT_INT,        /* int or int64_t (by size) in [lo, hi], stored times `scale` (1 when 0) */
    PP_OPT_REAL,       /* float or double (by size) in [lo, hi] */
    PP_OPT_STR,        /* const char *, borrowed from argv */
    PP_OPT_ENUM,       /* an int-sized enum: parse names it, def is its default */
    PP_OPT_INTS,       /* "A,B,..": const int64_t * at offset, its int count at count_offset */
    PP_OPT_NAMES,      /* "A,B,..": const char *const * at offset, its int count at count_offset */
    PP_OPT_DIMS,       /* NAME=V, repeatable: pp_dim_binding * at offset, its int count at count_offset */
    PP_OPT_CUSTOM,     /* parse stores it */
} pp_opt_type;

typedef struct pp_option {
    pp_opt_type type;
    const char *name;           /* "--steps"; NULL: set by the library's callers only (defaults, hash) */
    const char *alias;          /* a short spelling of the same option ("-o"), or NULL */
    const char *metavar;        /* "N" in --help; flags have none */
    size_t offset, size;        /* the field in the config (offsetof, sizeof) */
    size_t count_offset;        /* INTS, NAMES, DIMS: the int count's offset */
    double lo, hi;              /* INT, REAL, INTS: bounds; INTS, NAMES, DIMS: hi is the most entries */
    double def;                 /* INT, REAL, FLAG (no: 0), ENUM: the default */
    const char *def_str;        /* STR: the default */
    const char *shown;          /* --help's "(default ...)" text where def and def_str would not say
                                   it ("all", "off", "this machine"); else theirs */
    int scale;                  /* INT: the field holds value x scale (--bucket-kb: bytes) */
    int set;                    /* FLAG: the value it stores (1 when 0) */
    int agree;                  /* the ranks of a job must agree on it: pp_options_hash hashes it */
    /* ENUM, CUSTOM: stores v into field (the config's, at offset): 1; or says why not in err
       (the whole message, naming the option; the CLI's own parsers may report it themselves
       and leave err empty): 0 */
    int (*parse)(const char *v, void *field, pp_error *err);
    const char *help;           /* lines joined by \n */
    const char *group;          /* --help's heading over it: the command lists its headings in order */
    const struct pp_option *sub;    /* TABLE */
} pp_option;

/* Row makers: T the config type, f its field. */
#define PP_OPT_FIELD(T, f) .offset = offsetof(T, f), .size = sizeof(((T *)0)->f)
#define PP_OPT_COUNT(T, n) .count_offset = offsetof(T, n)

/* The config at base gets every default of the table (the rest of it zero is the
 * caller's). Local. Thread-safe. */
void pp_options_defaults(const pp_option *table, void *base);
/* h extended by every agree row's value in the config at base (strings by content, lists
 * by their entries): equal configs hash equal on every rank. Local. Thread-safe. */
uint32_t pp_options_hash(const pp_option *table, const void *base, uint32_t h);
/* The field of row r in the config at base. */
static inline void *pp_option_field(const pp_option *r, void *base) { return (char *)base + r->offset; }
/* An integer field (int or int64_t, by r->size) and a real one (float or double), read
 * and written: what the defaults, the hash, the parser and --help share. */
static inline int64_t pp_option_get_int(const pp_option *r, const void *p)
{
    return r->size == sizeof(int64_t) ? *(const int64_t *)p : *(const int *)p;
}
static inline void pp_option_set_int(const pp_option *r, void *p, int64_t v)
{
    if (r->size == sizeof(int64_t)) *(int64_t *)p = v;
    else *(int *)p = (int)v;
}
static inline double pp_option_get_real(const pp_option *r, const void *p)
{
    return r->size == sizeof(double) ? *(const double *)p : *(const float *)p;
}
static inline void pp_option_set_real(const pp_option *r, void *p, double v)
{
    if (r->size == sizeof(double)) *(double *)p = v;
    else *(float *)p = (float)v;
}
/* An option parser's failure: err gets fmt with v (the whole message, naming the option); 0. */
static inline int pp_option_bad(pp_error *err, const char *fmt, const char *v)
{
    pp_error_set(err, PP_ERR_INVALID_ARG, fmt, v);
    return 0;
}
/* Strict number parsing for option values (opt names the option in the message): the whole
 * string a number in [lo, hi]; "A,B,C": at most max integers in [lo, hi] into out, their
 * count in *n (>= 1). Local. Thread-safe. */
pp_status pp_option_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out,
                              pp_error *err);
pp_status pp_option_parse_real(const char *opt, const char *s, double lo, double hi, double *out, pp_error *err);
pp_status pp_option_parse_ints(const char *opt, const char *s, long long lo, long long hi, int max, int64_t *out,
                               int *n, pp_error *err);
/* Stores v (NULL for a flag given bare; "1" or "0" set or clear it) into row r's field of the
 * config at base (pp_option_find's *base_out), as the command line gives it: a string is
 * borrowed, a list entry (--dim, --cut, ...) appended to the list, which pp_options_free
 * frees. A failing ENUM or CUSTOM parser may leave err's message empty when it reported
 * the error itself. Local. */
pp_status pp_option_store(const pp_option *r, const char *v, void *base, pp_error *err);
/* Frees the lists pp_option_store appended to in the config at base (and its sub-tables'). */
void pp_options_free(const pp_option *table, void *base);

/* The row named name in table (its sub-tables searched, *base_out advanced to the
 * sub-table's config), or NULL. */
const pp_option *pp_option_find(const pp_option *table, const char *name, void *base, void **base_out);

/* The --help headings of the training options' rows, which commands list (cli_options.groups). */
#define PP_OPT_GROUP_SPLIT "the split into stages (preview it with `onnxpipe partition MODEL --stages P` and the same options):"
#define PP_OPT_GROUP_STAGE "what shapes a stage (and its memory):"
#define PP_OPT_GROUP_PARAMS "what is trained (docs/exporting.md: the default):"
#define PP_OPT_GROUP_LAYOUT "layout (run it under mpirun with pp x dp ranks: mpirun -np 4 onnxpipe train --pp 2 --dp 2 ...):"
#define PP_OPT_GROUP_TRAINING "training:"
#define PP_OPT_GROUP_MEMORY "mixed precision:"
#define PP_OPT_GROUP_CKPT "checkpoints (onnxpipe ckpt --help):"
#define PP_OPT_GROUP_EVAL "evaluation:"
#define PP_OPT_GROUP_OUTPUT "output:"
#define PP_OPT_GROUP_DATA "data (onnxpipe data --help):"
#define PP_OPT_GROUP_LOGS "logs and profiles:"
/* The previews' (partition, schedule --model, plan): the split's and the stage's. */
#define PP_OPT_GROUPS_PREVIEW PP_OPT_GROUP_SPLIT, PP_OPT_GROUP_STAGE, PP_OPT_GROUP_PARAMS

/* The training options' tables (train/options.c): the dataset's (pp_dataset_options: `onnxpipe
 * train` and `data show`), the partition's (pp_partition_options),
 * the stage's and the trainer's (pp_trainer_config; the trainer's holds the other two),
 * the run's (pp_train_config, holding the trainer's). */
extern const pp_option pp_dataset_option_table[];   /* pp_dataset_options, but its labels */
extern const pp_option pp_partition_option_table[];
extern const pp_option pp_stage_option_table[];
extern const pp_option pp_trainer_option_table[];
extern const pp_option pp_train_option_table[];

#endif

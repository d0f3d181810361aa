/* `onnxpipe data text FILE -o DIR --seq T [--split F]`: turns any file into a byte-level
 * language-model dataset (vocab 256, inputs and next-token labels), or into DIR/train and
 * DIR/valid from the two parts of the file. `onnxpipe data show DATA`: what onnxpipe reads
 * from a dataset of any form (train.h), as the trainer would: its arrays and samples. */
#include "cli.h"

#include <onnxpipe/train_job.h>

#include <stdlib.h>
#include <string.h>

/* `data show`'s and `data text`'s options. */
typedef struct show_args {
    pp_dataset_options o;
    int64_t first, count;
} show_args;

typedef struct text_args {
    const char *out;
    int64_t seq;
    double split;
} text_args;

#define OPTS "options:"
#define S(f) PP_OPT_FIELD(show_args, f)
#define T(f) PP_OPT_FIELD(text_args, f)

static const pp_option show_table[] = {
    {.type = PP_OPT_TABLE, .sub = pp_dataset_option_table, S(o)},
    {.type = PP_OPT_STR, .name = "--labels", .metavar = "NAME", S(o.labels), .shown = "labels", .group = OPTS,
     .help = "the labels array's name (onnxpipe train --labels)"},
    {.type = PP_OPT_INT, .name = "--first", .metavar = "I", S(first), .lo = 0, .hi = 1LL << 50, .group = OPTS,
     .help = "the first sample shown"},
    {.type = PP_OPT_INT, .name = "--count", .metavar = "N", S(count), .lo = 0, .hi = 1LL << 30, .def = 3,
     .group = OPTS, .help = "samples shown"},
    {.type = PP_OPT_INTS, .name = "--seq-buckets", .metavar = "A,B,..", S(o.buckets), PP_OPT_COUNT(show_args, o.nbuckets),
     .lo = 1, .hi = 32, .group = OPTS, .help = "with --pack or --pad: the samples in order of their bucket\n"
     "(onnxpipe train --seq-buckets)"},
    {.type = PP_OPT_INT, .name = NULL, S(o.ignore_index), .def = -100},
    {0},
};

static const pp_option text_table[] = {
    {.type = PP_OPT_STR, .name = "--out", .alias = "-o", .metavar = "DIR", T(out), .group = OPTS,
     .help = "dataset directory (dataset.json + input_ids.bin + labels.bin)"},
    {.type = PP_OPT_INT, .name = "--seq", .metavar = "T", T(seq), .lo = 1, .hi = 1 << 20, .def = 128,
     .group = OPTS, .help = "tokens per sample (the model's sequence length)"},
    {.type = PP_OPT_REAL, .name = "--split", .metavar = "F", T(split), .lo = 1e-9, .hi = 1.0, .def = 1.0,
     .shown = "none", .group = OPTS,
     .help = "DIR/train from the first fraction F of FILE, DIR/valid from the rest\n"
             "(for --eval-data), e.g. --split 0.9"},
    {0},
};

static const char *const show_groups[] = {PP_OPT_GROUP_DATA, OPTS, NULL};
static const char *const text_groups[] = {OPTS, NULL};

static const cli_options show_options = {
    .usage = "usage: onnxpipe data show DATA [options]\n\n"
             "The dataset's form, sample count and arrays, then samples I .. I+N-1 as JSON lines, as\n"
             "training reads them (DATA: see 'onnxpipe train --help').\n",
    .table = show_table,
    .groups = show_groups,
    .hint = "run 'onnxpipe data show --help'",
};

static const cli_options text_options = {
    .usage = "usage: onnxpipe data text FILE -o DIR [options]\n"
             "       onnxpipe data show DATA [options]   (onnxpipe data show --help)\n\n"
             "Writes a byte-level token dataset (vocab 256) from FILE: samples of T tokens\n"
             "(input_ids, int64) with the next tokens as labels, in non-overlapping windows.\n",
    .table = text_table,
    .groups = text_groups,
    .hint = "run 'onnxpipe data --help'",
};

/* A sample's values of array a as a JSON list. */
static pp_status print_sample(const pp_dataset *d, const pp_dataset_array *a, int64_t s, void *buf, pp_error *err)
{
    PP_CHECK(pp_dataset_read(d, a, s, 1, buf, err));
    int64_t n = (int64_t)(a->sample_bytes / pp_dtype_size(a->dtype));
    printf("\"%s\": [", a->name);
    for (int64_t k = 0; k < n; k++) {
        if (k) printf(", ");
        if (a->dtype == PP_DTYPE_I64) printf("%lld", (long long)((const int64_t *)buf)[k]);
        else if (a->dtype == PP_DTYPE_I32) printf("%d", ((const int32_t *)buf)[k]);
        else if (a->dtype == PP_DTYPE_F32) printf("%.9g", (double)((const float *)buf)[k]);
        else if (a->dtype == PP_DTYPE_F64) printf("%.17g", ((const double *)buf)[k]);
        else printf("\"?\"");
    }
    printf("]");
    return PP_OK;
}

/* show's work once its options are parsed. */
static int show_data(const char *path, const show_args *args)
{
    const pp_dataset_options o = args->o;
    long long first = args->first, count = args->count;
    pp_dataset *d;
    pp_error err = {0};
    if (pp_dataset_open_with(path, &o, &d, &err) != PP_OK) return cli_fail(&err);
    char packed[256];
    printf("%s: %s, %lld samples\n", path, pp_dataset_format(d), (long long)pp_dataset_samples(d));
    if (pp_dataset_docs(d) != PP_DOCS_WINDOWS) printf("  %s (labels -100 there)\n", pp_dataset_pack_summary(d, packed, sizeof packed));
    size_t most = 0;
    for (int i = 0; i < pp_dataset_num_arrays(d); i++) {
        const pp_dataset_array *a = pp_dataset_array_at(d, i);
        char sh[128];
        printf("  %s: %s %s per sample (stored as %s)\n", a->name, pp_dtype_name(a->dtype),
               pp_shape_format(&a->shape, sh, sizeof sh), pp_dtype_name(a->stored));
        if (a->sample_bytes > most) most = a->sample_bytes;
    }
    void *buf = malloc(most + 1);
    pp_status st = buf ? PP_OK : PP_NOMEM(&err);
    for (long long s = first; st == PP_OK && s < first + count && s < pp_dataset_samples(d); s++) {
        printf("{\"sample\": %lld", s);
        for (int i = 0; st == PP_OK && i < pp_dataset_num_arrays(d); i++) {
            printf(", ");
            st = print_sample(d, pp_dataset_array_at(d, i), s, buf, &err);
        }
        printf("}\n");
    }
    free(buf);
    pp_dataset_close(d);
    return st == PP_OK ? 0 : cli_fail(&err);
}

static int show(int argc, char **argv)
{
    show_args a = {0};
    pp_options_defaults(show_table, &a);
    const char *path = NULL;
    int npos = 0;
    int rc = cli_options_parse(&show_options, &a, argc - 1, argv + 1, &path, 1, &npos);
    if (rc < 0 && !path) rc = cli_usage_error("onnxpipe data show DATA", "need a dataset");
    if (rc < 0 && a.o.eos >= 0 && !a.o.docs)
        rc = cli_usage_error("add --pack or --pad", "--eos ends the documents of --pack and --pad");
    if (rc < 0) rc = show_data(path, &a);
    cli_options_free(&show_options, &a);   /* the lists the parser made (--seq-buckets) */
    return rc;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "show")) return show(argc, argv);
    text_args a = {0};
    pp_options_defaults(text_table, &a);
    const char *in = NULL;
    int npos = 0, text = argc >= 2 && !strcmp(argv[1], "text");
    int rc = cli_options_parse(&text_options, &a, argc - text, argv + text, &in, 1, &npos);
    if (rc >= 0) return rc;
    if (!text)
        return cli_usage_error("run 'onnxpipe data --help'", "expected 'onnxpipe data text FILE -o DIR' or "
                               "'onnxpipe data show DATA'");
    if (!in || !a.out) return cli_usage_error("onnxpipe data text FILE -o DIR", "need an input FILE and -o DIR");
    pp_error err = {0};
    if (pp_dataset_write_text_split(in, a.out, a.seq, a.split, &err) != PP_OK) return cli_fail(&err);
    const char *parts[] = {"", "/train", "/valid"};
    for (int k = a.split < 1 ? 1 : 0; k < (a.split < 1 ? 3 : 1); k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s", a.out, parts[k]);
        pp_dataset *d;
        if (pp_dataset_open(dir, &d, &err) != PP_OK) return cli_fail(&err);
        printf("wrote %s: %lld samples of %lld tokens (vocab 256) from %s\n", dir, (long long)pp_dataset_samples(d),
               (long long)a.seq, in);
        pp_dataset_close(d);
    }
    return 0;
}

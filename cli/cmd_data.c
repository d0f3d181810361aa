/* `onnxpipe data text FILE -o DIR --seq T [--split F]`: turns any file into a byte-level
 * language-model dataset (vocab 256, inputs and next-token labels), or into DIR/train and
 * DIR/valid from the two parts of the file. `onnxpipe data show DATA`: what onnxpipe reads
 * from a dataset of any form (train.h), as the trainer would: its arrays and samples. */
#include "cli.h"

#include <onnxpipe/train.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe data text FILE -o DIR [--seq T] [--split F]\n"
            "       onnxpipe data show DATA [--seq T] [--token-dtype D] [--labels NAME] [--pack|--pad [--eos ID]]\n"
            "                               [--first I] [--count N]\n\n"
            "show: the dataset's form, sample count and arrays, then samples I .. I+N-1 (default 0, 3)\n"
            "as JSON lines, as training reads them (DATA: see 'onnxpipe train --help').\n\n"
            "Writes a byte-level token dataset (vocab 256) from FILE: samples of T tokens\n"
            "(input_ids, int64) with the next tokens as labels, in non-overlapping windows.\n\n"
            "  -o, --out DIR   dataset directory (dataset.json + input_ids.bin + labels.bin)\n"
            "  --seq T         tokens per sample (default 128; the model's sequence length)\n"
            "  --split F       DIR/train from the first fraction F of FILE, DIR/valid from the rest\n"
            "                  (for --eval-data), e.g. --split 0.9\n");
}

/* A sample's values of array a as a JSON list. */
static void print_sample(const pp_dataset *d, const pp_dataset_array *a, int64_t s, void *buf)
{
    pp_dataset_read(d, a, s, 1, buf);
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
}

static int show(int argc, char **argv)
{
    const char *path = NULL, *labels = NULL;
    long long seq = 0, first = 0, count = 3, eos = -1;
    pp_docs docs = PP_DOCS_WINDOWS;
    pp_dtype tok = PP_DTYPE_UNDEFINED;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seq") && v) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 30, &seq)) return 2;
        } else if (!strcmp(a, "--first") && v) {
            if (!cli_parse_int(a, argv[++i], 0, 1LL << 50, &first)) return 2;
        } else if (!strcmp(a, "--count") && v) {
            if (!cli_parse_int(a, argv[++i], 0, 1LL << 30, &count)) return 2;
        } else if (!strcmp(a, "--eos") && v) {
            if (!cli_parse_int(a, argv[++i], 0, 1LL << 40, &eos)) return 2;
        } else if (!strcmp(a, "--pack") || !strcmp(a, "--pad")) {
            docs = a[4] == 'c' ? PP_DOCS_PACK : PP_DOCS_PAD;
        } else if (!strcmp(a, "--labels") && v) {
            labels = argv[++i];
        } else if (!strcmp(a, "--token-dtype") && v) {
            if (!cli_parse_token_dtype(argv[++i], &tok)) return 2;
        } else if (a[0] == '-') {
            return cli_usage_error("run 'onnxpipe data --help'", "unknown option '%s' (or it lacks its value)", a);
        } else if (!path) {
            path = a;
        } else {
            return cli_usage_error(NULL, "unexpected argument '%s'", a);
        }
    }
    if (!path) return cli_usage_error("onnxpipe data show DATA", "need a dataset");
    if (eos >= 0 && !docs) return cli_usage_error("add --pack or --pad", "--eos ends the documents of --pack and --pad");
    pp_dataset_options o = {.seq = seq, .labels = labels, .token_dtype = tok, .docs = docs, .eos = eos,
                            .ignore_index = -100};
    pp_dataset *d;
    pp_error err = {0};
    if (pp_dataset_open_with(path, &o, &d, &err) != PP_OK) return cli_fail(&err);
    char packed[256];
    printf("%s: %s, %lld samples\n", path, d->format, (long long)d->samples);
    if (d->pack) printf("  %s (labels -100 there)\n", pp_dataset_pack_summary(d, packed, sizeof packed));
    size_t most = 0;
    for (int i = 0; i < d->narrays; i++) {
        const pp_dataset_array *a = &d->arrays[i];
        char sh[128];
        printf("  %s: %s %s per sample (stored as %s)\n", a->name, pp_dtype_name(a->dtype),
               pp_shape_format(&a->shape, sh, sizeof sh), pp_dtype_name(a->stored));
        if (a->sample_bytes > most) most = a->sample_bytes;
    }
    void *buf = malloc(most + 1);
    for (long long s = first; buf && s < first + count && s < d->samples; s++) {
        printf("{\"sample\": %lld", s);
        for (int i = 0; i < d->narrays; i++) {
            printf(", ");
            print_sample(d, &d->arrays[i], s, buf);
        }
        printf("}\n");
    }
    free(buf);
    pp_dataset_close(d);
    return 0;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "show")) return show(argc, argv);
    if (argc < 2 || strcmp(argv[1], "text"))
        return cli_usage_error("run 'onnxpipe data --help'", "expected 'onnxpipe data text FILE -o DIR' or "
                               "'onnxpipe data show DATA'");
    const char *in = NULL, *out = NULL;
    long long seq = 128;
    double split = 1.0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--seq") && i + 1 < argc) {
            if (!cli_parse_int("--seq", argv[++i], 1, 1 << 20, &seq)) return 2;
        } else if (!strcmp(a, "--split") && i + 1 < argc) {
            if (!cli_parse_double("--split", argv[++i], 1e-9, 1.0, &split)) return 2;
        } else if (a[0] == '-') {
            return cli_usage_error("run 'onnxpipe data --help'", "unknown option '%s' (or it lacks its value)", a);
        } else if (!in) {
            in = a;
        } else {
            return cli_usage_error(NULL, "unexpected argument '%s'", a);
        }
    }
    if (!in || !out) return cli_usage_error("onnxpipe data text FILE -o DIR", "need an input FILE and -o DIR");
    pp_error err = {0};
    if (pp_dataset_write_text_split(in, out, seq, split, &err) != PP_OK) return cli_fail(&err);
    const char *parts[] = {"", "/train", "/valid"};
    for (int k = split < 1 ? 1 : 0; k < (split < 1 ? 3 : 1); k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s", out, parts[k]);
        pp_dataset *d;
        if (pp_dataset_open(dir, &d, &err) != PP_OK) return cli_fail(&err);
        printf("wrote %s: %lld samples of %lld tokens (vocab 256) from %s\n", dir, (long long)d->samples, seq, in);
        pp_dataset_close(d);
    }
    return 0;
}

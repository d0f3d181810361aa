/* `onnxpipe data text FILE -o DIR --seq T [--split F]`: turns any file into a byte-level
 * language-model dataset (vocab 256, inputs and next-token labels), or into DIR/train and
 * DIR/valid from the two parts of the file. */
#include "cli.h"

#include <onnxpipe/train.h>

#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe data text FILE -o DIR [--seq T] [--split F]\n\n"
            "Writes a byte-level token dataset (vocab 256) from FILE: samples of T tokens\n"
            "(input_ids, int64) with the next tokens as labels, in non-overlapping windows.\n\n"
            "  -o, --out DIR   dataset directory (dataset.json + input_ids.bin + labels.bin)\n"
            "  --seq T         tokens per sample (default 128; the model's sequence length)\n"
            "  --split F       DIR/train from the first fraction F of FILE, DIR/valid from the rest\n"
            "                  (for --eval-data), e.g. --split 0.9\n");
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "text"))
        return cli_usage_error("run 'onnxpipe data --help'", "expected 'onnxpipe data text FILE -o DIR'");
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

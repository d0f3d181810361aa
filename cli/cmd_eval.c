/* `onnxpipe eval`: forward of a model over a dataset, outputs written raw per output. */
#include "cli.h"

#include <onnxpipe/train.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe eval --model MODEL.onnx --data DIR -o OUT_DIR [--batch B] [--samples N] [--dim NAME=V]\n"
            "                     [--device auto|cpu|cuda]\n\n"
            "Runs the model forward (inference mode) over the dataset DIR, B samples at a time,\n"
            "and appends each graph output to OUT_DIR/<output name>.bin (raw, little-endian).\n");
}

int cmd_eval(int argc, char **argv)
{
    pp_dim_binding dims[16];
    pp_eval_config c = {.batch = 1, .dims = dims};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && v) c.model = argv[++i];
        else if (!strcmp(a, "--data") && v) c.data = argv[++i];
        else if (!strcmp(a, "--device") && v) c.device = argv[++i];
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && v) c.out_dir = argv[++i];
        else if (!strcmp(a, "--batch")) {
            if (!cli_parse_int("--batch", v, 1, 1LL << 30, &n)) return 2;
            c.batch = n;
            i++;
        } else if (!strcmp(a, "--samples")) {
            if (!cli_parse_int("--samples", v, 1, 1LL << 40, &n)) return 2;
            c.samples = n;
            i++;
        } else if (!strcmp(a, "--dim") && v && strchr(v, '=') && c.ndims < 16) {
            if (!cli_parse_int("--dim", strchr(v, '=') + 1, 1, 1LL << 40, &n)) return 2;
            dims[c.ndims].name = strndup(v, (size_t)(strchr(v, '=') - v));
            dims[c.ndims++].value = n;
            i++;
        } else
            return cli_usage_error("run 'onnxpipe eval --help'", "unknown option '%s' (or it lacks its value)", a);
    }
    if (!c.model || !c.data || !c.out_dir)
        return cli_usage_error("run 'onnxpipe eval --help'", "--model, --data and -o are required");
    pp_error err = {0};
    int64_t done = 0;
    pp_status st = pp_eval_run(&c, &done, &err);
    for (int i = 0; i < c.ndims; i++) free((char *)dims[i].name);
    if (st != PP_OK) return cli_fail(&err);
    printf("evaluated %lld samples into %s\n", (long long)done, c.out_dir);
    return 0;
}

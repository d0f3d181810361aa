/* `onnxpipe eval`: forward of a model over a dataset, outputs written raw per output. */
#include "cli.h"

#include <onnxpipe/train_job.h>


#define OPTS "options:"
#define E(f) PP_OPT_FIELD(pp_eval_config, f)

static const pp_option table[] = {
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL.onnx", E(model), .group = OPTS, .help = "the model"},
    {.type = PP_OPT_STR, .name = "--data", .metavar = "DIR", E(data), .group = OPTS, .help = "the dataset"},
    {.type = PP_OPT_STR, .name = "--out", .alias = "-o", .metavar = "OUT_DIR", E(out_dir), .group = OPTS,
     .help = "where the outputs go: OUT_DIR/<output name>.bin"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", E(batch), .lo = 1, .hi = 1LL << 30, .def = 1,
     .group = OPTS, .help = "samples per forward"},
    {.type = PP_OPT_INT, .name = "--samples", .metavar = "N", E(samples), .lo = 1, .hi = 1LL << 40,
     .shown = "the whole dataset, in whole batches", .group = OPTS, .help = "samples to run"},
    {.type = PP_OPT_DIMS, .name = "--dim", .metavar = "NAME=V", E(dims), PP_OPT_COUNT(pp_eval_config, ndims),
     .hi = 16, .group = OPTS, .help = "bind a symbolic dim of the model's inputs (repeatable)"},
    {.type = PP_OPT_STR, .name = "--device", .metavar = "KIND", E(device), .shown = "auto", .group = OPTS,
     .help = "auto | cpu | cuda"},
    {0},
};

static const char *const groups[] = {OPTS, NULL};

static const cli_options options = {
    .usage = "usage: onnxpipe eval --model MODEL.onnx --data DIR -o OUT_DIR [options]\n\n"
             "Runs the model forward (inference mode) over the dataset DIR, B samples at a time,\n"
             "and appends each graph output to OUT_DIR/<output name>.bin (raw, little-endian).\n",
    .table = table,
    .groups = groups,
    .hint = "run 'onnxpipe eval --help'",
};

int cmd_eval(int argc, char **argv)
{
    pp_eval_config c = {0};
    pp_options_defaults(table, &c);
    int rc = cli_options_parse(&options, &c, argc, argv, NULL, 0, NULL);
    if (rc < 0 && (!c.model || !c.data || !c.out_dir))
        rc = cli_usage_error("run 'onnxpipe eval --help'", "--model, --data and -o are required");
    if (rc >= 0) {
        cli_options_free(&options, &c);
        return rc;
    }
    pp_error err = {0};
    int64_t done = 0;
    pp_status st = pp_eval_run(&c, &done, &err);
    cli_options_free(&options, &c);
    if (st != PP_OK) return cli_fail(&err);
    printf("evaluated %lld samples into %s\n", (long long)done, c.out_dir);
    return 0;
}

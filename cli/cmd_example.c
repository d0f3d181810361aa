/* `onnxpipe example gpt|mlp`: builds an example model through the graph builder
 * (graph/example_*.c) and writes it with pp_graph_save, printing a one-line summary. */
#include "cli.h"

#include <string.h>
#include <sys/stat.h>

#include <onnxpipe/core_util.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>

#define MAX_DIM (1ll << 24)

/* The options of one example: its model's config and the file to write. */
typedef struct gpt_args {
    pp_gpt_config c;
    const char *out;
} gpt_args;

typedef struct mlp_args {
    pp_mlp_config c;
    const char *out;
} mlp_args;

/* "64,64" -> the config's hidden widths (reports a bad list itself). */
static int parse_hidden(const char *s, void *field, pp_error *err)
{
    (void)err;
    pp_mlp_config *c = field;
    return cli_parse_int_list("--hidden", s, 1, MAX_DIM, PP_MLP_MAX_HIDDEN, c->hidden, &c->nhidden);
}

#define OPTS "options:"
#define G(f) PP_OPT_FIELD(gpt_args, f)
#define M(f) PP_OPT_FIELD(mlp_args, f)

static const pp_option gpt_table[] = {
    {.type = PP_OPT_INT, .name = "--layers", .metavar = "L", G(c.layers), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "transformer blocks"},
    {.type = PP_OPT_INT, .name = "--d-model", .metavar = "D", G(c.d_model), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "width, divisible by --heads"},
    {.type = PP_OPT_INT, .name = "--heads", .metavar = "H", G(c.heads), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "attention heads"},
    {.type = PP_OPT_INT, .name = "--vocab", .metavar = "V", G(c.vocab), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "vocabulary size"},
    {.type = PP_OPT_INT, .name = "--seq", .metavar = "T", G(c.seq), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "context length"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", G(c.batch), .lo = 1, .hi = MAX_DIM,
     .shown = "symbolic dim 'batch'", .group = OPTS, .help = "fixed batch size"},
    {.type = PP_OPT_INT, .name = "--seed", .metavar = "S", G(c.seed), .lo = 0, .hi = 1LL << 62, .shown = "0",
     .group = OPTS, .help = "weight RNG seed"},
    {.type = PP_OPT_INT, .name = "--opset", .metavar = "N", G(c.opset), .lo = 13, .hi = 21, .group = OPTS,
     .help = "ai.onnx opset 13..21 (below 17 LayerNorm is decomposed)"},
    {.type = PP_OPT_FLAG, .name = "--loss", G(c.with_loss), .group = OPTS,
     .help = "add the labels input and the loss output"},
    {.type = PP_OPT_STR, .name = "--out", .alias = "-o", .metavar = "FILE", G(out), .group = OPTS,
     .help = "the .onnx file to write (required)"},
    {0},
};

static const pp_option mlp_table[] = {
    {.type = PP_OPT_INT, .name = "--in", .metavar = "N", M(c.in), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "input features"},
    {.type = PP_OPT_CUSTOM, .name = "--hidden", .metavar = "LIST", M(c), .parse = parse_hidden,
     .shown = "64,64", .group = OPTS, .help = "hidden widths, comma-separated"},
    {.type = PP_OPT_INT, .name = "--classes", .metavar = "C", M(c.classes), .lo = 1, .hi = MAX_DIM, .group = OPTS,
     .help = "classes"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", M(c.batch), .lo = 1, .hi = MAX_DIM,
     .shown = "symbolic dim 'batch'", .group = OPTS, .help = "fixed batch size"},
    {.type = PP_OPT_INT, .name = "--seed", .metavar = "S", M(c.seed), .lo = 0, .hi = 1LL << 62, .shown = "0",
     .group = OPTS, .help = "weight RNG seed"},
    {.type = PP_OPT_INT, .name = "--opset", .metavar = "N", M(c.opset), .lo = 13, .hi = 21, .group = OPTS,
     .help = "ai.onnx opset 13..21"},
    {.type = PP_OPT_FLAG, .name = "--loss", M(c.with_loss), .group = OPTS,
     .help = "add the labels input and the loss output"},
    {.type = PP_OPT_STR, .name = "--out", .alias = "-o", .metavar = "FILE", M(out), .group = OPTS,
     .help = "the .onnx file to write (required)"},
    {0},
};

static const char *const groups[] = {OPTS, NULL};

static const cli_options gpt_options = {
    .usage = "usage: onnxpipe example gpt [options] -o FILE\n\n"
             "Writes a GPT-2 style model: tied token embedding, learned positions, pre-LN blocks of\n"
             "causal self-attention and erf-GELU MLP. Inputs input_ids [batch, T] (and labels with\n"
             "--loss); outputs logits [batch, T, V] (and the mean cross-entropy loss with --loss).\n",
    .table = gpt_table,
    .groups = groups,
    .hint = "run 'onnxpipe example gpt --help' for the options",
};

static const cli_options mlp_options = {
    .usage = "usage: onnxpipe example mlp [options] -o FILE\n\n"
             "Writes an MLP classifier: (Gemm, Relu) per hidden layer, then a Gemm to the logits.\n"
             "Input x [batch, in] (and labels [batch] with --loss); outputs logits [batch, classes]\n"
             "(and the mean cross-entropy loss with --loss).\n",
    .table = mlp_table,
    .groups = groups,
    .hint = "run 'onnxpipe example mlp --help' for the options",
};

/* Parses an example's argv (argv[1] its name) into base: -1 to go on, else the exit code. */
static int parse_example(const cli_options *o, void *base, const char *const *out, int argc, char **argv)
{
    int rc = cli_options_parse(o, base, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!*out || !**out) return cli_usage_error("add -o FILE.onnx", "no output file given");
    return -1;
}

/* Saves g and prints: what was built, nodes, parameters, bytes, path. */
static int save_and_report(pp_graph *g, const char *what, const char *path)
{
    pp_error err = {0};
    if (pp_graph_save(g, path, NULL, &err) != PP_OK) {
        pp_graph_destroy(g);
        return cli_fail(&err);
    }
    char pcount[32], pbytes[32], fbytes[32];
    struct stat sb;
    double file_bytes = stat(path, &sb) == 0 ? (double)sb.st_size : 0.0;
    printf("%s: %d nodes, %lld parameters (%s, %s), wrote %s (%s)\n", what, g->nnodes,
           (long long)g->nparams, pp_format_count((double)g->nparams, pcount, sizeof pcount),
           pp_format_bytes((double)g->param_bytes, pbytes, sizeof pbytes), path,
           pp_format_bytes(file_bytes, fbytes, sizeof fbytes));
    pp_graph_destroy(g);
    return 0;
}

static int example_gpt(int argc, char **argv)
{
    gpt_args a = {.c = pp_gpt_config_default()};
    int rc = parse_example(&gpt_options, &a, &a.out, argc, argv);
    if (rc >= 0) return rc;
    pp_gpt_config c = a.c;
    if (c.d_model % c.heads)
        return cli_usage_error("pick --heads among the divisors of --d-model",
                               "--d-model %lld is not divisible by --heads %lld",
                               (long long)c.d_model, (long long)c.heads);
    pp_graph *g;
    pp_error err = {0};
    if (pp_example_gpt(&c, &g, &err) != PP_OK) return cli_fail(&err);
    char what[160];
    snprintf(what, sizeof what, "gpt L=%lld D=%lld H=%lld V=%lld T=%lld opset %lld%s", (long long)c.layers,
             (long long)c.d_model, (long long)c.heads, (long long)c.vocab, (long long)c.seq,
             (long long)g->opset, c.with_loss ? " +loss" : "");
    return save_and_report(g, what, a.out);
}

static int example_mlp(int argc, char **argv)
{
    mlp_args a = {.c = pp_mlp_config_default()};
    int rc = parse_example(&mlp_options, &a, &a.out, argc, argv);
    if (rc >= 0) return rc;
    pp_mlp_config c = a.c;
    pp_graph *g;
    pp_error err = {0};
    if (pp_example_mlp(&c, &g, &err) != PP_OK) return cli_fail(&err);
    char what[160];
    int n = snprintf(what, sizeof what, "mlp in=%lld hidden=", (long long)c.in);
    for (int l = 0; l < c.nhidden && n < (int)sizeof what; l++)
        n += snprintf(what + n, sizeof what - (size_t)n, "%s%lld", l ? "," : "", (long long)c.hidden[l]);
    if (n < (int)sizeof what)
        snprintf(what + n, sizeof what - (size_t)n, "%s classes=%lld%s", c.nhidden ? "" : "none",
                 (long long)c.classes, c.with_loss ? " +loss" : "");
    return save_and_report(g, what, a.out);
}

int cmd_example(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "gpt")) return example_gpt(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "mlp")) return example_mlp(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        gpt_args g = {.c = pp_gpt_config_default()};
        mlp_args m = {.c = pp_mlp_config_default()};
        cli_options_help(&gpt_options, &g, stdout);
        putchar('\n');
        cli_options_help(&mlp_options, &m, stdout);
        return 0;
    }
    if (argc < 2) return cli_usage_error("run 'onnxpipe example --help'", "which example? gpt or mlp");
    return cli_usage_error("run 'onnxpipe example --help'", "unknown example '%s' (gpt or mlp)", argv[1]);
}

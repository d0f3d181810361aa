/* `onnxpipe example gpt|mlp`: builds an example model through the graph builder
 * (graph/example_*.c) and writes it with pp_graph_save, printing a one-line summary. */
#include "cli.h"

#include <string.h>
#include <sys/stat.h>

#include <onnxpipe/core_util.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>

#define MAX_DIM (1ll << 24)

static const char gpt_usage[] =
    "usage: onnxpipe example gpt [options] -o FILE\n\n"
    "Writes a GPT-2 style model: tied token embedding, learned positions, pre-LN blocks of\n"
    "causal self-attention and erf-GELU MLP. Inputs input_ids [batch, T] (and labels with\n"
    "--loss); outputs logits [batch, T, V] (and the mean cross-entropy loss with --loss).\n\n"
    "options:\n"
    "  --layers L      transformer blocks (default 4)\n"
    "  --d-model D     width, divisible by --heads (default 256)\n"
    "  --heads H       attention heads (default 4)\n"
    "  --vocab V       vocabulary size (default 256)\n"
    "  --seq T         context length (default 128)\n"
    "  --batch B       fixed batch size (default: symbolic dim 'batch')\n"
    "  --seed S        weight RNG seed (default 0)\n"
    "  --opset N       ai.onnx opset 13..21 (default 17; below 17 LayerNorm is decomposed)\n"
    "  --loss          add the labels input and the loss output\n"
    "  -o, --output F  the .onnx file to write (required)\n";

static const char mlp_usage[] =
    "usage: onnxpipe example mlp [options] -o FILE\n\n"
    "Writes an MLP classifier: (Gemm, Relu) per hidden layer, then a Gemm to the logits.\n"
    "Input x [batch, in] (and labels [batch] with --loss); outputs logits [batch, classes]\n"
    "(and the mean cross-entropy loss with --loss).\n\n"
    "options:\n"
    "  --in N          input features (default 32)\n"
    "  --hidden LIST   hidden widths, comma-separated (default 64,64)\n"
    "  --classes C     classes (default 10)\n"
    "  --batch B       fixed batch size (default: symbolic dim 'batch')\n"
    "  --seed S        weight RNG seed (default 0)\n"
    "  --opset N       ai.onnx opset 13..21 (default 17)\n"
    "  --loss          add the labels input and the loss output\n"
    "  -o, --output F  the .onnx file to write (required)\n";

/* An integer option: flag, where it goes, its bounds. */
typedef struct int_opt {
    const char *flag;
    int64_t *dst;
    long long lo, hi;
} int_opt;

/* Options both models share. */
typedef struct common_opts {
    const char *output;
    int64_t seed;
    int help;
} common_opts;

/* The value after argv[*i] (main.c has split "--flag=V"), advancing *i; NULL if missing. */
static const char *option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

/* "64,64" -> hidden widths; returns 0 after printing an error. */
static int parse_hidden(const char *s, pp_mlp_config *c)
{
    return cli_parse_int_list("--hidden", s, 1, MAX_DIM, PP_MLP_MAX_HIDDEN, c->hidden, &c->nhidden);
}

/* Parses argv[2..] into the integer options, --loss, --hidden (when mlp != NULL),
 * -o and --help. Returns 0 after printing an error. */
static int parse_options(int argc, char **argv, const int_opt *opts, int nopts, int *loss,
                         pp_mlp_config *mlp, common_opts *co)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            co->help = 1;
            return 1;
        }
        if (!strcmp(a, "--loss")) {
            *loss = 1;
            continue;
        }
        const char *flag = !strcmp(a, "-o") ? "-o" : !strcmp(a, "--output") ? "--output" : NULL;
        if (flag) {
            if (!(co->output = option_value(argc, argv, &i)) || !*co->output)
                return !cli_usage_error(NULL, "%s expects a file name", flag);
            continue;
        }
        if (mlp && !strcmp(a, "--hidden")) {
            const char *v = option_value(argc, argv, &i);
            if (!v) return !cli_usage_error(NULL, "--hidden expects a list like 64,64");
            if (!parse_hidden(v, mlp)) return 0;
            continue;
        }
        int k = 0;
        while (k < nopts && strcmp(a, opts[k].flag)) k++;
        if (k == nopts)
            return !cli_usage_error("run 'onnxpipe example <gpt|mlp> --help' for the options",
                                    "unknown option '%s' for 'example %s'", a, argv[1]);
        long long v;
        if (!cli_parse_int(opts[k].flag, option_value(argc, argv, &i), opts[k].lo, opts[k].hi, &v))
            return 0;
        *opts[k].dst = v;
    }
    if (!co->output)
        return !cli_usage_error("add -o FILE.onnx", "no output file given");
    return 1;
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
    pp_gpt_config c = pp_gpt_config_default();
    common_opts co = {0};
    const int_opt opts[] = {
        {"--layers", &c.layers, 1, MAX_DIM}, {"--d-model", &c.d_model, 1, MAX_DIM},
        {"--heads", &c.heads, 1, MAX_DIM},   {"--vocab", &c.vocab, 1, MAX_DIM},
        {"--seq", &c.seq, 1, MAX_DIM},       {"--batch", &c.batch, 1, MAX_DIM},
        {"--seed", &co.seed, 0, INT64_MAX},  {"--opset", &c.opset, 13, 21},
    };
    if (!parse_options(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), &c.with_loss, NULL, &co)) return 2;
    if (co.help) {
        fputs(gpt_usage, stdout);
        return 0;
    }
    if (c.d_model % c.heads)
        return cli_usage_error("pick --heads among the divisors of --d-model",
                               "--d-model %lld is not divisible by --heads %lld",
                               (long long)c.d_model, (long long)c.heads);
    c.seed = (uint64_t)co.seed;
    pp_graph *g;
    pp_error err = {0};
    if (pp_example_gpt(&c, &g, &err) != PP_OK) return cli_fail(&err);
    char what[160];
    snprintf(what, sizeof what, "gpt L=%lld D=%lld H=%lld V=%lld T=%lld opset %lld%s", (long long)c.layers,
             (long long)c.d_model, (long long)c.heads, (long long)c.vocab, (long long)c.seq,
             (long long)g->opset, c.with_loss ? " +loss" : "");
    return save_and_report(g, what, co.output);
}

static int example_mlp(int argc, char **argv)
{
    pp_mlp_config c = pp_mlp_config_default();
    common_opts co = {0};
    const int_opt opts[] = {
        {"--in", &c.in, 1, MAX_DIM},        {"--classes", &c.classes, 1, MAX_DIM},
        {"--batch", &c.batch, 1, MAX_DIM},  {"--seed", &co.seed, 0, INT64_MAX},
        {"--opset", &c.opset, 13, 21},
    };
    if (!parse_options(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), &c.with_loss, &c, &co)) return 2;
    if (co.help) {
        fputs(mlp_usage, stdout);
        return 0;
    }
    c.seed = (uint64_t)co.seed;
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
    return save_and_report(g, what, co.output);
}

int cmd_example(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "gpt")) return example_gpt(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "mlp")) return example_mlp(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: onnxpipe example gpt|mlp [options] -o FILE\n\n%s\n%s", gpt_usage, mlp_usage);
        return 0;
    }
    if (argc < 2) return cli_usage_error("run 'onnxpipe example --help'", "which example? gpt or mlp");
    return cli_usage_error("run 'onnxpipe example --help'", "unknown example '%s' (gpt or mlp)", argv[1]);
}

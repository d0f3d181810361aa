/* `onnxpipe ckpt list|inspect|verify|export`: checkpoints looked at, checked and turned
 * into an inference model offline (no MPI, no device). */
#include "cli.h"

#include <onnxpipe/ckpt_lib.h>
#include <onnxpipe/core_util.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe ckpt list DIR [--no-verify]     checkpoints in DIR (a --save directory), newest first\n"
            "       onnxpipe ckpt inspect CKPT [--json]      manifest: step, model, optimizer, LR, layout, tensors\n"
            "       onnxpipe ckpt verify CKPT                every file's size and checksum (exit 1 on a bad one)\n"
            "       onnxpipe ckpt export CKPT --model MODEL.onnx -o OUT.onnx\n"
            "                                                the inference model with the checkpoint's weights\n\n"
            "CKPT is a checkpoint directory (DIR/step-N). Shards are safetensors files: any\n"
            "safetensors reader opens them; manifest.json names every tensor's file and offset.\n");
}

/* The subcommands' options: each its own table over one struct. */
typedef struct ckpt_args {
    int no_verify, json;
    const char *model, *out;
} ckpt_args;

#define OPTS "options:"
#define C(f) PP_OPT_FIELD(ckpt_args, f)

static const pp_option list_table[] = {
    {.type = PP_OPT_FLAG, .name = "--no-verify", C(no_verify), .group = OPTS,
     .help = "do not check each checkpoint's files against its manifest"},
    {0},
};
static const pp_option inspect_table[] = {
    {.type = PP_OPT_FLAG, .name = "--json", C(json), .group = OPTS, .help = "print the manifest (JSON)"},
    {0},
};
static const pp_option verify_table[] = {{0}};
static const pp_option export_table[] = {
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL.onnx", C(model), .group = OPTS,
     .help = "the model the checkpoint trained"},
    {.type = PP_OPT_STR, .name = "--out", .alias = "-o", .metavar = "OUT.onnx", C(out), .group = OPTS,
     .help = "the inference model to write"},
    {0},
};

static const char *const groups[] = {OPTS, NULL};

/* Parses a subcommand's argv (argv[0] its name) into a and its one positional argument
 * into *path: -1 to go on, else the exit code. */
static int parse_sub(const pp_option *table, const char *usage, int argc, char **argv, ckpt_args *a,
                     const char **path)
{
    const cli_options o = {.usage = usage, .table = table, .groups = groups, .hint = "run 'onnxpipe ckpt --help'"};
    int npos = 0;
    return cli_options_parse(&o, a, argc, argv, path, 1, &npos);
}

static int list(int argc, char **argv)
{
    const char *root = NULL;
    ckpt_args a = {0};
    int rc = parse_sub(list_table, "usage: onnxpipe ckpt list DIR [--no-verify]\n", argc, argv, &a, &root);
    if (rc >= 0) return rc;
    int verify = !a.no_verify;
    if (!root) return cli_usage_error("example: onnxpipe ckpt list ckpts", "ckpt list needs a directory");
    pp_error err = {0};
    pp_ckpt_entry *e;
    int n;
    if (pp_ckpt_list(root, &e, &n, &err) != PP_OK) return cli_fail(&err);
    if (!n) printf("no checkpoints in '%s'\n", root);
    else printf("%-10s %-12s %-26s %s\n", "step", "size", "written with", "status");
    for (int i = 0; i < n; i++) {
        pp_ckpt *c = NULL;
        pp_error why = {0};
        char size[32] = "?", layout[64] = "?", status[PP_ERROR_LEN + 32];
        if (pp_ckpt_open(e[i].dir, &c, &why) == PP_OK) {
            const pp_ckpt_info *in = pp_ckpt_inspect(c);
            pp_format_bytes((double)in->bytes, size, sizeof size);
            snprintf(layout, sizeof layout, "pp %d x dp %d, %s", in->meta.pp, in->meta.dp,
                     in->meta.schedule ? in->meta.schedule : "?");
            if (verify && pp_ckpt_verify(e[i].dir, &why) != PP_OK) snprintf(status, sizeof status, "BAD: %s", why.msg);
            else snprintf(status, sizeof status, "%s", verify ? "verified" : "not verified");
        } else {
            snprintf(status, sizeof status, "BAD: %s", why.msg);
        }
        pp_ckpt_close(c);
        printf("%-10lld %-12s %-26s %s%s\n", (long long)e[i].step, size, layout, status, e[i].latest ? "  (latest)" : "");
    }
    pp_ckpt_list_free(e, n);
    return 0;
}

static void print_info(const pp_ckpt_info *in)
{
    const pp_ckpt_meta *m = &in->meta;
    char b[32];
    printf("checkpoint %s\n", in->dir);
    printf("  format        %s %d (written by onnxpipe %s)\n", PP_CKPT_FORMAT, in->format_version,
           in->onnxpipe_version ? in->onnxpipe_version : "?");
    printf("  model         %s (hash %016llx)\n", m->model_path ? m->model_path : "?",
           (unsigned long long)in->model_hash);
    printf("  step          %lld (%lld samples)\n", (long long)m->step, (long long)m->samples);
    printf("  optimizer     %s lr %g", pp_optim_kind_name(m->optim.kind), (double)m->optim.lr);
    if (m->optim.kind == PP_OPTIM_SGD) printf(" momentum %g%s", (double)m->optim.momentum, m->optim.nesterov ? " nesterov" : "");
    else printf(" betas (%g, %g) eps %g", (double)m->optim.beta1, (double)m->optim.beta2, (double)m->optim.eps);
    printf(" weight decay %g\n", (double)m->optim.weight_decay);
    const pp_jvalue *lr = in->trainer ? pp_json_get(in->trainer, "lr_schedule") : NULL;
    const pp_jvalue *kind = lr ? pp_json_get(lr, "kind") : NULL, *pos = lr ? pp_json_get(lr, "position") : NULL;
    if (kind && kind->type == PP_JSTR && pos && pos->type == PP_JNUM)
        printf("  lr schedule   %s at step %.0f\n", kind->str, pos->num);
    if (m->loss_scale > 0) printf("  loss scale    %g\n", m->loss_scale);
    else printf("  loss scale    none\n");
    printf("  seed          %llu\n", (unsigned long long)m->seed);
    printf("  written with  pp %d x dp %d, %s, chunks %d, batch %lld as %lld microbatches per replica\n", m->pp, m->dp,
           m->schedule ? m->schedule : "?", m->chunks, (long long)m->batch, (long long)m->microbatches);
    printf("  files         %d, %s\n", in->nfiles, pp_format_bytes((double)in->bytes, b, sizeof b));
    printf("  tensors       %d\n\n", in->ntensors);
    printf("  %-48s %-9s %-20s %-12s %s\n", "tensor", "dtype", "shape", "bytes", "file");
    for (int i = 0; i < in->ntensors; i++) {
        const pp_ckpt_tensor *t = &in->tensors[i];
        char shape[64], name[1024], file[1024];   /* names from the model and manifest, escaped */
        printf("  %-48s %-9s %-20s %-12lld %s\n", pp_text_escape(t->name, 0, name, sizeof name),
               pp_dtype_name(t->dtype), pp_shape_format(&t->shape, shape, sizeof shape), (long long)t->nbytes,
               pp_text_escape(in->files[t->file].name, 0, file, sizeof file));
    }
}

static int inspect(int argc, char **argv)
{
    const char *dir = NULL;
    ckpt_args a = {0};
    int rc = parse_sub(inspect_table, "usage: onnxpipe ckpt inspect CKPT [--json]\n", argc, argv, &a, &dir);
    if (rc >= 0) return rc;
    int json = a.json;
    if (!dir) return cli_usage_error("example: onnxpipe ckpt inspect ckpts/step-100", "ckpt inspect needs a checkpoint");
    pp_error err = {0};
    pp_ckpt *c = NULL;
    if (pp_ckpt_open(dir, &c, &err) != PP_OK) return cli_fail(&err);
    if (json) {
        /* the manifest is the JSON form: stable keys, checked by the open above */
        size_t n = strlen(dir) + 16;
        char *path = malloc(n);
        FILE *f = NULL;
        if (path) snprintf(path, n, "%s/manifest.json", dir);
        if (path && (f = fopen(path, "rb"))) {
            char buf[65536];
            size_t k;
            while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, stdout);
            fclose(f);
        }
        free(path);
    } else {
        print_info(pp_ckpt_inspect(c));
    }
    pp_ckpt_close(c);
    return 0;
}

static int verify(int argc, char **argv)
{
    const char *dir = NULL;
    ckpt_args a = {0};
    int rc = parse_sub(verify_table, "usage: onnxpipe ckpt verify CKPT\n", argc, argv, &a, &dir);
    if (rc >= 0) return rc;
    if (!dir) return cli_usage_error("example: onnxpipe ckpt verify ckpts/step-100", "ckpt verify needs one checkpoint");
    pp_error err = {0};
    if (pp_ckpt_verify(dir, &err) != PP_OK) return cli_fail(&err);
    pp_ckpt *c = NULL;
    if (pp_ckpt_open(dir, &c, &err) != PP_OK) return cli_fail(&err);
    const pp_ckpt_info *in = pp_ckpt_inspect(c);
    char b[32];
    printf("%s: ok (%d files, %d tensors, %s; sizes and crc32c checksums match the manifest)\n", dir, in->nfiles,
           in->ntensors, pp_format_bytes((double)in->bytes, b, sizeof b));
    pp_ckpt_close(c);
    return 0;
}

static int export_(int argc, char **argv)
{
    const char *dir = NULL;
    ckpt_args a = {0};
    int rc = parse_sub(export_table, "usage: onnxpipe ckpt export CKPT --model MODEL.onnx -o OUT.onnx\n", argc, argv,
                       &a, &dir);
    if (rc >= 0) return rc;
    const char *model = a.model, *out = a.out;
    if (!dir || !model || !out)
        return cli_usage_error("example: onnxpipe ckpt export ckpts/step-100 --model gpt.onnx -o trained.onnx",
                               "ckpt export needs a checkpoint, --model and -o");
    pp_error err = {0};
    pp_ckpt *c = NULL;
    if (pp_ckpt_open(dir, &c, &err) != PP_OK) return cli_fail(&err);
    pp_status st = pp_ckpt_export(c, model, out, &err);
    int64_t step = pp_ckpt_inspect(c)->meta.step;
    pp_ckpt_close(c);
    if (st != PP_OK) return cli_fail(&err);
    printf("wrote %s: %s with the weights of step %lld\n", out, model, (long long)step);
    return 0;
}

int cmd_ckpt(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "list")) return list(argc - 1, argv + 1);
    if (!strcmp(argv[1], "inspect")) return inspect(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify")) return verify(argc - 1, argv + 1);
    if (!strcmp(argv[1], "export")) return export_(argc - 1, argv + 1);
    return cli_usage_error("run 'onnxpipe ckpt --help'", "unknown ckpt command '%s' (list, inspect, verify, export)",
                           argv[1]);
}

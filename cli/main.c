/* The onnxpipe command: dispatches to a subcommand (cli/cmd_*.c) and owns the
 * conventions they share: `onnxpipe: error: ...` on stderr and non-zero exits. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    cli_command_fn fn;
    const char *summary;
} commands[] = {
    {"partition", cmd_partition, "split a model into pipeline stages and preview the split"},
    {"schedule", cmd_schedule, "generate, validate and simulate a pipeline schedule"},
    {"example", cmd_example, "write an example model (gpt, mlp)"},
    {"train", cmd_train, "train a model on a dataset"},
    {"data", cmd_data, "make a dataset (byte-level text)"},
    {"eval", cmd_eval, "run a model forward over a dataset"},
    {"place", cmd_place, "show where ranks go (hosts, cores, GPUs) and the traffic per step"},
    {"plan", cmd_plan, "find the fastest layouts (pp, dp, schedule, microbatches, recompute, precision)"},
    {"ckpt", cmd_ckpt, "list, inspect, verify and export checkpoints"},
    {"ops", cmd_ops, "list the supported ONNX ops: opsets, backward, cpu / cuda kernels, folding"},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe <command> [options]\n\n"
            "Trains ONNX models with pipeline x data parallelism.\n\n"
            "commands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'onnxpipe <command> --help' for a command's options.\n");
}

int cli_usage_error(const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("onnxpipe: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    return 2;
}

int cli_fail(const pp_error *err)
{
    fprintf(stderr, "onnxpipe: error: %s\n", err->msg[0] ? err->msg : pp_status_string(err->status));
    return 1;
}


/* The option engine's parsers (train/option_table.c), reported as usage errors. */
static int reported(pp_status st, const pp_error *err)
{
    if (st != PP_OK) cli_usage_error(NULL, "%s", err->msg);
    return st == PP_OK;
}

int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    pp_error err = {0};
    return reported(pp_option_parse_int(opt, s, lo, hi, out, &err), &err);
}

int cli_parse_int_list(const char *opt, const char *s, long long lo, long long hi, int max, int64_t *out, int *n)
{
    pp_error err = {0};
    return reported(pp_option_parse_ints(opt, s, lo, hi, max, out, n, &err), &err);
}

int cli_parse_double(const char *opt, const char *s, double lo, double hi, double *out)
{
    pp_error err = {0};
    return reported(pp_option_parse_real(opt, s, lo, hi, out, &err), &err);
}

/* Every command takes "--opt=value" as "--opt value": each such argument is split at its
 * first '=' before the command sees it, so that no parser handles the two spellings itself
 * (a value of its own, as --dim's NAME=VALUE, keeps its '='). The new argv and a copy of its
 * strings are one block, which the caller frees; NULL if out of memory. */
static char **split_equals(int argc, char **argv, int *argc_out)
{
    size_t chars = 0, ptrs = ((size_t)argc * 2 + 1) * sizeof(char *);
    for (int i = 0; i < argc; i++) chars += strlen(argv[i]) + 1;
    char **out = calloc(1, ptrs + chars);
    if (!out) return NULL;
    char *s = (char *)out + ptrs;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        memcpy(s, argv[i], len + 1);
        char *eq = strchr(s, '=');
        out[n++] = s;
        if (i > 0 && !strncmp(s, "--", 2) && eq && eq > s + 2) {
            *eq = '\0';
            out[n++] = eq + 1;
        }
        s += len + 1;
    }
    *argc_out = n;
    return out;
}

int main(int argc, char **argv)
{
    pp_log_init();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("onnxpipe %s\n", pp_version());
        return 0;
    }
    char **args = split_equals(argc, argv, &argc);
    if (!args) {
        fprintf(stderr, "onnxpipe: error: out of memory reading the arguments\n");
        return 1;
    }
    int cmd = 0;
    while (cmd < NCOMMANDS && strcmp(args[1], commands[cmd].name)) cmd++;
    int rc = cmd < NCOMMANDS ? commands[cmd].fn(argc - 1, args + 1)
                             : cli_usage_error("run 'onnxpipe --help' for the list of commands",
                                               "unknown command '%s'", argv[1]);
    free(args);
    return rc;
}

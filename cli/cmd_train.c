/* `onnxpipe train`: parses the training options into a pp_train_config and runs it. */
#include "cli.h"

#include <onnxpipe/train_job.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char *const groups[] = {
    PP_OPT_GROUP_DATA, PP_OPT_GROUP_LAYOUT, PP_OPT_GROUP_SPLIT, PP_OPT_GROUP_TRAINING, PP_OPT_GROUP_STAGE,
    PP_OPT_GROUP_MEMORY, PP_OPT_GROUP_PARAMS, PP_OPT_GROUP_OUTPUT, PP_OPT_GROUP_CKPT, PP_OPT_GROUP_EVAL,
    PP_OPT_GROUP_LOGS, NULL,
};

static const cli_options options = {
    .usage = "usage: onnxpipe train --model MODEL.onnx --data DATA [options]\n\n"
             "Trains MODEL on DATA, read in place: a dataset directory (see 'onnxpipe data'), a directory\n"
             "of NAME.npy files (one per model input) or one .npy file, a token stream (.bin: raw uint16\n"
             "tokens as nanoGPT writes them, or llm.c's), or a Megatron-LM indexed dataset (PREFIX of\n"
             "PREFIX.bin and PREFIX.idx). A stream's samples are windows of --seq tokens (input_ids),\n"
             "and their labels the next tokens (named as --labels, default labels).\n",
    .table = pp_train_option_table,
    .groups = groups,
    .hint = "run 'onnxpipe train --help'",
};

/* "onnxpipe train ..." as typed, for the TensorBoard summary (caller frees). */
static char *join_args(int argc, char **argv)
{
    size_t n = sizeof "onnxpipe";
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 3;
    char *s = malloc(n), *o = s;
    if (!s) return NULL;
    o += sprintf(o, "onnxpipe");
    for (int i = 0; i < argc; i++) o += sprintf(o, strchr(argv[i], ' ') ? " '%s'" : " %s", argv[i]);
    return s;
}

/* What no one option's row can say: the options that need another. -1: all is well; else
 * the exit code (reported). */
static int check(pp_train_config *c, int argc, char **argv)
{
    pp_trainer_config *job = &c->trainer;
    if (!job->model) return cli_usage_error("run 'onnxpipe train --help'", "--model is required");
    if (!c->data) return cli_usage_error("make one with 'onnxpipe data text FILE -o DIR'", "--data is required");
    if (c->dataset.eos >= 0 && !c->dataset.docs) return cli_usage_error("add --pack or --pad", "--eos ends the documents of --pack and --pad");
    if (job->nbuckets && !c->dataset.docs)
        return cli_usage_error("add --pad (or --pack)", "--seq-buckets sorts documents by length: it needs --pad or --pack");
    if (job->nbuckets && !c->dataset.seq) c->dataset.seq = job->buckets[job->nbuckets - 1];
    if ((job->save_every || job->keep || job->save_sync || c->save_signals) && !job->save_dir)
        return cli_usage_error("add --save DIR", "--save-every, --keep, --save-sync and --save-on-signal need --save");
    int signals_given = 0;
    for (int i = 1; i < argc; i++) signals_given |= !strcmp(argv[i], "--save-on-signal");
    if (job->save_dir && !signals_given) c->save_signals = 1ull << SIGTERM;
    if ((c->profile_first > 0) != (c->profile_out != NULL))
        return cli_usage_error("example: --profile-steps 5:7 --profile prof.json",
                               "--profile-steps and --profile go together");
    return -1;
}

int cmd_train(int argc, char **argv)
{
    pp_train_config c = pp_train_config_default();
    int rc = cli_options_parse(&options, &c, argc, argv, NULL, 0, NULL);
    if (rc < 0) rc = check(&c, argc, argv);
    if (rc >= 0) {
        cli_options_free(&options, &c);
        return rc;
    }
    char *cmdline = join_args(argc, argv);
    c.command_line = cmdline;
    pp_error err = {0};
    pp_train_result res;
    pp_status st = pp_train_run(&c, &res, &err);
    cli_options_free(&options, &c);
    free(cmdline);
    if (st != PP_OK) return cli_fail_job(&err);
    if (cli_job_rank0() && res.preempted)
        printf("preempted after step %lld: exit status %d; go on with --resume auto\n", (long long)res.steps_done,
               CLI_EXIT_PREEMPTED);
    else if (cli_job_rank0() && res.steps_done) {
        long long n = res.steps_done - res.first_step + 1;
        printf("trained %lld step%s in %.1f s: loss %.4f -> %.4f, %.0f %s", n, n == 1 ? "" : "s", res.seconds,
               res.first_loss, res.last_loss, res.tokens_per_s, res.counts_tokens ? "tokens/s" : "samples/s");
        if (res.evals)
            printf(", eval loss %.4f (%d evaluations, %.1f s)", res.eval_loss, res.evals, res.eval_seconds);
        printf("\n");
    }
    cli_job_end();
    return res.preempted ? CLI_EXIT_PREEMPTED : 0;
}

/* Private to cli/: the subcommand table and helpers shared by the subcommands. */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <onnxpipe/core.h>
#include <onnxpipe/stage.h>

/* A subcommand: argv[0] is the subcommand name. Returns the process exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_partition(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
int cmd_example(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_place(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);

/* Prints "onnxpipe: error: <msg>" (and "hint: <hint>" when given) to stderr; returns 2. */
int cli_usage_error(const char *hint, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "onnxpipe: error: <err->msg>" to stderr; returns 1. */
int cli_fail(const pp_error *err);

/* For commands that run as MPI jobs (cli/job.c): print the error with the rank and
 * end the whole job when it has several ranks (returns 1 otherwise); whether this is
 * rank 0 (or no job); MPI_Finalize at the end of a job. */
int cli_fail_job(const pp_error *err);
int cli_job_rank0(void);
void cli_job_end(void);

/* Strict number parsing for option values: the whole string must be a number in
 * [lo, hi]; otherwise prints an error naming the option and returns 0. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_double(const char *opt, const char *s, double lo, double hi, double *out);
/* --recompute none|selective|full (train and the previews); 0 and an error listing them otherwise. */
int cli_parse_recompute(const char *s, pp_recompute *out);

#endif

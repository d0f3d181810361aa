/* Private to cli/: the subcommand table and helpers shared by the subcommands. */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/options.h>
#include <onnxpipe/train_job.h>
#include <onnxpipe/driver_lib.h>

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
int cmd_plan(int argc, char **argv);
int cmd_ops(int argc, char **argv);

/* Prints "onnxpipe: error: <msg>" (and "hint: <hint>" when given) to stderr; returns 2. */
/* `onnxpipe train`'s exit status after a --save-on-signal preemption: saved, to be resumed
 * (EX_TEMPFAIL: a batch system may requeue on it). */
#define CLI_EXIT_PREEMPTED 75

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
/* "A,B,C": at most max integers in [lo, hi] into out, their count in *n (>= 1). */
int cli_parse_int_list(const char *opt, const char *s, long long lo, long long hi, int max, int64_t *out, int *n);

/* cli/options.c: a command's options, parsed and shown by its table (options.h). usage
 * opens --help, groups are its headings in order (each row names its own), epilog ends it;
 * hint is the usage errors' hint ("run 'onnxpipe train --help'"). */
typedef struct cli_options {
    const char *usage;
    const pp_option *table;
    const char *const *groups;      /* NULL-terminated */
    const char *epilog;
    const char *hint;
} cli_options;
/* Parses argv[1..] into the config at base (defaults already in it): -1 to go on, else the
 * command's exit code: 0 after --help (printed), 2 after a bad argument (reported). Every
 * command's parse follows the same convention. Arguments not starting with '-' go to pos
 * (at most max_pos; pos NULL: none taken). */
int cli_options_parse(const cli_options *o, void *base, int argc, char **argv, const char **pos, int max_pos,
                      int *npos);
/* --help: usage, the rows by heading with the defaults base holds, epilog. */
void cli_options_help(const cli_options *o, void *base, FILE *out);
/* Stores value for the option name as if given on the command line: 1; 0: reported. */
int cli_options_set(const cli_options *o, void *base, const char *name, const char *value);
/* Frees the lists (--dim, --cut, ...) the parser allocated in base. */
void cli_options_free(const cli_options *o, void *base);

/* The memory estimate of the job `onnxpipe train` would run with c's stage options,
 * schedule sch and partition part: a table on out, or (json not NULL) one JSON object;
 * where the stages cannot be planned (no loss named...) it says why there instead. */
pp_status cli_memory_estimate(const pp_schedule *sch, const pp_partition *part, const pp_trainer_config *c,
                              pp_json *json, FILE *out, pp_error *err);
/* Prints the JSON object obj with "key": member added at its end; 0 if obj is not an object. */
int cli_print_json_with(FILE *out, const char *obj, const char *key, const char *member);

#endif

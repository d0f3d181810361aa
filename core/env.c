/* Every environment variable the library reads, in one table, and the only getenv of the
 * library (HOME: the CLI's calibration cache and the datasets' index cache; tests and
 * benchmarks read their own). docs/environment.md is generated from this table by
 * scripts/gen-env-doc.py (tests/test_env_doc.sh checks it, and that no other library file
 * calls getenv). */
#include <onnxpipe/env.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct env_var {
    const char *name;
    const char *deflt;          /* what unset means, as docs/environment.md says it */
    const char *what;           /* what it does, and who reads it (Markdown: docs/environment.md) */
} env_var;

static const env_var vars[] = {
    {"PP_LOG", "warn", "`error`, `warn`, `info` (per-rank step timing) or `debug` (also a line per failing check): "
                       "the log level, read by `pp_log_init` (the CLI calls it); other values are ignored"},
    {"PP_COMM_TIMEOUT", "120", "seconds a wait on a peer may go without progress before the job ends naming the "
                               "rank it waits for; a number > 0, anything else is an error (comm/mpi.c)"},
    {"PP_BIND", "auto", "`auto`: `train` binds each rank to its planned cores unless mpirun already bound it; "
                        "`none`: never; `force`: always; anything else is an error (comm/placement_job.c)"},
    {"PP_PREFETCH", "1", "`0` reads the training data at each feed instead of a step ahead on a thread "
                         "(train/prefetch.c)"},
    {"PP_CUDA_GRAPHS", "1", "`0`: a GPU step's kernels are launched one by one instead of replaying the step as "
                            "one CUDA Graph where the layout allows it (driver/driver_graph.c; docs/gpu.md)"},
    {"PP_DEBUG_SLOW_RANK", "", "`RANK:SECONDS`: that rank sleeps so long every step (for tests of the straggler "
                               "warning and hang reports; train/straggler.c)"},
    {"OMPI_COMM_WORLD_SIZE", "", "set by mpirun: the progress line is printed line by line, not redrawn "
                                 "(train/train.c)"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "", "set by mpirun: a rank whose index on its host differs from the "
                                       "placement's says so in its binding note (comm/placement_job.c)"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "", "set by mpirun: a host whose rank count differs from the placement's says "
                                       "so in its ranks' binding notes (comm/placement_job.c)"},
    {"OMPI_MCA_hwloc_base_binding_policy", "", "`none` (`mpirun --bind-to none`) turns binding off as "
                                               "`PP_BIND=none` does (comm/placement_job.c)"},
    {"SLURM_JOB_ID", "", "the batch system's job id, written into a save directory's lock (ckpt/lock.c)"},
    {"PBS_JOBID", "", "as `SLURM_JOB_ID`, when that is unset"},
    {"LSB_JOBID", "", "as `SLURM_JOB_ID`, when those above are unset"},
    {"JOB_ID", "", "as `SLURM_JOB_ID`, when those above are unset"},
    {"FLUX_JOB_ID", "", "as `SLURM_JOB_ID`, when those above are unset"},
    {"HOME", "", "`onnxpipe plan` caches each model's calibration in `$HOME/.cache/onnxpipe/calibration` "
                 "(cli/cmd_plan.c; unset: none is cached); `--pack`/`--pad` cache their index in "
                 "`$HOME/.cache/onnxpipe/data` where the data's folder is read-only (train/dataset_cache.c)"},
};

/* The table's row of name, or NULL (tests/test_env_doc.sh checks that every name the
 * library reads has one). */
static const env_var *find(const char *name)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (!strcmp(vars[i].name, name)) return &vars[i];
    return NULL;
}

const char *pp_env_get(const char *name) { return getenv(name); }

int pp_env_is(const char *name, const char *value)
{
    const char *v = pp_env_get(name);
    return v && !strcmp(v, value);
}

pp_status pp_env_seconds(const char *name, double *seconds, pp_error *err)
{
    const env_var *e = find(name);
    if (!e) return pp_error_set(err, PP_ERR_INTERNAL, "environment variable %s is not in core/env.c's table", name);
    const char *s = getenv(name);
    if (!s || !*s) s = e->deflt;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0) || !isfinite(v))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s='%s' is not a number of seconds > 0 (e.g. %s=%s)", name, s,
                            name, e->deflt);
    *seconds = v;
    return PP_OK;
}

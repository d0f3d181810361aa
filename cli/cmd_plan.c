/* `onnxpipe plan --model M --devices N --batch B ...`: the fastest layouts to train M on N
 * devices (planner/: pp_plan_search), each with its predicted step, tokens/s, bubble, memory
 * per rank and the mpirun command line that runs it; `--calibrate` measures the cost model
 * on this machine first (pp_calibrate), which is also what runs when no costs are given
 * and no calibration of the model is cached. */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/env.h>
#include <onnxpipe/plan.h>
#include <onnxpipe/placement.h>
#include <onnxpipe/graph_ir.h>

#include <errno.h>
#include <hwloc.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LIST 64

typedef struct int_list {
    int v[MAX_LIST], n;
} int_list;

typedef struct count_list {
    int64_t v[MAX_LIST];
    int n;
} count_list;

typedef struct precision_list {
    pp_dtype v[3];
    int n;
} precision_list;

typedef struct args {
    const char *model, *costs, *data, *xml, *synthetic, *link;
    int64_t devices, batch, top, max_pp, seq, max_mb, per_host;
    double memory, gflops, gflops_lowp, latency, max_seconds;
    int calibrate, json;
    int_list pp, dp, chunks;
    count_list mbs;
    unsigned kinds, recompute;
    precision_list precs;
    pp_trainer_config train;    /* the stage options, passed on to the command lines; --dim */
} args;

/* "80GiB", "512MiB", "1.5T", "2e9": bytes. */
static int parse_size(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},       {"B", 1},           {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0},          {"KB", 1e3},        {"MB", 1e6},        {"GB", 1e9},
                 {"TB", 1e12},  {"K", 1024.0},      {"M", 1048576.0},   {"G", 1073741824.0},
                 {"T", 1099511627776.0}};
    if (end != s && !errno && isfinite(v) && v > 0)
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(end, units[i].unit) && v * units[i].mult >= 1 && v * units[i].mult < 1e18) {
                *out = v * units[i].mult;
                return 1;
            }
    cli_usage_error("e.g. 80GiB, 512MiB or 2e9 (bytes)", "%s expects a size > 0, got '%s'", opt, s);
    return 0;
}

/* "a,b,c" into l: ints in [lo, hi]. */
static int parse_int_list(const char *opt, const char *s, long long lo, long long hi, int_list *l)
{
    int64_t w[MAX_LIST];
    if (!cli_parse_int_list(opt, s, lo, hi, MAX_LIST, w, &l->n)) return 0;
    for (int i = 0; i < l->n; i++) l->v[i] = (int)w[i];
    return 1;
}

/* A comma-separated list of names into bits (name i -> bit i), checked against names. */
static int parse_names(const char *opt, const char *s, const char *const *names, int nnames, const int *bit,
                       unsigned *out)
{
    char buf[256];
    if (strlen(s) >= sizeof buf) return !cli_usage_error(NULL, "%s: list too long", opt);
    strcpy(buf, s);
    *out = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < nnames && strcmp(tok, names[k])) k++;
        if (k == nnames) {
            char list[128] = "";
            for (int i = 0; i < nnames; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                                                      i ? ", " : "", names[i]);
            return !cli_usage_error(NULL, "%s: unknown '%s' (one of %s)", opt, tok, list);
        }
        *out |= 1u << bit[k];
    }
    if (!*out) return !cli_usage_error(NULL, "%s: empty list", opt);
    return 1;
}

/* The option rows' parsers over the helpers above (they report their own errors). */
static int opt_size(const char *v, void *f, pp_error *e) { (void)e; return parse_size("--device-memory", v, f); }
static int opt_pp(const char *v, void *f, pp_error *e)
{
    (void)e;
    return parse_int_list("--pp", v, 1, 4096, f);
}
static int opt_dp(const char *v, void *f, pp_error *e)
{
    (void)e;
    return parse_int_list("--dp", v, 1, 1 << 20, f);
}
static int opt_chunks(const char *v, void *f, pp_error *e)
{
    (void)e;
    return parse_int_list("--chunks", v, 2, 64, f);
}
static int opt_mbs(const char *v, void *f, pp_error *e)
{
    (void)e;
    count_list *l = f;
    return cli_parse_int_list("--microbatches", v, 1, 1LL << 30, MAX_LIST, l->v, &l->n);
}
static int opt_schedules(const char *v, void *f, pp_error *e)
{
    (void)e;
    static const char *const n[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"};
    static const int b[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED, PP_SCHED_ZB_H1, PP_SCHED_ZB_V};
    return parse_names("--schedule", v, n, 5, b, f);
}
static int opt_recomputes(const char *v, void *f, pp_error *e)
{
    (void)e;
    static const char *const n[] = {"none", "selective", "full"};
    static const int b[] = {PP_RECOMPUTE_NONE, PP_RECOMPUTE_SELECTIVE, PP_RECOMPUTE_FULL};
    return parse_names("--recompute", v, n, 3, b, f);
}
static int opt_precisions(const char *v, void *f, pp_error *e)
{
    (void)e;
    static const char *const n[] = {"fp32", "bf16", "fp16"};
    static const int b[] = {0, 1, 2};
    static const pp_dtype d[] = {PP_DTYPE_F32, PP_DTYPE_BF16, PP_DTYPE_F16};
    precision_list *l = f;
    unsigned bits = 0;
    if (!parse_names("--precision", v, n, 3, b, &bits)) return 0;
    l->n = 0;
    for (int q = 0; q < 3; q++)
        if (bits & (1u << q)) l->v[l->n++] = d[q];
    return 1;
}

#define JOB "the job:"
#define COSTS "costs (default: the calibration of this model cached for this machine, made now if none):"
#define LINKS "links:"
#define SEARCH "what to search (default: all):"
#define A(f) PP_OPT_FIELD(args, f)

/* Its own rows first: --recompute, --precision (lists of the search), --gflops and
 * --link-gbps (the cost model's, not one split's) take the place of the stage's and the
 * split's rows of the same names. */
static const pp_option table[] = {
    {.type = PP_OPT_STR, .name = "--model", .metavar = "M.onnx", A(model), .group = JOB, .help = "the model"},
    {.type = PP_OPT_INT, .name = "--devices", .metavar = "N", A(devices), .lo = 1, .hi = 1 << 20, .group = JOB,
     .help = "devices (GPUs, or cores for --device cpu): layouts use pp x dp <= N"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", A(batch), .lo = 1, .hi = 1LL << 40, .group = JOB,
     .help = "global batch: samples per optimizer step"},
    {.type = PP_OPT_CUSTOM, .name = "--device-memory", .metavar = "SIZE", A(memory), .parse = opt_size,
     .shown = "80GiB", .group = JOB, .help = "memory per device, e.g. 80GiB, 512MiB, 2e9"},
    {.type = PP_OPT_INT, .name = "--seq", .metavar = "T", A(seq), .lo = 1, .hi = 1LL << 30, .group = JOB,
     .help = "the sequence length: binds dim 1 of the model's [batch, T] token input"},
    {.type = PP_OPT_DIMS, .name = "--dim", .metavar = "NAME=V", A(train.dims), PP_OPT_COUNT(args, train.ndims),
     .hi = 16, .group = JOB, .help = "bind a symbolic dim of the model's inputs (repeatable)"},
    {.type = PP_OPT_STR, .name = "--data", .metavar = "DIR", A(data), .shown = "DATA", .group = JOB,
     .help = "the dataset to put in the command lines"},
    {.type = PP_OPT_STR, .name = "--costs", .metavar = "FILE", A(costs), .group = COSTS,
     .help = "a calibration file (with --calibrate: where to write it)"},
    {.type = PP_OPT_FLAG, .name = "--calibrate", A(calibrate), .group = COSTS,
     .help = "time the model's ops now, on this machine's device (one core on the\n"
             "cpu: run it with OPENBLAS_NUM_THREADS=1, as the ranks run)"},
    {.type = PP_OPT_INT, .name = "--max-microbatch", .metavar = "N", A(max_mb), .lo = 1, .hi = 1LL << 20,
     .shown = "the batch, at most 32", .group = COSTS, .help = "calibrate microbatches 1, 2, 4, ... up to N"},
    {.type = PP_OPT_REAL, .name = "--gflops", .metavar = "X", A(gflops), .lo = 1e-6, .hi = 1e12, .group = COSTS,
     .help = "flat costs instead: X GFLOP/s per device for fp32 (backward 2x forward)"},
    {.type = PP_OPT_REAL, .name = "--gflops-lowp", .metavar = "Y", A(gflops_lowp), .lo = 1e-6, .hi = 1e12,
     .shown = "X", .group = COSTS, .help = "... and Y for bf16 / fp16"},
    {.type = PP_OPT_STR, .name = "--link-gbps", .metavar = "Y", A(link), .group = LINKS,
     .help = "GB/s between any two devices; or host=Y,network=Z (default: host at\n"
             "the calibration's memcpy rate or 25 with GPUs, network 12.5)"},
    {.type = PP_OPT_STR, .name = "--topology", .metavar = "FILE.xml", A(xml), .group = LINKS,
     .help = "hosts look like this hwloc topology: its GPUs (or cores) are the\n"
             "devices per host, ranks fill hosts in order (as onnxpipe place)"},
    {.type = PP_OPT_STR, .name = "--synthetic", .metavar = "DESC", A(synthetic), .group = LINKS,
     .help = "... an hwloc synthetic one, e.g. \"package:2 core:8 pu:1\""},
    {.type = PP_OPT_INT, .name = "--devices-per-host", .metavar = "H", A(per_host), .lo = 1, .hi = 1 << 20,
     .shown = "one host", .group = LINKS, .help = "hosts of H devices without a topology"},
    {.type = PP_OPT_REAL, .name = "--latency", .metavar = "S", A(latency), .lo = 0, .hi = 10, .shown = "5e-6",
     .group = LINKS, .help = "seconds per message"},
    {.type = PP_OPT_CUSTOM, .name = "--pp", .metavar = "LIST", A(pp), .parse = opt_pp, .group = SEARCH,
     .help = "allowed pipeline stages, e.g. --pp 1,2,4"},
    {.type = PP_OPT_CUSTOM, .name = "--dp", .metavar = "LIST", A(dp), .parse = opt_dp, .group = SEARCH,
     .help = "allowed data-parallel replicas"},
    {.type = PP_OPT_INT, .name = "--max-pp", .metavar = "P", A(max_pp), .lo = 1, .hi = 4096, .shown = "N",
     .group = SEARCH, .help = "largest pp"},
    {.type = PP_OPT_CUSTOM, .name = "--microbatches", .metavar = "LIST", A(mbs), .parse = opt_mbs, .group = SEARCH,
     .help = "allowed microbatch counts per replica"},
    {.type = PP_OPT_CUSTOM, .name = "--schedule", .metavar = "LIST", A(kinds), .parse = opt_schedules,
     .group = SEARCH, .help = "of gpipe, 1f1b, interleaved, zb-h1, zb-v"},
    {.type = PP_OPT_CUSTOM, .name = "--chunks", .metavar = "LIST", A(chunks), .parse = opt_chunks,
     .shown = "2", .group = SEARCH, .help = "interleaved's chunks per rank"},
    {.type = PP_OPT_CUSTOM, .name = "--recompute", .metavar = "LIST", A(recompute), .parse = opt_recomputes,
     .group = SEARCH, .help = "of none, selective, full"},
    {.type = PP_OPT_CUSTOM, .name = "--precision", .metavar = "LIST", A(precs), .parse = opt_precisions,
     .group = SEARCH, .help = "of fp32, bf16, fp16"},
    {.type = PP_OPT_INT, .name = "--top", .metavar = "K", A(top), .lo = 1, .hi = 100000, .shown = "5",
     .group = SEARCH, .help = "layouts to print"},
    {.type = PP_OPT_REAL, .name = "--max-seconds", .metavar = "S", A(max_seconds), .lo = 1e-3, .hi = 1e6,
     .shown = "60", .group = SEARCH, .help = "search budget"},
    {.type = PP_OPT_FLAG, .name = "--json", A(json), .group = SEARCH, .help = "print JSON"},
    {.type = PP_OPT_TABLE, .sub = pp_stage_option_table, A(train)},
    {.type = PP_OPT_TABLE, .sub = pp_partition_option_table, A(train.partition)},
    {0},
};

static const char *const groups[] = {JOB, COSTS, LINKS, SEARCH, PP_OPT_GROUPS_PREVIEW, NULL};

static const cli_options options = {
    .usage = "usage: onnxpipe plan --model M.onnx --devices N --batch B [options]\n"
             "       onnxpipe plan --calibrate --model M.onnx [--costs FILE] [options]\n\n"
             "Finds the fastest ways to train M on N devices: every pp x dp <= N, every microbatch count\n"
             "that divides the batch, schedules gpipe, 1f1b, interleaved, zb-h1 and zb-v, recompute none,\n"
             "selective and full, precision fp32, bf16 and fp16. Layouts whose memory per device does not\n"
             "fit are dropped; the rest are simulated best-first by a lower bound on their step (per-stage\n"
             "compute, pipeline sends and data-parallel all-reduces), and the winners' memory is checked\n"
             "by the stage planner. Prints the top K with the step time, tokens/s, bubble, memory per\n"
             "rank and the `mpirun ... onnxpipe train` command line. Reads shapes, not weights. The\n"
             "stage's options are `onnxpipe train`'s, passed on to the command lines.\n",
    .table = table,
    .groups = groups,
    .hint = "run 'onnxpipe plan --help' for the options",
};

/* -1: go on; else the exit code. */
static int parse(int argc, char **argv, args *a)
{
    a->train = pp_trainer_config_default();
    a->memory = 80.0 * (1ull << 30);
    int rc = cli_options_parse(&options, a, argc, argv, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!a->model) return cli_usage_error("e.g. onnxpipe plan --model gpt.onnx --devices 8 --batch 64", "--model is required");
    if (!a->calibrate || a->devices || a->batch) {
        if (!a->devices || !a->batch)
            return cli_usage_error("e.g. onnxpipe plan --model gpt.onnx --devices 8 --batch 64",
                                   "--devices and --batch are required (or --calibrate alone)");
    }
    if (a->gflops > 0 && (a->costs || a->calibrate))
        return cli_usage_error("--gflops gives flat costs; --costs and --calibrate measured ones",
                               "--gflops cannot go with --costs or --calibrate");
    if (a->gflops_lowp > 0 && !(a->gflops > 0)) return cli_usage_error(NULL, "--gflops-lowp needs --gflops");
    if (a->xml && a->synthetic) return cli_usage_error(NULL, "give --topology or --synthetic, not both");
    if ((a->xml || a->synthetic) && a->per_host)
        return cli_usage_error("the topology says how many devices a host has",
                               "--devices-per-host cannot go with --topology or --synthetic");
    return -1;
}

/* The --link-gbps value: one number, or host=Y,network=Z. */
static int parse_links(const char *s, pp_plan_links *l)
{
    char *end;
    double v = strtod(s, &end);
    if (end != s && !*end) {
        if (!(v > 0 && v < 1e9)) return !cli_usage_error(NULL, "--link-gbps expects GB/s > 0, got '%s'", s);
        l->host_gbps = l->network_gbps = v;
        return 1;
    }
    char buf[128];
    if (strlen(s) >= sizeof buf) return !cli_usage_error(NULL, "--link-gbps: too long");
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double x;
        if (!eq) return !cli_usage_error("e.g. --link-gbps 50 or --link-gbps host=50,network=12.5",
                                         "--link-gbps: '%s' is not LEVEL=GBPS", tok);
        *eq = 0;
        if (!cli_parse_double("--link-gbps", eq + 1, 1e-6, 1e9, &x)) return 0;
        if (!strcmp(tok, "host")) l->host_gbps = x;
        else if (!strcmp(tok, "network")) l->network_gbps = x;
        else return !cli_usage_error(NULL, "--link-gbps: unknown level '%s' (host or network)", tok);
    }
    return 1;
}

/* --seq T: dim 1 of the [batch, T] integer input; bound by its name when symbolic, checked
 * when fixed. */
static int bind_seq(args *a)
{
    pp_graph_options go = {.batch = 1, .dims = a->train.dims, .ndims = a->train.ndims, .allow_unknown_dims = 1,
                           .params = a->train.params};
    pp_graph *g = NULL;
    pp_error err = {0};
    if (pp_graph_load(a->model, &go, &g, &err) != PP_OK) return !cli_fail(&err);
    int ok = 0, rc = 1;
    for (int i = 0; i < g->ninputs && !ok; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        if (v->shape.rank != 2 || (v->dtype != PP_DTYPE_I64 && v->dtype != PP_DTYPE_I32)) continue;
        ok = 1;
        if (v->shape.dims[1] >= 0 && v->shape.dims[1] != a->seq)
            rc = !cli_usage_error("drop --seq, or export the model with another length",
                                  "--seq %lld: the model's input '%s' has a fixed length %lld", (long long)a->seq, v->name,
                                  (long long)v->shape.dims[1]);
        else if (v->shape.dims[1] < 0 && v->shape.syms[1]) {
            char spec[160];
            snprintf(spec, sizeof spec, "%s=%lld", v->shape.syms[1], (long long)a->seq);
            rc = cli_options_set(&options, a, "--dim", spec);
        } else if (v->shape.dims[1] < 0)
            rc = !cli_usage_error(NULL, "--seq: the model's input '%s' has an unnamed dim 1", v->name);
    }
    if (!ok) rc = !cli_usage_error("use --dim NAME=V", "--seq: '%s' has no [batch, T] integer input", a->model);
    pp_graph_destroy(g);
    return rc;
}

/* Devices per host from an hwloc topology: its NVIDIA GPUs for GPU jobs, else its cores. */
static int topology_hosts(const args *a, pp_device_kind kind, int *per_host, int *gpus)
{
    pp_topology *t = NULL;
    pp_error err = {0};
    if (pp_topology_load(a->xml, a->synthetic, &t, &err) != PP_OK) return !cli_fail(&err);
    int ng = pp_topology_ngpus(t);
    int cores = hwloc_get_nbobjs_by_type((hwloc_topology_t)t, HWLOC_OBJ_CORE);
    *gpus = kind == PP_DEVICE_CUDA && ng > 0;
    *per_host = *gpus ? ng : cores > 0 ? cores : 1;
    pp_topology_destroy(t);
    return 1;
}

/* Where an automatic calibration of this model lives: ~/.cache/onnxpipe/calibration/. */
static int cache_path(uint64_t hash, const char *device, char *out, size_t len)
{
    const char *home = pp_env_get("HOME");
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    if (!home || !*home) return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/.cache", home);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/.cache/onnxpipe", home);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/.cache/onnxpipe/calibration", home);
    mkdir(dir, 0755);
    return snprintf(out, len, "%s/%016" PRIx64 "-%s-%s.json", dir, hash, device, host) < (int)len;
}

static uint64_t model_hash(const args *a, pp_error *err, int *ok)
{
    pp_graph_options go = {.batch = 1, .dims = a->train.dims, .ndims = a->train.ndims, .allow_unknown_dims = 1,
                           .params = a->train.params};
    pp_graph *g = NULL;
    *ok = pp_graph_load(a->model, &go, &g, err) == PP_OK;
    uint64_t h = *ok ? pp_graph_model_hash(g) : 0;
    pp_graph_destroy(g);
    return h;
}

/* The calibration to price layouts with: --costs FILE, a fresh one (--calibrate, or no cached
 * one), or the cached one. *source describes it. */
static int get_calibration(args *a, pp_device_kind kind, pp_calibration **out, char *source, size_t len)
{
    pp_error err = {0};
    char path[4096];
    int ok;
    if (a->costs && !a->calibrate) {
        if (pp_calibration_load(a->costs, out, &err) != PP_OK) return !cli_fail(&err);
        snprintf(source, len, "calibration %s", a->costs);
        return 1;
    }
    uint64_t h = model_hash(a, &err, &ok);
    if (!ok) return !cli_fail(&err);
    int cached = !a->costs && cache_path(h, pp_device_kind_name(kind), path, sizeof path);
    static const pp_dtype all[] = {PP_DTYPE_F32, PP_DTYPE_BF16, PP_DTYPE_F16};
    pp_dtype precs[3];
    int nprecs = 0;
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < (a->precs.n ? a->precs.n : 3); i++)
            if ((a->precs.n ? a->precs.v[i] : all[i]) == all[q]) precs[nprecs++] = all[q];
    if (cached && !a->calibrate && access(path, R_OK) == 0 && pp_calibration_load(path, out, &err) == PP_OK) {
        int same = pp_calibration_model_hash(*out) == h, has = same;
        for (int i = 0; i < nprecs; i++) has &= pp_calibration_has_precision(*out, precs[i]);
        if (has) {
            snprintf(source, len, "calibration %s (cached)", path);
            return 1;
        }
        /* measured again with the precisions it had too, so that the file keeps covering them */
        for (int q = 0; same && q < 3; q++) {
            int in = 0;
            for (int i = 0; i < nprecs; i++) in |= precs[i] == all[q];
            if (!in && pp_calibration_has_precision(*out, all[q])) precs[nprecs++] = all[q];
        }
        pp_calibration_destroy(*out);
        *out = NULL;
    }
    long long max_mb = a->max_mb ? a->max_mb : a->batch ? (a->batch < 32 ? a->batch : 32) : 8;
    pp_calibrate_options co = {.dims = a->train.dims, .ndims = a->train.ndims, .max_microbatch = max_mb, .precisions = precs,
                               .nprecisions = nprecs, .device = kind, .optim = a->train.optim, .loss = a->train.loss,
                               .progress = a->json ? stderr : stdout};
    fprintf(co.progress, "calibrating '%s' on this machine (%s; microbatches up to %lld)...\n", a->model,
            pp_device_kind_name(kind), max_mb);
    if (pp_calibrate(a->model, &co, out, &err) != PP_OK) return !cli_fail(&err);
    const char *dest = a->costs ? a->costs : cached ? path : NULL;
    if (dest && pp_calibration_save(*out, dest, &err) != PP_OK) return !cli_fail(&err);
    snprintf(source, len, "calibration %s (measured now)", dest ? dest : "(not saved)");
    return 1;
}

/* The command line that runs entry e. */
static void command_line(const args *a, const pp_plan_entry *e, pp_device_kind kind, char *out, size_t len)
{
    size_t n = 0;
#define ADD(...) (n += (size_t)snprintf(out + n, n < len ? len - n : 0, __VA_ARGS__))
    ADD("mpirun -np %d", e->pp * e->dp);
    if (kind == PP_DEVICE_CPU) ADD(" -x OPENBLAS_NUM_THREADS=1");
    ADD(" onnxpipe train --model %s --data %s --pp %d --dp %d --schedule %s", a->model, a->data ? a->data : "DATA",
        e->pp, e->dp, pp_schedule_kind_name(e->kind));
    if (e->kind == PP_SCHED_INTERLEAVED && e->chunks != 2) ADD(" --chunks %d", e->chunks);
    ADD(" --batch %lld --microbatches %lld", (long long)(e->microbatch * e->dp * e->microbatches),
        (long long)e->microbatches);
    if (e->precision != PP_DTYPE_F32) ADD(" --precision %s", pp_precision_name(e->precision));
    if (e->recompute != PP_RECOMPUTE_NONE) ADD(" --recompute %s", pp_recompute_name(e->recompute));
    if (a->train.device && strcmp(a->train.device, "auto")) ADD(" --device %s", a->train.device);
    if (a->train.optim.kind != PP_OPTIM_ADAMW) ADD(" --optimizer %s", pp_optim_kind_name(a->train.optim.kind));
    if (a->train.loss.logits || a->train.loss.labels)
        ADD(" --loss cross_entropy --logits %s --labels %s", a->train.loss.logits ? a->train.loss.logits : "?",
            a->train.loss.labels ? a->train.loss.labels : "?");
    for (int i = 0; i < a->train.ndims; i++) ADD(" --dim %s=%lld", a->train.dims[i].name, (long long)a->train.dims[i].value);
#undef ADD
}

static void print_text(const args *a, const pp_plan_result *r, const pp_plan_options *o, const char *source)
{
    char b1[32], b2[32];
    printf("onnxpipe plan: %s on %d devices (%s, %s each), global batch %lld", a->model, o->devices,
           pp_device_kind_name(o->device), pp_format_bytes(o->device_memory, b1, sizeof b1), (long long)o->batch);
    if (r->tokens_per_sample) printf(" (%lld tokens)", (long long)(o->batch * r->tokens_per_sample));
    printf("\ncosts: %s\nlinks: %.3g GB/s inside a host, %.3g GB/s between hosts, %.3g us per message; %s", source,
           r->links.host_gbps, r->links.network_gbps, 1e6 * r->links.latency_s,
           r->links.devices_per_host ? "hosts of " : "one host\n");
    if (r->links.devices_per_host) printf("%d devices\n", r->links.devices_per_host);
    printf("searched %lld layouts in %.2f s: %lld skipped (less recompute fits), %lld over memory by the model, %lld "
           "simulated, %lld checked by the stage planner (%lld too large); %s\n", (long long)(r->layouts + r->dominated),
           r->seconds, (long long)r->dominated, (long long)r->memory_pruned,
           (long long)r->simulated, (long long)r->exact_checked, (long long)r->exact_rejected,
           !r->complete ? "stopped at the time budget: the best of those simulated"
           : r->bound_misses ? "no layout left unsimulated could be faster by its bound on the scanned split (which "
                               "training's split beat on some: a heuristic here)"
                             : "no layout left unsimulated could be faster (bound)");
    if (r->note[0]) printf("note: %s\n", r->note);
    printf("\n %2s %4s %4s %-13s %5s %6s %-9s %-4s %10s %11s %7s %10s\n", "#", "pp", "dp", "schedule", "mb", "x m",
           "recompute", "prec", "step ms", r->tokens_per_sample ? "tokens/s" : "samples/s", "bubble", "peak/rank");
    for (int i = 0; i < r->n; i++) {
        const pp_plan_entry *e = &r->entries[i];
        char kind[32];
        if (e->kind == PP_SCHED_INTERLEAVED) snprintf(kind, sizeof kind, "interleaved/%d", e->chunks);
        else snprintf(kind, sizeof kind, "%s", pp_schedule_kind_name(e->kind));
        printf(" %2d %4d %4d %-13s %5lld %6lld %-9s %-4s %10.2f %11.0f %6.1f%% %10s%s\n", i + 1, e->pp, e->dp, kind,
               (long long)e->microbatch, (long long)e->microbatches, pp_recompute_name(e->recompute),
               pp_precision_name(e->precision), 1e3 * e->step_s, r->tokens_per_sample ? e->tokens_per_s : e->samples_per_s,
               100 * e->bubble, pp_format_bytes((double)e->peak_bytes, b2, sizeof b2), e->exact ? "" : " (model)");
    }
    printf("\n");
    for (int i = 0; i < r->n; i++) {
        const pp_plan_entry *e = &r->entries[i];
        char cmd[2048];
        command_line(a, e, o->device, cmd, sizeof cmd);
        printf("%d. compute %.2f ms, all-reduce %.2f ms, message %.3f ms, optimizer %.2f ms (busiest rank); memory per "
               "rank%s:", i + 1, 1e3 * e->compute_s, 1e3 * e->allreduce_s, 1e3 * e->send_s, 1e3 * e->optimizer_s,
               e->exact ? " (stage planner)" : " (model)");
        for (int k = 0; k < e->pp; k++) printf(" %s", pp_format_bytes((double)e->rank_bytes[k], b1, sizeof b1));
        printf("\n   %s\n", cmd);
        if (!e->exact && e->exact_error[0]) printf("   (no exact memory estimate: %s)\n", e->exact_error);
    }
}

static void print_json(const args *a, const pp_plan_result *r, const pp_plan_options *o, const char *source)
{
    pp_json j;
    pp_json_init(&j, stdout, 1);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "model", a->model);
    pp_json_int(&j, "devices", o->devices);
    pp_json_int(&j, "batch", o->batch);
    pp_json_double(&j, "device_memory", o->device_memory);
    pp_json_string(&j, "device", pp_device_kind_name(o->device));
    pp_json_string(&j, "costs", source);
    pp_json_double(&j, "host_gbps", r->links.host_gbps);
    pp_json_double(&j, "network_gbps", r->links.network_gbps);
    pp_json_double(&j, "latency_s", r->links.latency_s);
    pp_json_int(&j, "devices_per_host", r->links.devices_per_host);
    pp_json_int(&j, "tokens_per_sample", r->tokens_per_sample);
    pp_json_int(&j, "layouts", r->layouts + r->dominated);
    pp_json_int(&j, "dominated", r->dominated);
    pp_json_int(&j, "memory_pruned", r->memory_pruned);
    pp_json_int(&j, "simulated", r->simulated);
    pp_json_int(&j, "bound_misses", r->bound_misses);
    pp_json_int(&j, "exact_checked", r->exact_checked);
    pp_json_int(&j, "exact_rejected", r->exact_rejected);
    pp_json_bool(&j, "complete", r->complete);
    pp_json_double(&j, "seconds", r->seconds);
    pp_json_string(&j, "note", r->note);
    pp_json_begin_array(&j, "plans");
    for (int i = 0; i < r->n; i++) {
        const pp_plan_entry *e = &r->entries[i];
        char cmd[2048];
        command_line(a, e, o->device, cmd, sizeof cmd);
        pp_json_begin_object(&j, NULL);
        pp_json_int(&j, "pp", e->pp);
        pp_json_int(&j, "dp", e->dp);
        pp_json_string(&j, "schedule", pp_schedule_kind_name(e->kind));
        pp_json_int(&j, "chunks", e->chunks);
        pp_json_int(&j, "microbatches", e->microbatches);
        pp_json_int(&j, "microbatch", e->microbatch);
        pp_json_string(&j, "recompute", pp_recompute_name(e->recompute));
        pp_json_string(&j, "precision", pp_precision_name(e->precision));
        pp_json_string(&j, "order", e->order == PP_GRID_REPLICA_MAJOR ? "replica-major" : "stage-major");
        pp_json_double(&j, "step_s", e->step_s);
        pp_json_double(&j, "bound_s", e->bound_s);
        pp_json_double(&j, "samples_per_s", e->samples_per_s);
        if (r->tokens_per_sample) pp_json_double(&j, "tokens_per_s", e->tokens_per_s);
        else pp_json_null(&j, "tokens_per_s");
        pp_json_double(&j, "bubble", e->bubble);
        pp_json_double(&j, "compute_s", e->compute_s);
        pp_json_double(&j, "allreduce_s", e->allreduce_s);
        pp_json_double(&j, "send_s", e->send_s);
        pp_json_double(&j, "optimizer_s", e->optimizer_s);
        pp_json_int(&j, "peak_bytes", e->peak_bytes);
        pp_json_begin_array(&j, "rank_bytes");
        for (int k = 0; k < e->pp; k++) pp_json_int(&j, NULL, e->rank_bytes[k]);
        pp_json_end_array(&j);
        pp_json_bool(&j, "memory_exact", e->exact);
        if (!e->exact) pp_json_string(&j, "memory_note", e->exact_error);
        pp_json_string(&j, "command", cmd);
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
}

static int run(args *a)
{
    pp_error err = {0}, why = {0};
    pp_device_kind kind;
    if (pp_device_choose(a->train.device, 0, &kind, &why, &err) != PP_OK) return cli_fail(&err);
    if (a->seq && !bind_seq(a)) return 2;
    pp_calibration *cal = NULL;
    pp_plan_result *r = NULL;
    char source[4200] = "";
    int rc = 0;
    if (!(a->gflops > 0) && !get_calibration(a, kind, &cal, source, sizeof source)) return 1;
    if (a->calibrate && !a->devices) {   /* calibration only */
        pp_calibration_print(cal, stdout);
        printf("%s\n", source);
        pp_calibration_destroy(cal);
        return 0;
    }
    if (a->calibrate && !a->json) pp_calibration_print(cal, stdout), putchar('\n');
    if (cal) {   /* rates of another model's op types still apply, but say so */
        int ok;
        uint64_t h = model_hash(a, &err, &ok);
        if (ok && h != pp_calibration_model_hash(cal))
            fprintf(stderr, "onnxpipe: warning: the calibration was measured on another model; its op types' rates "
                            "are used for '%s' (--calibrate measures this one)\n", a->model);
    }
    pp_plan_options o = {
        .devices = (int)a->devices, .batch = a->batch, .device_memory = a->memory,
        .device = kind, .cost = {.calibration = cal, .gflops = a->gflops, .gflops_lowp = a->gflops_lowp},
        .links = {.latency_s = a->latency, .devices_per_host = (int)a->per_host},
        .pp_values = a->pp.n ? a->pp.v : NULL, .npp = a->pp.n, .max_pp = (int)a->max_pp,
        .dp_values = a->dp.n ? a->dp.v : NULL, .ndp = a->dp.n,
        .microbatch_counts = a->mbs.n ? a->mbs.v : NULL, .nmicrobatch_counts = a->mbs.n,
        .kinds = a->kinds, .chunks = a->chunks.n ? a->chunks.v : NULL, .nchunks = a->chunks.n, .recompute = a->recompute,
        .precisions = a->precs.n ? a->precs.v : NULL, .nprecisions = a->precs.n, .top = (int)a->top,
        .max_seconds = a->max_seconds,
    };
    int gpus = 0;
    if ((a->xml || a->synthetic) && !topology_hosts(a, kind, &o.links.devices_per_host, &gpus)) {
        pp_calibration_destroy(cal);
        return 1;
    }
    if (!cal && !a->gflops) snprintf(source, sizeof source, "flat");
    if (a->gflops > 0)
        snprintf(source, sizeof source, "flat %g GFLOP/s (fp32), %g GFLOP/s (bf16/fp16)", a->gflops,
                 a->gflops_lowp > 0 ? a->gflops_lowp : a->gflops);
    /* GPUs: PCIe 4 x16 unless told (hwloc cannot see NVLink); cores: the calibration's memcpy */
    if (kind == PP_DEVICE_CUDA || gpus) o.links.host_gbps = 25.0;
    if (a->link && !parse_links(a->link, &o.links)) {
        pp_calibration_destroy(cal);
        return 2;
    }
    pp_trainer_config tc = a->train;
    tc.batch = a->batch;
    o.stage = pp_train_stage_options(&tc);
    pp_graph_options go = {.dims = a->train.dims, .ndims = a->train.ndims, .params = a->train.params};
    if (pp_plan_search(a->model, &go, &o, &r, &err) != PP_OK) {
        rc = cli_fail(&err);
    } else if (a->json) {
        print_json(a, r, &o, source);
    } else {
        print_text(a, r, &o, source);
    }
    pp_plan_result_destroy(r);
    pp_calibration_destroy(cal);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    int rc = parse(argc, argv, &a);
    if (rc < 0) rc = run(&a);
    cli_options_free(&options, &a);
    return rc;
}

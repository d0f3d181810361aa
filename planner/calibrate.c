/* pp_calibrate: times the model's ops on this machine's device. One stage (the whole
 * model, or the first, middle and last stage of a split when the whole would not fit) is
 * built per (microbatch, precision) and run forward + backward with the stage profiler on;
 * per op type the median seconds are kept with the work the planner will count for the
 * same nodes (registry FLOPs, output bytes), so a prediction for this model at a timed
 * point gives back the measured stage time. */
#include "planner_internal.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/device.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/stage_lib.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_MB 8
#define DEFAULT_REPS 3
#define DEFAULT_MAX_SECONDS 2.0
#define DEFAULT_STAGE_BYTES (2ll << 30)
#define MAX_TIMED 3

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One thread's memcpy rate over 64 MiB, best of three (GB/s): the planner's default speed
 * between two devices of a host when they are this machine's cores. */
static double memcpy_gbps(void)
{
    size_t n = 64u << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        for (int k = 0; k < 3; k++) {
            double t0 = pp_now();
            memcpy(b, a, n);
            double t = pp_now() - t0;
            if (t > 0 && n / t / 1e9 > best) best = (double)n / t / 1e9;
            a[k] = b[n - 1 - k];   /* keep both buffers live */
        }
    }
    free(a);
    free(b);
    return best > 0 ? best : 10.0;
}

/* The timed stages and what they hold, for one (microbatch, precision). */
typedef struct timed {
    pp_stage *stage[MAX_TIMED];
    int index[MAX_TIMED], n;
} timed;

static void timed_free(timed *t)
{
    for (int i = 0; i < t->n; i++) pp_stage_destroy(t->stage[i]);
    memset(t, 0, sizeof *t);
}

/* Zeroes every input and output-gradient buffer of slot 0: the data does not change a
 * kernel's time (labels and ids 0 are valid). */
static pp_status zero_ports(pp_stage *s, int last, pp_error *err)
{
    pp_device *d = pp_stage_device(s);
    for (int i = 0; i < pp_stage_num_inputs(s); i++)
        PP_CHECK(pp_device_memset(d, pp_stage_input_buffer(s, 0, i), 0, pp_stage_input(s, i)->nbytes, err));
    if (!last)
        for (int i = 0; i < pp_stage_num_outputs(s); i++)
            PP_CHECK(pp_device_memset(d, pp_stage_grad_output_buffer(s, 0, i), 0, pp_stage_output(s, i)->nbytes, err));
    return PP_OK;
}

/* The op types of the timed stages' nodes with their work (FLOPs and output bytes per
 * forward), into point->ops. */
static pp_status node_work(const pp_partition *part, const timed *t, calib_point *pt, pp_error *err)
{
    const pp_graph *g = part->graph;
    for (int k = 0; k < t->n; k++) {
        const pp_stage_info *si = &part->stages[t->index[k]];
        for (int i = si->first_node; i <= si->last_node; i++) {
            const char *type = g->nodes[i].op_type;
            int o = 0;
            while (o < pt->nops && strcmp(pt->ops[o].type, type)) o++;
            if (o == pt->nops) {
                calib_op *grown = pp_realloc_array(pt->ops, (size_t)pt->nops + 1, sizeof *grown);
                if (!grown) return PP_NOMEM(err);
                pt->ops = grown;
                memset(&pt->ops[o], 0, sizeof pt->ops[o]);
                if (!(pt->ops[o].type = pp_strdup(type))) return PP_NOMEM(err);
                pt->nops++;
            }
            const pp_node_cost *c = &part->costs[i];
            pt->ops[o].flops += c->flops > 0 ? (double)c->flops : 0;
            pt->ops[o].bytes += c->act_bytes > 0 ? (double)c->act_bytes : 0;
        }
    }
    return PP_OK;
}

/* Runs the timed stages reps times after a warm-up; per op type the median forward and
 * backward seconds go into pt (the profile's types; time under a type the nodes do not
 * have, e.g. a fused Gelu, is spread over the others in proportion, so the totals stay
 * the measured ones). *run_s: the median seconds of one forward + backward of all timed
 * stages; *opt_s: of their optimizer steps and gradient zeroing. */
static pp_status time_point(timed *t, int nstages, int reps, calib_point *pt, double *run_s, double *opt_s,
                            pp_error *err)
{
    int nt = pt->nops;
    double *fw = pp_calloc((size_t)(nt + 1) * (size_t)reps, sizeof *fw);
    double *bw = pp_calloc((size_t)(nt + 1) * (size_t)reps, sizeof *bw);
    double *runs = pp_calloc((size_t)reps + 1, sizeof *runs), *opts = pp_calloc((size_t)reps + 1, sizeof *opts);
    pp_status st = fw && bw && runs && opts ? PP_OK : PP_NOMEM(err);
    for (int k = 0; st == PP_OK && k < t->n; k++) {
        st = pp_stage_profile_enable(t->stage[k], 1, err);
        if (st == PP_OK) st = zero_ports(t->stage[k], t->index[k] == nstages - 1, err);
    }
    for (int rep = -1; st == PP_OK && rep < reps; rep++) {   /* rep -1: the warm-up */
        double run = 0, opt = 0;
        for (int k = 0; st == PP_OK && k < t->n; k++) {
            pp_stage *s = t->stage[k];
            pp_stage_profile_reset(s);
            double t0 = pp_now();
            st = pp_stage_zero_grads(s, err);
            double t1 = pp_now();
            if (st == PP_OK) st = pp_stage_forward(s, 0, rep + 2, 0, err);
            if (st == PP_OK) st = pp_stage_backward(s, 0, PP_BACKWARD_FULL, err);
            if (st == PP_OK) st = pp_device_synchronize(pp_stage_device(s), err);
            double t2 = pp_now();
            if (st == PP_OK) st = pp_stage_step(s, 1e-9f, 1.0f, rep + 2, err);
            if (st == PP_OK) st = pp_device_synchronize(pp_stage_device(s), err);
            double t3 = pp_now();
            run += t2 - t1;
            opt += (t1 - t0) + (t3 - t2);
            if (st == PP_OK) st = pp_stage_profile_flush(s, err);   /* the calls' device times */
            if (st != PP_OK || rep < 0) continue;
            int n = 0;
            const pp_stage_op_profile *rows = pp_stage_profile_get(s, &n);
            for (int r = 0; r < n; r++) {
                int o = 0;
                while (o < nt && strcmp(pt->ops[o].type, rows[r].op_type)) o++;   /* o == nt: "elsewhere" */
                fw[(size_t)rep * (nt + 1) + o] += rows[r].forward_s;
                bw[(size_t)rep * (nt + 1) + o] += rows[r].backward_s;
                if (o < nt) pt->ops[o].calls += (double)rows[r].forward_calls / reps;
            }
        }
        if (rep >= 0) runs[rep] = run, opts[rep] = opt;
    }
    if (st == PP_OK) {
        double *col = pp_calloc((size_t)reps, sizeof *col);
        if (!col) st = PP_NOMEM(err);
        double mf[2] = {0, 0}, known[2] = {0, 0};
        for (int o = 0; st == PP_OK && o <= nt; o++)
            for (int dir = 0; dir < 2; dir++) {
                double *src = dir ? bw : fw;
                for (int rep = 0; rep < reps; rep++) col[rep] = src[(size_t)rep * (nt + 1) + o];
                double m = median(col, reps);
                if (o == nt) mf[dir] = m;
                else {
                    known[dir] += m;
                    *(dir ? &pt->ops[o].backward_s : &pt->ops[o].forward_s) = m;
                }
            }
        for (int o = 0; st == PP_OK && o < nt; o++) {
            if (known[0] > 0) pt->ops[o].forward_s *= 1 + mf[0] / known[0];
            if (known[1] > 0) pt->ops[o].backward_s *= 1 + mf[1] / known[1];
        }
        free(col);
        *run_s = median(runs, reps);
        *opt_s = median(opts, reps);
    }
    for (int k = 0; k < t->n; k++) pp_stage_profile_enable(t->stage[k], 0, NULL);
    free(fw);
    free(bw);
    free(runs);
    free(opts);
    return st;
}

static int cmp_point(const void *a, const void *b)
{
    const calib_point *x = a, *y = b;
    if (x->precision != y->precision) return x->precision < y->precision ? -1 : 1;
    return (x->microbatch > y->microbatch) - (x->microbatch < y->microbatch);
}

pp_status pp_calibrate(const char *model, const pp_calibrate_options *opt, pp_calibration **out, pp_error *err)
{
    *out = NULL;
    pp_calibrate_options o = *opt;
    if (!o.max_microbatch) o.max_microbatch = DEFAULT_MAX_MB;
    if (!o.reps) o.reps = DEFAULT_REPS;
    if (!(o.max_seconds > 0)) o.max_seconds = DEFAULT_MAX_SECONDS;
    if (!o.max_stage_bytes) o.max_stage_bytes = DEFAULT_STAGE_BYTES;
    static const pp_dtype fp32_only[] = {PP_DTYPE_F32};
    if (!o.precisions || o.nprecisions < 1) o.precisions = fp32_only, o.nprecisions = 1;
    if (o.max_microbatch < 1 || o.reps < 1 || o.reps > 1000)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "calibration: max microbatch %lld (>= 1), reps %d (1..1000)",
                            (long long)o.max_microbatch, o.reps);
    pp_calibration *c = pp_calloc(1, sizeof *c);
    pp_device *dev = NULL;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    timed t = {0};
    double opt_s_sum = 0, params_sum = 0;
    pp_status st = c ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK && !(c->model = pp_strdup(model))) st = PP_NOMEM(err);
    if (st != PP_OK) goto fail;
    gethostname(c->host, sizeof c->host - 1);
    snprintf(c->device, sizeof c->device, "%s", pp_device_kind_name(o.device));
    snprintf(c->optimizer, sizeof c->optimizer, "%s", pp_optim_kind_name(o.optim.kind));
    c->memcpy_gbps = memcpy_gbps();
    PP_CHECK_GOTO(pp_device_create(o.device, 0, &dev, err), st, fail);
    int stopped[8] = {0};   /* per precision: a run took longer than max_seconds */
    for (int64_t mb = 1; mb <= o.max_microbatch; mb *= 2) {
        int any = 0;
        for (int k = 0; k < o.nprecisions && k < 8; k++) any |= !stopped[k];
        if (!any) break;
        pp_graph_options go = {.batch = mb, .dims = o.dims, .ndims = o.ndims};
        pp_graph_destroy(g);
        g = NULL;
        pp_partition_destroy(part);
        part = NULL;
        PP_CHECK_GOTO(pp_graph_load(model, &go, &g, err), st, fail);
        if (mb == 1) c->model_hash = pp_graph_model_hash(g);
        /* a stage holds weights, gradients and two optimizer moments */
        int64_t need = g->param_bytes * 4;
        int nst = (int)((need + o.max_stage_bytes - 1) / o.max_stage_bytes);
        if (nst < 1) nst = 1;
        if (nst > g->nnodes) nst = g->nnodes;
        pp_partition_options po = {.microbatches = 1};
        PP_CHECK_GOTO(pp_partition_create(g, nst, &po, &part, err), st, fail);
        c->stages_of = nst;
        for (int k = 0; k < o.nprecisions && k < 8; k++) {
            if (stopped[k]) continue;
            pp_stage_options so = {.slots = 1, .microbatch = mb, .global_batch = mb, .optim = o.optim, .loss = o.loss,
                                   .training = 1, .precision = o.precisions[k]};
            int want[MAX_TIMED] = {0, nst / 2, nst - 1};
            t.n = 0;
            for (int w = 0; w < MAX_TIMED; w++) {
                int dup = 0;
                for (int u = 0; u < t.n; u++) dup |= t.index[u] == want[w];
                if (dup) continue;
                t.index[t.n] = want[w];
                PP_CHECK_GOTO(pp_stage_create(part, want[w], dev, &so, &t.stage[t.n], err), st, fail);
                t.n++;
            }
            c->stages_timed = t.n;
            calib_point *grown = pp_realloc_array(c->points, (size_t)c->npoints + 1, sizeof *grown);
            if (!grown) {
                st = PP_NOMEM(err);
                goto fail;
            }
            c->points = grown;
            calib_point *pt = &c->points[c->npoints++];
            *pt = (calib_point){.precision = o.precisions[k], .microbatch = mb};
            double run_s = 0, opt_s = 0;
            PP_CHECK_GOTO(node_work(part, &t, pt, err), st, fail);
            PP_CHECK_GOTO(time_point(&t, nst, o.reps, pt, &run_s, &opt_s, err), st, fail);
            double params = 0, flops = 0;
            for (int u = 0; u < t.n; u++) params += (double)part->stages[t.index[u]].params;
            for (int u = 0; u < pt->nops; u++) flops += pt->ops[u].flops;
            opt_s_sum += opt_s;
            params_sum += params;
            if (o.progress)
                fprintf(o.progress, "calibrate: %s microbatch %lld: forward+backward %.4f s (%.2f GFLOP/s forward-"
                        "FLOP rate x 3), optimizer %.4f s\n", pp_precision_name(o.precisions[k]), (long long)mb, run_s,
                        run_s > 0 ? 3 * flops / run_s * 1e-9 : 0, opt_s);
            timed_free(&t);
            if (run_s > o.max_seconds) stopped[k] = 1;
        }
    }
    c->optimizer_s_per_param = params_sum > 0 ? opt_s_sum / params_sum : 0;
    qsort(c->points, (size_t)c->npoints, sizeof *c->points, cmp_point);
    timed_free(&t);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    pp_device_destroy(dev);
    *out = c;
    return PP_OK;
fail:
    pp_error_prefix(err, "calibrating '%s': ", model);
    timed_free(&t);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    pp_device_destroy(dev);
    pp_calibration_destroy(c);
    return st;
}

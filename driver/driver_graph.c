/* A step as one graph (DESIGN.md: "The GPU step is the device's alone"). Where the device
 * captures graphs and nothing in the step needs the host (pp_graph_refusal: one rank, one
 * shape, nothing timed on the host, no fp16 loss scaling, no op keyed by the step), the
 * first step runs eagerly (kernel workspaces, library plans and caches find their sizes,
 * the inputs' staging is made), the second step's walk is captured (the sums and gradients
 * zeroed, every forward and backward, the losses' sums, tied sums, the squares, the
 * optimizer's decision and update: driver_walk and driver_device_tail with d->in_graph)
 * and launched, and every step after launches it again. Before a launch the host does
 * what the step needs of it: feeds every microbatch's data inputs (copied into the
 * staging, which the graph copies into the slot), writes the loss seeds and the step's
 * optimizer scalars into device memory and waits for a checkpoint's copy (before_update);
 * after it, it reads the step's sums once and decides on the loss, the norm and NaN/Inf as
 * an eager step does (the device already skipped a bad update by the same function). A
 * capture that fails (an op that copies from the host, an allocation) leaves the steps
 * eager and says why once. */
#include "driver_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/env.h>
#include <onnxpipe/kernels.h>

typedef struct driver_graph {
    char mode[64 + PP_ERROR_LEN];   /* pp_driver_step_mode */
    int failed;             /* a capture failed: eager from then on */
    int warm;               /* an eligible step ran eagerly and made the staging */
    void *exec;             /* the captured step, or NULL */
    float *host_seeds;      /* [microbatches] */
    int64_t frees;          /* the device's frees when captured: one since (the work memory or the cuda
                             * workspace grown, an eval's buffers) may have released memory the graph
                             * points at, so the graph is captured again */
} driver_graph;

const char *pp_graph_refusal(const pp_graph_facts *f)
{
    if (f->disabled) return "PP_CUDA_GRAPHS=0";
    if (!(f->device_caps & PP_DEVICE_CAP_GRAPHS)) return "the device does not capture graphs";
    if (f->ranks > 1) return "several ranks: messages and the norm's reduction pass through the host";
    if (f->shapes > 1) return "sequence buckets: each step's shape is chosen on the host";
    if (f->recording) return "a trace or profile times each call on the host";
    if (f->loss_scaling) return "fp16 loss scaling decides on the host";
    return f->stage_refusal;
}

const char *pp_driver_step_mode(const pp_driver *d) { return d->graph ? d->graph->mode : "eager: no step yet"; }

static const char *refusal(const pp_driver *d, char *buf, size_t len)
{
    pp_graph_facts f = {.device_caps = pp_device_caps(d->cfg.dev), .ranks = pp_comm_size(d->grid->world),
                        .shapes = d->nshapes, .recording = d->trace != NULL, .loss_scaling = d->loss_scale != 0,
                        .disabled = pp_env_is("PP_CUDA_GRAPHS", "0")};
    for (int i = 0; i < d->nvs; i++) {
        f.recording |= pp_stage_profiling(d->vs[i].s);
        if (!f.stage_refusal && pp_stage_graph_refusal(d->vs[i].s, buf, len)) f.stage_refusal = buf;
    }
    return pp_graph_refusal(&f);
}

static void drop(pp_driver *d)
{
    pp_device_graph_destroy(d->cfg.dev, d->graph->exec);
    d->graph->exec = NULL;
}

/* The device memory a graph step reads that an eager step does not: every microbatch's
 * data inputs of each stage (made at the first eligible step, never in a replayed one). */
static pp_status make_staging(pp_driver *d, pp_error *err)
{
    driver_graph *g = d->graph;
    if (!(g->host_seeds = calloc((size_t)d->microbatches, sizeof *g->host_seeds))) return PP_NOMEM(err);
    for (int i = 0; i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        if (v->data_bytes)
            PP_CHECK(pp_device_alloc_as(d->cfg.dev, PP_MEM_OTHER, v->data_bytes * (size_t)d->microbatches,
                                        &v->staging, err));
    }
    g->warm = 1;
    return PP_OK;
}

/* What the host does for a step before its launch: each microbatch fed into slot 0 and
 * copied into the staging, the seeds written, the optimizer's scalars, the checkpoint. */
static pp_status before_launch(pp_driver *d, int64_t step, float lr, pp_error *err)
{
    driver_graph *g = d->graph;
    for (int i = 0; i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        for (int mb = 0; mb < d->microbatches; mb++) {
            if (d->cfg.feed) PP_CHECK(d->cfg.feed(d->cfg.feed_user, v->s, 0, step, mb, err));
            size_t at = (size_t)mb * v->data_bytes;
            for (int k = 0; k < pp_stage_num_inputs(v->s); k++) {
                const pp_stage_port *p = pp_stage_input(v->s, k);
                if (!p->is_data) continue;
                PP_CHECK(pp_device_copy(d->cfg.dev, (char *)v->staging + at, pp_stage_input_buffer(v->s, 0, k),
                                        p->nbytes, err));
                at += p->nbytes;
            }
            if (pp_stage_loss_data(v->s, 0)) g->host_seeds[mb] = pp_stage_loss_seed(v->s, 0);
        }
    }
    PP_CHECK(pp_device_copy_from_host(d->cfg.dev, d->seeds, g->host_seeds, (size_t)d->microbatches * sizeof *d->seeds,
                                      err));
    /* clipping and skipping are the graph's to decide (driver_device_tail) */
    for (int i = 0; i < d->nvs; i++) PP_CHECK(pp_stage_set_step(d->vs[i].s, lr, 1.0f, step, err));
    if (d->cfg.before_update) PP_CHECK(d->cfg.before_update(d->cfg.before_update_user, err));
    return PP_OK;
}

/* The step's walk and device tail recorded into g->exec; on an error nothing ran and the
 * walk's host state is put back. */
static pp_status capture(pp_driver *d, int64_t step, pp_error *err)
{
    driver_graph *g = d->graph;
    pp_device *dev = d->cfg.dev;
    /* each captured step remakes the 16-bit parameter copy at its first forward */
    for (int i = 0; i < d->nvs; i++) (void)pp_stage_params(d->vs[i].s);
    PP_CHECK(pp_device_capture_begin(dev, err));
    d->in_graph = 1;
    pp_status st = driver_walk(d, step, err);
    if (st == PP_OK) st = driver_drain(d, err);
    if (st == PP_OK) st = driver_device_tail(d, step, err);
    d->in_graph = 0;
    pp_error end = {0};
    void *exec = NULL;
    pp_status st_end = pp_device_capture_end(dev, &exec, &end);
    if (st == PP_OK && st_end != PP_OK) {
        st = st_end;
        *err = end;
    }
    if (st != PP_OK) {
        pp_device_graph_destroy(dev, exec);
        driver_reset_walk(d);
        for (int i = 0; i < d->nvs; i++) (void)pp_stage_params(d->vs[i].s);
        return st;
    }
    pp_device_counters cn;
    pp_device_get_counters(dev, &cn);
    g->exec = exec;
    g->frees = cn.frees;
    return PP_OK;
}

pp_status driver_graph_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, int *ran, pp_error *err)
{
    *ran = 0;
    if (!d->graph && !(d->graph = calloc(1, sizeof *d->graph))) return PP_NOMEM(err);
    driver_graph *g = d->graph;
    if (g->failed) return PP_OK;
    char why[192];
    const char *no = refusal(d, why, sizeof why);
    if (no) {
        drop(d);
        snprintf(g->mode, sizeof g->mode, "eager: %s", no);
        return PP_OK;
    }
    if (!g->warm) {
        snprintf(g->mode, sizeof g->mode, "eager: the first step (the graph is captured at the next)");
        return make_staging(d, err);
    }
    pp_status st = before_launch(d, step, lr, err);
    pp_device_counters cn;
    pp_device_get_counters(d->cfg.dev, &cn);
    if (g->exec && cn.frees != g->frees) drop(d);   /* also a free in the feed or before_update */
    if (st == PP_OK && !g->exec) {
        pp_error why_not = {0};
        if (capture(d, step, &why_not) != PP_OK) {
            g->failed = 1;
            snprintf(g->mode, sizeof g->mode, "eager: the capture failed: %s", why_not.msg);
            pp_log(PP_LOG_WARN, "step %lld: steps run eagerly, the capture of a graph failed: %s", (long long)step,
                   why_not.msg);
            return PP_OK;
        }
        snprintf(g->mode, sizeof g->mode, "graph");
    }
    double t0 = pp_now();
    if (st == PP_OK) st = pp_device_graph_launch(d->cfg.dev, g->exec, err);
    if (st == PP_OK) st = driver_read_sums(d, err);
    stats->compute_s = pp_now() - t0;
    if (st == PP_OK) st = driver_finish_step(d, step, lr, 0, stats, err);
    if (st != PP_OK)
        return pp_error_prefix(err, "rank %d (stage %d, replica %d), step %lld (a graph): ", d->grid->rank,
                               d->grid->stage, d->grid->replica, (long long)step);
    *ran = 1;
    return PP_OK;
}

void driver_graph_free(pp_driver *d)
{
    if (!d->graph) return;
    drop(d);
    for (int i = 0; i < d->nvs; i++) {
        pp_device_free(d->cfg.dev, d->vs[i].staging);
        d->vs[i].staging = NULL;
    }
    free(d->graph->host_seeds);
    free(d->graph);
    d->graph = NULL;
}

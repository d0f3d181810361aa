/* The training job, the same on every rank: load the model, agree with the other
 * ranks on it and on the options, partition, schedule, build this rank's stages under
 * the driver, then run the steps; rank 0 prints the plan and the progress lines. */
#include <onnxpipe/comm.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/placement.h>
#include <onnxpipe/train.h>

#include "train_ckpt.h"
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run {
    const pp_train_config *cfg;
    pp_comm *world;             /* MPI: host-memory collectives */
    pp_comm *link;              /* device buffers: world on the cpu, its NCCL twin on cuda */
    pp_grid *grid;
    pp_graph *g;
    pp_partition *part;
    pp_schedule *sched;
    pp_device *dev;
    pp_driver *drv;
    pp_dataset *data;
    pp_topology *topo;
    pp_placement *place;
    pp_bind_result bind;
    pp_device_kind kind;
    pp_error device_note;       /* why auto chose the cpu */
    int64_t mb;                 /* samples per microbatch */
    int64_t counted_step;       /* the step whose loss labels are weighed below */
    int64_t *labels;            /* that step's global batch of labels */
    double *mb_weight;          /* [batch / mb] each microbatch's labels' weight (stage/loss.c) */
    double counted_global;      /* the global batch's */
    FILE *losses;
    train_ckpt ck;
    /* the run a user watches (issue 12) */
    pp_train_config c_run;      /* cfg with --epochs turned into steps (what cfg points to) */
    int64_t steps;              /* --steps, or --epochs x steps per epoch */
    pp_lr_schedule lr;          /* cfg->lr over `steps` */
    pp_sampler smp;             /* which sample each place of a global batch reads */
    train_io io;                /* tokens per sample, logits, labels (found at start) */
    train_eval *eval;
    train_log *log;
    train_prof *prof;
    double eval_s;              /* seconds in evaluations so far */
    int evals;
    double eval_loss;           /* the last evaluation's */
    int64_t stage_bytes;        /* this rank's stage allocations */
} run;

static pp_status check_config(const pp_train_config *c, pp_error *err)
{
    if (c->microbatches < 1 || c->batch < 1 || c->batch % ((int64_t)c->dp * c->microbatches))
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "--batch %lld must be a positive multiple of dp x microbatches = %lld",
                            (long long)c->batch, (long long)c->dp * c->microbatches);
    if (c->steps < 1 && c->epochs < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--steps %lld must be >= 1", (long long)c->steps);
    if ((c->profile_first > 0) != (c->profile_out != NULL) || c->profile_last < c->profile_first)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--profile-steps A:B (1 <= A <= B) and --profile FILE go "
                            "together");
    return PP_OK;
}

/* Every rank hashes the model's structure and the options; ranks that disagree with
 * rank 0 are named, on every rank, before anything else happens. */
static pp_status agree(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    const pp_graph *g = r->g;
    uint32_t h = 0;
    int64_t nums[] = {g->nnodes, g->nvalues, g->ninits, g->nparams, c->pp, c->dp, c->batch, c->microbatches,
                      c->steps, c->schedule, c->chunks, (int64_t)c->seed, c->lr.warmup, c->lr.kind, c->optim.kind,
                      c->optim.nesterov, c->ndims, c->skip_nonfinite, c->bucket_bytes, c->save_every, c->keep,
                      c->save_sync,
                      /* what makes collectives (eval, gathers of logs and profiles) */
                      c->epochs, c->shuffle, c->eval_data != NULL, c->eval_every, c->eval_batches,
                      c->logdir || c->metrics_out, c->log_every, c->log_histograms, c->profile_first,
                      c->profile_last};
    float fl[] = {c->lr.lr, c->lr.min_lr, c->optim.momentum, c->optim.beta1, c->optim.beta2, c->optim.eps,
                  c->optim.weight_decay, c->clip_norm};
    h = pp_crc32c(h, nums, sizeof nums);
    h = pp_crc32c(h, fl, sizeof fl);
    for (int i = 0; i < c->ndims; i++) {
        h = pp_crc32c(h, c->dims[i].name, strlen(c->dims[i].name));
        h = pp_crc32c(h, &c->dims[i].value, sizeof c->dims[i].value);
    }
    const char *names[] = {c->loss.logits, c->loss.labels, c->device, c->save_dir, c->resume};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i]) h = pp_crc32c(h, names[i], strlen(names[i]) + 1);
    for (int i = 0; i < g->nnodes; i++) {
        h = pp_crc32c(h, g->nodes[i].name, strlen(g->nodes[i].name));
        h = pp_crc32c(h, g->nodes[i].op_type, strlen(g->nodes[i].op_type));
    }
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        h = pp_crc32c(h, g->values[in->value].name, strlen(g->values[in->value].name));
        h = pp_crc32c(h, in->t.shape.dims, (size_t)in->t.shape.rank * sizeof(int64_t));
    }
    uint32_t *all = malloc((size_t)r->world->size * sizeof *all);
    if (!all) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(r->world, &h, all, sizeof h, err);
    if (st == PP_OK)
        for (int k = 1; k < r->world->size; k++)
            if (all[k] != all[0]) {
                st = pp_error_set(err, PP_ERR_INVALID_ARG,
                                  "rank %d was given a different model or different options than rank 0 (this is "
                                  "rank %d, model '%s'); every rank must run the same command", k, r->world->rank,
                                  c->model);
                break;
            }
    free(all);
    return st;
}

/* A mean loss seeds each microbatch with its labels' share of the global batch's weight
 * (stage/loss.c says why). The global batch's labels are weighed once per step, when its
 * first microbatch reaches the last stage; every rank reads the same global batch, so
 * all agree without a message. */
static pp_status weigh_loss(run *r, pp_stage *s, int slot, int64_t step, int64_t offset, pp_error *err)
{
    pp_loss_labels l;
    if (pp_stage_loss_labels(s, &l, NULL) != PP_OK) return PP_OK;
    const pp_dataset_array *a = pp_dataset_find(r->data, l.labels);
    if (!a || a->dtype != PP_DTYPE_I64) return PP_OK;
    int64_t groups = r->cfg->batch / r->mb;
    if (!r->labels && !(r->labels = malloc((size_t)r->cfg->batch * a->sample_bytes))) return PP_NOMEM(err);
    if (!r->mb_weight && !(r->mb_weight = malloc((size_t)groups * sizeof *r->mb_weight))) return PP_NOMEM(err);
    if (r->counted_step != step) {
        pp_sampler_read(&r->smp, r->data, a, step, 0, r->cfg->batch, r->labels);
        r->counted_global = pp_loss_labels_weight(&l, r->labels, groups,
                                                  r->mb * (int64_t)(a->sample_bytes / sizeof(int64_t)), r->mb_weight);
        r->counted_step = step;
    }
    pp_stage_set_loss_weight(s, slot, r->mb_weight[offset / r->mb], r->counted_global);
    return PP_OK;
}

/* Fills a stage's data inputs for a microbatch: replica r reads its share of the
 * global batch, so the global batch is the same for any layout. */
static pp_status feed(void *user, pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err)
{
    run *r = user;
    int64_t offset = r->grid->replica * (r->cfg->batch / r->cfg->dp) + microbatch * r->mb;
    PP_CHECK(train_feed_stage(s, slot, r->data, &r->smp, step, offset, r->mb, err));
    return weigh_loss(r, s, slot, step, offset, err);
}

static void print_plan(const run *r, FILE *out)
{
    const pp_train_config *c = r->cfg;
    fprintf(out, "onnxpipe train: %s, %d ranks = pp %d x dp %d, schedule %s", c->model, r->world->size, c->pp,
            c->dp, pp_schedule_kind_name(r->sched->kind));
    if (r->sched->chunks > 1) fprintf(out, " (%d chunks per rank)", r->sched->chunks);
    fprintf(out, ", global batch %lld = %d replicas x %lld microbatches x %lld samples\n\n", (long long)c->batch,
            c->dp, (long long)c->microbatches, (long long)r->mb);
    fprintf(out, "device: %s", pp_device_kind_name(r->dev->kind));
    if (r->device_note.msg[0]) fprintf(out, " (%s)", r->device_note.msg);
    fprintf(out, "\n\n");
    pp_partition_print(r->part, out);
    fprintf(out, "\n");
    pp_placement_print(r->place, out);
    fprintf(out, "binding (rank 0): %s\n\n", r->bind.note[0] ? r->bind.note : r->bind.cpus);
    pp_stage_cost *costs = calloc((size_t)r->part->nstages, sizeof *costs);
    pp_sim_result *sim = NULL;
    if (costs) {
        pp_train_stage_costs(r->part, 100.0, costs);
        pp_costs pc = {.stage = costs, .num_stages = r->part->nstages};
        if (pp_schedule_simulate(r->sched, &pc, &sim, NULL) == PP_OK)
            fprintf(out, "\nschedule %s: predicted bubble %.1f%% (closed form %.1f%%), predicted step %.3f s at "
                    "100 GFLOP/s per rank\n\n", pp_schedule_kind_name(r->sched->kind), 100 * sim->bubble,
                    100 * pp_schedule_closed_form_bubble(r->sched, &pc), sim->makespan);
    }
    pp_sim_result_destroy(sim);
    free(costs);
    fflush(out);
}

/* Places the ranks: the grid order that keeps the heavier traffic inside a host, each
 * rank's cores (and GPU), and binds this process unless mpirun already did. */
static pp_status place(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    int64_t param_bytes[4096] = {0}, send_bytes[4096] = {0};
    for (int s = 0; s < r->part->nstages; s++) {
        int rank = r->sched->stage_rank[s];
        param_bytes[rank] += r->part->stages[s].param_bytes;
        if (s + 1 < r->part->nstages && r->part->stages[s].send_bytes > 0) send_bytes[rank] += r->part->stages[s].send_bytes;
    }
    pp_placement_input in = {
        .pp = c->pp, .dp = c->dp, .param_bytes = param_bytes, .send_bytes = send_bytes,
        .microbatches = c->microbatches, .order = -1,
        /* GPUs by PCI bus id where hwloc sees them (a container may hide them: then local index) */
        .device = r->kind == PP_DEVICE_CUDA ? PP_PLACE_AUTO : PP_PLACE_CPU,
    };
    PP_CHECK(pp_topology_load(NULL, NULL, &r->topo, err));
    PP_CHECK(pp_placement_plan_job(r->world, &in, r->topo, &r->place, err));
    return pp_placement_bind(r->place, r->world->rank, r->topo, &r->bind, err);
}

/* The device, after placement: on cuda the GPU placement gave this rank (by PCI bus id),
 * or its local rank when placement saw no GPUs; then the communicator of device buffers. */
static pp_status open_device(run *r, pp_error *err)
{
    int index = 0;
    PP_CHECK(pp_placement_device_index(r->place, r->world->rank, r->kind, &index, err));
    PP_CHECK(pp_device_create(r->kind, index, &r->dev, err));
    return pp_comm_for_device(r->world, r->dev, &r->link, err);
}

/* --device auto: cuda only when every rank opens a GPU of its own (its index among its
 * host's ranks), else every rank runs on the cpu and the plan says why. */
static pp_status choose_device(run *r, pp_error *err)
{
    const char *name = r->cfg->device;
    int is_auto = !name || !strcmp(name, "auto"), local = 0, nlocal = 1;
    if (is_auto && r->world->size > 1) {
        pp_comm *node = NULL;
        PP_CHECK(pp_comm_mpi_node(r->world, &node, err));
        local = node->rank, nlocal = node->size;
        pp_comm_destroy(node);
    }
    PP_CHECK(pp_device_choose(name, local, &r->kind, &r->device_note, err));
    if (!is_auto || r->world->size == 1) return PP_OK;
    if (r->kind == PP_DEVICE_CPU && local > 0)
        pp_error_prefix(&r->device_note, "rank %d, rank %d of %d on its host, has no GPU %d: ", r->world->rank, local,
                        nlocal, local);
    double gpus = r->kind == PP_DEVICE_CUDA;
    PP_CHECK(pp_comm_allreduce(r->world, &gpus, 1, PP_DTYPE_F64, err));
    if (r->kind == PP_DEVICE_CUDA && gpus < r->world->size) {
        r->kind = PP_DEVICE_CPU;
        pp_error_set(&r->device_note, PP_ERR_DEVICE, "only %.0f of the %d ranks have a GPU of their own", gpus,
                     r->world->size);
    }
    return PP_OK;
}

/* The text summary at step 0: the command line and the plan as printed. */
static pp_status log_summary(run *r, pp_error *err)
{
    char *plan = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&plan, &len);
    if (!mem) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the plan summary");
    fprintf(mem, "%s\n\n", r->cfg->command_line ? r->cfg->command_line : r->cfg->model);
    print_plan(r, mem);
    fclose(mem);
    /* the text plugin renders markdown: the plan as a code block, indented */
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += plan[i] == '\n';
    char *md = malloc(len + 4 * lines + 1), *o = md;
    pp_status st = md ? PP_OK : pp_error_set(err, PP_ERR_NOMEM, "out of memory for the plan summary");
    for (size_t i = 0; md && i < len; i++) {
        if (i == 0 || plan[i - 1] == '\n') o += sprintf(o, "    ");
        *o++ = plan[i];
    }
    if (md) *o = 0;
    if (st == PP_OK) st = train_log_text(r->log, "config/plan", md, err);
    free(md);
    free(plan);
    return st;
}

/* Data order, evaluation and logs: what surrounds the steps a user watches. */
static pp_status setup_watch(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    if (c->eval_data)
        PP_CHECK(train_eval_open(c->eval_data, r->g, &c->loss, c->batch, c->microbatches, c->dp, r->grid->replica,
                                 c->eval_batches, &r->eval, err));
    PP_CHECK(train_log_open(c, r->world, r->steps, r->io.tokens_per_sample > 0, &r->log, err));
    PP_CHECK(train_prof_open(c, r->drv, r->world, r->sched, r->part, r->grid, &r->prof, err));
    for (int i = 0; i < pp_driver_num_stages(r->drv); i++) {
        pp_stage_bytes b;
        pp_stage_allocation(pp_driver_stage(r->drv, i), &b);
        r->stage_bytes += b.total;
    }
    return train_log_tb(r->log) ? log_summary(r, err) : PP_OK;
}

static pp_status setup(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    PP_CHECK(pp_comm_mpi_world(&r->world, err));
    if (r->world->size > 1) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[rank %d] ", r->world->rank);
        pp_log_set_prefix(prefix);
    }
    PP_CHECK(check_config(c, err));
    if (c->pp > 4096) return pp_error_set(err, PP_ERR_INVALID_ARG, "--pp %d: at most 4096", c->pp);
    r->mb = c->batch / ((int64_t)c->dp * c->microbatches);
    pp_graph_options gopt = {.batch = r->mb, .dims = c->dims, .ndims = c->ndims};
    PP_CHECK(pp_graph_load(c->model, &gopt, &r->g, err));
    PP_CHECK(agree(r, err));
    int chunks = c->chunks > 0 ? c->chunks : 1;
    PP_CHECK(pp_schedule_create(c->schedule, c->pp, (int)c->microbatches, chunks, &r->sched, err));
    pp_partition_options popt = {.microbatches = c->microbatches};
    PP_CHECK(pp_partition_create(r->g, r->sched->num_stages, &popt, &r->part, err));
    PP_CHECK(choose_device(r, err));
    PP_CHECK(place(r, err));
    PP_CHECK(open_device(r, err));
    PP_CHECK(pp_grid_create(r->link, c->pp, c->dp, r->place->order, &r->grid, err));
    PP_CHECK(pp_dataset_open(c->data, &r->data, err));
    if (r->data->samples < c->batch)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' holds %lld samples, fewer than one batch of %lld",
                            c->data, (long long)r->data->samples, (long long)c->batch);
    PP_CHECK(train_check_data(r->g, &c->loss, r->data, "--data", c->data, r->mb, &r->io, err));
    pp_sampler_init(&r->smp, r->data->samples, c->batch, c->shuffle, c->seed);
    r->steps = c->epochs > 0 ? c->epochs * r->smp.steps_per_epoch : c->steps;
    r->lr = c->lr;
    r->lr.steps = r->steps;
    r->c_run.steps = r->steps;      /* what checkpoints record and save at */
    r->c_run.lr.steps = r->steps;
    if (r->world->rank == 0 && !c->quiet) print_plan(r, stdout);
    pp_driver_config dc = {
        .schedule = r->sched, .partition = r->part, .grid = r->grid, .control = r->world, .dev = r->dev,
        .stage_options = {.microbatch = r->mb, .global_batch = c->batch, .optim = c->optim, .loss = c->loss,
                          .seed = c->seed, .training = 1},
        .feed = feed, .feed_user = r, .clip_norm = c->clip_norm, .bucket_bytes = c->bucket_bytes,
        .skip_nonfinite = c->skip_nonfinite, .before_update = train_ckpt_before_update, .before_update_user = &r->ck,
    };
    PP_CHECK(pp_driver_create(&dc, &r->drv, err));
    PP_CHECK(train_ckpt_init(&r->ck, c, r->world, r->drv, r->part, r->grid, r->sched, err));
    /* a resumed run goes on where its checkpoint stopped in the sample stream, whatever
     * batch that run had (and with --shuffle in the same permutation) */
    r->smp.start = r->ck.sample0;
    if (c->trace_path) PP_CHECK(pp_driver_record(r->drv, 1, err));
    if (c->losses_out && r->world->rank == 0 && !(r->losses = fopen(c->losses_out, "w")))
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s'", c->losses_out);
    return setup_watch(r, err);
}

static void teardown(run *r)
{
    free(r->labels);
    free(r->mb_weight);
    if (r->losses) fclose(r->losses);
    train_ckpt_free(&r->ck);
    train_eval_close(r->eval);
    train_log_close(r->log, NULL);
    train_prof_close(r->prof);
    pp_driver_destroy(r->drv);
    pp_dataset_close(r->data);
    pp_placement_destroy(r->place);
    pp_topology_destroy(r->topo);
    pp_grid_destroy(r->grid);
    if (r->link != r->world) pp_comm_destroy(r->link);
    pp_device_destroy(r->dev);
    pp_partition_destroy(r->part);
    pp_schedule_destroy(r->sched);
    pp_graph_destroy(r->g);
    pp_comm_destroy(r->world);
}

static void format_duration(double s, char *buf, size_t len)
{
    if (s < 60) snprintf(buf, len, "%.1fs", s);
    else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void progress(const run *r, int64_t step, const pp_step_stats *st, float lr, double elapsed, double rate,
                     double train_s, int tty)
{
    char el[32], eta[32], ev[64] = "", ep[64] = "";
    const pp_train_config *c = r->cfg;
    format_duration(elapsed, el, sizeof el);
    format_duration(train_eta(step, r->steps, step - r->ck.resumed_step, train_s, c->eval_every, r->evals,
                              r->eval_s, r->eval ? train_eval_batches(r->eval) : 0, r->eval != NULL),
                    eta, sizeof eta);
    if (r->evals) snprintf(ev, sizeof ev, "  eval %.4f", r->eval_loss);
    if (c->epochs > 0)
        snprintf(ep, sizeof ep, "  epoch %lld/%lld", (long long)pp_sampler_epoch(&r->smp, step) + 1,
                 (long long)c->epochs);
    printf("%sstep %lld/%lld%s  loss %.4f%s  lr %.3g  %.0f %s  elapsed %s  ETA %s%s%s", tty ? "\r" : "",
           (long long)step, (long long)r->steps, ep, st->loss, ev, lr, rate,
           r->io.tokens_per_sample ? "tok/s" : "samples/s", el, eta, st->skipped ? "  (skipped)" : "",
           tty ? "   " : "\n");
    if (tty && step == r->steps) putchar('\n');
    fflush(stdout);
}

/* After a step: the evaluation when one is due, then the logs (collective when they
 * gather or an evaluation ran, the same on every rank). */
static pp_status watch_step(run *r, int64_t step, const pp_step_stats *stats, float lr, double step_s,
                            double rate, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    train_eval_result ev, *evp = NULL;
    if (r->eval && train_eval_due(step, r->steps, c->eval_every)) {
        PP_CHECK(train_eval_run(r->eval, r->drv, r->world, step, &ev, err));
        r->eval_s += ev.seconds;
        r->evals++;
        r->eval_loss = ev.loss;
        evp = &ev;
        if (r->world->rank == 0 && !c->quiet && !r->log)
            pp_log(PP_LOG_INFO, "step %lld: eval loss %.6f over %lld samples", (long long)step, ev.loss,
                   (long long)ev.samples);
    }
    if (!r->log) return PP_OK;
    train_step_log sl = {
        .step = step, .epoch = pp_sampler_epoch(&r->smp, step), .loss = stats->loss, .lr = lr,
        .grad_norm = stats->grad_norm, .throughput = rate, .step_s = step_s, .compute_s = stats->compute_s,
        .wait_s = stats->wait_s, .stage_bytes = r->stage_bytes, .skipped = stats->skipped,
        .rss_bytes = train_log_gathers(r->log, step) ? train_rss_peak_bytes() : 0,
        .has_ckpt = c->save_dir != NULL, .ckpt_saves = r->ck.saves, .ckpt_stall_s = r->ck.stall_s,
    };
    PP_CHECK(train_log_step(r->log, &sl, evp, err));
    if (c->log_histograms > 0 && c->logdir && step % c->log_histograms == 0)
        PP_CHECK(train_log_histograms(train_log_tb(r->log), r->world, r->drv, r->g, r->part, r->grid->replica, step,
                                      err));
    return PP_OK;
}

/* The last step as executed, every rank's actions on a Perfetto timeline (rank 0 writes). */
static pp_status write_trace(run *r, pp_error *err)
{
    FILE *f = NULL;
    if (r->world->rank == 0 && !(f = fopen(r->cfg->trace_path, "w")))
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s'", r->cfg->trace_path);
    pp_status st = pp_driver_write_trace(r->drv, r->world, f, err);
    if (f && fclose(f) && st == PP_OK) st = pp_error_set(err, PP_ERR_IO, "cannot write '%s'", r->cfg->trace_path);
    return st;
}

typedef struct gathered {
    const pp_graph *g;
    const float *all;
    const int64_t *offset;
} gathered;

static const void *gathered_value(void *user, const char *name, size_t nbytes)
{
    const gathered *x = user;
    int v = pp_graph_find_value(x->g, name);
    (void)nbytes;
    return v >= 0 && x->offset[v] >= 0 ? (const void *)(x->all + x->offset[v]) : NULL;
}

/* Gathers every parameter and BatchNorm running statistic onto rank 0 (replica 0's
 * stages contribute; a tied one only from the first stage holding it) and writes the
 * model there. */
/* A BatchNormalization running statistic the training forward updates (input 3 or 4
 * of a node that returns it as output 1 or 2): the stages' buffers (pp_stage_buffer_at). */
static int is_running_stat(const pp_graph *g, int v)
{
    const pp_value *x = &g->values[v];
    if (x->kind != PP_VALUE_INITIALIZER || x->is_param || x->dtype != PP_DTYPE_F32) return 0;
    for (int c = 0; c < x->nconsumers; c++) {
        const pp_node *n = &g->nodes[x->consumers[c]];
        if (n->op != PP_OP_BATCH_NORMALIZATION || n->ninputs < 5 || n->noutputs < 3) continue;
        for (int k = 3; k <= 4; k++)
            if (n->inputs[k] == v && n->outputs[k - 2] >= 0) return 1;
    }
    return 0;
}

static pp_status export_model(run *r, pp_error *err)
{
    const pp_graph *g = r->g;
    int64_t *offset = malloc((size_t)g->nvalues * sizeof *offset), total = 0;
    if (!offset) return PP_NOMEM(err);
    for (int v = 0; v < g->nvalues; v++) {
        int kept = g->values[v].is_param || is_running_stat(g, v);
        offset[v] = kept ? total : -1;
        if (kept) total += pp_shape_numel(&g->values[v].shape);
    }
    float *all = calloc((size_t)total + 1, sizeof *all);
    pp_status st = PP_OK;
    if (!all) {
        free(offset);
        return PP_NOMEM(err);
    }
    for (int i = 0; r->grid->replica == 0 && i < pp_driver_num_stages(r->drv); i++) {
        pp_stage *s = pp_driver_stage(r->drv, i);
        for (int k = 0; k < pp_stage_num_params(s); k++) {
            const pp_stage_param *p = pp_stage_param_at(s, k);
            int owner = 1;
            for (int t = 0; t < r->part->ntied; t++)
                if (r->part->tied[t].value == p->value) owner = r->part->tied[t].stages[0] == pp_driver_stage_index(r->drv, i);
            if (owner)
                PP_CHECK_GOTO(pp_device_copy_to_host(r->dev, all + offset[p->value], pp_stage_params(s) + p->offset,
                                                     (size_t)p->numel * sizeof(float), err), st, done);
        }
        for (int k = 0; k < pp_stage_num_buffers(s); k++) {
            pp_stage_buffer b;
            PP_CHECK_GOTO(pp_stage_buffer_at(s, k, &b, err), st, done);
            if (offset[b.value] >= 0)
                PP_CHECK_GOTO(pp_device_copy_to_host(r->dev, all + offset[b.value], b.data, b.nbytes, err), st, done);
        }
    }
    PP_CHECK_GOTO(pp_comm_allreduce(r->world, all, (size_t)total, PP_DTYPE_F32, err), st, done);
    if (r->world->rank == 0) {
        pp_graph *model = NULL;
        pp_graph_options unbound = {.allow_unknown_dims = 1};
        st = pp_graph_load(r->cfg->model, &unbound, &model, err);
        gathered x = {.g = g, .all = all, .offset = offset};
        if (st == PP_OK) st = pp_ckpt_write_model(model, gathered_value, &x, r->cfg->export_path, err);
        pp_graph_destroy(model);
    }
done:
    free(all);
    free(offset);
    return st;
}

pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err)
{
    memset(res, 0, sizeof *res);
    run r = {.c_run = *cfg};
    r.cfg = &r.c_run;
    cfg = r.cfg;
    pp_status st;
    PP_CHECK_GOTO(setup(&r, err), st, done);
    /* mpirun hands ranks a pty: there, plain lines */
    int tty = isatty(STDOUT_FILENO) && !getenv("OMPI_COMM_WORLD_SIZE"), rank0 = r.world->rank == 0;
    double t0 = pp_now();
    res->first_step = r.ck.resumed_step + 1;
    res->eval_loss = NAN;
    if (rank0 && !cfg->quiet && r.ck.resumed_step >= r.steps)
        printf("the checkpoint is at step %lld, not before --steps %lld: no step to run\n",
               (long long)r.ck.resumed_step, (long long)r.steps);
    for (int64_t step = res->first_step; step <= r.steps; step++) {
        float lr = pp_lr_at(&r.lr, step);
        pp_step_stats stats;
        PP_CHECK_GOTO(train_prof_begin(r.prof, step, err), st, done);
        double ts = pp_now();
        PP_CHECK_GOTO(pp_driver_step(r.drv, step, lr, &stats, err), st, done);
        double step_s = pp_now() - ts;
        PP_CHECK_GOTO(train_prof_end(r.prof, step, r.steps, &stats, step_s, err), st, done);
        /* per-rank timing (bench/pipeline.sh measures the bubble from it) */
        pp_log(PP_LOG_INFO, "step %lld: %.5f s, compute %.5f s, wait %.5f s", (long long)step, step_s,
               stats.compute_s, stats.wait_s);
        if (!isfinite(stats.loss) && !cfg->skip_nonfinite) {
            st = pp_error_set(err, PP_ERR_NUMERIC, "step %lld: the loss is %g; lower --lr or pass --skip-nonfinite",
                              (long long)step, stats.loss);
            goto done;
        }
        /* a save due after this step, before the logs so they carry its cost */
        PP_CHECK_GOTO(train_ckpt_after_step(&r.ck, step, err), st, done);
        /* throughput over the training time: evaluations do not count */
        double train_s = pp_now() - t0 - r.eval_s;
        double rate = (double)((step - r.ck.resumed_step) * cfg->batch *
                               (r.io.tokens_per_sample ? r.io.tokens_per_sample : 1)) / train_s;
        PP_CHECK_GOTO(watch_step(&r, step, &stats, lr, step_s, rate, err), st, done);
        double elapsed = pp_now() - t0;
        res->steps_done = step;
        if (step == res->first_step) res->first_loss = stats.loss;
        res->last_loss = stats.loss;
        res->seconds = elapsed;
        res->tokens_per_s = rate;
        res->counts_tokens = r.io.tokens_per_sample > 0;
        res->epochs_done = pp_sampler_epoch(&r.smp, step) + 1;
        res->evals = r.evals;
        res->eval_seconds = r.eval_s;
        if (r.evals) res->eval_loss = r.eval_loss;
        if (r.losses) fprintf(r.losses, "%lld %.9g\n", (long long)step, stats.loss);
        if (rank0 && !cfg->quiet) progress(&r, step, &stats, lr, elapsed, rate, train_s, tty);
    }
    PP_CHECK_GOTO(train_ckpt_finish(&r.ck, err), st, done);
    res->saves = r.ck.saves;
    res->save_stall_s = r.ck.stall_s;
    PP_CHECK_GOTO(train_report_memory(r.world, r.drv, r.part, cfg->microbatches, rank0 && !cfg->quiet, err), st,
                  done);
    if (cfg->trace_path) PP_CHECK_GOTO(write_trace(&r, err), st, done);
    if (cfg->export_path) PP_CHECK_GOTO(export_model(&r, err), st, done);
done:
    /* A step that failed on one rank of a job may leave receives and reductions posted
     * into the stages' buffers, and MPI could still write into them: leave everything
     * allocated, since the caller ends the job (pp_comm_mpi_abort_world). */
    if (st != PP_OK && r.world && r.world->size > 1) return st;
    teardown(&r);
    return st;
}

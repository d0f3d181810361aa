/* The trainer object: everything a rank holds for a training job (model, partition,
 * schedule, placement, device, driver and stages, checkpoints) and the calls a trainer
 * makes on it: step, eval, save, load, export. pp_train_run (train.c) drives one. */
#include <onnxpipe/comm.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/options.h>
#include <onnxpipe/placement.h>
#include <onnxpipe/trainer.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *model_name(const pp_trainer *t)
{
    return t->c.model ? t->c.model : "(a graph in memory)";
}

pp_status trainer_check_config(const pp_trainer_config *c, pp_error *err)
{
    if (c->microbatches < 1 || c->batch < 1 || c->batch % ((int64_t)c->dp * c->microbatches))
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "--batch %lld must be a positive multiple of dp x microbatches = %lld",
                            (long long)c->batch, (long long)c->dp * c->microbatches);
    if (c->steps < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--steps %lld must be >= 1", (long long)c->steps);
    return PP_OK;
}


/* Every rank hashes the model's structure and the options (those its option table marks
 * agree); ranks that disagree with rank 0 are named, on every rank, before anything else happens. */
static pp_status agree(pp_trainer *t, pp_error *err)
{
    const pp_trainer_config *c = &t->c;
    const pp_graph *g = t->g;
    int64_t shape[] = {g->nnodes, g->nvalues, g->ninits, g->nparams};
    uint32_t h = pp_options_hash(pp_trainer_option_table, c, pp_crc32c(0, shape, sizeof shape));
    for (int i = 0; i < g->nnodes; i++) {
        h = pp_crc32c(h, g->nodes[i].name, strlen(g->nodes[i].name));
        h = pp_crc32c(h, g->nodes[i].op_type, strlen(g->nodes[i].op_type));
    }
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        h = pp_crc32c(h, g->values[in->value].name, strlen(g->values[in->value].name));
        h = pp_crc32c(h, in->t.shape.dims, (size_t)in->t.shape.rank * sizeof(int64_t));
    }
    return trainer_agree(t, h, err);
}

pp_status trainer_agree(pp_trainer *t, uint32_t h, pp_error *err)
{
    uint32_t *all = malloc((size_t)pp_comm_size(t->world) * sizeof *all);
    if (!all) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(t->world, &h, all, sizeof h, err);
    if (st == PP_OK)
        for (int k = 1; k < pp_comm_size(t->world); k++)
            if (all[k] != all[0]) {
                st = pp_error_set(err, PP_ERR_INVALID_ARG,
                                  "rank %d was given a different model or different options than rank 0 (this is "
                                  "rank %d, model '%s'); every rank must run the same command", k,
                                  pp_comm_rank(t->world), model_name(t));
                break;
            }
    free(all);
    return st;
}


void trainer_print_plan(const pp_trainer *t, FILE *out)
{
    const pp_trainer_config *c = &t->c;
    fprintf(out, "onnxpipe train: %s, %d rank%s = pp %d x dp %d, schedule %s", model_name(t), pp_comm_size(t->world),
            pp_comm_size(t->world) == 1 ? "" : "s", c->pp, c->dp, pp_schedule_kind_name(t->sched->kind));
    if (t->sched->chunks > 1) fprintf(out, " (%d chunks per rank)", t->sched->chunks);
    fprintf(out, ", global batch %lld = %d replica%s x %lld microbatch%s x %lld sample%s\n\n", (long long)c->batch,
            c->dp, c->dp == 1 ? "" : "s", (long long)c->microbatches, c->microbatches == 1 ? "" : "es",
            (long long)t->mb, t->mb == 1 ? "" : "s");
    fprintf(out, "device: %s, precision %s", pp_device_kind_name(pp_device_get_kind(t->dev)), pp_precision_name(c->precision));
    if (t->device_note.msg[0]) fprintf(out, " (%s)", t->device_note.msg);
    fprintf(out, "\n\n");
    pp_partition_print(t->part, out);
    fprintf(out, "\n");
    pp_placement_print(t->place, out);
    fprintf(out, "binding (rank 0): %s\n\n", t->bind.note[0] ? t->bind.note : t->bind.cpus);
    pp_stage_cost *costs = calloc((size_t)t->part->nstages, sizeof *costs);
    pp_sim_result *sim = NULL;
    if (costs) {
        pp_train_stage_costs(t->part, 100.0, costs);
        pp_costs pc = {.stage = costs, .num_stages = t->part->nstages};
        char cf[160], step[32];
        if (pp_schedule_simulate(t->sched, &pc, &sim, NULL) == PP_OK)
            fprintf(out, "\nschedule %s: predicted bubble %.2f%% (%s), predicted step %s at "
                    "100 GFLOP/s per rank\n\n", pp_schedule_kind_name(t->sched->kind), 100 * sim->bubble,
                    pp_schedule_closed_form_text(t->sched, &pc, cf, sizeof cf),
                    pp_format_seconds(sim->makespan, step, sizeof step));
    }
    pp_sim_result_destroy(sim);
    free(costs);
    fflush(out);
}

/* Places the ranks: the grid order that keeps the heavier traffic inside a host, each
 * rank's cores (and GPU), and binds this process unless mpirun already did. */
static pp_status place(pp_trainer *t, pp_error *err)
{
    const pp_trainer_config *c = &t->c;
    int64_t param_bytes[4096] = {0}, send_bytes[4096] = {0};
    for (int s = 0; s < t->part->nstages; s++) {
        int rank = t->sched->stage_rank[s];
        param_bytes[rank] += t->part->stages[s].param_bytes;
        if (s + 1 < t->part->nstages && t->sched->stage_rank[s + 1] != rank)  /* zb-v's middle boundary is local */
            send_bytes[rank] += t->part->stages[s].send_bytes;
    }
    pp_placement_input in = {
        .pp = c->pp, .dp = c->dp, .param_bytes = param_bytes, .send_bytes = send_bytes,
        .microbatches = c->microbatches, .order = -1,
        /* GPUs by PCI bus id where hwloc sees them (a container may hide them: then local index) */
        .device = t->kind == PP_DEVICE_CUDA ? PP_PLACE_AUTO : PP_PLACE_CPU,
    };
    PP_CHECK(pp_topology_load(NULL, NULL, &t->topo, err));
    PP_CHECK(pp_placement_plan_job(t->world, &in, t->topo, &t->place, err));
    return pp_placement_bind(t->place, pp_comm_rank(t->world), t->topo, &t->bind, err);
}

/* The device, after placement: on cuda the GPU placement gave this rank (by PCI bus id),
 * or its local rank when placement saw no GPUs; then the communicator of device buffers. */
static pp_status open_device(pp_trainer *t, pp_error *err)
{
    int index = 0;
    PP_CHECK(pp_placement_device_index(t->place, pp_comm_rank(t->world), t->kind, &index, err));
    PP_CHECK(pp_device_create(t->kind, index, &t->dev, err));
    return pp_comm_for_device(t->world, t->dev, &t->link, err);
}

/* --device auto: cuda only when every rank opens a GPU of its own (its index among its
 * host's ranks), else every rank runs on the cpu and the plan says why. */
static pp_status choose_device(pp_trainer *t, pp_error *err)
{
    const char *name = t->c.device;
    int is_auto = !name || !strcmp(name, "auto"), local = 0, nlocal = 1;
    if (is_auto && pp_comm_size(t->world) > 1) {
        pp_comm *node = NULL;
        PP_CHECK(pp_comm_mpi_node(t->world, &node, err));
        local = pp_comm_rank(node), nlocal = pp_comm_size(node);
        pp_comm_destroy(node);
    }
    PP_CHECK(pp_device_choose(name, local, &t->kind, &t->device_note, err));
    if (!is_auto || pp_comm_size(t->world) == 1) return PP_OK;
    if (t->kind == PP_DEVICE_CPU && local > 0)
        pp_error_prefix(&t->device_note, "rank %d, rank %d of %d on its host, has no GPU %d: ",
                        pp_comm_rank(t->world), local, nlocal, local);
    double gpus = t->kind == PP_DEVICE_CUDA;
    PP_CHECK(pp_comm_allreduce(t->world, &gpus, 1, PP_DTYPE_F64, err));
    if (t->kind == PP_DEVICE_CUDA && gpus < pp_comm_size(t->world)) {
        t->kind = PP_DEVICE_CPU;
        pp_error_set(&t->device_note, PP_ERR_DEVICE, "only %.0f of the %d ranks have a GPU of their own", gpus,
                     pp_comm_size(t->world));
    }
    return PP_OK;
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

/* Gathers every parameter and BatchNorm running statistic onto rank 0 (replica 0's
 * stages contribute; a tied one only from the first stage holding it) and writes the
 * model there: the file's graph with its symbolic dims, or the caller's graph. */
pp_status pp_trainer_export(pp_trainer *t, const char *path, pp_error *err)
{
    const pp_graph *g = t->g;
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
    for (int i = 0; t->grid->replica == 0 && i < pp_driver_num_stages(t->drv); i++) {
        pp_stage *s = pp_driver_stage(t->drv, i);
        for (int k = 0; k < pp_stage_num_params(s); k++) {
            const pp_stage_param *p = pp_stage_param_at(s, k);
            int owner = 1;
            for (int j = 0; j < t->part->ntied; j++)
                if (t->part->tied[j].value == p->value)
                    owner = t->part->tied[j].stages[0] == pp_driver_stage_index(t->drv, i);
            if (owner)
                PP_CHECK_GOTO(pp_device_copy_to_host(t->dev, all + offset[p->value], pp_stage_params(s) + p->offset,
                                                     (size_t)p->numel * sizeof(float), err), st, done);
        }
        for (int k = 0; k < pp_stage_num_buffers(s); k++) {
            pp_stage_buffer b;
            PP_CHECK_GOTO(pp_stage_buffer_at(s, k, &b, err), st, done);
            if (offset[b.value] >= 0)
                PP_CHECK_GOTO(pp_device_copy_to_host(t->dev, all + offset[b.value], b.data, b.nbytes, err), st, done);
        }
    }
    PP_CHECK_GOTO(pp_comm_allreduce(t->world, all, (size_t)total, PP_DTYPE_F32, err), st, done);
    if (pp_comm_rank(t->world) == 0) {
        pp_graph *model = NULL;
        pp_graph_options unbound = {.allow_unknown_dims = 1, .params = t->c.params};
        if (t->owned) st = pp_graph_load(t->c.model, &unbound, &model, err);
        gathered x = {.g = g, .all = all, .offset = offset};
        if (st == PP_OK) st = pp_ckpt_write_model(model ? model : g, gathered_value, &x, path, err);
        pp_graph_destroy(model);
    }
done:
    free(all);
    free(offset);
    return st;
}


/* Slot's label buffer for an evaluation, large enough for the labels fed and for the
 * rows of the logits that the accuracy reads. */
static pp_status eval_slot(pp_trainer *t, int slot, size_t nbytes, pp_error *err)
{
    size_t want = nbytes;
    if (t->io.logits >= 0 && t->io.classes > 0) {
        size_t rows = (size_t)pp_shape_numel(&t->g->values[t->io.logits].shape) / (size_t)t->io.classes;
        if (rows * sizeof(int64_t) > want) want = rows * sizeof(int64_t);
    }
    if (slot >= t->eval_slots) {
        int n = slot + 1;
        int64_t **lab = realloc(t->eval_labels, (size_t)n * sizeof *lab);
        if (!lab) return PP_NOMEM(err);
        t->eval_labels = lab;
        int64_t *cnt = realloc(t->eval_nlabels, (size_t)n * sizeof *cnt);
        if (!cnt) return PP_NOMEM(err);
        t->eval_nlabels = cnt;
        for (int i = t->eval_slots; i < n; i++) lab[i] = NULL, cnt[i] = 0;
        t->eval_slots = n;
    }
    if (want > t->eval_label_bytes) {   /* every slot grows to the same size */
        for (int i = 0; i < t->eval_slots; i++) {
            free(t->eval_labels[i]);
            t->eval_labels[i] = NULL, t->eval_nlabels[i] = 0;
        }
        t->eval_label_bytes = want;
    }
    if (!t->eval_labels[slot] && !(t->eval_labels[slot] = calloc(1, t->eval_label_bytes + 8))) return PP_NOMEM(err);
    return PP_OK;
}

/* An eval microbatch: the caller's feed, then a copy of its labels (the input io.labels,
 * int64) for eval_observe to weigh the loss and count the hits with. */
static pp_status eval_feed_labels(void *user, const pp_trainer_feed *f, pp_error *err)
{
    pp_trainer *t = user;
    PP_CHECK(t->feed(t->feed_user, f, err));
    for (int i = 0; t->io.labels && i < f->ninputs; i++) {
        const pp_trainer_input *in = &f->inputs[i];
        if (strcmp(in->name, t->io.labels) || in->dtype != PP_DTYPE_I64) continue;
        PP_CHECK(eval_slot(t, f->slot, in->nbytes, err));
        memcpy(t->eval_labels[f->slot], in->data, in->nbytes);
        t->eval_nlabels[f->slot] = (int64_t)(in->nbytes / sizeof(int64_t));
    }
    return PP_OK;
}

/* The driver's feed: the microbatch as the caller's feed sees it. pp_driver_forward counts
 * microbatches across the eval batches; the feed is told (eval batch, microbatch). */
static pp_status trainer_feed(void *user, pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err)
{
    pp_trainer *t = user;
    pp_trainer_feed f = {.training = t->training, .step = step, .microbatch = microbatch,
                         .replica = t->grid->replica, .samples = t->mb, .bucket = pp_trainer_bucket(t),
                         .length = t->c.nbuckets ? t->c.buckets[t->bucket] : 0};
    if (!t->training) f.step = microbatch / t->c.microbatches + 1, f.microbatch = microbatch % t->c.microbatches;
    f.offset = f.replica * (t->c.batch / t->c.dp) + f.microbatch * t->mb;
    if (!t->feed)
        for (int i = 0; i < pp_stage_num_inputs(s); i++)
            if (pp_stage_input(s, i)->is_data)
                return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: stage %d reads graph input '%s' but no feed "
                                    "was given", pp_comm_rank(t->world), t->grid->stage, pp_stage_input(s, i)->name);
    return train_feed_inputs(&t->feed_buf, s, slot, &f, t->training ? t->feed : eval_feed_labels,
                             t->training ? t->feed_user : t, err);
}

/* Up to the process grid: checks cfg, loads the model (or borrows graph), agrees with
 * the other ranks, schedules, partitions, chooses and opens the device, places the ranks. */
static pp_status begin(pp_trainer *t, const pp_trainer_config *cfg, const pp_graph *graph, pp_comm *world,
                       pp_error *err)
{
    memset(t, 0, sizeof *t);
    t->c = *cfg;
    const pp_trainer_config *c = &t->c;
    t->world = world;
    if (!world) {
        PP_CHECK(pp_comm_mpi_world(&t->world, err));
        t->owns_world = 1;
    }
    if (pp_comm_size(t->world) > 1) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[rank %d] ", pp_comm_rank(t->world));
        pp_log_set_prefix(prefix);
    }
    PP_CHECK(trainer_check_config(c, err));
    if (c->pp > 4096) return pp_error_set(err, PP_ERR_INVALID_ARG, "--pp %d: at most 4096", c->pp);
    t->mb = c->batch / ((int64_t)c->dp * c->microbatches);
    pp_graph_options gopt = {.batch = t->mb, .dims = c->dims, .ndims = c->ndims, .params = c->params};
    if (c->nbuckets) PP_CHECK(train_load_buckets(t, &gopt, err));
    else if (!graph) PP_CHECK(pp_graph_load(c->model, &gopt, &t->owned, err));
    t->g = graph ? graph : t->owned;
    train_find_io(t->g, &c->loss, &t->io);
    PP_CHECK(agree(t, err));
    int chunks = c->chunks > 0 ? c->chunks : pp_schedule_default_chunks(c->schedule);
    PP_CHECK(pp_schedule_create(c->schedule, c->pp, (int)c->microbatches, chunks, &t->sched, err));
    PP_CHECK(choose_device(t, err));   /* the partition's memory model plans stages for its kind */
    PP_CHECK(pp_train_partition(c, t->g, t->sched->num_stages, t->kind, &t->part, NULL, err));
    if (c->nbuckets) PP_CHECK(train_partition_buckets(t, err));
    PP_CHECK(place(t, err));
    PP_CHECK(open_device(t, err));
    return pp_grid_create(t->link, c->pp, c->dp, t->place->order, &t->grid, err);
}

/* The driver and this rank's stages, then checkpoints (resume when c.resume). */
static pp_status build(pp_trainer *t, pp_error *err)
{
    const pp_trainer_config *c = &t->c;
    t->c.lr.steps = c->steps;   /* what checkpoints record */
    t->lr = c->lr;
    pp_driver_config dc = {
        .schedule = t->sched, .partition = t->part, .grid = t->grid, .control = t->world, .dev = t->dev,
        .stage_options = pp_train_stage_options(c),
        .feed = trainer_feed, .feed_user = t, .clip_norm = c->clip_norm, .bucket_bytes = c->bucket_bytes,
        .reduce_dtype = c->reduce_dtype,
        .skip_nonfinite = c->skip_nonfinite, .before_update = train_ckpt_before_update, .before_update_user = &t->ck,
        /* fp16 only: bf16 has fp32's range */
        .loss_scale = c->precision != PP_DTYPE_F16 ? 0 : c->loss_scale > 0 ? c->loss_scale : 65536.0f,
        .loss_scale_dynamic = !(c->loss_scale > 0), .loss_scale_window = c->loss_scale_window,
        .shapes = (const pp_partition *const *)t->bucket_part, .nshapes = c->nbuckets,
    };
    if (c->loss_scale > 0 && c->precision != PP_DTYPE_F16)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--loss-scale %g: loss scaling is for --precision fp16 (this run "
                            "is %s)", (double)c->loss_scale, pp_precision_name(c->precision));
    PP_CHECK(pp_driver_create(&dc, &t->drv, err));
    PP_CHECK(train_ckpt_init(&t->ck, c, t->world, t->drv, t->part, t->grid, t->sched, err));
    t->step = t->ck.resumed_step;
    /* after the lock: the board goes in the save directory this job owns */
    if (pp_comm_size(t->world) > 1) PP_CHECK(pp_comm_board_open(t->world, c->save_dir, err));
    return PP_OK;
}

static void trainer_free(pp_trainer *t)
{
    for (int i = 0; i < t->eval_slots; i++) free(t->eval_labels[i]);
    free(t->eval_labels);
    free(t->eval_nlabels);
    free(t->eval_logits);
    train_feed_buf_free(&t->feed_buf);
    if (t->world && pp_comm_size(t->world) > 1) pp_comm_board_close();
    train_ckpt_free(&t->ck);
    pp_driver_destroy(t->drv);
    train_free_buckets(t);
    pp_placement_destroy(t->place);
    pp_topology_destroy(t->topo);
    pp_grid_destroy(t->grid);
    if (t->link != t->world) pp_comm_destroy(t->link);
    pp_device_destroy(t->dev);
    pp_partition_destroy(t->part);
    pp_schedule_destroy(t->sched);
    pp_graph_destroy(t->owned);
    if (t->owns_world) pp_comm_destroy(t->world);
    memset(t, 0, sizeof *t);
}

pp_status pp_trainer_create(const pp_trainer_config *cfg, pp_comm *world, pp_trainer **out, pp_error *err)
{
    *out = NULL;
    if (!cfg->model == !cfg->graph)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_trainer_config: give a model file or a graph (%s)",
                            cfg->model ? "both were given" : "neither was");
    pp_trainer *t = calloc(1, sizeof *t);
    if (!t) return PP_NOMEM(err);
    pp_trainer_config c = *cfg;
    if (c.chunks <= 0) c.chunks = pp_schedule_default_chunks(c.schedule);
    if (c.eval_batches <= 0) c.eval_batches = 1;   /* hashed by agree: eval is collective */
    pp_status st;
    PP_CHECK_GOTO(begin(t, &c, cfg->graph, world, err), st, fail);
    if (pp_comm_rank(t->world) == 0 && !cfg->quiet) trainer_print_plan(t, stdout);
    PP_CHECK_GOTO(build(t, err), st, fail);
    t->eval_batches = c.eval_batches;
    *out = t;
    return PP_OK;
fail:
    /* on a job of several ranks a peer may still send into the stages: the caller ends the job */
    if (!t->world || pp_comm_size(t->world) == 1) pp_trainer_destroy(t);
    return st;
}

void pp_trainer_destroy(pp_trainer *t)
{
    if (!t) return;
    trainer_free(t);
    free(t);
}

pp_status pp_trainer_step(pp_trainer *t, pp_trainer_feed_fn feed, void *user, pp_trainer_stats *stats,
                          pp_error *err)
{
    int64_t step = t->step + 1;
    float lr = pp_lr_at(&t->lr, step);
    pp_step_stats s;
    t->feed = feed, t->feed_user = user, t->training = 1;
    double t0 = pp_now();
    pp_status st = pp_driver_step(t->drv, step, lr, &s, err);
    double seconds = pp_now() - t0;
    t->feed = NULL, t->feed_user = NULL;
    PP_CHECK(st);
    /* per-rank timing (bench/pipeline.sh measures the bubble from it) */
    pp_log(PP_LOG_INFO, "step %lld: %.5f s, compute %.5f s, wait %.5f s", (long long)step, seconds, s.compute_s,
           s.wait_s);
    *stats = (pp_trainer_stats){.step = step, .lr = lr, .loss = s.loss, .grad_norm = s.grad_norm,
                                .skipped = s.skipped, .seconds = seconds, .compute_s = s.compute_s,
                                .wait_s = s.wait_s, .loss_scale = s.loss_scale};
    if (!isfinite(s.loss) && !t->c.skip_nonfinite && !(s.loss_scale && s.skipped))   /* an fp16 overflow */
        return pp_error_set(err, PP_ERR_NUMERIC, "step %lld: the loss is %g; lower --lr or pass --skip-nonfinite",
                            (long long)step, s.loss);
    t->step = step;
    return train_ckpt_after_step(&t->ck, step, err);
}

/* Hits of argmax over the class axis of the logits x against the labels y (ignore_index
 * skipped). */
static void count_hits(const pp_trainer *t, const float *x0, const int64_t *y, double *correct, double *counted)
{
    const pp_shape *L = &t->g->values[t->io.logits].shape;
    int64_t outer = 1, inner = 1, C = t->io.classes;
    for (int k = 0; k < t->io.class_axis; k++) outer *= L->dims[k];
    for (int k = t->io.class_axis + 1; k < L->rank; k++) inner *= L->dims[k];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t label = y[o * inner + in];
            if (label == t->io.ignore_index) continue;
            const float *x = x0 + o * C * inner + in;
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (x[c * inner] > x[best * inner]) best = c;
            *correct += best == label;
            *counted += 1;
        }
}

/* The last stage's loss of each eval microbatch, weighed as training weighs it: by its
 * labels' weight (ignore_index, class weights: stage/loss.c), or by its samples when the
 * loss has no such labels; and the argmax hits when the logits are a graph output. */
static pp_status eval_observe(void *user, pp_stage *s, int slot, int64_t microbatch, pp_error *err)
{
    pp_trainer *t = user;
    (void)microbatch;
    int64_t n = slot < t->eval_slots ? t->eval_nlabels[slot] : 0;
    const int64_t *y = n > 0 ? t->eval_labels[slot] : NULL;
    double w = (double)t->mb;
    pp_loss_labels l;
    if (y && pp_stage_loss_labels(s, &l, NULL) == PP_OK) w = pp_loss_labels_weight(&l, y, 1, n, NULL);
    if (w > 0) {
        t->eval_sum[0] += pp_stage_loss(s, slot) * w;
        t->eval_sum[1] += w;
    }
    if (y) t->eval_nlabels[slot] = 0;
    const pp_value *v = t->io.logits >= 0 ? &t->g->values[t->io.logits] : NULL;
    if (!y || !v || v->dtype != PP_DTYPE_F32 || !v->is_output) return PP_OK;
    void *buf = pp_stage_value_buffer(s, slot, t->io.logits);
    if (!buf) return PP_OK;
    int64_t numel = pp_shape_numel(&v->shape);
    size_t nbytes = (size_t)numel * sizeof(float);
    if (nbytes > t->eval_logits_bytes) {   /* the largest bucket's so far */
        free(t->eval_logits);
        if (!(t->eval_logits = malloc(nbytes))) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the eval logits");
        t->eval_logits_bytes = nbytes;
    }
    pp_dtype dt = pp_stage_value_dtype(s, t->io.logits);
    if (dt != PP_DTYPE_F32) {   /* 16-bit logits (mixed precision): widened on the device */
        void *wide;
        PP_CHECK(pp_device_alloc(pp_stage_device(s), nbytes, &wide, err));
        pp_status st = pp_kernel_convert(pp_stage_device(s), wide, PP_DTYPE_F32, buf, dt, numel, err);
        if (st == PP_OK) st = pp_device_copy_to_host(pp_stage_device(s), t->eval_logits, wide, nbytes, err);
        pp_device_free(pp_stage_device(s), wide);
        PP_CHECK(st);
    } else {
        PP_CHECK(pp_device_copy_to_host(pp_stage_device(s), t->eval_logits, buf, nbytes, err));
    }
    count_hits(t, t->eval_logits, y, &t->eval_sum[2], &t->eval_sum[3]);
    return PP_OK;
}

pp_status pp_trainer_eval(pp_trainer *t, pp_trainer_feed_fn feed, void *user, pp_trainer_eval_stats *stats,
                          pp_error *err)
{
    double t0 = pp_now();
    t->feed = feed, t->feed_user = user, t->training = 0;
    memset(t->eval_sum, 0, sizeof t->eval_sum);
    for (int i = 0; i < t->eval_slots; i++) t->eval_nlabels[i] = 0;
    /* a negative key: never a training step's */
    pp_status st = pp_driver_forward(t->drv, -(t->step + 1), t->eval_batches * t->c.microbatches, trainer_feed, t,
                                     eval_observe, t, err);
    t->feed = NULL, t->feed_user = NULL;
    PP_CHECK(st);
    PP_CHECK(pp_comm_allreduce(t->world, t->eval_sum, 4, PP_DTYPE_F64, err));
    const double *sum = t->eval_sum;
    *stats = (pp_trainer_eval_stats){.loss = sum[1] > 0 ? sum[0] / sum[1] : NAN,
                                     .accuracy = sum[3] > 0 ? sum[2] / sum[3] : NAN,
                                     .has_accuracy = sum[3] > 0, .has_perplexity = t->io.tokens_per_sample > 0,
                                     .samples = t->eval_batches * t->c.batch};
    stats->perplexity = exp(stats->loss);
    stats->seconds = pp_now() - t0;
    return PP_OK;
}

pp_status pp_trainer_save(pp_trainer *t, const char *dir, pp_error *err)
{
    return train_ckpt_save_to(&t->ck, dir, t->step, err);
}

pp_status pp_trainer_wait_saves(pp_trainer *t, pp_error *err)
{
    return train_ckpt_finish(&t->ck, err);
}

pp_status pp_trainer_load(pp_trainer *t, const char *path, pp_error *err)
{
    PP_CHECK(train_ckpt_load(&t->ck, path, err));
    t->step = t->ck.resumed_step;
    return PP_OK;
}

int64_t pp_trainer_steps_done(const pp_trainer *t) { return t->step; }
int pp_trainer_rank(const pp_trainer *t) { return pp_comm_rank(t->world); }
int pp_trainer_stage(const pp_trainer *t) { return t->grid->stage; }
int pp_trainer_replica(const pp_trainer *t) { return t->grid->replica; }
pp_driver *pp_trainer_driver(pp_trainer *t) { return t->drv; }
const pp_graph *pp_trainer_graph(const pp_trainer *t) { return t->g; }

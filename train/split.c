/* The split of a training job that every rank computes the same way: its partition (with
 * the stage's memory profile, stage/memprofile.c) and predicted stage costs for the
 * simulator. */
#include <onnxpipe/plan.h>
#include <onnxpipe/trainer_lib.h>
#include <onnxpipe/stage_lib.h>

#include <string.h>

void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs)
{
    pp_cost_model m = {.gflops = gflops};
    if (pp_plan_stage_costs(part, &m, 1, PP_DTYPE_F32, PP_RECOMPUTE_NONE, costs, NULL) != PP_OK)
        memset(costs, 0, (size_t)part->nstages * sizeof *costs);   /* unknown shapes: nothing to predict */
}

pp_status pp_train_partition(const pp_trainer_config *c, const pp_graph *g, int nstages, pp_device_kind kind,
                             pp_partition **out, pp_error *why, pp_error *err)
{
    pp_partition_options o = c->partition;
    o.microbatches = c->microbatches;
    o.recompute = c->recompute;
    pp_memory_profile *prof = NULL;
    if (!o.memory) {   /* what the job's stages allocate, from the planner that builds them */
        pp_stage_options so = pp_train_stage_options(c);
        so.whole_backward = 1;   /* the memory balance models 1F1B, whose backward is whole */
        pp_error e = {0};
        pp_status st = pp_stage_memory_profile(g, kind, &so, &prof, &e);
        if (st == PP_ERR_NOMEM) {
            *err = e;
            return st;
        }
        if (st != PP_OK && why) *why = e;
        o.memory = prof;
    }
    pp_status st = pp_partition_create(g, nstages, &o, out, err);
    pp_memory_profile_destroy(prof);
    return st;
}

pp_stage_options pp_train_stage_options(const pp_trainer_config *c)
{
    int64_t per = (int64_t)(c->dp > 0 ? c->dp : 1) * (c->microbatches > 0 ? c->microbatches : 1);
    return (pp_stage_options){.slots = 1, .microbatch = c->batch / per, .global_batch = c->batch, .optim = c->optim,
                              .loss = c->loss, .seed = c->seed, .training = 1, .precision = c->precision,
                              .recompute = c->recompute, .fused_attention = c->fused_attention};
}

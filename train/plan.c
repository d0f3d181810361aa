/* The plan of a training job that every rank computes the same way: predicted stage
 * costs for the simulator, and the hash ranks compare to refuse mismatched jobs. */
#include <onnxpipe/plan.h>
#include <onnxpipe/train.h>

#include <string.h>

void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs)
{
    pp_cost_model m = {.gflops = gflops};
    if (pp_plan_stage_costs(part, &m, 1, PP_DTYPE_F32, PP_RECOMPUTE_NONE, costs, NULL) != PP_OK)
        memset(costs, 0, (size_t)part->nstages * sizeof *costs);   /* unknown shapes: nothing to predict */
}

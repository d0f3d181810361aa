/* The plan of a training job that every rank computes the same way: predicted stage
 * costs for the simulator, and the hash ranks compare to refuse mismatched jobs. */
#include <onnxpipe/train.h>

#include <string.h>

void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs)
{
    for (int s = 0; s < part->nstages; s++) {
        const pp_stage_info *si = &part->stages[s];
        double f = si->flops > 0 ? (double)si->flops / (gflops * 1e9) : 0;
        costs[s] = (pp_stage_cost){
            .forward = f, .backward_input = f, .backward_weight = f,
            .act_bytes = si->act_bytes > 0 ? (double)si->act_bytes : 0,
            .send_bytes = si->send_bytes > 0 ? (double)si->send_bytes : 0,
        };
    }
}

/* The stage options a trainer starts from (pp_stage_options_default): a plain fp32
 * training stage with AdamW at PyTorch's defaults, so a custom trainer sets only its
 * batch sizes and what it changes. */
#include <onnxpipe/stage.h>

pp_stage_options pp_stage_options_default(void)
{
    return (pp_stage_options){
        .slots = 1,
        .microbatch = 1,
        .global_batch = 1,
        .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f},
        .loss = {.ignore_index = -100},
        .training = 1,
        .precision = PP_DTYPE_F32,
    };
}

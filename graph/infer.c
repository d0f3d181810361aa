/* TEMPORARY during bring-up: replaced by the inference/folding pass. */
#include "graph_internal.h"
pp_status graph_infer(pp_graph *g, const pp_graph_options *opt, pp_error *err)
{
    (void)g; (void)opt; (void)err;
    return PP_OK;
}

/* Per-stage views: what a trainer reads of a stage through the opaque handle (its nodes,
 * parameters and boundary tensors), stage s as a graph of its own (its nodes, the tensors
 * it receives as inputs, the tensors it sends and the graph outputs it makes as outputs),
 * and the stage-N.onnx files written from them. */
#include "partition_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <onnxpipe/graph_ir.h>

int pp_partition_num_stages(const pp_partition *p)
{
    return p->nstages;
}

int pp_partition_stage_nodes(const pp_partition *p, int stage, const int **nodes)
{
    *nodes = NULL;
    if (stage < 0 || stage >= p->nstages) return 0;
    *nodes = p->order + p->stages[stage].first_node;
    return p->stages[stage].last_node - p->stages[stage].first_node + 1;
}

int64_t pp_partition_stage_params(const pp_partition *p, int stage)
{
    return stage < 0 || stage >= p->nstages ? -1 : p->stages[stage].own_params;
}

int pp_partition_stage_inputs(const pp_partition *p, int stage, const int **values)
{
    *values = NULL;
    if (stage < 0 || stage >= p->nstages) return 0;
    *values = p->stages[stage].inputs;
    return p->stages[stage].ninputs;
}

int pp_partition_stage_outputs(const pp_partition *p, int stage, const int **values)
{
    *values = NULL;
    if (stage < 0 || stage >= p->nstages) return 0;
    *values = p->stages[stage].outputs;
    return p->stages[stage].noutputs;
}

pp_status pp_partition_stage_graph(const pp_partition *p, int stage, pp_graph **out, pp_error *err)
{
    *out = NULL;
    if (stage < 0 || stage >= p->nstages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d out of range (0..%d)", stage, p->nstages - 1);
    const pp_stage_info *st = &p->stages[stage];
    int n = st->last_node - st->first_node + 1;
    int *nodes = malloc((size_t)n * sizeof *nodes);
    if (!nodes) return pp_error_set(err, PP_ERR_NOMEM, "out of memory extracting stage %d", stage);
    /* the stage's nodes in the graph's order (a topological order of them) */
    for (int i = 0, k = 0; i < p->graph->nnodes; i++)
        if (p->node_stage[i] == stage) nodes[k++] = i;
    char name[256];
    snprintf(name, sizeof name, "%s_stage%d", p->graph->name, stage);
    pp_status s = pp_graph_extract(p->graph, nodes, n, st->outputs, st->noutputs, name, out, err);
    free(nodes);
    if (s != PP_OK) pp_error_prefix(err, "extracting stage %d: ", stage);
    return s;
}

pp_status pp_partition_save_stages(const pp_partition *p, const char *dir, pp_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return pp_error_set(err, PP_ERR_IO, "cannot create directory '%s': %s", dir, strerror(errno));
    for (int s = 0; s < p->nstages; s++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/stage-%d.onnx", dir, s) >= (int)sizeof path)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "output directory path too long: '%s'", dir);
        pp_graph *sg = NULL;
        PP_CHECK(pp_partition_stage_graph(p, s, &sg, err));
        pp_status st = pp_graph_save(sg, path, NULL, err);
        pp_graph_destroy(sg);
        if (st != PP_OK) return pp_error_prefix(err, "writing stage %d: ", s);
    }
    return PP_OK;
}

/* The loss of the last stage, in one place: finding the model's SoftmaxCrossEntropyLoss
 * or building one over --logits / --labels, reading it, the seed that starts backward,
 * the weight of the labels a mean divides by, and each microbatch's share of the loss.
 *
 * The convention (llm.c's dloss = 1/(B*T), spread over microbatches and replicas). The
 * step's loss L is one loss of the whole global batch of B samples, whatever the layout.
 * A microbatch's loss l_m is what the kernel computes over its own labels: with reduction
 * 'mean' sum(w_y * nll_y) / W_m, where label y weighs w_y (its class weight, or 1; a label
 * equal to ignore_index 0) and W_m is its labels' summed weight; with 'sum' the same
 * numerator. The seed of microbatch m, dL/dl_m, is
 *   mean: W_m / W, W the weight of the global batch's labels (every replica's), so that L
 *         is the mean over all of them. A stage starts with microbatch / B, that ratio
 *         when every label weighs 1; a trainer that can count the labels sets the ratio
 *         per microbatch before its backward (pp_loss_labels_weight counts every W_m and
 *         W in one pass, pp_stage_set_loss_weight divides). It cannot when the labels are
 *         computed (other than by reshapes) or the class weights are no initializer: then
 *         the default stays;
 *   sum:  1 / B: L is the mean over the samples of each sample's summed loss.
 * Backward starts from the seed (run.c: seed_backward), so the gradients summed over
 * microbatches and replicas (the driver's all-reduce sums; nothing divides afterwards) are
 * dL/dparameters. The reported loss follows the same rule: L = sum over microbatches and
 * replicas of seed_m * l_m; the last stage's rank adds its microbatches' terms on the
 * device (the driver's seeds and sums: pp_kernel_loss_add; pp_stage_loss_share is the
 * host's form) and driver/driver_step.c sums them over the world in the all-reduce it
 * makes anyway. Evaluation (train/eval_loop.c) weighs its
 * microbatches' losses by W_m the same way. The kernel counts W_m again, to divide by it,
 * and neither count can stand in for the other: the seed needs W, over every replica's
 * labels, before any backward, which only the data gives without a message; the kernel's
 * count lives on the device, inside the forward. */
#include "stage_places.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

/* The seed of a microbatch when all microbatches weigh the same (see above). */
static float default_seed(const pp_stage *s, int mean)
{
    return mean ? (float)((double)s->opt.microbatch / (double)s->opt.global_batch)
                : (float)(1.0 / (double)s->opt.global_batch);
}

/* A tensor of the loss that is no graph value: a view of tslot base ([N, C] logits, [N]
 * labels), or the scalar loss (base -1). */
static pp_status add_synthetic(pp_stage *s, int base, int rank, const int64_t *dims, int *out)
{
    tslot *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->value = -1;
    t->view_of = base >= 0 ? stage_base(s, base) : -1;   /* views are of bases */
    t->dtype = base >= 0 ? s->t[base].dtype : PP_DTYPE_F32;
    t->rank = rank;
    if (rank > 0) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);   /* the scalar loss: dims NULL */
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    t->nbytes = (size_t)n * pp_dtype_size(t->dtype);
    t->def_op = -1;
    t->last_op = -1;
    t->param = -1;
    t->master = -1;
    *out = s->nt++;
    return PP_OK;
}

/* The graph's own SoftmaxCrossEntropyLoss output, or one the caller names (logits +
 * labels), added as a synthetic op over [N, C] views. */
pp_status stage_place_loss(pp_stage *s, pp_error *err)
{
    const pp_graph *g = s->g;
    s->loss_t = -1;
    for (int o = 0; o < s->nops; o++) {
        const pp_node *n = &g->nodes[s->ops[o].node];
        if (n->op != PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS || n->outputs[0] < 0) continue;
        if (!g->values[n->outputs[0]].is_output) continue;
        const char *red = "mean";
        PP_CHECK(pp_attr_string(n->attrs, n->nattrs, "reduction", "mean", &red, n->name, err));
        if (!strcmp(red, "none"))
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s': a loss with reduction 'none' is not a scalar; export with "
                                "reduction 'mean' or 'sum'", n->name);
        s->loss_t = s->ops[o].out[0];
        s->loss_seed = default_seed(s, !strcmp(red, "mean"));
        /* labels reached from a graph input through reshapes can be counted by the trainer */
        int v = n->ninputs > 1 ? n->inputs[1] : -1;
        while (v >= 0 && g->values[v].producer >= 0) {
            const pp_node *p = &g->nodes[g->values[v].producer];
            v = pp_op_get(p->op)->flags & PP_OPF_PASS_GRAD ? p->inputs[0] : -1;   /* same values, reshaped */
        }
        /* class weights the trainer can read: a float initializer of one weight per class */
        int w = n->ninputs > 2 ? n->inputs[2] : -1;
        const pp_const_tensor *wt = w >= 0 && g->values[w].init >= 0 ? &g->inits[g->values[w].init].t : NULL;
        int weights_known = w < 0 || (wt && wt->dtype == PP_DTYPE_F32 && wt->shape.rank == 1 && wt->data);
        const pp_attr *ig = pp_attr_find(n->attrs, n->nattrs, "ignore_index");
        if (v >= 0 && g->values[v].kind == PP_VALUE_INPUT && !strcmp(red, "mean") && weights_known) {
            s->loss_labels = g->values[v].name;
            s->loss_ignore = ig && ig->type == PP_ATTR_INT ? ig->i : INT64_MIN;
            s->loss_weights = wt ? wt->data : NULL;
            s->loss_classes = wt ? wt->shape.dims[0] : 0;
            s->loss_counts = 1;
        }
        return PP_OK;
    }
    const pp_loss_spec *ls = &s->opt.loss;
    if (!ls->logits && !ls->labels && !s->opt.training) return PP_OK;   /* inference */
    if (!ls->logits || !ls->labels)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "the model has no SoftmaxCrossEntropyLoss output; name the loss with "
                            "--loss cross_entropy --logits NAME --labels NAME");
    int lv = pp_graph_find_value(g, ls->logits), yv = pp_graph_find_value(g, ls->labels);
    if (lv < 0 || s->t_of_value[lv] < 0 || s->t[s->t_of_value[lv]].dtype != PP_DTYPE_F32)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--logits '%s' is not a float tensor of the last stage",
                            ls->logits);
    int lt = s->t_of_value[lv], yt;
    const tslot *L = &s->t[lt];
    int64_t rows = 1;
    for (int i = 0; i + 1 < L->rank; i++) rows *= L->dims[i];
    int64_t classes = L->rank ? L->dims[L->rank - 1] : 1;
    if (yv >= 0 && g->values[yv].kind != PP_VALUE_INPUT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--labels '%s' names a tensor the model computes; labels "
                            "come from the dataset", ls->labels);
    if (yv >= 0) {   /* the model declares the labels input */
        int is_port = s->t_of_value[yv] >= 0;
        PP_CHECK(stage_tslot_of(s, yv, err, &yt));
        if (!is_port) PP_CHECK(stage_add_port(s, 1, yt, 1, err));
    } else {         /* int64 labels shaped like the logits without the class dim */
        tslot *y = &s->t[s->nt];
        memset(y, 0, sizeof *y);
        y->value = -1;
        y->view_of = -1;
        y->dtype = PP_DTYPE_I64;
        y->rank = L->rank - 1;
        memcpy(y->dims, L->dims, sizeof y->dims);
        y->nbytes = (size_t)rows * 8;
        y->def_op = y->last_op = -1;
        y->param = -1;
        y->master = -1;
        yt = s->nt++;
        PP_CHECK(stage_add_port(s, 1, yt, 1, err));
    }
    const tslot *Y = &s->t[yt];
    if (Y->dtype != PP_DTYPE_I64 || (int64_t)(Y->nbytes / 8) != rows)
        return pp_error_set(err, PP_ERR_SHAPE,
                            "--labels '%s' must be int64 with one label per row of --logits '%s' (%lld rows of %lld classes)",
                            ls->labels, ls->logits, (long long)rows, (long long)classes);
    int lview, yview, loss;
    PP_CHECK(add_synthetic(s, lt, 2, (int64_t[]){rows, classes}, &lview));
    PP_CHECK(add_synthetic(s, yt, 1, (int64_t[]){rows}, &yview));
    PP_CHECK(add_synthetic(s, -1, 0, NULL, &loss));
    stage_op *op = &s->ops[s->nops++];
    memset(op, 0, sizeof *op);
    op->node = -1;
    op->name = "loss";
    op->op = PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS;
    op->op_type = pp_op_get(op->op)->name;
    op->k = pp_kernel_find(op->op, pp_device_get_kind(s->dev), PP_DTYPE_F32);
    if (!op->k) return pp_error_set(err, PP_ERR_UNSUPPORTED, "no SoftmaxCrossEntropyLoss kernel");
    s->loss_attrs[0] = (pp_attr){.name = "reduction", .type = PP_ATTR_STRING, .s = "mean"};
    s->loss_attrs[1] = (pp_attr){.name = "ignore_index", .type = PP_ATTR_INT, .i = ls->ignore_index};
    op->attrs = s->loss_attrs;
    op->nattrs = 2;
    op->nin = 2;
    op->nout = 1;
    op->in = malloc(2 * sizeof(int));
    op->out = malloc(sizeof(int));
    if (!op->in || !op->out) return pp_error_set(err, PP_ERR_NOMEM, "out of memory planning the loss");
    op->in[0] = lview;
    op->in[1] = yview;
    op->out[0] = loss;
    s->loss_t = loss;
    s->loss_seed = default_seed(s, 1);
    s->loss_labels = ls->labels;
    s->loss_ignore = ls->ignore_index;
    s->loss_counts = 1;
    return PP_OK;
}

void pp_stage_seed_from(pp_stage *s, const float *seeds) { s->seeds = seeds; }

float *pp_stage_loss_data(pp_stage *s, int slot)
{
    if (s->loss_t < 0 || slot < 0 || slot >= s->opt.slots) return NULL;
    return stage_tensor_data(s, slot, s->loss_t);
}

float pp_stage_loss_seed(const pp_stage *s, int slot)
{
    return slot >= 0 && slot < s->opt.slots ? s->slot_seed[slot] : 0.0f;
}

void pp_stage_set_loss_scale(pp_stage *s, float scale) { s->loss_scale = scale; }

double pp_stage_loss(const pp_stage *s, int slot)
{
    if (s->loss_t < 0 || slot < 0 || slot >= s->opt.slots) return 0.0;
    float v = 0;
    pp_device_copy_to_host(s->dev, &v, stage_tensor_data((pp_stage *)s, slot, s->loss_t), sizeof v, NULL);
    return v;
}

void pp_stage_set_loss_weight(pp_stage *s, int slot, double weight, double global_weight)
{
    if (slot >= 0 && slot < s->opt.slots)
        s->slot_seed[slot] = (float)(global_weight != 0 ? weight / global_weight : 0.0);
}

double pp_stage_loss_share(const pp_stage *s, int slot, double loss)
{
    return (slot >= 0 && slot < s->opt.slots ? s->slot_seed[slot] : 0.0) * loss;
}

pp_status pp_stage_loss_labels(const pp_stage *s, pp_loss_labels *out, pp_error *err)
{
    if (s->loss_t < 0 || !s->loss_counts)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "the stage has no mean loss over graph-input labels");
    *out = (pp_loss_labels){s->loss_labels, s->loss_ignore, s->loss_weights, s->loss_classes};
    return PP_OK;
}

double pp_loss_labels_weight(const pp_loss_labels *l, const int64_t *y, int64_t groups, int64_t per, double *weight)
{
    double all = 0;
    for (int64_t j = 0; j < groups; j++) {
        double w = 0;
        for (int64_t k = 0; k < per; k++, y++) {
            if (*y == l->ignore_index) continue;
            double c = !l->class_weights ? 1.0 : *y >= 0 && *y < l->classes ? l->class_weights[*y] : 0.0;
            w += c;
            all += c;
        }
        if (weight) weight[j] = w;
    }
    return all;
}

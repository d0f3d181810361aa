/* What the model reads and predicts, found once from the graph and the loss options: its
 * logits, classes and labels (what pp_trainer_eval reports on) and its token input (what
 * counts as a token for tokens/s). */
#include "trainer_internal.h"

#include <string.h>
#include <onnxpipe/graph_ir.h>

static int is_int(pp_dtype t) { return t == PP_DTYPE_I64 || t == PP_DTYPE_I32; }

/* The model's own SoftmaxCrossEntropyLoss node, or -1. */
static int loss_node(const pp_graph *g)
{
    for (int i = g->nnodes - 1; i >= 0; i--)
        if (g->nodes[i].op == PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS) return i;
    return -1;
}

/* Logits, classes and labels: from --logits/--labels, else from the loss node. */
void train_find_io(const pp_graph *g, const pp_loss_spec *loss, train_io *io)
{
    *io = (train_io){.logits = -1, .ignore_index = INT64_MIN};
    int n = loss_node(g);
    if (n >= 0 && g->nodes[n].ninputs >= 2) {
        const pp_node *nd = &g->nodes[n];
        io->logits = nd->inputs[0];
        io->class_axis = 1;
        int y = nd->inputs[1];
        if (y >= 0 && g->values[y].kind == PP_VALUE_INPUT) io->labels = g->values[y].name;
        const pp_attr *ig = pp_attr_find(nd->attrs, nd->nattrs, "ignore_index");
        if (ig && ig->type == PP_ATTR_INT) io->ignore_index = ig->i;
    } else if (loss->logits && loss->labels) {
        io->logits = pp_graph_find_value(g, loss->logits);
        io->labels = loss->labels;
        io->ignore_index = loss->ignore_index;
        if (io->logits >= 0) io->class_axis = g->values[io->logits].shape.rank - 1;
    }
    if (io->logits >= 0 && io->class_axis >= 0 && io->class_axis < g->values[io->logits].shape.rank)
        io->classes = g->values[io->logits].shape.dims[io->class_axis];
    else
        io->logits = -1;
    /* tokens: an integer input of [batch, seq], whatever it is called (not the labels) */
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        int is_labels = io->labels && !strcmp(v->name, io->labels);
        if (is_int(v->dtype) && v->shape.rank == 2 && v->nconsumers > 0 && !is_labels) {
            io->tokens_per_sample = v->shape.dims[1];
            io->token_input = v->name;
            break;
        }
    }
}

/* A MatMul's epilogue, where the MatMul kernel can (PP_KCAP_MATMUL_ALPHA, _BIAS: the cpu's):
 * MatMul followed by Mul by a scalar constant becomes one MatMul with the scalar as a fourth
 * input (kernels/cpu/matmul.c: sgemm's alpha), and a MatMul (scaled or not) followed by Add
 * of a bias [N] or [M, N] (attention's causal mask) one MatMul with the bias as a third input
 * (sgemm's C). Not under --precision bf16 / fp16 (stage_fuse leaves the caps out): a product
 * is rounded there before its scale and bias are applied, as where a cut separates them. */
#include "stage_fuse.h"

#include <stdlib.h>
#include <onnxpipe/backend/kernels_backend.h>

/* If op o is a MatMul (with a fused scale or none) whose result only an Add of a float
 * [N] or [M, N] (its last dims; or [1, .., 1, M, N]) reads, returns that Add's op and sets *bias; else -1. */
static int match_bias(const pp_stage *s, const int *op_of_node, int o, int *bias)
{
    const stage_op *mm = &s->ops[o];
    if (mm->op != PP_OP_MATMUL || (mm->nin != 2 && (mm->nin != 4 || mm->in[2] >= 0)) || mm->nout != 1 ||
        mm->in[0] < 0 || mm->in[1] < 0)
        return -1;
    int y0 = mm->out[0], add = stage_only_reader(s, op_of_node, y0, PP_OP_ADD);
    if (add < 0) return -1;
    int b = stage_other_input(&s->ops[add], y0), y = s->ops[add].out[0];
    if (b < 0 || y < 0 || s->t[b].dtype != PP_DTYPE_F32 || s->t[y].nbytes != s->t[y0].nbytes) return -1;
    const tslot *tb = &s->t[b], *ty0 = &s->t[y0];
    if (tb->rank < 1 || ty0->rank < tb->rank) return -1;
    for (int d = 0; d + 2 < tb->rank; d++)   /* [1, .., 1, M, N]: a mask kept once (graph/compact.c) */
        if (tb->dims[d] != 1) return -1;
    for (int d = 1; d <= tb->rank && d <= 2; d++)
        if (tb->dims[tb->rank - d] != ty0->dims[ty0->rank - d]) return -1;
    *bias = b;
    return add;
}

/* If op o is a MatMul without a fused bias whose result only a Mul by a float scalar
 * constant reads (attention's 1/sqrt(d) scale), returns that Mul's op and sets *scale
 * to the constant's tslot; else -1. */
static int match_scale(const pp_stage *s, const int *op_of_node, int o, int *scale)
{
    const stage_op *mm = &s->ops[o];
    float f;
    if (mm->op != PP_OP_MATMUL || mm->nin != 2 || mm->nout != 1 || mm->in[0] < 0 || mm->in[1] < 0)
        return -1;
    int mul = stage_only_reader(s, op_of_node, mm->out[0], PP_OP_MUL);
    if (mul < 0 || s->ops[mul].out[0] < 0) return -1;
    *scale = stage_other_input(&s->ops[mul], mm->out[0]);
    return stage_scalar_const(s, *scale, &f) ? mul : -1;
}

/* Op op (the Mul or Add after MatMul mm) becomes that MatMul: its node, name, kernel, attributes. */
static void take_matmul(stage_op *op, const stage_op *mm)
{
    op->node = mm->node;
    op->name = mm->name;
    op->op = mm->op;
    op->op_type = mm->op_type;
    op->attrs = mm->attrs;
    op->nattrs = mm->nattrs;
    op->k = mm->k;
}

/* The Mul at position mul becomes MatMul(A, B, -, scale) -> the Mul's output. */
static pp_status fuse_scale(pp_stage *s, int o, int mul, int scale, char *gone, pp_error *err)
{
    stage_op *mm = &s->ops[o], *op = &s->ops[mul];
    int *in = realloc(op->in, 4 * sizeof *in);
    if (in) op->in = in;
    const void **host_in = realloc(op->host_in, 4 * sizeof *host_in);
    if (host_in) op->host_in = host_in;
    if (!in || !host_in) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    const void *hs = op->host_in[op->in[0] == scale ? 0 : 1];
    take_matmul(op, mm);
    op->nin = 4;
    op->in[0] = mm->in[0];
    op->in[1] = mm->in[1];
    op->in[2] = -1;
    op->in[3] = scale;
    op->host_in[0] = mm->host_in ? mm->host_in[0] : NULL;
    op->host_in[1] = mm->host_in ? mm->host_in[1] : NULL;
    op->host_in[2] = NULL;
    op->host_in[3] = hs;
    gone[o] = 1;
    s->t[mm->out[0]].view_of = mm->in[0];   /* unused from now on */
    return PP_OK;
}

/* The Add at position add becomes MatMul(A, W, bias[, scale]) -> the Add's output. */
static pp_status fuse_bias(pp_stage *s, int o, int add, int bias, char *gone, pp_error *err)
{
    stage_op *mm = &s->ops[o], *op = &s->ops[add];
    const int nin = mm->nin == 4 ? 4 : 3;   /* the Add's in and host_in hold 2 + 1 = 3 entries */
    if (nin == 4) {
        int *in = realloc(op->in, 4 * sizeof *in);
        if (in) op->in = in;
        const void **host_in = op->host_in ? realloc(op->host_in, 4 * sizeof *host_in) : NULL;
        if (host_in) op->host_in = host_in;
        if (!in || (op->host_in && !host_in)) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    }
    int y0 = mm->out[0];
    const void *hb = op->host_in ? op->host_in[op->in[0] == bias ? 0 : 1] : NULL;
    take_matmul(op, mm);
    op->nin = nin;
    op->in[0] = mm->in[0];
    op->in[1] = mm->in[1];
    op->in[2] = bias;
    if (nin == 4) op->in[3] = mm->in[3];
    if (op->host_in) {
        for (int i = 0; i < nin; i++) op->host_in[i] = i != 2 && mm->host_in ? mm->host_in[i] : NULL;
        op->host_in[2] = hb;
    }
    gone[o] = 1;
    s->t[y0].view_of = mm->in[0];   /* unused from now on */
    return PP_OK;
}

pp_status stage_fuse_epilogue(fuse_ctx *f, pp_error *err)
{
    pp_stage *s = f->s;
    const int *op_of_node = f->op_of_node;
    char *gone = f->gone;
    /* scales first: a fused MatMul sits where its Mul was, and its result's Add follows */
    for (int o = 0; (f->mm_caps & PP_KCAP_MATMUL_ALPHA) && o < s->nops; o++) {
        int scale, mul = gone[o] ? -1 : match_scale(s, op_of_node, o, &scale);
        if (mul < 0) continue;
        pp_log(PP_LOG_DEBUG, "stage: fused '%s' * scale '%s' into one MatMul", s->ops[o].name, s->ops[mul].name);
        PP_CHECK(fuse_scale(s, o, mul, scale, gone, err));
    }
    for (int o = 0; (f->mm_caps & PP_KCAP_MATMUL_BIAS) && o < s->nops; o++) {
        int bias, add = gone[o] ? -1 : match_bias(s, op_of_node, o, &bias);
        if (add < 0) continue;
        pp_log(PP_LOG_DEBUG, "stage: fused '%s' + bias '%s' into one MatMul", s->ops[o].name, s->ops[add].name);
        PP_CHECK(fuse_bias(s, o, add, bias, gone, err));
    }
    return PP_OK;
}

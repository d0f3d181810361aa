/* Private to stage/: the fusion layer (stage_types.h says the layers). stage_fuse (fuse.c)
 * runs the passes below in their order over the ops a stage collected; each pass is one
 * pattern, in its own fuse_<pattern>.c, over the helpers of fuse_match.c. A pass replaces
 * the ops of a match by one op (the others marked gone, their results made unused aliases)
 * and calls nothing of the places or run layers. */
#ifndef PP_STAGE_FUSE_H
#define PP_STAGE_FUSE_H

#include "stage_types.h"

/* fuse.c: replaces op patterns by one op, after the ops are collected and before gradients
 * and memory are planned (stage_place_tensors). */
pp_status stage_fuse(pp_stage *s, pp_error *err);

/* What every pass reads and marks. */
typedef struct fuse_ctx {
    pp_stage *s;
    int *op_of_node;    /* [end - first] the op of node first + i, or -1 */
    char *gone;         /* [nops] 1: the op was fused away */
    unsigned mm_caps;   /* the MatMul kernel's caps the passes may use (no epilogue under 16 bits) */
} fuse_ctx;

/* The passes, in the order stage_fuse runs them (the headers of their files say when each applies). */
pp_status stage_fuse_epilogue(fuse_ctx *f, pp_error *err);          /* fuse_epilogue.c: MatMul * scale + bias */
pp_status stage_fuse_gelu(fuse_ctx *f, pp_error *err);              /* fuse_gelu.c: erf and tanh GELU -> Gelu */
pp_status stage_fuse_swish(fuse_ctx *f, pp_error *err);             /* fuse_swish.c: x * Sigmoid(x) -> Swish */
pp_status stage_fuse_swiglu(fuse_ctx *f, pp_error *err);            /* fuse_swiglu.c: Swish(g) * u -> SwiGLU */
pp_status stage_fuse_views(fuse_ctx *f, pp_error *err);             /* fuse_views.c: reshapes, identities -> views */
pp_status stage_fuse_attention(fuse_ctx *f, pp_error *err);         /* fuse_attention.c: the chain -> Attention */
pp_status stage_fuse_strided_transposes(fuse_ctx *f, pp_error *err);   /* fuse_transpose.c: perm_A / _B / _Y */
pp_status stage_fuse_rmsnorm(fuse_ctx *f, pp_error *err);           /* fuse_rmsnorm.c: HF's chain -> RMSNormalization */
pp_status stage_fuse_rope(fuse_ctx *f, pp_error *err);              /* fuse_rope.c: rotate_half -> RotaryEmbedding */
pp_status stage_fuse_transposed_operands(fuse_ctx *f, pp_error *err);  /* fuse_transpose.c: trans_A / _B */
pp_status stage_fuse_causal(fuse_ctx *f, pp_error *err);            /* fuse_causal.c: causal marks */
pp_status stage_fuse_residual_norm(fuse_ctx *f, pp_error *err);     /* fuse_residual_norm.c: Add + norm -> Skip..Norm */

/* fuse_match.c, the passes' helpers: the op (of this stage, an `op`) that alone reads tslot
 * t, graph-wide, else -1 (op_of_node: op of node first + i, or -1); the input of binary op o
 * that is not t, or -2 when t is not one; attribute a added after op m's own
 * (stage_op.folded; 0 where they do not fit, else 1); op m made an `id` op run by kernel k,
 * its attributes dropped. */
int stage_only_reader(const pp_stage *s, const int *op_of_node, int t, pp_op op);
int stage_other_input(const stage_op *op, int t);
int stage_fold_attr(stage_op *m, pp_attr a);
void stage_op_become(stage_op *m, pp_op id, const pp_kernel *k);
/* The values of tslot t if it is a float32 constant (not trained) of shape [1, .., 1, R, C]
 * (a mask, a rotary table), else NULL. */
const float *stage_const_matrix(const pp_stage *s, int t, int64_t R, int64_t C);
/* A float scalar constant (not a trained one): 1 and its value in *f, else 0; whether it is
 * one within 1e-6 of want; whether tslot t is a float constant [T, T] (or [1, .., 1, T, T])
 * whose entries above the diagonal are all <= -1e4 (or -inf): a causal mask under which exp
 * underflows to exactly 0 after Softmax subtracts the row's maximum; the one live op that
 * reads tslot t or a view of it (through Casts and Dropouts that became views: HF's
 * torchscript export writes Softmax, Cast, Dropout, MatMul), if it is an `op` and neither t
 * nor those views leave the stage, else -1; the op of this stage, not gone, that makes tslot
 * t, or -1. */
int stage_scalar_const(const pp_stage *s, int t, float *f);
int stage_is_const(const pp_stage *s, int t, double want);
int stage_causal_mask(const pp_stage *s, int t, int64_t T);
int stage_only_reader_via_views(const pp_stage *s, const char *gone, int t, pp_op op);
int stage_producer(const pp_stage *s, const int *op_of_node, const char *gone, int t);
/* A pass that makes one op of kind id: at(s, k, op_of_node, o, gone) on every op o not gone,
 * where the device has a float32 kernel k of id (else nothing). */
typedef void (*stage_fuse_at)(pp_stage *s, const pp_kernel *k, const int *op_of_node, int o, char *gone);
void stage_fuse_each(fuse_ctx *f, pp_op id, stage_fuse_at at);

#endif

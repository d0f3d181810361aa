/* The tensors of cuDNN's fused attention (flash attention, kernels/cuda/sdpa.cu) described in
 * plain C, so that they are compiled into every build and tested without a GPU
 * (tests/test_cuda_launch.c): from an Attention call's layout (op_args_nn.h: Q, K, V, Y with
 * strides, GQA, the mask's broadcast strides) the dims and strides of every tensor cuDNN reads
 * or writes, what cuDNN's flash kernels take (checked before any graph is built), the key of
 * the plan cache, and the workspace of the backward graph. */
#ifndef PP_KERNELS_CUDA_SDPA_PLAN_H
#define PP_KERNELS_CUDA_SDPA_PLAN_H

#include <stddef.h>

#include "launch.h"
#include "op_args_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The graphs' tensors that live in memory (the rest are virtual), each [d0, d1, d2, d3] with
 * element strides; also their unique ids in cuDNN's variant pack. Q [B, Hq, Sq, Dk], K and V
 * [B, Hkv, Skv, D], O [B, Hq, Sq, Dv] as the call stores them; KT and VT the same memory as
 * [B, Hkv, D, Skv] (cuDNN's products take K^T and, backward, V^T); the softmax statistics
 * max + log(sum exp) [B, Hq, Sq, 1] in fp32 (forward writes them to aux, backward reads them);
 * the mask [B or 1, Hq or 1, Sq, Skv] (added to the scaled scores); backward's dO like O, dQ,
 * dK, dV like Q, K, V, and its two fp32 work tensors: rowsum(dO * O) [B, Hq, Sq, 1] and dQ's
 * accumulator [B, Hq, Sq, Dk], packed. */
enum {
    PP_SDPA_Q, PP_SDPA_K, PP_SDPA_V, PP_SDPA_KT, PP_SDPA_VT, PP_SDPA_O, PP_SDPA_STATS, PP_SDPA_BIAS,
    PP_SDPA_DO, PP_SDPA_DQ, PP_SDPA_DK, PP_SDPA_DV, PP_SDPA_SUM, PP_SDPA_DQ_ACCUM,
    PP_SDPA_NT
};

typedef struct pp_cu_sdpa_tensor {
    long long dims[4], st[4];
} pp_cu_sdpa_tensor;

/* One call's plan; also the key of the device's plan cache (compared whole: pp_cu_sdpa_plan
 * zeroes it first). */
typedef struct pp_cu_sdpa {
    pp_cu_sdpa_tensor t[PP_SDPA_NT];
    long long b, hq, hkv, sq, skv, dk, dv;
    int dtype;          /* PP_CUDNN_DATA_HALF or _BFLOAT16: Q, K, V, O and their gradients */
    int bias_dtype;     /* the mask's PP_CUDNN_DATA_*, with has_bias */
    int has_bias, causal;
    float scale;
    int backward;       /* the cache holds forward and backward plans apart */
} pp_cu_sdpa;

/* The plan of an Attention call whose Q, K, V and Y are of dtype io and whose additive mask
 * (a->mask 2) is of dtype mask; PP_ERR_UNSUPPORTED, with the reason, where cuDNN's flash
 * kernels do not take the call: io not bfloat16 or float16, head dims not a multiple of 8 or
 * above 128, strides of the 16-bit rows not multiples of 8 elements (16-byte aligned), a bool
 * mask, a mask broadcast over the queries or keys, or one query and one key. */
pp_status pp_cu_sdpa_plan(pp_cu_sdpa *p, const pp_attn_args *a, pp_dtype io, pp_dtype mask, int backward,
                          const char *node, pp_error *err);

/* Bytes of the softmax statistics forward keeps for backward (the kernel's aux). */
size_t pp_cu_sdpa_stats_bytes(const pp_cu_sdpa *p);

/* Backward's workspace: cuDNN's own (plan_bytes) first, then the fp32 rowsum and dQ
 * accumulator, then, for each gradient i (0 dQ, 1 dK, 2 dV) whose bit is in `temps`, a 16-bit
 * temporary of its elements (cuDNN assigns its gradients; a gradient the call must add to goes
 * there and is added after). Offsets are 256-byte aligned. */
typedef struct pp_cu_sdpa_ws {
    size_t sum_at, accum_at, accum_bytes, tmp_at[3], bytes;
} pp_cu_sdpa_ws;
void pp_cu_sdpa_bwd_ws(const pp_cu_sdpa *p, size_t plan_bytes, unsigned temps, pp_cu_sdpa_ws *w);

#ifdef __cplusplus
}
#endif
#endif

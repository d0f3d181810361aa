/* cuBLASLt's description of one GEMM: layouts, compute type, bias epilogue, alignments and the
 * cache key (lt_plan.h); plain C, in every build. */
#include "lt_plan.h"

#include <stdint.h>
#include <string.h>

static int align_of(const void *p)
{
    const uintptr_t u = (uintptr_t)p;
    int a = 16;
    while (a > 1 && u % (uintptr_t)a) a /= 2;
    return a;
}

static int cu_type(pp_dtype t)
{
    return t == PP_DTYPE_BF16 ? PP_CU_R_16BF : t == PP_DTYPE_F16 ? PP_CU_R_16F : PP_CU_R_32F;
}

_Static_assert(sizeof(pp_cu_lt) == 15 * sizeof(long long) + 14 * sizeof(int), "pp_cu_lt has padding bytes");

pp_cu_lt pp_cu_lt_of(const pp_cu_gemm *g, int bias_type, const void *a, const void *b, const void *c,
                     const void *bias)
{
    pp_cu_lt l;
    memset(&l, 0, sizeof l);
    l.transa = g->transa, l.transb = g->transb;
    l.m = g->m, l.n = g->n, l.k = g->k;
    l.rows[0] = g->transa ? g->k : g->m, l.cols[0] = g->transa ? g->m : g->k, l.ld[0] = g->lda;
    l.rows[1] = g->transb ? g->n : g->k, l.cols[1] = g->transb ? g->k : g->n, l.ld[1] = g->ldb;
    l.rows[2] = g->m, l.cols[2] = g->n, l.ld[2] = g->ldc;
    l.batch = g->batch;
    l.stride[0] = g->stride_a, l.stride[1] = g->stride_b, l.stride[2] = g->stride_c;
    l.type[0] = g->atype, l.type[1] = g->btype, l.type[2] = g->ctype;
    l.compute = g->atype == PP_CU_R_32F && g->btype == PP_CU_R_32F ? PP_CU_COMPUTE_32F_FAST_TF32 : g->compute;
    l.epilogue = bias_type < 0 ? PP_CU_LT_EPILOGUE_DEFAULT : PP_CU_LT_EPILOGUE_BIAS;
    l.bias_type = bias_type < 0 ? 0 : bias_type;
    l.align[0] = align_of(a), l.align[1] = align_of(b), l.align[2] = align_of(c);
    l.align[3] = bias_type < 0 ? 0 : align_of(bias);
    return l;
}

int pp_cu_lt_bias_epilogue(const pp_tensor *C, long long N, float beta, pp_dtype y, int *bias_type)
{
    if (!C || !C->data || beta != 1.f || (C->dtype != PP_DTYPE_F32 && C->dtype != y)) return 0;
    if (!(C->rank == 1 && C->dims[0] == N) && !(C->rank == 2 && C->dims[0] == 1 && C->dims[1] == N)) return 0;
    *bias_type = cu_type(C->dtype);
    return 1;
}

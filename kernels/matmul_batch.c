/* The batch of a numpy MatMul (its shapes, broadcast strides and fold), shared by the
 * cpu and cuda kernels. */
#include "matmul_batch.h"

#include <string.h>

pp_status pp_matmul_batch_make(const pp_tensor *A, const pp_tensor *B, const pp_tensor *Y, pp_matmul_batch *p,
                          const char *node, pp_error *err)
{
    memset(p, 0, sizeof *p);
    if (A->rank < 1 || B->rank < 1)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): operands must have rank >= 1 (got %d and %d)",
                            node, A->rank, B->rank);
    int ab = A->rank > 1 ? A->rank - 2 : 0, bb = B->rank > 1 ? B->rank - 2 : 0;
    p->M = A->rank > 1 ? A->dims[A->rank - 2] : 1;
    p->K = A->dims[A->rank - 1];
    int64_t kb = B->rank > 1 ? B->dims[B->rank - 2] : B->dims[0];
    p->N = B->rank > 1 ? B->dims[B->rank - 1] : 1;
    if (kb != p->K)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): inner dims differ (A has K=%lld, B has K=%lld)",
                            node, (long long)p->K, (long long)kb);
    p->brank = ab > bb ? ab : bb;
    int64_t sa = 1, sb = 1;
    p->batch = 1;
    for (int d = p->brank - 1; d >= 0; d--) {
        int da = d - (p->brank - ab), db = d - (p->brank - bb);
        int64_t na = da >= 0 ? A->dims[da] : 1, nb = db >= 0 ? B->dims[db] : 1;
        if (na != nb && na != 1 && nb != 1)
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): batch dims %lld and %lld do not broadcast",
                                node, (long long)na, (long long)nb);
        p->bdims[d] = na > nb ? na : nb;
        p->astr[d] = na == 1 ? 0 : sa;
        p->bstr[d] = nb == 1 ? 0 : sb;
        sa *= na;
        sb *= nb;
        p->batch *= p->bdims[d];
    }
    p->a_mats = sa;
    p->b_mats = sb;
    if (pp_tensor_numel(Y) != p->batch * p->M * p->N)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): output has %lld elements, expected %lld", node,
                            (long long)pp_tensor_numel(Y), (long long)(p->batch * p->M * p->N));
    p->fold_a = sb == 1 && sa == p->batch;
    return PP_OK;
}

pp_status pp_matmul_batch_of(const pp_kernel_ctx *c, const pp_tensor *Y, pp_matmul_batch *p, pp_error *err)
{
    int64_t t[2];
    pp_tensor op[2] = {c->in[0], c->in[1]};
    static const char *const names[2] = {"trans_A", "trans_B"};
    for (int k = 0; k < 2; k++) {
        PP_CHECK(pp_attr_int(c->attrs, c->nattrs, names[k], 0, &t[k], c->node, err));
        if (t[k] && op[k].rank < 2)
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): %s needs an operand of rank >= 2 (got %d)",
                                c->node, names[k], op[k].rank);
        if (t[k]) {   /* plan on the operand's logical shape */
            op[k].dims[op[k].rank - 2] = c->in[k].dims[op[k].rank - 1];
            op[k].dims[op[k].rank - 1] = c->in[k].dims[op[k].rank - 2];
        }
    }
    PP_CHECK(pp_matmul_batch_make(&op[0], &op[1], Y, p, c->node, err));
    p->ta = t[0] != 0;
    p->tb = t[1] != 0;
    p->fold_a = p->fold_a && !p->ta;   /* a transposed A's matrices are no one (batch M, K) matrix */
    return PP_OK;
}

void pp_matmul_batch_index(const pp_matmul_batch *p, int64_t b, int64_t *ia, int64_t *ib)
{
    *ia = *ib = 0;
    for (int d = p->brank - 1; d >= 0; d--) {
        int64_t idx = b % p->bdims[d];
        b /= p->bdims[d];
        *ia += idx * p->astr[d];
        *ib += idx * p->bstr[d];
    }
}

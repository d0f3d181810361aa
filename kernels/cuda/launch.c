/* Launch configuration and library-call arithmetic of the cuda backend (launch.h): plain
 * C, compiled into every build, so that tests/test_cuda_launch.c checks it on any machine. */
#include "launch.h"

#include <string.h>

pp_cu_launch pp_cu_launch_1d(int64_t n)
{
    int64_t g = (n + PP_CU_BLOCK - 1) / PP_CU_BLOCK;
    if (g < 1) g = 1;
    if (g > PP_CU_MAX_GRID) g = PP_CU_MAX_GRID;
    return (pp_cu_launch){(unsigned)g, PP_CU_BLOCK};
}

pp_cu_launch pp_cu_launch_parts(int64_t n, unsigned max_blocks)
{
    pp_cu_launch l = pp_cu_launch_1d(n);
    if (max_blocks < 1) max_blocks = 1;
    if (l.grid > max_blocks) l.grid = max_blocks;
    return l;
}

pp_cu_launch pp_cu_launch_rows(int64_t rows, int64_t n)
{
    unsigned b = 32;
    while (b < 1024 && (int64_t)b < n) b *= 2;
    return (pp_cu_launch){(unsigned)(rows > 0 ? rows : 1), b};
}

size_t pp_cu_alloc_round(size_t n)
{
    const size_t small = 512, large = (size_t)2 << 20;
    if (n == 0) n = 1;
    return n < ((size_t)1 << 20) ? (n + small - 1) / small * small : (n + large - 1) / large * large;
}

int pp_cu_alloc_fits(size_t have, size_t want)
{
    want = pp_cu_alloc_round(want);
    return want <= have && have <= 2 * want;
}

static int ld_of(int64_t rows) { return rows > 1 ? (int)rows : 1; }

pp_cu_gemm pp_cu_gemm_rowmajor(int tx, int ty, int64_t M, int64_t N, int64_t K, int64_t sx, int64_t sy, int64_t sc,
                               int64_t batch)
{
    pp_cu_gemm g;
    g.transa = ty;
    g.transb = tx;
    g.m = (int)N;
    g.n = (int)M;
    g.k = (int)K;
    /* Y stored (K, N) row-major = (N, K) column-major. cuBLAS rejects a leading dimension
     * below 1 even when a dimension is 0 (empty tensors), where any ld >= 1 is right */
    g.lda = ld_of(ty ? K : N);
    g.ldb = ld_of(tx ? M : K);
    g.ldc = ld_of(N);
    g.stride_a = sy;
    g.stride_b = sx;
    g.stride_c = sc;
    g.batch = (int)batch;
    g.atype = g.btype = g.ctype = PP_CU_R_32F;
    g.compute = PP_CU_COMPUTE_32F;
    return g;
}

static int cu_type(pp_dtype t)
{
    return t == PP_DTYPE_F32 ? PP_CU_R_32F : t == PP_DTYPE_BF16 ? PP_CU_R_16BF : t == PP_DTYPE_F16 ? PP_CU_R_16F : -1;
}

int pp_cu_gemm_set_types(pp_cu_gemm *g, pp_dtype x, pp_dtype y, pp_dtype c)
{
    const int tx = cu_type(x), tc = cu_type(c);
    if (tx < 0 || x != y || tc < 0 || (c != x && c != PP_DTYPE_F32)) return 0;
    g->atype = g->btype = tx;
    g->ctype = tc;
    g->compute = PP_CU_COMPUTE_32F;
    return 1;
}

/* Matrix stride of an operand holding `mats` matrices of `size` elements in a batch of
 * `batch`: size when it has one per output matrix, 0 when it has one for all, -1 when
 * the pattern is no uniform stride. */
static int64_t uniform_stride(int64_t mats, int64_t batch, int64_t size)
{
    return mats == batch ? size : mats == 1 ? 0 : -1;
}

pp_cu_gemm pp_cu_mm_gemm(const pp_cu_mm *p, pp_cu_part part, int *serial)
{
    const int64_t M = p->M, K = p->K, N = p->N, MB = p->batch * p->M;
    *serial = 0;
    const int ta = p->ta, tb = p->tb;
    if (p->fold_a) {   /* never under trans_A (pp_matmul_batch_of) */
        switch (part) {
        case PP_CU_Y: return pp_cu_gemm_rowmajor(0, tb, MB, N, K, 0, 0, 0, 1);
        case PP_CU_DA: return pp_cu_gemm_rowmajor(0, !tb, MB, K, N, 0, 0, 0, 1);
        default:   /* dB (K, N) = A^T dY, or under trans_B dB (N, K) = dY^T A */
            return tb ? pp_cu_gemm_rowmajor(1, 0, N, K, MB, 0, 0, 0, 1)
                      : pp_cu_gemm_rowmajor(1, 0, K, N, MB, 0, 0, 0, 1);
        }
    }
    int64_t sa = uniform_stride(p->a_mats, p->batch, M * K), sb = uniform_stride(p->b_mats, p->batch, K * N);
    int64_t sy = M * N;
    /* a gradient written with stride 0 would race between the batch's matrices */
    *serial = sa < 0 || sb < 0 || (part == PP_CU_DA && sa == 0) || (part == PP_CU_DB && sb == 0);
    int64_t batch = *serial ? 1 : p->batch;
    if (*serial) sa = sb = sy = 0;
    switch (part) {
    case PP_CU_Y: return pp_cu_gemm_rowmajor(ta, tb, M, N, K, sa, sb, sy, batch);
    case PP_CU_DA:   /* dA (M, K) = dY B'^T, or under trans_A dA (K, M) = B' dY^T */
        return ta ? pp_cu_gemm_rowmajor(tb, 1, K, M, N, sb, sy, sa, batch)
                  : pp_cu_gemm_rowmajor(0, !tb, M, K, N, sy, sb, sa, batch);
    default:   /* dB (K, N) = A'^T dY, or under trans_B dB (N, K) = dY^T A' */
        return tb ? pp_cu_gemm_rowmajor(1, ta, N, K, M, sy, sa, sb, batch)
                  : pp_cu_gemm_rowmajor(!ta, 0, K, N, M, sa, sy, sb, batch);
    }
}

void pp_cu_mm_offsets(const pp_cu_mm *p, pp_cu_part part, int64_t b, int64_t *ox, int64_t *oy, int64_t *oc)
{
    const int64_t sa = p->M * p->K, sb = p->K * p->N, sy = p->M * p->N;
    int64_t ia, ib;
    pp_matmul_batch_index(p, b, &ia, &ib);
    switch (part) {
    case PP_CU_Y: *ox = ia * sa, *oy = ib * sb, *oc = b * sy; break;
    case PP_CU_DA:
        if (p->ta) *ox = ib * sb, *oy = b * sy, *oc = ia * sa;
        else *ox = b * sy, *oy = ib * sb, *oc = ia * sa;
        break;
    default:
        if (p->tb) *ox = b * sy, *oy = ia * sa, *oc = ib * sb;
        else *ox = ia * sa, *oy = b * sy, *oc = ib * sb;
        break;
    }
}

pp_cu_gemm pp_cu_gemm_op_gemm(const pp_cu_gemm_op *g, pp_cu_part part)
{
    const int64_t M = g->M, K = g->K, N = g->N;
    switch (part) {
    case PP_CU_Y: return pp_cu_gemm_rowmajor(g->ta, g->tb, M, N, K, 0, 0, 0, 1);
    case PP_CU_DA:
        return g->ta ? pp_cu_gemm_rowmajor(g->tb, 1, K, M, N, 0, 0, 0, 1)      /* dA (K,M) = B' dY^T */
                     : pp_cu_gemm_rowmajor(0, !g->tb, M, K, N, 0, 0, 0, 1);    /* dA (M,K) = dY B'^T */
    default:
        return g->tb ? pp_cu_gemm_rowmajor(1, g->ta, N, K, M, 0, 0, 0, 1)      /* dB (N,K) = dY^T A' */
                     : pp_cu_gemm_rowmajor(!g->ta, 0, K, N, M, 0, 0, 0, 1);    /* dB (K,N) = A'^T dY */
    }
}

void pp_cu_gemm_op_operands(const pp_cu_gemm_op *g, pp_cu_part part, const void *A, const void *B, const void *dY,
                            const void **x, const void **y)
{
    switch (part) {
    case PP_CU_Y: *x = A, *y = B; break;
    case PP_CU_DA: *x = g->ta ? B : dY, *y = g->ta ? dY : B; break;
    default: *x = g->tb ? dY : A, *y = g->tb ? A : dY; break;
    }
}

pp_status pp_cu_bcast_init(pp_cu_bcast *b, const pp_tensor *out, const pp_tensor *const *in, int nin,
                           const char *node, pp_error *err)
{
    memset(b, 0, sizeof *b);
    b->nin = nin;
    b->n = pp_tensor_numel(out);
    b->same = 1;
    int64_t st[PP_CU_MAX_IN][PP_MAX_RANK];
    for (int i = 0; i < nin; i++) {
        const pp_tensor *x = in[i];
        if (x->rank > out->rank)
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s': input %d has rank %d > output rank %d", node, i,
                                x->rank, out->rank);
        int64_t s = 1;
        for (int d = out->rank - 1; d >= 0; d--) {
            int xd = d - (out->rank - x->rank);
            int64_t n = xd >= 0 ? x->dims[xd] : 1;
            if (n != out->dims[d] && n != 1)
                return pp_error_set(err, PP_ERR_SHAPE, "node '%s': input %d dim %d is %lld, does not broadcast to %lld",
                                    node, i, xd, (long long)n, (long long)out->dims[d]);
            st[i][d] = n == 1 && out->dims[d] != 1 ? 0 : s;
            s *= n;
        }
        if (pp_tensor_numel(x) != b->n) b->same = 0;
    }
    /* merge dim d into the previous merged dim when every input is contiguous across them */
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1) continue;
        int merge = r > 0;
        for (int i = 0; i < nin && merge; i++) merge = b->st[i][r - 1] == st[i][d] * out->dims[d];
        if (merge) {
            b->dims[r - 1] *= out->dims[d];
            for (int i = 0; i < nin; i++) b->st[i][r - 1] = st[i][d];
        } else {
            b->dims[r] = out->dims[d];
            for (int i = 0; i < nin; i++) b->st[i][r] = st[i][d];
            r++;
        }
    }
    if (r == 0) {
        b->dims[0] = 1;
        r = 1;
    }
    b->rank = r;
    return PP_OK;
}

void pp_cu_strided_init(pp_cu_strided *s, int rank, const int64_t *dims, const int64_t *dst_st, const int64_t *src_st)
{
    memset(s, 0, sizeof *s);
    s->n = 1;
    int r = 0;
    for (int d = 0; d < rank; d++) {
        s->n *= dims[d];
        if (dims[d] == 1) continue;
        if (r > 0 && s->dst_st[r - 1] == dst_st[d] * dims[d] && s->src_st[r - 1] == src_st[d] * dims[d]) {
            s->dims[r - 1] *= dims[d];
            s->dst_st[r - 1] = dst_st[d];
            s->src_st[r - 1] = src_st[d];
        } else {
            s->dims[r] = dims[d];
            s->dst_st[r] = dst_st[d];
            s->src_st[r] = src_st[d];
            r++;
        }
    }
    if (r == 0) {
        s->dims[0] = 1;
        s->dst_st[0] = s->src_st[0] = 1;
        r = 1;
    }
    s->rank = r;
}

static void row_major_strides(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
}

void pp_cu_strided_transpose(pp_cu_strided *s, const pp_tensor *in, const int64_t *perm)
{
    int64_t ist[PP_MAX_RANK], odims[PP_MAX_RANK], ost[PP_MAX_RANK], sst[PP_MAX_RANK];
    row_major_strides(in->rank, in->dims, ist);
    for (int d = 0; d < in->rank; d++) {
        odims[d] = in->dims[perm[d]];
        sst[d] = ist[perm[d]];
    }
    row_major_strides(in->rank, odims, ost);
    pp_cu_strided_init(s, in->rank, odims, ost, sst);
}

void pp_cu_reduce_init(pp_cu_reduce *r, int rank, const int64_t *src_dims, const int *reduce)
{
    int64_t st[PP_MAX_RANK];
    memset(r, 0, sizeof *r);
    row_major_strides(rank, src_dims, st);
    r->nout = r->nred = 1;
    for (int d = 0; d < rank; d++) {
        if (src_dims[d] == 1) continue;
        if (reduce[d]) {
            r->rdims[r->rrank] = src_dims[d];
            r->rst[r->rrank++] = st[d];
            r->nred *= src_dims[d];
        } else {
            r->kdims[r->krank] = src_dims[d];
            r->kst[r->krank++] = st[d];
            r->nout *= src_dims[d];
        }
    }
}

pp_status pp_cu_reduce_to_shape(pp_cu_reduce *r, const pp_tensor *dst, const pp_tensor *src, const char *node,
                                pp_error *err)
{
    int red[PP_MAX_RANK];
    if (dst->rank > src->rank)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s': gradient of rank %d cannot sum into rank %d", node,
                            src->rank, dst->rank);
    for (int d = 0; d < src->rank; d++) {
        int dd = d - (src->rank - dst->rank);
        int64_t n = dd >= 0 ? dst->dims[dd] : 1;
        if (n != src->dims[d] && n != 1)
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s': dim %d of size %lld cannot sum into %lld", node, d,
                                (long long)src->dims[d], (long long)n);
        red[d] = n == 1 && src->dims[d] != 1;
    }
    pp_cu_reduce_init(r, src->rank, src->dims, red);
    return PP_OK;
}

pp_cu_rows pp_cu_rows_of(const int64_t *dims, int rank, int axis_from, int axis_to)
{
    pp_cu_rows r = {1, 1, 1};
    for (int d = 0; d < rank; d++) {
        if (d < axis_from) r.outer *= dims[d];
        else if (d < axis_to) r.n *= dims[d];
        else r.inner *= dims[d];
    }
    return r;
}

/* Fills the spatial part of a Conv plan; k is the kernel (kh, kw) or (kw) for 1-D. */
static pp_status spatial(pp_cu_conv *cv, const pp_tensor *X, const pp_tensor *Y, const int64_t *k,
                         const int64_t *pads, const int64_t *strides, const int64_t *dil, const char *node,
                         const char *op, pp_error *err)
{
    int sp = X->rank - 2;
    if (sp < 1 || sp > 2 || Y->rank != X->rank)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): input rank %d (only 1-D and 2-D, NC[H]W)", node,
                            op, X->rank);
    for (int i = 0; i < 2; i++) {
        int d = i - (2 - sp); /* spatial index, -1 for the H = 1 of a 1-D op */
        int64_t pb = d >= 0 && pads ? pads[d] : 0, pe = d >= 0 && pads ? pads[d + sp] : 0;
        if (pb != pe)
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s' (%s): asymmetric pads %lld/%lld on spatial dim %d (cuDNN needs them equal)",
                                node, op, (long long)pb, (long long)pe, d);
        cv->pad[i] = (int)pb;
        cv->stride[i] = d >= 0 && strides ? (int)strides[d] : 1;
        cv->dil[i] = d >= 0 && dil ? (int)dil[d] : 1;
        cv->w[2 + i] = d >= 0 ? (int)k[d] : 1;
        cv->x[2 + i] = d >= 0 ? (int)X->dims[2 + d] : 1;
        cv->y[2 + i] = d >= 0 ? (int)Y->dims[2 + d] : 1;
        int64_t want = (cv->x[2 + i] + 2 * pb - (int64_t)cv->dil[i] * (cv->w[2 + i] - 1) - 1) / cv->stride[i] + 1;
        if (want != cv->y[2 + i])
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (%s): output spatial dim %d is %d, expected %lld", node,
                                op, d, cv->y[2 + i], (long long)want);
    }
    cv->x[0] = (int)X->dims[0];
    cv->x[1] = (int)X->dims[1];
    cv->y[0] = (int)Y->dims[0];
    cv->y[1] = (int)Y->dims[1];
    for (int t = 0; t < 2; t++) {
        int *dims = t ? cv->y : cv->x, *st = t ? cv->yst : cv->xst;
        st[3] = 1;
        for (int d = 2; d >= 0; d--) st[d] = st[d + 1] * dims[d + 1];
    }
    return PP_OK;
}

static int conv_type(pp_dtype t)
{
    return t == PP_DTYPE_F32    ? PP_CUDNN_DATA_FLOAT
           : t == PP_DTYPE_BF16 ? PP_CUDNN_DATA_BFLOAT16
           : t == PP_DTYPE_F16  ? PP_CUDNN_DATA_HALF
                                : -1;
}

pp_status pp_cu_conv_plan(pp_cu_conv *cv, const pp_tensor *X, const pp_tensor *W, const pp_tensor *Y,
                          const int64_t *pads, const int64_t *strides, const int64_t *dilations, int64_t groups,
                          const char *node, pp_error *err)
{
    memset(cv, 0, sizeof *cv);
    if (W->rank != X->rank)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Conv): W has rank %d, X has rank %d", node, W->rank,
                            X->rank);
    cv->dtype = conv_type(X->dtype);
    if (cv->dtype < 0 || W->dtype != X->dtype || Y->dtype != X->dtype)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "node '%s' (Conv): X, W and Y are %s, %s and %s; cuDNN takes float32, bfloat16 or "
                            "float16 for all three",
                            node, pp_dtype_name(X->dtype), pp_dtype_name(W->dtype), pp_dtype_name(Y->dtype));
    cv->compute = PP_CUDNN_DATA_FLOAT;
    /* as PyTorch: TF32 allowed for float32, tensor cores without down-conversion for 16 bits */
    cv->math = X->dtype == PP_DTYPE_F32 ? PP_CUDNN_DEFAULT_MATH : PP_CUDNN_TENSOR_OP_MATH;
    PP_CHECK(spatial(cv, X, Y, W->dims + 2, pads, strides, dilations, node, "Conv", err));
    cv->groups = (int)groups;
    cv->w[0] = (int)W->dims[0];
    cv->w[1] = (int)W->dims[1];
    if (groups < 1 || X->dims[1] != W->dims[1] * groups || W->dims[0] % groups || Y->dims[1] != W->dims[0])
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Conv): X has %lld channels, W is [%lld, %lld, ...], group %lld",
                            node, (long long)X->dims[1], (long long)W->dims[0], (long long)W->dims[1],
                            (long long)groups);
    return PP_OK;
}

int pp_cu_conv_native(const pp_tensor *in, int nin, const pp_tensor *y, const pp_tensor *grad_in)
{
    if (nin < 2 || nin > 3) return 0;   /* the F32 kernel, under the adapter, says what is wrong */
    const pp_dtype t = in[0].dtype;
    if (conv_type(t) < 0 || in[1].dtype != t || y->dtype != t) return 0;
    if (!grad_in) return nin < 3 || !in[2].data || in[2].dtype == t || in[2].dtype == PP_DTYPE_F32;
    return (!grad_in[0].data || grad_in[0].dtype == t) &&
           (!grad_in[1].data || grad_in[1].dtype == t || grad_in[1].dtype == PP_DTYPE_F32) &&
           (nin < 3 || !grad_in[2].data || grad_in[2].dtype == PP_DTYPE_F32);
}

int pp_cu_conv_filter_ws(const pp_cu_conv *cv, size_t algo_ws, pp_dtype dw, size_t *bytes, size_t *temp_at)
{
    const size_t align = 256, elems = (size_t)cv->w[0] * (size_t)cv->w[1] * (size_t)cv->w[2] * (size_t)cv->w[3];
    const int temp = cv->dtype != PP_CUDNN_DATA_FLOAT && dw == PP_DTYPE_F32;
    *temp_at = temp ? (algo_ws + align - 1) / align * align : 0;
    *bytes = temp ? *temp_at + elems * 2 : algo_ws;   /* bfloat16 and float16: 2 bytes */
    return temp;
}

void pp_cu_bn_dims(const pp_tensor *x, int dims[4])
{
    int64_t hw = 1;
    for (int d = 2; d < x->rank; d++) hw *= x->dims[d];
    dims[0] = (int)x->dims[0];
    dims[1] = x->rank > 1 ? (int)x->dims[1] : 1;
    dims[2] = (int)hw;
    dims[3] = 1;
}

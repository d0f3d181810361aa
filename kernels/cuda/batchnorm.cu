/* cuda BatchNormalization over x (N, C, spatial...) on cuDNN (spatial mode, x seen as
 * N C HW 1): training forward and backward with batch statistics (aux keeps cuDNN's saved
 * mean and 1/sqrt(var + eps) per channel, the cpu's layout), inference forward with the
 * running ones. The running mean/var outputs follow ONNX (biased batch variance), not
 * cuDNN's unbiased update, so a small kernel writes them from the saved statistics; the
 * inference-mode backward (statistics are inputs with gradients) has its own kernels. */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "reduce.cuh"

typedef struct bn_plan {
    int dims[4];                /* N C HW 1 */
    int64_t C, HW, n;           /* channels, spatial size, elements of x */
    float eps, momentum;
} bn_plan;

/* x: the input or (backward) its gradient, same shape */
static pp_status bn_plan_make(const pp_kernel_ctx *c, const pp_tensor *x, bn_plan *p, pp_error *err)
{
    if (c->nin != 5) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 5", c->nin);
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "epsilon", 1e-5f, &p->eps, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "momentum", 0.9f, &p->momentum, c->node, err));
    if (x->rank < 2) return pp_args_fail(c, PP_ERR_SHAPE, err, "input rank %d, expected >= 2", x->rank);
    for (int i = 0; i < 5; i++)
        if (c->in[i].dtype != PP_DTYPE_F32)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d has dtype %s, expected float32", i,
                             pp_dtype_name(c->in[i].dtype));
    pp_cu_bn_dims(x, p->dims);
    p->C = p->dims[1];
    p->HW = p->dims[2];
    p->n = pp_tensor_numel(x);
    for (int i = 1; i < 5; i++)
        if (c->in[i].rank != 1 || c->in[i].dims[0] != p->C)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input %d must have shape [%lld] (channels)", i, (long long)p->C);
    if ((double)p->eps < CUDNN_BN_MIN_EPSILON)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "epsilon %g is below cuDNN's minimum %g", (double)p->eps,
                         (double)CUDNN_BN_MIN_EPSILON);
    return PP_OK;
}

/* The x and per-channel descriptors; released by the caller (also on error). */
typedef struct bn_desc {
    cudnnTensorDescriptor_t x, ch;
} bn_desc;

static pp_status desc_make(const pp_kernel_ctx *c, const bn_plan *p, bn_desc *d, pp_error *err)
{
    CUDNN_TRY(c, cudnnCreateTensorDescriptor(&d->x));
    CUDNN_TRY(c, cudnnCreateTensorDescriptor(&d->ch));
    CUDNN_TRY(c, cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, p->dims[0], p->dims[1],
                                            p->dims[2], p->dims[3]));
    CUDNN_TRY(c, cudnnDeriveBNTensorDescriptor(d->ch, d->x, CUDNN_BATCHNORM_SPATIAL));
    return PP_OK;
}

static void desc_free(bn_desc *d)
{
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->ch) cudnnDestroyTensorDescriptor(d->ch);
}

PP_CU_AUX(pp_cu_batchnorm_aux) { return c->in[0].rank >= 2 ? (size_t)c->in[0].dims[1] * 2 * sizeof(float) : 0; }

/* run = run * momentum + batch * (1 - momentum), batch var = 1 / rstd^2 - eps (biased) */
__global__ void k_bn_running(float *mean_out, float *var_out, const float *rm, const float *rv, const float *stats,
                             int64_t C, float eps, float momentum)
{
    CU_FOR(ch, C) {
        const float mean = stats[ch], rstd = stats[C + ch];
        if (mean_out) mean_out[ch] = rm[ch] * momentum + mean * (1.f - momentum);
        /* a constant channel has var 0, which the float round trip can leave at -1e-12 */
        if (var_out) var_out[ch] = rv[ch] * momentum + fmaxf(1.f / (rstd * rstd) - eps, 0.f) * (1.f - momentum);
    }
}

static pp_status fwd_train(const pp_kernel_ctx *c, const bn_plan *p, const bn_desc *d, pp_error *err)
{
    float *mean_out = c->nout > 1 ? (float *)c->out[1].data : NULL, *var_out = c->nout > 2 ? (float *)c->out[2].data : NULL;
    float *stats = (float *)c->aux;
    if (!stats && (mean_out || var_out)) PP_CHECK(pp_cuda_workspace(c, (size_t)p->C * 2 * sizeof(float), (void **)&stats, err));
    const float one = 1.f, zero = 0.f;
    CUDNN_TRY(c, cudnnBatchNormalizationForwardTraining(cu_of(c->dev)->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x,
                                                        c->in[0].data, d->x, c->out[0].data, d->ch, c->in[1].data,
                                                        c->in[2].data, 0.0, NULL, NULL, (double)p->eps, stats,
                                                        stats ? stats + p->C : NULL));
    if (mean_out || var_out) {
        pp_cu_launch L = pp_cu_launch_1d(p->C);
        k_bn_running<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(mean_out, var_out, (const float *)c->in[3].data,
                                                                    (const float *)c->in[4].data, stats, p->C, p->eps,
                                                                    p->momentum);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}

PP_CU_FWD(pp_cu_batchnorm_forward)
{
    bn_plan p;
    PP_CHECK(bn_plan_make(c, &c->in[0], &p, err));
    if (!p.n) return PP_OK;
    bn_desc d = {NULL, NULL};
    pp_status st = desc_make(c, &p, &d, err);
    const float one = 1.f, zero = 0.f;
    if (st == PP_OK && c->training) st = fwd_train(c, &p, &d, err);
    else if (st == PP_OK) {
        cudnnStatus_t e = cudnnBatchNormalizationForwardInference(
            cu_of(c->dev)->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, c->in[0].data, d.x, c->out[0].data, d.ch,
            c->in[1].data, c->in[2].data, c->in[3].data, c->in[4].data, (double)p.eps);
        if (e != CUDNN_STATUS_SUCCESS)
            st = pp_cu_fail(c, err, "cuDNN", "cudnnBatchNormalizationForwardInference", cudnnGetErrorString(e));
    }
    desc_free(&d);
    return st;
}

__global__ void k_axpy_bn(float *y, const float *x, int64_t n) { CU_FOR(i, n) y[i] += x[i]; }

/* cuDNN's backward: dx accumulates (beta 1) into grad_in[0] or goes to scratch; dscale and
 * dbias go to scratch and are added to the requested gradients. */
static pp_status bwd_train(const pp_kernel_ctx *c, const pp_tensor *gy, pp_tensor *gin, const bn_plan *p,
                           const bn_desc *d, pp_error *err)
{
    if (!c->aux) return pp_args_fail(c, PP_ERR_INTERNAL, err, "training backward needs the statistics kept in aux");
    const float *stats = (const float *)c->aux;
    float *ws;
    size_t params = (size_t)p->C * 2, dx_scratch = gin[0].data ? 0 : (size_t)p->n;
    PP_CHECK(pp_cuda_workspace(c, (params + dx_scratch) * sizeof(float), (void **)&ws, err));
    float *dx = gin[0].data ? (float *)gin[0].data : ws + params;
    const float one = 1.f, zero = 0.f, beta_dx = gin[0].data ? 1.f : 0.f;
    CUDNN_TRY(c, cudnnBatchNormalizationBackward(cu_of(c->dev)->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &beta_dx, &one,
                                                 &zero, d->x, c->in[0].data, d->x, gy->data, d->x, dx, d->ch,
                                                 c->in[1].data, ws, ws + p->C, (double)p->eps, stats, stats + p->C));
    pp_cu_launch L = pp_cu_launch_1d(p->C);
    for (int k = 1; k <= 2; k++)
        if (gin[k].data) {
            k_axpy_bn<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>((float *)gin[k].data, ws + (k - 1) * p->C, p->C);
            CU_LAUNCHED(c);
        }
    return PP_OK;
}

/* Inference mode, per channel (one block each): with a = scale rstd, sdy = sum dy and
 * sdyxh = sum dy (x - mean) rstd: dscale += sdyxh, dbias += sdy, dmean += -a sdy,
 * dvar += -scale sdyxh rstd^2 / 2 (the cpu's formulas). */
__global__ void k_bn_infer_params(const float *x, const float *dy, const float *scale, const float *rm, const float *rv,
                                  float *gs, float *gb, float *gm, float *gv, int64_t N, int64_t C, int64_t HW,
                                  float eps)
{
    for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
        const float mean = rm[ch], rstd = 1.f / sqrtf(rv[ch] + eps);
        float sdy = 0.f, sdyxh = 0.f;
        for (int64_t j = threadIdx.x; j < N * HW; j += blockDim.x) {
            const int64_t i = (j / HW * C + ch) * HW + j % HW;
            sdy += dy[i];
            sdyxh += dy[i] * (x[i] - mean) * rstd;
        }
        sdy = cu_block_reduce(sdy, cu_sum(), 0.f);
        sdyxh = cu_block_reduce(sdyxh, cu_sum(), 0.f);
        if (threadIdx.x == 0) {
            if (gs) gs[ch] += sdyxh;
            if (gb) gb[ch] += sdy;
            if (gm) gm[ch] += -scale[ch] * rstd * sdy;
            if (gv) gv[ch] += -0.5f * scale[ch] * sdyxh * rstd * rstd;
        }
    }
}

/* inference mode: dx += dy scale rstd */
__global__ void k_bn_infer_dx(const float *dy, const float *scale, const float *rv, float *dx, int64_t n, int64_t C,
                              int64_t HW, float eps)
{
    CU_FOR(i, n) {
        const int64_t ch = i / HW % C;
        dx[i] += dy[i] * scale[ch] * (1.f / sqrtf(rv[ch] + eps));
    }
}

static pp_status bwd_infer(const pp_kernel_ctx *c, const pp_tensor *gy, pp_tensor *gin, const bn_plan *p, pp_error *err)
{
    cudaStream_t s = cu_of(c->dev)->stream;
    const float *X = (const float *)c->in[0].data, *GY = (const float *)gy->data, *S = (const float *)c->in[1].data;
    const float *RM = (const float *)c->in[3].data, *RV = (const float *)c->in[4].data;
    if (gin[1].data || gin[2].data || gin[3].data || gin[4].data) {
        unsigned grid = p->C < PP_CU_MAX_GRID ? (unsigned)p->C : PP_CU_MAX_GRID;
        k_bn_infer_params<<<grid, PP_CU_BLOCK, 0, s>>>(X, GY, S, RM, RV, (float *)gin[1].data, (float *)gin[2].data,
                                                       (float *)gin[3].data, (float *)gin[4].data, p->dims[0], p->C,
                                                       p->HW, p->eps);
        CU_LAUNCHED(c);
    }
    if (gin[0].data) {
        pp_cu_launch L = pp_cu_launch_1d(p->n);
        k_bn_infer_dx<<<L.grid, L.block, 0, s>>>(GY, S, RV, (float *)gin[0].data, p->n, p->C, p->HW, p->eps);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}

PP_CU_BWD(pp_cu_batchnorm_backward)
{
    if (!grad_out[0].data) return PP_OK;
    bn_plan p;
    PP_CHECK(bn_plan_make(c, &grad_out[0], &p, err));
    if (!p.n) return PP_OK;
    if (!c->training) return bwd_infer(c, &grad_out[0], grad_in, &p, err);
    if (!grad_in[0].data && !grad_in[1].data && !grad_in[2].data) return PP_OK;
    bn_desc d = {NULL, NULL};
    pp_status st = desc_make(c, &p, &d, err);
    if (st == PP_OK) st = bwd_train(c, &grad_out[0], grad_in, &p, &d, err);
    desc_free(&d);
    return st;
}

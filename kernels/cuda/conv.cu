/* cuda Conv (1-D and 2-D, pads/strides/dilations/group, optional bias) on cuDNN's
 * convolution API, in float32 and, for the 16-bit tables, natively in bfloat16 / float16
 * (cuDNN's PSEUDO_BFLOAT16 / PSEUDO_HALF configurations: 16-bit tensors and filter, fp32
 * compute). One path for every dtype: the bias is broadcast into Y (rounded to Y's dtype)
 * and the convolution adds to it (beta = 1); backward data and filter accumulate (beta = 1)
 * into the gradients, the bias gradient is a reduction. The descriptors and algorithms are
 * chosen once per shape and dtype (cudnnGet*Algorithm_v7, the first deterministic one) and
 * cached on the device; workspace comes from the caching allocator. */
#include "cuda_internal.h"
#include "lowp.h"
#include "nn_cuda.h"

extern "C" {
#include "window.h"
}

#include <stdlib.h>
#include <string.h>

static_assert(PP_CUDNN_DATA_FLOAT == CUDNN_DATA_FLOAT && PP_CUDNN_DATA_HALF == CUDNN_DATA_HALF &&
                  PP_CUDNN_DATA_BFLOAT16 == CUDNN_DATA_BFLOAT16,
              "launch.h's cuDNN data types");
static_assert(PP_CUDNN_DEFAULT_MATH == CUDNN_DEFAULT_MATH && PP_CUDNN_TENSOR_OP_MATH == CUDNN_TENSOR_OP_MATH,
              "launch.h's cuDNN math types");

struct cu_conv_algo {
    pp_cu_conv key;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_data, ws_filter;  /* bytes */
};

static void algo_release(cu_conv_algo *a)
{
    if (a->x) cudnnDestroyTensorDescriptor(a->x);
    if (a->y) cudnnDestroyTensorDescriptor(a->y);
    if (a->w) cudnnDestroyFilterDescriptor(a->w);
    if (a->conv) cudnnDestroyConvolutionDescriptor(a->conv);
}

void pp_cu_conv_cache_free(pp_cuda *cu)
{
    for (int i = 0; i < cu->nconvs; i++) algo_release(&cu->convs[i]);
    free(cu->convs);
    cu->convs = NULL;
    cu->nconvs = 0;
}

/* The first deterministic algorithm cuDNN's heuristics rank as working, else the first
 * working one (perf: cuDNN's ranked list of n). */
#define PICK(perf, n, out, ws)                                                                             \
    do {                                                                                                   \
        int pick_ = -1;                                                                                    \
        for (int i_ = 0; i_ < (n) && pick_ < 0; i_++)                                                      \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].determinism == CUDNN_DETERMINISTIC) \
                pick_ = i_;                                                                                \
        for (int i_ = 0; i_ < (n) && pick_ < 0; i_++)                                                      \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS) pick_ = i_;                                     \
        if (pick_ < 0) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cuDNN has no " #out " algorithm for this shape"); \
        (out) = (perf)[pick_].algo;                                                                        \
        (ws) = (perf)[pick_].memory;                                                                       \
    } while (0)

/* Descriptors and algorithms of one shape (a is zeroed; released by the caller on error). */
static pp_status algo_make(const pp_kernel_ctx *c, const pp_cu_conv *cv, cu_conv_algo *a, pp_error *err)
{
    cudnnHandle_t h = cu_of(c->dev)->dnn;
    a->key = *cv;
    CUDNN_TRY(c, cudnnCreateTensorDescriptor(&a->x));
    CUDNN_TRY(c, cudnnCreateTensorDescriptor(&a->y));
    CUDNN_TRY(c, cudnnCreateFilterDescriptor(&a->w));
    CUDNN_TRY(c, cudnnCreateConvolutionDescriptor(&a->conv));
    const cudnnDataType_t t = (cudnnDataType_t)cv->dtype;
    CUDNN_TRY(c, cudnnSetTensor4dDescriptor(a->x, CUDNN_TENSOR_NCHW, t, cv->x[0], cv->x[1], cv->x[2], cv->x[3]));
    CUDNN_TRY(c, cudnnSetTensor4dDescriptor(a->y, CUDNN_TENSOR_NCHW, t, cv->y[0], cv->y[1], cv->y[2], cv->y[3]));
    CUDNN_TRY(c, cudnnSetFilter4dDescriptor(a->w, t, CUDNN_TENSOR_NCHW, cv->w[0], cv->w[1], cv->w[2], cv->w[3]));
    CUDNN_TRY(c, cudnnSetConvolution2dDescriptor(a->conv, cv->pad[0], cv->pad[1], cv->stride[0], cv->stride[1],
                                                 cv->dil[0], cv->dil[1], CUDNN_CROSS_CORRELATION,
                                                 (cudnnDataType_t)cv->compute));
    CUDNN_TRY(c, cudnnSetConvolutionGroupCount(a->conv, cv->groups));
    /* TF32 tensor cores on A100/H100 for fp32, as cuBLAS (docs/gpu.md); 16-bit ones for 16 bits */
    CUDNN_TRY(c, cudnnSetConvolutionMathType(a->conv, (cudnnMathType_t)cv->math));
    int n = 0, k = 0, oh = 0, ow = 0;
    CUDNN_TRY(c, cudnnGetConvolution2dForwardOutputDim(a->conv, a->x, a->w, &n, &k, &oh, &ow));
    if (n != cv->y[0] || k != cv->y[1] || oh != cv->y[2] || ow != cv->y[3])
        return pp_args_fail(c, PP_ERR_SHAPE, err, "cuDNN computes output [%d, %d, %d, %d], the graph says [%d, %d, %d, %d]",
                         n, k, oh, ow, cv->y[0], cv->y[1], cv->y[2], cv->y[3]);
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_TRY(c, cudnnGetConvolutionForwardAlgorithm_v7(h, a->x, a->w, a->conv, a->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                        &n, pf));
    PICK(pf, n, a->fwd, a->ws_fwd);
    CUDNN_TRY(c, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, a->w, a->y, a->conv, a->x,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, pd));
    PICK(pd, n, a->bwd_data, a->ws_data);
    CUDNN_TRY(c, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, a->x, a->y, a->conv, a->w,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, pw));
    PICK(pw, n, a->bwd_filter, a->ws_filter);
    /* the heuristics' memory figure is an estimate: the size query for the chosen
     * algorithm is what the call checks its workspace against */
    size_t ws = 0;
    CUDNN_TRY(c, cudnnGetConvolutionForwardWorkspaceSize(h, a->x, a->w, a->conv, a->y, a->fwd, &ws));
    if (ws > a->ws_fwd) a->ws_fwd = ws;
    CUDNN_TRY(c, cudnnGetConvolutionBackwardDataWorkspaceSize(h, a->w, a->y, a->conv, a->x, a->bwd_data, &ws));
    if (ws > a->ws_data) a->ws_data = ws;
    CUDNN_TRY(c, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, a->x, a->y, a->conv, a->w, a->bwd_filter, &ws));
    if (ws > a->ws_filter) a->ws_filter = ws;
    return PP_OK;
}

/* The cached entry of this shape, made on first use. */
static pp_status algo_of(const pp_kernel_ctx *c, const pp_cu_conv *cv, const cu_conv_algo **out, pp_error *err)
{
    pp_cuda *cu = cu_of(c->dev);
    for (int i = 0; i < cu->nconvs; i++)
        if (!memcmp(&cu->convs[i].key, cv, sizeof *cv)) {
            *out = &cu->convs[i];
            return PP_OK;
        }
    cu_conv_algo a;
    memset(&a, 0, sizeof a);
    pp_status st = algo_make(c, cv, &a, err);
    cu_conv_algo *grown = st == PP_OK ? (cu_conv_algo *)realloc(cu->convs, (size_t)(cu->nconvs + 1) * sizeof a) : NULL;
    if (st == PP_OK && !grown) st = pp_args_fail(c, PP_ERR_NOMEM, err, "out of host memory for the cuDNN descriptors");
    if (st != PP_OK) {
        algo_release(&a);
        return st;
    }
    cu->convs = grown;
    cu->convs[cu->nconvs] = a;
    *out = &cu->convs[cu->nconvs++];
    return PP_OK;
}

/* y: the output or its gradient (same shape and dtype). Pads, strides and dilations as the
 * cpu kernel reads them (auto_pad included), then launch.c's descriptor dims and types. */
static pp_status conv_plan(const pp_kernel_ctx *c, const pp_tensor *y, pp_cu_conv *cv, pp_error *err)
{
    if (c->nin < 2 || c->nin > 3)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 2 or 3 (X, W, optional B)", c->nin);
    const pp_tensor *x = &c->in[0], *w = &c->in[1];
    if (w->rank != x->rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "weight rank %d differs from input rank %d", w->rank, x->rank);
    pp_window win;
    int64_t group;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "group", 1, &group, c->node, err));
    PP_CHECK(pp_window_make(c, x, y, w->dims + 2, 0, &win, err));
    int nsp = win.nsp, o = 2 - nsp;
    int64_t pads[4], strides[2], dil[2];
    for (int i = 0; i < nsp; i++) {
        pads[i] = win.pb[i + o];
        pads[i + nsp] = win.pe[i + o];
        strides[i] = win.s[i + o];
        dil[i] = win.d[i + o];
    }
    return pp_cu_conv_plan(cv, x, w, y, pads, strides, dil, group, c->node, err);
}

/* B (K) viewed as (K, 1[, 1]) so that it broadcasts over Y (N, K, spatial...) */
static pp_tensor bias_view(const pp_tensor *b, int yrank)
{
    pp_tensor v = *b;
    v.rank = yrank - 1;
    for (int d = 1; d < v.rank; d++) v.dims[d] = 1;
    return v;
}

/* Y = conv(X, W) (+ B), in X's dtype. The bias goes into Y first and cuDNN adds the
 * convolution to it in fp32 (beta = 1), so a 16-bit Y is rounded once, from the sum of
 * the convolution and the bias rounded to Y's dtype (as torch.autocast casts it). */
static pp_status conv_forward(const pp_kernel_ctx *c, pp_error *err)
{
    pp_cu_conv cv;
    const cu_conv_algo *a;
    PP_CHECK(conv_plan(c, &c->out[0], &cv, err));
    if (!pp_tensor_numel(&c->out[0])) return PP_OK;
    PP_CHECK(algo_of(c, &cv, &a, err));
    const int bias = c->nin > 2 && c->in[2].data;
    if (bias) {
        pp_tensor b = bias_view(&c->in[2], c->out[0].rank);
        PP_CHECK(pp_cu_broadcast_copy(c, &c->out[0], &b, err));
    }
    void *ws = NULL;
    if (a->ws_fwd) PP_CHECK(pp_cuda_workspace(c, a->ws_fwd, &ws, err));
    const float one = 1.f, beta = bias ? 1.f : 0.f;   /* fp32 scalars: the compute type's */
    CUDNN_TRY(c, cudnnConvolutionForward(cu_of(c->dev)->dnn, &one, a->x, c->in[0].data, a->w, c->in[1].data, a->conv,
                                         a->fwd, ws, a->ws_fwd, &beta, a->y, c->out[0].data));
    return PP_OK;
}

/* dW += dconv/dW. cuDNN writes dW in the filter's dtype; a float32 (master) dW under a
 * 16-bit filter is computed into a 16-bit temporary in the workspace, then widened and
 * added (pp_cu_conv_filter_ws). Not the fp32 route for dW (X and dY converted into fp32
 * copies, an fp32 convolution): that costs two activation-sized copies and conversion
 * passes on every call and runs a third of the convolution's FLOPs at the TF32 rate, where
 * this costs a weight-sized temporary. The price is one 16-bit rounding of this call's dW
 * before it joins the fp32 sum (a float16 dW past 65504 becomes Inf, which loss scaling
 * counts as an overflow), as in torch.autocast, whose 16-bit conv returns a 16-bit dW that
 * the cast's backward adds into the fp32 .grad. */
static pp_status conv_filter_grad(const pp_kernel_ctx *c, const cu_conv_algo *a, const pp_tensor *gy,
                                  const pp_tensor *gw, pp_error *err)
{
    size_t bytes, at;
    const int temp = pp_cu_conv_filter_ws(&a->key, a->ws_filter, gw->dtype, &bytes, &at);
    void *ws = NULL;
    if (bytes) PP_CHECK(pp_cuda_workspace(c, bytes, &ws, err));
    pp_tensor t = *gw;
    if (temp) {
        t.dtype = c->in[1].dtype;
        t.data = (char *)ws + at;
    }
    const float one = 1.f, beta = temp ? 0.f : 1.f;
    CUDNN_TRY(c, cudnnConvolutionBackwardFilter(cu_of(c->dev)->dnn, &one, a->x, c->in[0].data, a->y, gy->data, a->conv,
                                                a->bwd_filter, ws, a->ws_filter, &beta, a->w, t.data));
    return temp ? pp_cu_sum_into(c, gw, &t, 1.f, err) : PP_OK;
}

/* Each requested gradient on its own: dX needs W, dW needs X, dB neither. */
static pp_status conv_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, pp_error *err)
{
    const pp_tensor *gy = &grad_out[0];
    if (!gy->data) return PP_OK;
    pp_cu_conv cv;
    const cu_conv_algo *a;
    PP_CHECK(conv_plan(c, gy, &cv, err));
    if (!pp_tensor_numel(gy)) return PP_OK;
    if (c->nin > 2 && grad_in[2].data) {
        int red[PP_MAX_RANK] = {0};
        for (int d = 0; d < gy->rank; d++) red[d] = d != 1;
        pp_cu_reduce r;
        pp_cu_reduce_init(&r, gy->rank, gy->dims, red);
        PP_CHECK(pp_cu_reduce_launch(c, &r, gy->data, gy->dtype, grad_in[2].data, grad_in[2].dtype, 1.f, err));
    }
    if (!grad_in[0].data && !grad_in[1].data) return PP_OK;
    PP_CHECK(algo_of(c, &cv, &a, err));
    if (grad_in[0].data) {
        const float one = 1.f;
        void *ws = NULL;
        if (a->ws_data) PP_CHECK(pp_cuda_workspace(c, a->ws_data, &ws, err));
        CUDNN_TRY(c, cudnnConvolutionBackwardData(cu_of(c->dev)->dnn, &one, a->w, c->in[1].data, a->y, gy->data,
                                                  a->conv, a->bwd_data, ws, a->ws_data, &one, a->x, grad_in[0].data));
    }
    return grad_in[1].data ? conv_filter_grad(c, a, gy, &grad_in[1], err) : PP_OK;
}

/* the float32 table's kernels take float32 inputs only (an omitted bias has no data) */
static pp_status want_f32(const pp_kernel_ctx *c, pp_error *err)
{
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].data && c->in[k].dtype != PP_DTYPE_F32)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d has dtype %s, expected float32", k,
                                pp_dtype_name(c->in[k].dtype));
    return PP_OK;
}

PP_CU_FWD(pp_cu_conv_forward)
{
    PP_CHECK(want_f32(c, err));
    return conv_forward(c, err);
}

PP_CU_BWD(pp_cu_conv_backward)
{
    PP_CHECK(want_f32(c, err));
    return conv_backward(c, grad_out, grad_in, err);
}

/* bfloat16 / float16: native where cuDNN takes the dtypes (pp_cu_conv_native), else the adapter */
PP_CU_FWD(pp_cu_conv_lp_forward)
{
    if (!pp_cu_conv_native(c->in, c->nin, &c->out[0], NULL)) return pp_lowp_forward(c, err);
    return conv_forward(c, err);
}

PP_CU_BWD(pp_cu_conv_lp_backward)
{
    if (!pp_cu_conv_native(c->in, c->nin, &grad_out[0], grad_in)) return pp_lowp_backward(c, grad_out, grad_in, err);
    return conv_backward(c, grad_out, grad_in, err);
}

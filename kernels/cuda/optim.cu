/* cuda flat-buffer kernels (the pp_flat_ops of the cuda device): fused optimizer updates
 * (one pass for SGD/Adam/AdamW; LAMB's two passes around its per-tensor norms) reading the
 * step's pp_optim_step from device memory, sum of squares in double added into device
 * memory, scale, accumulate, the NaN/Inf scan, a microbatch's loss into the step's sums, the
 * optimizer's decision from them, and float32 <-> bfloat16 <-> float16 conversion. Per-element
 * math is element.h's, scalars are pp_optim_scalars_of's, as on the cpu. */
#include "cuda_internal.h"
#include <onnxpipe/element.h>
#include "reduce.cuh"
#include <onnxpipe/backend/kernels_backend.h>

#define FLAT_CTX(name) pp_kernel_ctx c_ = {}; c_.node = name; c_.op_type = "flat"; const pp_kernel_ctx *c = &c_
#define LAUNCH(n) pp_cu_launch L_ = pp_cu_launch_1d(n)
#define PARTS 1024      /* blocks of a two-pass reduction (pp_cu_launch_parts) */

/* The clipped gradient: one rounding of g * scale, as the cpu's (never fused into what reads it) */
static __device__ __forceinline__ float clipped(float g, float scale) { return __fmul_rn(g, scale); }

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, const pp_optim_step *ts, float momentum,
                      int nesterov, float wd)
{
    const pp_optim_step t = *ts;
    if (t.skip) return;
    CU_FOR(i, n) {
        float dummy = 0.f;
        p[i] = pp_el_sgd(p[i], clipped(g[i], t.grad_scale), buf ? &buf[i] : &dummy, t.lr, momentum, nesterov, wd,
                         t.first);
    }
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float beta1, float beta2,
                       const pp_optim_step *ts, float eps, int decoupled)
{
    const pp_optim_step t = *ts;
    const pp_optim_scalars k = t.k;
    if (t.skip) return;
    CU_FOR(i, n) {
        float pi = decoupled ? p[i] * k.shrink : p[i];
        float gi = clipped(g[i], t.grad_scale);
        if (k.l2 != 0.f) gi += k.l2 * pi;
        float mi = m[i], vi = v[i];
        pp_el_adam_moments(gi, &mi, &vi, beta1, k.c1, beta2, k.c2);
        m[i] = mi;
        v[i] = vi;
        p[i] = pp_el_adam_apply(pi, mi, vi, k.step_size, k.bc2_sqrt, eps);
    }
}

/* LAMB pass 1: moments, and per block sums of p^2 and u^2 into norms[2 * block] */
__global__ void k_lamb_moments(const float *p, const float *g, float *m, float *v, int64_t n, float beta1,
                               float beta2, const pp_optim_step *ts, float eps, float wd, double *norms)
{
    const pp_optim_step t = *ts;
    const pp_optim_scalars k = t.k;
    if (t.skip) return;
    double pn = 0, un = 0;
    CU_FOR(i, n) {
        float mi = m[i], vi = v[i];
        pp_el_adam_moments(clipped(g[i], t.grad_scale), &mi, &vi, beta1, k.c1, beta2, k.c2);
        m[i] = mi;
        v[i] = vi;
        float u = pp_el_lamb_dir(p[i], mi, vi, k.bc1, k.bc2, eps, wd);
        pn += (double)p[i] * p[i];
        un += (double)u * u;
    }
    pn = cu_block_reduce(pn, cu_sum(), 0.0);
    un = cu_block_reduce(un, cu_sum(), 0.0);
    if (threadIdx.x == 0) {
        norms[2 * blockIdx.x] = pn;
        norms[2 * blockIdx.x + 1] = un;
    }
}

/* LAMB pass 2: every block folds the nblocks (<= PARTS) per-block norms, then steps p */
__global__ void k_lamb_apply(float *p, const float *m, const float *v, int64_t n, const double *norms, int nblocks,
                             const pp_optim_step *ts, float eps, float wd)
{
    const pp_optim_step t = *ts;
    const pp_optim_scalars k = t.k;
    if (t.skip) return;
    double pn = 0, un = 0;
    for (int b = threadIdx.x; b < nblocks; b += blockDim.x) {
        pn += norms[2 * b];
        un += norms[2 * b + 1];
    }
    pn = sqrt(cu_block_reduce(pn, cu_sum(), 0.0));
    un = sqrt(cu_block_reduce(un, cu_sum(), 0.0));
    double trust = pn > 0 && un > 0 ? pn / un : 1.0;
    float step = (float)((double)t.lr * trust);
    CU_FOR(i, n) p[i] -= step * pp_el_lamb_dir(p[i], m[i], v[i], k.bc1, k.bc2, eps, wd);
}

static pp_status cu_optim_update(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                                 const float *grad, float *state, int64_t n, pp_error *err)
{
    FLAT_CTX("optimizer update");
    c_.dev = dev;
    if (!n) return PP_OK;
    cudaStream_t s = cu_of(dev)->stream;
    LAUNCH(n);
    /* LAMB's passes run on at most PARTS blocks: each block of pass 2 folds every
     * partial, so an uncapped grid (n / 256 blocks) would cost (n / 256)^2 reads */
    const pp_cu_launch P = pp_cu_launch_parts(n, PARTS);
    switch (h->kind) {
    case PP_OPTIM_SGD:
        k_sgd<<<L_.grid, L_.block, 0, s>>>(param, grad, h->momentum != 0.f ? state : NULL, n, step, h->momentum,
                                           h->nesterov, h->weight_decay);
        break;
    case PP_OPTIM_ADAM:
    case PP_OPTIM_ADAMW:
        k_adam<<<L_.grid, L_.block, 0, s>>>(param, grad, state, state + n, n, h->beta1, h->beta2, step, h->eps,
                                            h->kind == PP_OPTIM_ADAMW);
        break;
    case PP_OPTIM_LAMB: {
        void *ws;
        PP_CHECK(pp_cuda_workspace(c, 2 * sizeof(double) * P.grid, &ws, err));
        k_lamb_moments<<<P.grid, P.block, 0, s>>>(param, grad, state, state + n, n, h->beta1, h->beta2, step, h->eps,
                                                  h->weight_decay, (double *)ws);
        CU_LAUNCHED(c);
        k_lamb_apply<<<P.grid, P.block, 0, s>>>(param, state, state + n, n, (const double *)ws, (int)P.grid, step,
                                                h->eps, h->weight_decay);
        break;
    }
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

/* per-block partial sums of squares, then one block adds them: deterministic */
__global__ void k_sumsq_part(const float *x, int64_t n, double *part)
{
    double s = 0;
    CU_FOR(i, n) s += (double)x[i] * x[i];
    s = cu_block_reduce(s, cu_sum(), 0.0);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* one block adds the parts into *acc, in block order then one tree: deterministic */
__global__ void k_sum_parts(const double *part, int nparts, double *acc)
{
    double s = 0;
    for (int b = threadIdx.x; b < nparts; b += blockDim.x) s += part[b];
    s = cu_block_reduce(s, cu_sum(), 0.0);
    if (threadIdx.x == 0) *acc += s;
}

static pp_status cu_sumsq_add(pp_device *dev, const float *x, int64_t n, double *acc, pp_error *err)
{
    FLAT_CTX("sumsq");
    c_.dev = dev;
    if (!n) return PP_OK;
    cudaStream_t s = cu_of(dev)->stream;
    const pp_cu_launch P = pp_cu_launch_parts(n, PARTS);
    void *ws;
    PP_CHECK(pp_cuda_workspace(c, PARTS * sizeof(double), &ws, err));
    k_sumsq_part<<<P.grid, P.block, 0, s>>>(x, n, (double *)ws);
    CU_LAUNCHED(c);
    k_sum_parts<<<1, 1024, 0, s>>>((const double *)ws, (int)P.grid, acc);
    CU_LAUNCHED(c);
    return PP_OK;
}

__global__ void k_scale(float *x, int64_t n, float s) { CU_FOR(i, n) x[i] *= s; }
__global__ void k_accumulate(float *y, const float *x, int64_t n) { CU_FOR(i, n) y[i] += x[i]; }

static pp_status cu_scale(pp_device *dev, float *x, int64_t n, float sc, pp_error *err)
{
    FLAT_CTX("scale");
    if (!n) return PP_OK;
    LAUNCH(n);
    k_scale<<<L_.grid, L_.block, 0, cu_of(dev)->stream>>>(x, n, sc);
    CU_LAUNCHED(c);
    return PP_OK;
}

static pp_status cu_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err)
{
    FLAT_CTX("accumulate");
    if (!n) return PP_OK;
    LAUNCH(n);
    k_accumulate<<<L_.grid, L_.block, 0, cu_of(dev)->stream>>>(y, x, n);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* smallest index of a NaN/Inf: atomicMin over a 64-bit slot initialised to n */
__global__ void k_nonfinite(const float *x, int64_t n, unsigned long long *first)
{
    CU_FOR(i, n) if (!isfinite(x[i])) atomicMin(first, (unsigned long long)i);
}
__global__ void k_set_u64(unsigned long long *p, unsigned long long v) { *p = v; }

static pp_status cu_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err)
{
    FLAT_CTX("find_nonfinite");
    c_.dev = dev;
    cudaStream_t s = cu_of(dev)->stream;
    *index = -1;
    if (!n) return PP_OK;
    void *ws;
    unsigned long long first = 0;
    PP_CHECK(pp_cuda_workspace(c, sizeof first, &ws, err));
    LAUNCH(n);
    k_set_u64<<<1, 1, 0, s>>>((unsigned long long *)ws, (unsigned long long)n);
    CU_LAUNCHED(c);
    k_nonfinite<<<L_.grid, L_.block, 0, s>>>(x, n, (unsigned long long *)ws);
    CU_LAUNCHED(c);
    PP_CHECK(pp_device_copy_to_host(dev, &first, ws, sizeof first, err));
    *index = first < (unsigned long long)n ? (int64_t)first : -1;
    return PP_OK;
}

/* one thread: the step's sums are a handful of doubles */
__global__ void k_loss_add(double *acc, const float *loss, const float *weight, int64_t microbatch)
{
    const float l = *loss;
    acc[0] += (double)*weight * (double)l;
    if (isfinite(l)) return;
    if (acc[1] == 0) acc[2] = (double)microbatch;
    acc[1] += 1;
}

static pp_status cu_loss_add(pp_device *dev, double *acc, const float *loss, const float *weight, int64_t microbatch,
                             pp_error *err)
{
    FLAT_CTX("loss_add");
    k_loss_add<<<1, 1, 0, cu_of(dev)->stream>>>(acc, loss, weight, microbatch);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* one thread, the terms in index order: the host's sum, bit for bit */
__global__ void k_optim_decide(const double *terms, int64_t n, const double *bad_losses, float clip,
                               pp_optim_step *step)
{
    double sumsq = 0;
    for (int64_t i = 0; i < n; i++) sumsq += terms[i];
    pp_optim_step_decide(sumsq, *bad_losses, clip, step);
}

static pp_status cu_optim_decide(pp_device *dev, const double *terms, int64_t n, const double *bad_losses,
                                 float clip_norm, pp_optim_step *step, pp_error *err)
{
    FLAT_CTX("optim_decide");
    k_optim_decide<<<1, 1, 0, cu_of(dev)->stream>>>(terms, n, bad_losses, clip_norm, step);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* one element of a float32 / bfloat16 / float16 buffer as a float, and back (the cpu's functions) */
static __device__ float load_as_f32(pp_dtype t, const void *p, int64_t i)
{
    const uint16_t *h = (const uint16_t *)p;
    return t == PP_DTYPE_F32 ? ((const float *)p)[i] : t == PP_DTYPE_BF16 ? pp_el_f32_from_bf16(h[i])
                                                                          : pp_el_f32_from_f16(h[i]);
}
static __device__ void store_from_f32(pp_dtype t, void *p, int64_t i, float v)
{
    if (t == PP_DTYPE_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == PP_DTYPE_BF16 ? pp_el_bf16_from_f32(v) : pp_el_f16_from_f32(v);
}

__global__ void k_convert(void *dst, pp_dtype dt, const void *src, pp_dtype st, int64_t n)
{
    CU_FOR(i, n) store_from_f32(dt, dst, i, load_as_f32(st, src, i));
}

static pp_status cu_convert(pp_device *dev, void *dst, pp_dtype dt, const void *src, pp_dtype st, int64_t n,
                            pp_error *err)
{
    FLAT_CTX("convert");
    if (!n) return PP_OK;
    LAUNCH(n);
    k_convert<<<L_.grid, L_.block, 0, cu_of(dev)->stream>>>(dst, dt, src, st, n);
    CU_LAUNCHED(c);
    return PP_OK;
}

extern const pp_flat_ops pp_cuda_flat_ops;
const pp_flat_ops pp_cuda_flat_ops = {
    /* .optim_update   = */ cu_optim_update,
    /* .sumsq_add      = */ cu_sumsq_add,
    /* .scale          = */ cu_scale,
    /* .accumulate     = */ cu_accumulate,
    /* .find_nonfinite = */ cu_find_nonfinite,
    /* .convert        = */ cu_convert,
    /* .loss_add       = */ cu_loss_add,
    /* .optim_decide   = */ cu_optim_decide,
};

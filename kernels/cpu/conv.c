/* cpu Conv (1-D and 2-D, pads/strides/dilations/group) as im2col + sgemm per image and
 * group; backward: weight gradient dY col^T, data gradient col2im(W^T dY), bias sums.
 * 1x1 convolutions with unit stride and no pad use x itself as the column matrix. */
#include "cpu_math.h"
#include "smat.h"
#include "window.h"

#include <string.h>

typedef struct conv_plan {
    pp_window w;
    int64_t G, M, Cg, Mg;       /* groups, output channels, channels per group */
    int64_t KK, IHW, OHW;       /* kernel, input and output spatial sizes */
    int direct;                 /* 1x1, stride 1, no pad: col = x */
} conv_plan;

/* y: the output or its gradient (same shape) */
static pp_status conv_plan_make(const pp_kernel_ctx *c, const pp_tensor *y, conv_plan *p, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 3, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_cpu_want_dtype(c, 1, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_cpu_want_dtype(c, 2, PP_DTYPE_F32, 1, err));
    const pp_tensor *x = &c->in[0], *wt = &c->in[1];
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "group", 1, &p->G, c->node, err));
    if (wt->rank != x->rank)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Conv): weight rank %d differs from input rank %d", c->node,
                            wt->rank, x->rank);
    PP_CHECK(pp_window_make(c, x, y, wt->dims + 2, 0, &p->w, err));
    p->M = wt->dims[0];
    if (p->G < 1 || p->w.C % p->G || p->M % p->G || wt->dims[1] != p->w.C / p->G || y->dims[1] != p->M)
        return pp_error_set(err, PP_ERR_SHAPE,
                            "node '%s' (Conv): group=%lld does not fit %lld input channels, weight [%lld, %lld, ...] "
                            "and %lld output channels",
                            c->node, (long long)p->G, (long long)p->w.C, (long long)wt->dims[0],
                            (long long)wt->dims[1], (long long)y->dims[1]);
    p->Cg = p->w.C / p->G;
    p->Mg = p->M / p->G;
    p->KK = p->w.k[0] * p->w.k[1];
    p->IHW = p->w.in[0] * p->w.in[1];
    p->OHW = p->w.out[0] * p->w.out[1];
    p->direct = p->KK == 1 && p->w.s[0] == 1 && p->w.s[1] == 1 && !p->w.pb[0] && !p->w.pb[1] && !p->w.pe[0] &&
                !p->w.pe[1];
    return PP_OK;
}

/* col (Cg*KK, OHW) from x (Cg, IH, IW); zero where the window reads padding */
static void im2col(const pp_window *w, int64_t Cg, const float *x, float *col)
{
    int64_t OH = w->out[0], OW = w->out[1], IH = w->in[0], IW = w->in[1];
    for (int64_t ch = 0; ch < Cg; ch++)
        for (int64_t ki = 0; ki < w->k[0]; ki++)
            for (int64_t kj = 0; kj < w->k[1]; kj++) {
                float *dst = col + ((ch * w->k[0] + ki) * w->k[1] + kj) * OH * OW;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->s[0] - w->pb[0] + ki * w->d[0];
                    float *row = dst + oh * OW;
                    if (ih < 0 || ih >= IH) {
                        memset(row, 0, (size_t)OW * sizeof *row);
                        continue;
                    }
                    const float *src = x + (ch * IH + ih) * IW;
                    int64_t off = kj * w->d[1] - w->pb[1];
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t iw = ow * w->s[1] + off;
                        row[ow] = iw >= 0 && iw < IW ? src[iw] : 0.f;
                    }
                }
            }
}

/* dx (Cg, IH, IW) += the columns of dcol folded back: the adjoint of im2col */
static void col2im_add(const pp_window *w, int64_t Cg, const float *dcol, float *dx)
{
    int64_t OH = w->out[0], OW = w->out[1], IH = w->in[0], IW = w->in[1];
    for (int64_t ch = 0; ch < Cg; ch++)
        for (int64_t ki = 0; ki < w->k[0]; ki++)
            for (int64_t kj = 0; kj < w->k[1]; kj++) {
                const float *src = dcol + ((ch * w->k[0] + ki) * w->k[1] + kj) * OH * OW;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * w->s[0] - w->pb[0] + ki * w->d[0];
                    if (ih < 0 || ih >= IH) continue;
                    float *dst = dx + (ch * IH + ih) * IW;
                    const float *row = src + oh * OW;
                    int64_t off = kj * w->d[1] - w->pb[1];
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t iw = ow * w->s[1] + off;
                        if (iw >= 0 && iw < IW) dst[iw] += row[ow];
                    }
                }
            }
}

/* The columns one call allocates (forward, and a backward asking for dX or dW). */
static size_t col_bytes(const conv_plan *p) { return p->direct ? 0 : (size_t)(p->Cg * p->KK * p->OHW) * sizeof(float); }

size_t pp_cpu_conv_work_bytes(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in)
{
    conv_plan p;
    if (conv_plan_make(c, &c->out[0], &p, &(pp_error){0}) != PP_OK) return 0;   /* the call itself says why */
    if (grad_out && (!grad_out[0].data || (!grad_in[0].data && !grad_in[1].data))) return 0;
    return col_bytes(&p);
}

/* The columns: the call's work memory (the stage's), else an allocation col_free frees. */
static pp_status col_alloc(const pp_kernel_ctx *c, const conv_plan *p, float **col, pp_error *err)
{
    *col = NULL;
    if (p->direct) return PP_OK;
    if (c->work && c->work_size >= col_bytes(p)) {
        *col = c->work;
        return PP_OK;
    }
    return pp_device_alloc(c->dev, col_bytes(p), (void **)col, err);
}

static void col_free(const pp_kernel_ctx *c, float *col)
{
    if (col != c->work) pp_device_free(c->dev, col);
}

PP_FWD(pp_cpu_conv_forward)
{
    conv_plan p;
    PP_CHECK(conv_plan_make(c, &c->out[0], &p, err));
    const float *X = c->in[0].data, *W = c->in[1].data, *B = c->nin > 2 ? c->in[2].data : NULL;
    float *Y = c->out[0].data, *col;
    PP_CHECK(col_alloc(c, &p, &col, err));
    int CK = (int)(p.Cg * p.KK), OHW = (int)p.OHW;
    for (int64_t n = 0; n < p.w.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            const float *xg = X + (n * p.w.C + g * p.Cg) * p.IHW, *src = xg;
            if (!p.direct) {
                im2col(&p.w, p.Cg, xg, col);
                src = col;
            }
            float *yg = Y + (n * p.M + g * p.Mg) * p.OHW;
            smat_gemm(SMAT_FULL, (int)p.Mg, OHW, CK, 1.f, (smat){(float *)W + g * p.Mg * CK, 0, CK},
                      (smat){(float *)src, 0, OHW}, 0.f, (smat){yg, 0, OHW});
            if (B)
                for (int64_t m = 0; m < p.Mg; m++)
                    for (int64_t i = 0; i < p.OHW; i++) yg[m * p.OHW + i] += B[g * p.Mg + m];
        }
    col_free(c, col);
    return PP_OK;
}

/* Each requested gradient on its own: dX needs W, dW needs X (its columns), dB neither. */
PP_BWD(pp_cpu_conv_backward)
{
    const float *GY = grad_out[0].data;
    float *GX = grad_in[0].data, *GW = grad_in[1].data, *GB = c->nin > 2 ? grad_in[2].data : NULL;
    if (!GY) return PP_OK;
    conv_plan p;
    PP_CHECK(conv_plan_make(c, &grad_out[0], &p, err));
    const float *X = c->in[0].data, *W = c->in[1].data;
    int CK = (int)(p.Cg * p.KK), OHW = (int)p.OHW, Mg = (int)p.Mg;
    if (GB)
        for (int64_t n = 0; n < p.w.N; n++)
            for (int64_t m = 0; m < p.M; m++) {
                const float *gy = GY + (n * p.M + m) * p.OHW;
                double s = 0;
                for (int64_t i = 0; i < p.OHW; i++) s += gy[i];
                GB[m] += (float)s;
            }
    if (!GX && !GW) return PP_OK;
    float *col;
    PP_CHECK(col_alloc(c, &p, &col, err));
    for (int64_t n = 0; n < p.w.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            const float *gy = GY + (n * p.M + g * p.Mg) * p.OHW, *wg = W + g * p.Mg * CK;
            int64_t xoff = (n * p.w.C + g * p.Cg) * p.IHW;
            if (GW) {
                const float *src = X + xoff;
                if (!p.direct) {
                    im2col(&p.w, p.Cg, X + xoff, col);
                    src = col;
                }
                smat_gemm(SMAT_FULL, Mg, CK, OHW, 1.f, (smat){(float *)gy, 0, OHW}, (smat){(float *)src, 1, OHW}, 1.f,
                          (smat){GW + g * p.Mg * CK, 0, CK});
            }
            if (GX) {
                const smat wt = {(float *)wg, 1, CK}, dy = {(float *)gy, 0, OHW};
                if (p.direct) {
                    smat_gemm(SMAT_FULL, CK, OHW, Mg, 1.f, wt, dy, 1.f, (smat){GX + xoff, 0, OHW});
                } else {
                    smat_gemm(SMAT_FULL, CK, OHW, Mg, 1.f, wt, dy, 0.f, (smat){col, 0, OHW});
                    col2im_add(&p.w, p.Cg, col, GX + xoff);
                }
            }
        }
    col_free(c, col);
    return PP_OK;
}

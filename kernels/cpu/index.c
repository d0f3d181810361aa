/* GatherElements, GatherND, ScatterElements and ScatterND on the cpu, with the index math
 * of kernels/index_ops.h (shared with kernels/cuda/index.cu and the constant folder).
 * Gathers' backward scatter-adds into the data gradient; scatters' backward gathers dy into
 * the updates' gradient and passes dy to data's except where reduction none overwrote it
 * (the positions the forward marked in aux: duplicates there are undefined in ONNX). */
#include "cpu_math.h"
#include "op_args_index.h"

#include <string.h>

static int64_t index_val(const pp_tensor *idx, int64_t j)
{
    return idx->dtype == PP_DTYPE_I64 ? ((const int64_t *)idx->data)[j] : ((const int32_t *)idx->data)[j];
}

static pp_status out_of_range(const pp_kernel_ctx *c, const pp_tensor *idx, int64_t j, pp_error *err)
{
    return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "index %lld (at position %lld of the indices) is out of range",
                        (long long)index_val(idx, j), (long long)j);
}

/* The data element of indices' element j (GatherElements / ScatterElements), or an error. */
static pp_status element_at(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, int ax, int64_t j,
                            int64_t *e, pp_error *err)
{
    const pp_ix di = pp_ix_of(data->rank, data->dims), ii = pp_ix_of(idx->rank, idx->dims);
    const int64_t v = pp_ix_wrap(index_val(idx, j), data->dims[ax]);
    if (v < 0) return out_of_range(c, idx, j, err);
    *e = pp_ix_elements_dst(&di, &ii, ax, v, j);
    return PP_OK;
}

/* The data offset of index tuple t (GatherND / ScatterND), or an error. */
static pp_status tuple_at(const pp_kernel_ctx *c, const pp_ix_nd *p, const pp_tensor *idx, int64_t t, int64_t *base,
                          pp_error *err)
{
    int64_t ind[PP_MAX_RANK];
    for (int j = 0; j < p->q; j++) ind[j] = index_val(idx, t * p->q + j);
    *base = pp_ix_nd_base(p, t, ind);
    if (*base < 0) return out_of_range(c, idx, t * p->q, err);
    return PP_OK;
}

/* ---------------- GatherElements ---------------- */

PP_FWD(pp_cpu_gather_elements_forward)
{
    const pp_tensor *x = &c->in[0], *idx = &c->in[1];
    int ax;
    PP_CHECK(pp_args_elements(c, x, idx, &ax, err));
    const size_t es = pp_dtype_size(x->dtype);
    for (int64_t j = 0; j < pp_tensor_numel(idx); j++) {
        int64_t e;
        PP_CHECK(element_at(c, x, idx, ax, j, &e, err));
        memcpy((char *)c->out[0].data + (size_t)j * es, (const char *)x->data + (size_t)e * es, es);
    }
    return PP_OK;
}

PP_BWD(pp_cpu_gather_elements_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_tensor *idx = &c->in[1];
    int ax;
    PP_CHECK(pp_args_elements(c, &grad_in[0], idx, &ax, err));
    float *dx = grad_in[0].data;
    const float *dy = grad_out[0].data;
    for (int64_t j = 0; j < pp_tensor_numel(idx); j++) {
        int64_t e;
        PP_CHECK(element_at(c, &grad_in[0], idx, ax, j, &e, err));
        dx[e] += dy[j];
    }
    return PP_OK;
}

/* ---------------- GatherND ---------------- */

PP_FWD(pp_cpu_gather_nd_forward)
{
    const pp_tensor *x = &c->in[0], *idx = &c->in[1];
    pp_ix_nd p;
    PP_CHECK(pp_args_nd(c, x, idx, &p, err));
    const size_t es = pp_dtype_size(x->dtype), row = (size_t)p.slice * es;
    const int64_t ntup = pp_tensor_numel(idx) / p.q;
    if (pp_tensor_numel(&c->out[0]) != ntup * p.slice)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, expected %lld",
                            (long long)pp_tensor_numel(&c->out[0]), (long long)(ntup * p.slice));
    for (int64_t t = 0; t < ntup; t++) {
        int64_t base;
        PP_CHECK(tuple_at(c, &p, idx, t, &base, err));
        memcpy((char *)c->out[0].data + (size_t)t * row, (const char *)x->data + (size_t)base * es, row);
    }
    return PP_OK;
}

PP_BWD(pp_cpu_gather_nd_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_tensor *idx = &c->in[1];
    pp_ix_nd p;
    PP_CHECK(pp_args_nd(c, &grad_in[0], idx, &p, err));
    float *dx = grad_in[0].data;
    const float *dy = grad_out[0].data;
    for (int64_t t = 0; t < pp_tensor_numel(idx) / p.q; t++) {
        int64_t base;
        PP_CHECK(tuple_at(c, &p, idx, t, &base, err));
        for (int64_t e = 0; e < p.slice; e++) dx[base + e] += dy[t * p.slice + e];
    }
    return PP_OK;
}

/* ---------------- ScatterElements / ScatterND ---------------- */

/* aux: with reduction none, one byte per data element, 1 where the forward overwrote it */
PP_AUX(pp_cpu_scatter_aux)
{
    const char *r = "none";
    pp_error err;
    if (pp_attr_string(c->attrs, c->nattrs, "reduction", "none", &r, c->node, &err) != PP_OK) return 0;
    return strcmp(r, "none") ? 0 : (size_t)pp_tensor_numel(&c->in[0]);
}

/* The data element update k goes to (ScatterElements: one per index; ScatterND: a tuple's
 * slice). */
typedef struct scatter_plan {
    int nd, ax, add;
    pp_ix_nd p;
    int64_t nupd;
} scatter_plan;

static pp_status scatter_plan_of(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx,
                                 const pp_tensor *upd, scatter_plan *s, pp_error *err)
{
    s->nd = c->op == PP_OP_SCATTER_ND;
    PP_CHECK(pp_args_scatter_add(c, &s->add, err));
    if (s->nd) PP_CHECK(pp_args_nd(c, data, idx, &s->p, err));
    else PP_CHECK(pp_args_elements(c, data, idx, &s->ax, err));
    s->nupd = s->nd ? pp_tensor_numel(idx) / s->p.q * s->p.slice : pp_tensor_numel(idx);
    if (pp_tensor_numel(upd) != s->nupd)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "updates have %lld elements, the indices address %lld",
                            (long long)pp_tensor_numel(upd), (long long)s->nupd);
    return PP_OK;
}

static pp_status scatter_dst(const pp_kernel_ctx *c, const scatter_plan *s, const pp_tensor *data,
                             const pp_tensor *idx, int64_t k, int64_t *e, pp_error *err)
{
    if (!s->nd) return element_at(c, data, idx, s->ax, k, e, err);
    PP_CHECK(tuple_at(c, &s->p, idx, k / s->p.slice, e, err));
    *e += k % s->p.slice;
    return PP_OK;
}

static pp_status scatter_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *idx = &c->in[1], *upd = &c->in[2], *y = &c->out[0];
    scatter_plan s;
    PP_CHECK(scatter_plan_of(c, x, idx, upd, &s, err));
    if (s.add && x->dtype != PP_DTYPE_F32 && x->dtype != PP_DTYPE_I64)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "reduction add on dtype %s (float32 and int64 are)",
                            pp_dtype_name(x->dtype));
    const size_t es = pp_dtype_size(x->dtype);
    memcpy(y->data, x->data, pp_tensor_nbytes(y));
    if (c->aux) memset(c->aux, 0, (size_t)pp_tensor_numel(x));
    for (int64_t k = 0; k < s.nupd; k++) {
        int64_t e;
        PP_CHECK(scatter_dst(c, &s, x, idx, k, &e, err));
        if (!s.add) memcpy((char *)y->data + (size_t)e * es, (const char *)upd->data + (size_t)k * es, es);
        else if (x->dtype == PP_DTYPE_F32) ((float *)y->data)[e] += ((const float *)upd->data)[k];
        else ((int64_t *)y->data)[e] += ((const int64_t *)upd->data)[k];
        if (c->aux) ((unsigned char *)c->aux)[e] = 1;
    }
    return PP_OK;
}

/* d data += dy where not overwritten; d updates[k] += dy[dst(k)] */
static pp_status scatter_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gout[0].data) return PP_OK;
    const pp_tensor *idx = &c->in[1];
    scatter_plan s;
    PP_CHECK(scatter_plan_of(c, &gout[0], idx, &gin[2], &s, err));
    const float *dy = gout[0].data;
    float *dx = gin[0].data, *du = gin[2].data;
    const unsigned char *mask = s.add ? NULL : c->aux;
    if (!s.add && !mask && dx)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "backward needs the forward's aux memory (reduction none)");
    for (int64_t i = 0; dx && i < pp_tensor_numel(&gout[0]); i++)
        if (!mask || !mask[i]) dx[i] += dy[i];
    for (int64_t k = 0; du && k < s.nupd; k++) {
        int64_t e;
        PP_CHECK(scatter_dst(c, &s, &gout[0], idx, k, &e, err));
        du[k] += dy[e];
    }
    return PP_OK;
}

PP_FWD(pp_cpu_scatter_nd_forward) { return scatter_forward(c, err); }
PP_BWD(pp_cpu_scatter_nd_backward) { return scatter_backward(c, grad_out, grad_in, err); }
PP_FWD(pp_cpu_scatter_elements_forward) { return scatter_forward(c, err); }
PP_BWD(pp_cpu_scatter_elements_backward) { return scatter_backward(c, grad_out, grad_in, err); }

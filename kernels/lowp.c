/* The generic 16-bit kernel of every op (lowp.h): bfloat16 / float16 tensors of a call get
 * fp32 shadows (inputs converted exactly), the backend's F32 kernel runs on an all-F32 view,
 * and 16-bit outputs and gradients are rounded back; F32 tensors pass as they are. Backend-
 * agnostic: it takes the shadows from the call's work memory (or allocates them) and calls
 * pp_kernel_convert. */
#include "lowp.h"

#include "op_args.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <onnxpipe/backend/device_backend.h>

static int is_lowp(pp_dtype t) { return t == PP_DTYPE_BF16 || t == PP_DTYPE_F16; }

/* The F32 view of one call: slots in[0..nin) out[0..nout) and, in backward, grad_out[0..nout)
 * grad_in[0..nin); t[s] is what the F32 kernel sees, shadow[s] the fp32 copy of a 16-bit slot. */
typedef struct lowp_call {
    pp_device *dev;
    int n;
    pp_tensor *t;
    void **shadow;
    char *work;             /* the rest of the call's work memory (c->work), shadows first */
    size_t left;
    int owned;              /* the shadows were allocated (no work memory was passed) */
} lowp_call;

/* A shadow's bytes: whole 256-byte blocks, so that each one (and the F32 kernel's own work
 * after them) is aligned as an allocation would be. */
static size_t shadow_size(int64_t n) { return ((size_t)(n ? n : 1) * sizeof(float) + 255) / 256 * 256; }

static void call_free(lowp_call *v)
{
    for (int s = 0; v->owned && v->shadow && s < v->n; s++) pp_device_free(v->dev, v->shadow[s]);
    free(v->shadow);
    free(v->t);
}

/* Slot s views src; a 16-bit one becomes F32 and, when it has data, gets a shadow, filled from
 * src when `read` (inputs, and gradients the kernel adds to). */
static pp_status call_slot(lowp_call *v, int s, const pp_tensor *src, int read, pp_error *err)
{
    v->t[s] = *src;
    if (!is_lowp(src->dtype)) return PP_OK;
    v->t[s].dtype = PP_DTYPE_F32;
    if (!src->data) return PP_OK;
    const int64_t n = pp_tensor_numel(src);
    const size_t bytes = shadow_size(n);
    if (v->owned) {
        PP_CHECK(pp_device_alloc(v->dev, bytes, &v->shadow[s], err));
    } else {
        if (bytes > v->left)   /* work_bytes asked for every shadow: a caller passed less */
            return pp_error_set(err, PP_ERR_INTERNAL, "16-bit adapter: %zu bytes of work memory left, a shadow "
                                "needs %zu", v->left, bytes);
        v->shadow[s] = v->work;
        v->work += bytes;
        v->left -= bytes;
    }
    v->t[s].data = v->shadow[s];
    return read ? pp_kernel_convert(v->dev, v->shadow[s], PP_DTYPE_F32, src->data, src->dtype, n, err) : PP_OK;
}

/* Rounds slot s's shadow into dst, a 16-bit tensor the kernel wrote. */
static pp_status call_round(const lowp_call *v, int s, const pp_tensor *dst, pp_error *err)
{
    if (!v->shadow[s]) return PP_OK;
    return pp_kernel_convert(v->dev, dst->data, dst->dtype, v->shadow[s], PP_DTYPE_F32, pp_tensor_numel(dst), err);
}

static pp_status call_init(lowp_call *v, const pp_kernel_ctx *c, int n, pp_error *err)
{
    v->dev = c->dev;
    v->n = n;
    v->work = c->work;
    v->left = c->work ? c->work_size : 0;
    v->owned = !c->work;
    v->t = calloc((size_t)(n ? n : 1), sizeof *v->t);
    v->shadow = calloc((size_t)(n ? n : 1), sizeof *v->shadow);
    if (!v->t || !v->shadow) return PP_NOMEM(err);
    /* a constant the kernel reads on the host (c->host_in) would be read as float32 */
    for (int i = 0; c->host_in && i < c->nin; i++)
        if (c->host_in[i] && is_lowp(c->in[i].dtype))
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err,
                                "input %d is a %s constant read on the host; constants of a 16-bit call stay float32",
                                i, pp_dtype_name(c->in[i].dtype));
    return PP_OK;
}

static pp_status f32_kernel(const pp_kernel_ctx *c, const pp_kernel **k, pp_error *err)
{
    *k = pp_kernel_find(c->op, c->dev->kind, PP_DTYPE_F32);
    if (!*k) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "no float32 %s kernel under the 16-bit one",
                                 pp_device_kind_name(c->dev->kind));
    return PP_OK;
}

/* Cast's output dtype is its attribute's: the F32 Cast writes 16 bits itself. */
static int keeps_out(const pp_kernel_ctx *c) { return c->op == PP_OP_CAST; }

pp_status pp_lowp_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_kernel *k;
    PP_CHECK(f32_kernel(c, &k, err));
    lowp_call v = {0};
    pp_status st = call_init(&v, c, c->nin + c->nout, err);
    for (int i = 0; st == PP_OK && i < c->nin; i++) st = call_slot(&v, i, &c->in[i], 1, err);
    for (int o = 0; st == PP_OK && o < c->nout; o++) {
        if (keeps_out(c)) v.t[c->nin + o] = c->out[o];
        else st = call_slot(&v, c->nin + o, &c->out[o], 0, err);
    }
    if (st == PP_OK) {
        pp_kernel_ctx f = *c;
        f.in = v.t;
        f.out = v.t + c->nin;
        f.work = v.work, f.work_size = v.left;
        st = k->forward(&f, err);
    }
    for (int o = 0; st == PP_OK && o < c->nout; o++) st = call_round(&v, c->nin + o, &c->out[o], err);
    call_free(&v);
    return st;
}

pp_status pp_lowp_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, pp_error *err)
{
    const pp_kernel *k;
    PP_CHECK(f32_kernel(c, &k, err));
    if (!k->backward) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "no backward");
    const int nin = c->nin, nout = c->nout, gi = nin + 2 * nout;
    lowp_call v = {0};
    pp_status st = call_init(&v, c, 2 * (nin + nout), err);
    for (int i = 0; st == PP_OK && i < nin; i++) st = call_slot(&v, i, &c->in[i], 1, err);
    for (int o = 0; st == PP_OK && o < nout; o++) st = call_slot(&v, nin + o, &c->out[o], 1, err);
    for (int o = 0; st == PP_OK && o < nout; o++) st = call_slot(&v, nin + nout + o, &grad_out[o], 1, err);
    /* backward adds: a shadow starts from the gradient so far, unless this call assigns it */
    for (int i = 0; st == PP_OK && i < nin; i++)
        st = call_slot(&v, gi + i, &grad_in[i], !(c->grad_fresh >> i & 1), err);
    if (st == PP_OK) {
        pp_kernel_ctx f = *c;
        f.in = v.t;
        f.out = v.t + nin;
        f.work = v.work, f.work_size = v.left;
        st = k->backward(&f, v.t + nin + nout, v.t + gi, err);
    }
    for (int i = 0; st == PP_OK && i < nin; i++) st = call_round(&v, gi + i, &grad_in[i], err);
    call_free(&v);
    return st;
}

/* What the F32 kernel sees of a call (f, and in backward the gradients at view + nin + nout
 * and view + nin + 2 nout): c's tensors with 16-bit ones retyped F32. Caller frees. */
static pp_tensor *f32_view(const pp_kernel_ctx *c, const pp_tensor *gout, const pp_tensor *gin, pp_kernel_ctx *f)
{
    const int n = c->nin + c->nout, total = gout ? 2 * n : n;
    pp_tensor *t = calloc((size_t)total + 1, sizeof *t);
    if (!t) return NULL;
    for (int s = 0; s < total; s++) {
        const int g = s >= n, k = s - g * n;   /* gradients: grad_out[0..nout) then grad_in[0..nin) */
        t[s] = !g ? (k < c->nin ? c->in[k] : c->out[k - c->nin]) : (k < c->nout ? gout[k] : gin[k - c->nout]);
        if (is_lowp(t[s].dtype)) t[s].dtype = PP_DTYPE_F32;
    }
    *f = *c;
    f->in = t;
    f->out = t + c->nin;
    return t;
}

/* aux stays the F32 kernel's (kernel-private fp32): its size for the all-F32 view */
static size_t lowp_aux_bytes(const pp_kernel_ctx *c)
{
    const pp_kernel *k = pp_kernel_find(c->op, c->dev->kind, PP_DTYPE_F32);
    if (!k || !k->aux_bytes) return 0;
    pp_kernel_ctx f;
    pp_tensor *t = f32_view(c, NULL, NULL, &f);
    if (!t) return SIZE_MAX;   /* the caller's allocation of it fails and says so */
    const size_t n = k->aux_bytes(&f);
    free(t);
    return n;
}

/* The shadows call_slot allocates for n tensors. */
static size_t shadow_bytes(const pp_tensor *t, int n)
{
    size_t b = 0;
    for (int i = 0; i < n; i++) {
        const int64_t e = pp_tensor_numel(&t[i]);
        if (is_lowp(t[i].dtype) && t[i].data) b += shadow_size(e);
    }
    return b;
}

/* A call's shadows (as pp_lowp_forward / pp_lowp_backward make them) and what the F32
 * kernel allocates on the view. */
static size_t lowp_work_bytes(const pp_kernel_ctx *c, const pp_tensor *gout, const pp_tensor *gin)
{
    size_t n = shadow_bytes(c->in, c->nin) + (keeps_out(c) && !gout ? 0 : shadow_bytes(c->out, c->nout));
    if (gout) n += shadow_bytes(gout, c->nout) + shadow_bytes(gin, c->nin);
    const pp_kernel *k = pp_kernel_find(c->op, c->dev->kind, PP_DTYPE_F32);
    if (!k || !k->work_bytes) return n;
    pp_kernel_ctx f;
    pp_tensor *t = f32_view(c, gout, gin, &f);
    if (!t) return SIZE_MAX;
    const int nio = c->nin + c->nout;
    n += k->work_bytes(&f, gout ? t + nio : NULL, gout ? t + nio + c->nout : NULL);
    free(t);
    return n;
}

static pp_kernel adapters[PP_DEVICE_KIND_COUNT][PP_OP_COUNT];
static pthread_once_t adapters_once = PTHREAD_ONCE_INIT;

/* caps: the F32 kernel's (MatMul's alpha, bias and strided forms work on the view); it
 * honours grad_fresh because a fresh 16-bit gradient's shadow is not read */
static void fill_adapters(void)
{
    for (int d = 0; d < PP_DEVICE_KIND_COUNT; d++)
        for (int op = 0; op < PP_OP_COUNT; op++) {
            const pp_kernel *k = pp_kernel_find((pp_op)op, (pp_device_kind)d, PP_DTYPE_F32);
            if (!k) continue;
            adapters[d][op] = (pp_kernel){k->aux_bytes ? lowp_aux_bytes : NULL, pp_lowp_forward,
                                          k->backward ? pp_lowp_backward : NULL, k->caps, lowp_work_bytes, NULL};
        }
}

const pp_kernel *pp_lowp_adapter(pp_op op, pp_device_kind kind)
{
    if ((int)op < 0 || op >= PP_OP_COUNT || (int)kind < 0 || kind >= PP_DEVICE_KIND_COUNT) return NULL;
    pthread_once(&adapters_once, fill_adapters);
    return adapters[kind][op].forward ? &adapters[kind][op] : NULL;
}

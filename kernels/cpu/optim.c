/* cpu optimizer updates over one parameter tensor in a flat buffer: SGD (momentum,
 * Nesterov, L2 weight decay), Adam, AdamW (decoupled decay) and LAMB (per-tensor trust
 * ratio), with torch.optim's formulas and order of operations (element.h). Scalars such
 * as bias corrections are computed in double and rounded once, as torch does. */
#include "cpu_math.h"
#include <onnxpipe/element.h>

#include <math.h>
#include <string.h>
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/kernels.h>

int pp_optim_state_slots(const pp_optim_hparams *h)
{
    if (h->kind == PP_OPTIM_SGD) return h->momentum != 0.f ? 1 : 0;
    return 2;
}

static const char *const optim_names[] = {"sgd", "adam", "adamw", "lamb"};

const char *pp_optim_kind_name(pp_optim_kind k)
{
    return (int)k >= PP_OPTIM_SGD && k <= PP_OPTIM_LAMB ? optim_names[k] : "unknown";
}

int pp_optim_kind_parse(const char *name, pp_optim_kind *out)
{
    for (int i = 0; name && i <= PP_OPTIM_LAMB; i++)
        if (!strcmp(name, optim_names[i])) {
            *out = (pp_optim_kind)i;
            return 1;
        }
    return 0;
}

pp_status pp_optim_check(const pp_optim_hparams *h, const float *state, int64_t n, pp_error *err)
{
    const char *nm = pp_optim_kind_name(h->kind);
    if ((int)h->kind < PP_OPTIM_SGD || h->kind > PP_OPTIM_LAMB)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "optimizer kind %d is not one of sgd, adam, adamw, lamb",
                            (int)h->kind);
    if (n < 0) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: element count %lld < 0", nm, (long long)n);
    if (h->step < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: step %lld, expected >= 1 (1-based)", nm, (long long)h->step);
    if (!(h->lr >= 0.f) || !(h->weight_decay >= 0.f))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: lr %g and weight_decay %g must be >= 0", nm, (double)h->lr,
                            (double)h->weight_decay);
    if (h->kind == PP_OPTIM_SGD && h->nesterov && h->momentum <= 0.f)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "sgd: nesterov needs momentum > 0 (got %g)", (double)h->momentum);
    if (h->kind != PP_OPTIM_SGD &&
        !(h->beta1 >= 0.f && h->beta1 < 1.f && h->beta2 >= 0.f && h->beta2 < 1.f && h->eps >= 0.f))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: betas (%g, %g) must lie in [0, 1) and eps %g >= 0", nm,
                            (double)h->beta1, (double)h->beta2, (double)h->eps);
    if (pp_optim_state_slots(h) && !state && n)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: optimizer state is NULL", nm);
    return PP_OK;
}

static void update_sgd(const pp_optim_hparams *h, const pp_optim_step *t, float *p, const float *g, float *buf,
                       int64_t n)
{
    const float gs = t->grad_scale;
    for (int64_t i = 0; i < n; i++) {
        float dummy = 0.f;
        p[i] = pp_el_sgd(p[i], g[i] * gs, buf ? &buf[i] : &dummy, t->lr, h->momentum, h->nesterov, h->weight_decay,
                         t->first);
    }
}

pp_optim_scalars pp_optim_scalars_of(const pp_optim_hparams *h)
{
    double t = (double)h->step;
    pp_optim_scalars k;
    k.c1 = (float)(1.0 - (double)h->beta1);
    k.c2 = (float)(1.0 - (double)h->beta2);
    k.bc1 = (float)(1.0 - pow((double)h->beta1, t));
    k.bc2 = (float)(1.0 - pow((double)h->beta2, t));
    k.step_size = (float)((double)h->lr / (1.0 - pow((double)h->beta1, t)));
    k.bc2_sqrt = (float)sqrt(1.0 - pow((double)h->beta2, t));
    k.shrink = h->kind == PP_OPTIM_ADAMW ? (float)(1.0 - (double)h->lr * (double)h->weight_decay) : 1.f;
    k.l2 = h->kind == PP_OPTIM_ADAM ? h->weight_decay : 0.f;
    return k;
}

pp_optim_step pp_optim_step_at(const pp_optim_hparams *h, float grad_scale)
{
    return (pp_optim_step){.k = pp_optim_scalars_of(h), .lr = h->lr, .grad_scale = grad_scale, .first = h->step == 1,
                           .skip = 0};
}

/* Adam (L2 decay added to the gradient: l2 != 0) and AdamW (decoupled: p *= shrink =
 * 1 - lr wd first; shrink is 1 for Adam); the gradient is multiplied by gs (clipping) as it
 * is read. It runs over every parameter each step: PP_CPU_CLONES, and vectorised because
 * this file is compiled without errno for sqrtf (CMakeLists.txt); vector sqrt and division
 * round as the scalar ones. */
PP_CPU_CLONES static void adam_loop(const pp_optim_hparams *h, const pp_optim_scalars *ks, float gs,
                                    float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                                    int64_t n)
{
    const pp_optim_scalars k = *ks;
    const float b1 = h->beta1, b2 = h->beta2, eps = h->eps;
    if (k.l2 != 0.f) {
        for (int64_t i = 0; i < n; i++) {
            float pi = p[i] * k.shrink, gi = g[i] * gs + k.l2 * pi;
            pp_el_adam_moments(gi, &m[i], &v[i], b1, k.c1, b2, k.c2);
            p[i] = pp_el_adam_apply(pi, m[i], v[i], k.step_size, k.bc2_sqrt, eps);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i] * k.shrink;
        pp_el_adam_moments(g[i] * gs, &m[i], &v[i], b1, k.c1, b2, k.c2);
        p[i] = pp_el_adam_apply(pi, m[i], v[i], k.step_size, k.bc2_sqrt, eps);
    }
}

/* LAMB: pass 1 updates the moments and measures ||p|| and ||u||; pass 2 recomputes u
 * (p is unchanged until then) and steps p -= lr * trust * u. */
static void update_lamb(const pp_optim_hparams *h, const pp_optim_step *t, float *p, const float *g, float *m,
                        float *v, int64_t n)
{
    const pp_optim_scalars k = t->k;
    const float c1 = k.c1, c2 = k.c2, bc1 = k.bc1, bc2 = k.bc2, gs = t->grad_scale;
    double pn = 0, un = 0;
    for (int64_t i = 0; i < n; i++) {
        pp_el_adam_moments(g[i] * gs, &m[i], &v[i], h->beta1, c1, h->beta2, c2);
        float u = pp_el_lamb_dir(p[i], m[i], v[i], bc1, bc2, h->eps, h->weight_decay);
        pn += (double)p[i] * p[i];
        un += (double)u * u;
    }
    pn = sqrt(pn);
    un = sqrt(un);
    double trust = pn > 0 && un > 0 ? pn / un : 1.0;
    float step = (float)((double)t->lr * trust);
    for (int64_t i = 0; i < n; i++) p[i] -= step * pp_el_lamb_dir(p[i], m[i], v[i], bc1, bc2, h->eps, h->weight_decay);
}

pp_status pp_cpu_optim_update(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                              const float *grad, float *state, int64_t n, pp_error *err)
{
    (void)dev, (void)err;
    if (step->skip) return PP_OK;
    switch (h->kind) {
    case PP_OPTIM_SGD: update_sgd(h, step, param, grad, h->momentum != 0.f ? state : NULL, n); break;
    case PP_OPTIM_ADAM:
    case PP_OPTIM_ADAMW: adam_loop(h, &step->k, step->grad_scale, param, grad, state, state + n, n); break;
    case PP_OPTIM_LAMB: update_lamb(h, step, param, grad, state, state + n, n); break;
    }
    return PP_OK;
}

/* Learning-rate schedules: constant, linear warmup then linear / cosine / polynomial decay. */
#include <onnxpipe/trainer_lib.h>

#include <math.h>
#include <string.h>

float pp_lr_at(const pp_lr_schedule *s, int64_t step)
{
    if (s->warmup > 0 && step <= s->warmup) return s->lr * (float)step / (float)s->warmup;
    if (s->kind == PP_LR_CONSTANT) return s->lr;
    int64_t span = s->steps - s->warmup;
    double t = span > 0 ? (double)(step - s->warmup) / (double)span : 1.0;
    if (t > 1) t = 1;
    double frac;
    switch (s->kind) {
    case PP_LR_LINEAR: frac = 1.0 - t; break;
    case PP_LR_COSINE: frac = 0.5 * (1.0 + cos(M_PI * t)); break;
    default: frac = pow(1.0 - t, s->power > 0 ? s->power : 1.0); break;
    }
    return (float)(s->min_lr + (s->lr - s->min_lr) * frac);
}

static const char *const lr_names[] = {"constant", "linear", "cosine", "poly"};

const char *pp_lr_kind_name(pp_lr_kind k) { return (int)k >= 0 && k <= PP_LR_POLY ? lr_names[k] : "unknown"; }

int pp_lr_parse(const char *name, pp_lr_kind *out)
{
    for (int i = 0; i <= PP_LR_POLY; i++)
        if (!strcmp(name, lr_names[i])) {
            *out = (pp_lr_kind)i;
            return 1;
        }
    return 0;
}

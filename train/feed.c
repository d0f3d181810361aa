/* Filling a stage's data inputs: the trainer hands them to its feed callback as host
 * buffers, and the dataset fill reads the samples a sampler names (the training stream
 * and the evaluation passes share it), or copies them from what prefetch.c read ahead. */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

pp_status train_feed_inputs(pp_stage *s, int slot, pp_trainer_feed *f, pp_trainer_feed_fn fn, void *user,
                            pp_error *err)
{
    pp_device *dev = pp_stage_device(s);
    int host = (pp_device_caps(dev) & PP_DEVICE_CAP_HOST_MEMORY) != 0;   /* staging is the device memory itself */
    int n = 0;
    for (int i = 0; i < pp_stage_num_inputs(s); i++) n += pp_stage_input(s, i)->is_data;
    if (n == 0) return PP_OK;
    pp_trainer_input *in = calloc((size_t)n, sizeof *in);
    int *port = calloc((size_t)n, sizeof *port);
    pp_status st = PP_OK;
    if (!in || !port) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int i = 0, k = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        if (!p->is_data) continue;
        in[k] = (pp_trainer_input){.name = p->name, .dtype = p->dtype, .shape = p->shape, .nbytes = p->nbytes,
                                   .data = host ? pp_stage_input_buffer(s, slot, i) : malloc(p->nbytes)};
        port[k++] = i;
        if (!in[k - 1].data) {
            st = PP_NOMEM(err);
            goto done;
        }
    }
    f->inputs = in, f->ninputs = n, f->stage = s, f->slot = slot;
    PP_CHECK_GOTO(fn(user, f, err), st, done);
    for (int k = 0; !host && k < n; k++)
        PP_CHECK_GOTO(pp_device_copy_from_host(dev, pp_stage_input_buffer(s, slot, port[k]), in[k].data, in[k].nbytes,
                                               err), st, done);
done:
    for (int k = 0; in && !host && k < n; k++) free(in[k].data);
    free(in);
    free(port);
    f->inputs = NULL, f->ninputs = 0;
    return st;
}

pp_status train_feed_dataset(const pp_dataset *d, const pp_sampler *smp, train_prefetch *pf, int64_t step,
                             const pp_trainer_feed *f, pp_error *err)
{
    for (int i = 0; i < f->ninputs; i++) {
        const pp_trainer_input *p = &f->inputs[i];
        const pp_dataset_array *a = pp_dataset_find(d, p->name);
        size_t bytes = a ? pp_dataset_sample_bytes(a, pp_sampler_len(smp, d, step)) : 0;   /* the step's length */
        if (!a || bytes * (size_t)f->samples != p->nbytes)   /* train_check_data said why before step 1 */
            return pp_error_set(err, PP_ERR_SHAPE, "dataset '%s' has no array '%s' of %zu bytes per sample",
                                d->dir, p->name, p->nbytes / (size_t)(f->samples > 0 ? f->samples : 1));
        const void *ahead = NULL;
        if (pf) PP_CHECK(train_prefetch_get(pf, step, a, f->offset, f->samples, &ahead, err));
        if (ahead) memcpy(p->data, ahead, p->nbytes);
        else PP_CHECK(pp_sampler_read(smp, d, a, step, f->offset, f->samples, p->data, err));
    }
    return PP_OK;
}

typedef struct dataset_fill {
    const pp_dataset *d;
    const pp_sampler *smp;
    int64_t step;
} dataset_fill;

static pp_status fill(void *user, const pp_trainer_feed *f, pp_error *err)
{
    const dataset_fill *x = user;
    return train_feed_dataset(x->d, x->smp, NULL, x->step, f, err);
}

pp_status train_feed_stage(pp_stage *s, int slot, const pp_dataset *d, const pp_sampler *smp, int64_t step,
                           int64_t offset, int64_t count, pp_error *err)
{
    dataset_fill x = {.d = d, .smp = smp, .step = step};
    pp_trainer_feed f = {.step = step, .offset = offset, .samples = count};
    return train_feed_inputs(s, slot, &f, fill, &x, err);
}

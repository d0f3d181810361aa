/* Filling a stage's data inputs from a dataset for the samples a sampler names (the
 * training stream and the evaluation passes share it). */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

pp_status train_feed_stage(pp_stage *s, int slot, const pp_dataset *d, const pp_sampler *smp, int64_t step,
                           int64_t offset, int64_t count, pp_error *err)
{
    pp_device *dev = pp_stage_device(s);
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        if (!p->is_data) continue;
        const pp_dataset_array *a = pp_dataset_find(d, p->name);
        if (!a || a->sample_bytes * (size_t)count != p->nbytes)   /* train_check_data said why before step 1 */
            return pp_error_set(err, PP_ERR_SHAPE, "dataset '%s' has no array '%s' of %zu bytes per sample",
                                d->dir, p->name, p->nbytes / (size_t)(count > 0 ? count : 1));
        void *dst = pp_stage_input_buffer(s, slot, i);
        if (pp_device_caps(dev) & PP_DEVICE_CAP_HOST_MEMORY) {   /* staging is the device memory itself */
            pp_sampler_read(smp, d, a, step, offset, count, dst);
            continue;
        }
        void *tmp = malloc(p->nbytes);
        if (!tmp) return PP_NOMEM(err);
        pp_sampler_read(smp, d, a, step, offset, count, tmp);
        pp_status st = pp_device_copy_from_host(dev, dst, tmp, p->nbytes, err);
        free(tmp);
        PP_CHECK(st);
    }
    return PP_OK;
}

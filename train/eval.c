/* Inference over a dataset with the same stage executor (forward only): what
 * `onnxpipe eval` runs, and how tests compare our forward with onnxruntime. */
#include <onnxpipe/partition.h>
#include <onnxpipe/train_job.h>
#include <onnxpipe/graph_ir.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

pp_status pp_eval_run(const pp_eval_config *cfg, int64_t *samples_done, pp_error *err)
{
    *samples_done = 0;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    pp_device *dev = NULL;
    pp_stage *s = NULL;
    pp_dataset *d = NULL;
    FILE *outs[64] = {0};
    void *host = NULL;
    pp_status st;
    pp_graph_options gopt = {.batch = cfg->batch, .dims = cfg->dims, .ndims = cfg->ndims};
    PP_CHECK_GOTO(pp_graph_load(cfg->model, &gopt, &g, err), st, done);
    PP_CHECK_GOTO(pp_partition_create(g, 1, NULL, &part, err), st, done);
    pp_device_kind kind;
    PP_CHECK_GOTO(pp_device_choose(cfg->device, 0, &kind, NULL, err), st, done);
    PP_CHECK_GOTO(pp_device_create(kind, 0, &dev, err), st, done);
    pp_stage_options so = {.slots = 1, .microbatch = cfg->batch, .global_batch = cfg->batch};
    PP_CHECK_GOTO(pp_stage_create(part, 0, dev, &so, &s, err), st, done);
    PP_CHECK_GOTO(pp_dataset_open(cfg->data, &d, err), st, done);
    int64_t total = cfg->samples ? cfg->samples : pp_dataset_samples(d);
    if (total < cfg->batch) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' holds %lld samples, fewer than one batch of %lld",
                          cfg->data, (long long)pp_dataset_samples(d), (long long)cfg->batch);
        goto done;
    }
    if (mkdir(cfg->out_dir, 0755) && errno != EEXIST) {
        st = pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", cfg->out_dir, strerror(errno));
        goto done;
    }
    if (g->noutputs > 64) {
        st = pp_error_set(err, PP_ERR_UNSUPPORTED, "the model has %d outputs (at most 64)", g->noutputs);
        goto done;
    }
    size_t max_bytes = 0;
    for (int o = 0; o < g->noutputs; o++) {
        const pp_value *v = &g->values[g->outputs[o]];
        size_t nb = (size_t)pp_shape_numel(&v->shape) * pp_dtype_size(v->dtype);
        if (nb > max_bytes) max_bytes = nb;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", cfg->out_dir, v->name);
        if (!(outs[o] = fopen(path, "wb"))) {
            st = pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
            goto done;
        }
    }
    for (int i = 0; i < pp_stage_num_inputs(s); i++)
        if (pp_stage_input(s, i)->nbytes > max_bytes) max_bytes = pp_stage_input(s, i)->nbytes;
    host = malloc(max_bytes ? max_bytes : 1);
    if (!host) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int64_t first = 0; first + cfg->batch <= total; first += cfg->batch) {
        for (int i = 0; i < pp_stage_num_inputs(s); i++) {
            const pp_stage_port *p = pp_stage_input(s, i);
            const pp_dataset_array *a = pp_dataset_find(d, p->name);
            if (!a || a->sample_bytes * (size_t)cfg->batch != p->nbytes || a->dtype != p->dtype) {
                st = pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' has no %s array '%s' of %zu bytes per sample "
                                  "for the model input", cfg->data, pp_dtype_name(p->dtype), p->name,
                                  p->nbytes / (size_t)cfg->batch);
                goto done;
            }
            /* staged: device memory may not be host memory */
            PP_CHECK_GOTO(pp_dataset_read(d, a, first, cfg->batch, host, err), st, done);
            PP_CHECK_GOTO(pp_device_copy_from_host(dev, pp_stage_input_buffer(s, 0, i), host, p->nbytes, err), st, done);
        }
        PP_CHECK_GOTO(pp_stage_forward(s, 0, 0, first / cfg->batch, err), st, done);
        for (int o = 0; o < g->noutputs; o++) {
            const pp_value *v = &g->values[g->outputs[o]];
            size_t nb = (size_t)pp_shape_numel(&v->shape) * pp_dtype_size(v->dtype);
            void *buf = pp_stage_value_buffer(s, 0, g->outputs[o]);
            if (!buf) {
                st = pp_error_set(err, PP_ERR_INTERNAL, "output '%s' was not kept by the stage", v->name);
                goto done;
            }
            PP_CHECK_GOTO(pp_device_copy_to_host(dev, host, buf, nb, err), st, done);
            if (fwrite(host, 1, nb, outs[o]) != nb) {
                st = pp_error_set(err, PP_ERR_IO, "cannot write the output '%s'", v->name);
                goto done;
            }
        }
        *samples_done = first + cfg->batch;
    }
done:
    for (int o = 0; o < 64; o++)
        if (outs[o] && fclose(outs[o]) && st == PP_OK) st = pp_error_set(err, PP_ERR_IO, "cannot write outputs");
    free(host);
    pp_dataset_close(d);
    pp_stage_destroy(s);
    pp_device_destroy(dev);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    return st;
}

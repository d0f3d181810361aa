/* Filling a stage's data inputs: the trainer hands them to its feed callback as host
 * buffers (the job's callback fills them from its dataset: prefetch.c). */
#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

/* b's room for n inputs and `bytes` of host staging (grown, never shrunk). */
static pp_status feed_room(train_feed_buf *b, int n, size_t bytes, pp_error *err)
{
    if (n > b->cap) {
        pp_trainer_input *in = realloc(b->in, (size_t)n * sizeof *in);
        if (in) b->in = in;
        int *port = realloc(b->port, (size_t)n * sizeof *port);
        if (port) b->port = port;
        if (!in || !port) return PP_NOMEM(err);
        b->cap = n;
    }
    if (bytes > b->bytes) {
        void *h = realloc(b->host, bytes);
        if (!h) return PP_NOMEM(err);
        b->host = h;
        b->bytes = bytes;
    }
    return PP_OK;
}

void train_feed_buf_free(train_feed_buf *b)
{
    free(b->in);
    free(b->port);
    free(b->host);
    memset(b, 0, sizeof *b);
}

pp_status train_feed_inputs(train_feed_buf *b, pp_stage *s, int slot, pp_trainer_feed *f, pp_trainer_feed_fn fn,
                            void *user, pp_error *err)
{
    pp_device *dev = pp_stage_device(s);
    int host = (pp_device_caps(dev) & PP_DEVICE_CAP_HOST_MEMORY) != 0;   /* staging is the device memory itself */
    int n = 0;
    size_t bytes = 0;
    for (int i = 0; i < pp_stage_num_inputs(s); i++)
        if (pp_stage_input(s, i)->is_data) n++, bytes += pp_stage_input(s, i)->nbytes;
    if (n == 0) return PP_OK;
    PP_CHECK(feed_room(b, n, host ? 0 : bytes, err));
    size_t at = 0;
    for (int i = 0, k = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        if (!p->is_data) continue;
        b->in[k] = (pp_trainer_input){.name = p->name, .dtype = p->dtype, .shape = p->shape, .nbytes = p->nbytes,
                                      .data = host ? pp_stage_input_buffer(s, slot, i) : (char *)b->host + at};
        b->port[k++] = i;
        at += p->nbytes;
    }
    f->inputs = b->in, f->ninputs = n, f->stage = s, f->slot = slot;
    pp_status st = fn(user, f, err);
    for (int k = 0; st == PP_OK && !host && k < n; k++)
        st = pp_device_copy_from_host(dev, pp_stage_input_buffer(s, slot, b->port[k]), b->in[k].data, b->in[k].nbytes,
                                      err);
    f->inputs = NULL, f->ninputs = 0;
    return st;
}

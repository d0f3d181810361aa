/* The cpu device: 64-byte aligned host memory; every operation is synchronous, so a
 * timer is the host clock read when it is recorded, and there are no graphs. */
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/device.h>

#include <stdlib.h>
#include <string.h>

static const char *cpu_name(const pp_device *d)
{
    (void)d;
    return "cpu";
}

static pp_status cpu_alloc(pp_device *d, size_t nbytes, void **out, pp_error *err)
{
    (void)d;
    size_t n = (nbytes + 63) / 64 * 64;
    *out = aligned_alloc(64, n ? n : 64);
    if (!*out) return pp_error_set(err, PP_ERR_NOMEM, "cpu: out of memory allocating %zu bytes", nbytes);
    return PP_OK;
}

static void cpu_free(pp_device *d, void *p)
{
    (void)d;
    free(p);
}

static pp_status cpu_copy(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    (void)d;
    (void)err;
    memmove(dst, src, n);
    return PP_OK;
}

static pp_status cpu_memset(pp_device *d, void *p, int value, size_t n, pp_error *err)
{
    (void)d;
    (void)err;
    memset(p, value, n);
    return PP_OK;
}

static void cpu_destroy(pp_device *d)
{
    free(d);
}

/* A timer is one double: pp_now() when recorded. */
static pp_status cpu_timer_create(pp_device *d, void **timer, pp_error *err)
{
    (void)d;
    *timer = calloc(1, sizeof(double));
    return *timer ? PP_OK : pp_error_set(err, PP_ERR_NOMEM, "cpu: out of memory for a timer");
}

static void cpu_timer_destroy(pp_device *d, void *timer)
{
    (void)d;
    free(timer);
}

static pp_status cpu_timer_record(pp_device *d, void *timer, pp_error *err)
{
    (void)d, (void)err;
    *(double *)timer = pp_now();
    return PP_OK;
}

static pp_status cpu_timer_elapsed(pp_device *d, void *from, void *to, double *seconds, pp_error *err)
{
    (void)d, (void)err;
    *seconds = *(const double *)to - *(const double *)from;
    return PP_OK;
}

static const pp_device_i cpu_device_i = {
    /* .name              = */ cpu_name,
    /* .alloc             = */ cpu_alloc,
    /* .free              = */ cpu_free,
    /* .copy_from_host    = */ cpu_copy,
    /* .copy_to_host      = */ cpu_copy,
    /* .copy              = */ cpu_copy,
    /* .memset            = */ cpu_memset,
    /* .synchronize       = */ NULL,   /* CPU work is synchronous */
    /* .stream_create     = */ NULL,
    /* .stream_destroy    = */ NULL,
    /* .event_record      = */ NULL,
    /* .stream_wait_event = */ NULL,
    /* .destroy           = */ cpu_destroy,
    /* .timer_create      = */ cpu_timer_create,
    /* .timer_destroy     = */ cpu_timer_destroy,
    /* .timer_record      = */ cpu_timer_record,
    /* .timer_elapsed     = */ cpu_timer_elapsed,
    /* .capture_begin     = */ NULL,   /* no graphs: work runs as it is called */
    /* .capture_end       = */ NULL,
    /* .graph_launch      = */ NULL,
    /* .graph_destroy     = */ NULL,
};

pp_status pp_device_cpu_create(int index, pp_device **out, pp_error *err)
{
    pp_device *d = calloc(1, sizeof *d);
    if (!d) return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating the cpu device");
    d->i = &cpu_device_i;
    d->kind = PP_DEVICE_CPU;
    d->index = index;
    *out = d;
    return PP_OK;
}

/* Device creation through the backend list (kernels/backends.c) and the checked
 * wrappers around a backend's vtable. */
#include <onnxpipe/kernels.h>

#include <string.h>

const char *pp_device_kind_name(pp_device_kind kind)
{
    switch (kind) {
    case PP_DEVICE_CPU: return "cpu";
    case PP_DEVICE_CUDA: return "cuda";
    default: return "unknown";
    }
}

pp_status pp_device_create(pp_device_kind kind, int index, pp_device **out, pp_error *err)
{
    *out = NULL;
    if ((int)kind < 0 || kind >= PP_DEVICE_KIND_COUNT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "device kind %d out of range", (int)kind);
    const pp_backend *b = pp_backend_get(kind);
    if (!b)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "the %s backend is not compiled into this build of onnxpipe; rebuild with it or "
                            "use --device cpu", pp_device_kind_name(kind));
    return b->create(index, out, err);
}

pp_device_kind pp_device_auto(int index, pp_error *why)
{
    pp_device *d = NULL;
    pp_error e = {0};
    if (pp_device_create(PP_DEVICE_CUDA, index, &d, &e) == PP_OK) {
        pp_device_destroy(d);
        return PP_DEVICE_CUDA;
    }
    if (why) *why = e;
    return PP_DEVICE_CPU;
}

pp_status pp_device_choose(const char *name, int index, pp_device_kind *kind, pp_error *why, pp_error *err)
{
    if (!name || !strcmp(name, "auto")) *kind = pp_device_auto(index, why);
    else if (!strcmp(name, "cpu")) *kind = PP_DEVICE_CPU;
    else if (!strcmp(name, "cuda")) *kind = PP_DEVICE_CUDA;
    else return pp_error_set(err, PP_ERR_INVALID_ARG, "--device '%s': use auto, cpu or cuda", name);
    return PP_OK;
}

void pp_device_destroy(pp_device *d)
{
    if (d && d->i->destroy) d->i->destroy(d);
}

pp_status pp_device_alloc(pp_device *d, size_t nbytes, void **out, pp_error *err)
{
    return d->i->alloc(d, nbytes, out, err);
}

void pp_device_free(pp_device *d, void *p)
{
    if (p) d->i->free(d, p);
}

pp_status pp_device_copy_from_host(pp_device *d, void *dst, const void *src_host, size_t n, pp_error *err)
{
    return n ? d->i->copy_from_host(d, dst, src_host, n, err) : PP_OK;
}

pp_status pp_device_copy_to_host(pp_device *d, void *dst_host, const void *src, size_t n, pp_error *err)
{
    return n ? d->i->copy_to_host(d, dst_host, src, n, err) : PP_OK;
}

pp_status pp_device_copy(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    return n && dst != src ? d->i->copy(d, dst, src, n, err) : PP_OK;
}

pp_status pp_device_memset(pp_device *d, void *p, int value, size_t n, pp_error *err)
{
    return n ? d->i->memset(d, p, value, n, err) : PP_OK;
}

pp_status pp_device_synchronize(pp_device *d, pp_error *err)
{
    return d->i->synchronize ? d->i->synchronize(d, err) : PP_OK;
}

/* Reading an ONNX TensorProto (an initializer or a tensor attribute): dims and dtype
 * checked, data from raw_data, the typed fields, or an mmapped external-data file beside
 * the model. */
#include "load_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

/* 1 if p is a block unpack_alloc placed in the graph's arena. */
static int in_graph_arena(const loader *L, const void *p)
{
    for (int i = L->nbig - 1; i >= 0; i--)
        if (L->big[i] == p) return 1;
    return 0;
}

pp_dtype load_dtype(int64_t t)
{
    if (t <= 0 || t == PP_DTYPE_STRING || t > PP_DTYPE_BF16) return PP_DTYPE_UNDEFINED;
    return pp_dtype_size((pp_dtype)t) ? (pp_dtype)t : PP_DTYPE_UNDEFINED;
}

/* ---- external data ------------------------------------------------------ */

/* Rejects absolute locations and any '..' component: external data stays beside the model. */
static int location_is_safe(const char *loc)
{
    if (!*loc || loc[0] == '/') return 0;
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += n + (e ? 1 : 0);
    }
    return 1;
}

/* 1 if the resolved path real lies in dir (resolved here), or, with dir_of, in the
 * folder holding the file dir. */
static int lies_in(const char *real, const char *dir, int dir_of)
{
    char *rd = realpath(dir, NULL);
    if (!rd) return 0;
    if (dir_of) {
        char *slash = strrchr(rd, '/');
        if (slash) slash[slash == rd] = '\0';   /* "/m.onnx" -> "/" */
    }
    size_t n = strlen(rd);
    int in = !strncmp(real, rd, n) && (real[n] == '/' || (n == 1 && rd[0] == '/'));
    free(rd);
    return in;
}

/* The data file, links resolved, must lie in the model's folder: the folder it was loaded
 * from, or the one the model file really is in (a model and its data linked in from a
 * cache, as the Hugging Face hub lays them out); onnxruntime (1.24) checks the same. A
 * link beside the model pointing anywhere else is refused. *real: the resolved path
 * (NULL when the file does not exist: opening it says so). */
static pp_status check_inside(const loader *L, const char *init, const char *loc, const char *path, char **real,
                              pp_error *err)
{
    *real = realpath(path, NULL);
    if (!*real || lies_in(*real, L->base_dir, 0) || (L->model_path && lies_in(*real, L->model_path, 1)))
        return PP_OK;
    pp_status st = pp_error_set(err, PP_ERR_PARSE,
                                "%s: external data location '%s' resolves to '%s', which lies outside the "
                                "model's directory; links beside a model may only point into its folder",
                                init, loc, *real);
    free(*real);
    *real = NULL;
    return st;
}

static pp_status map_external(loader *L, const char *init, const char *loc, const ext_file **out,
                              pp_error *err)
{
    for (int i = 0; i < L->nfiles; i++)
        if (!strcmp(L->files[i].location, loc)) {
            *out = &L->files[i];
            return PP_OK;
        }
    if (!location_is_safe(loc))
        return pp_error_set(err, PP_ERR_PARSE,
                            "%s: external data location '%s' is absolute or leaves the model's "
                            "directory; it must be a relative path beside the model", init, loc);
    if (!L->base_dir)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "%s has external data in '%s' but no base directory was given; "
                            "load the model from its file or pass base_dir", init, loc);
    size_t plen = strlen(L->base_dir) + strlen(loc) + 2;
    char *path = malloc(plen);
    if (!path) return PP_NOMEM(err);
    snprintf(path, plen, "%s/%s", L->base_dir, loc);
    char *real = NULL;
    pp_status st = check_inside(L, init, loc, path, &real, err);
    struct stat sb;
    void *addr = NULL;
    int fd = st != PP_OK ? -1 : open(real ? real : path, O_RDONLY | O_CLOEXEC);
    if (st != PP_OK) goto done;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st = pp_error_set(err, PP_ERR_IO, "%s: cannot open external data file '%s': %s",
                          init, path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = pp_error_set(err, PP_ERR_IO, "%s: external data '%s' is not a regular file", init, path);
        goto done;
    }
    if (sb.st_size > 0) {
        addr = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            st = pp_error_set(err, PP_ERR_IO, "%s: cannot mmap external data file '%s': %s",
                              init, path, strerror(errno));
            goto done;
        }
        if ((st = graph_keep_mmap(L->g, addr, (size_t)sb.st_size, err)) != PP_OK) {
            munmap(addr, (size_t)sb.st_size);
            goto done;
        }
    }
    if (L->nfiles == L->cap) {
        int cap = L->cap ? 2 * L->cap : 4;
        ext_file *f = pp_realloc_array(L->files, (size_t)cap, sizeof *f);
        if (!f) {
            st = PP_NOMEM(err);
            goto done;
        }
        L->files = f;
        L->cap = cap;
    }
    ext_file *f = &L->files[L->nfiles];
    *f = (ext_file){pp_graph_strdup(L->g, loc), addr, (size_t)sb.st_size};
    if (!f->location) {
        st = PP_NOMEM(err);
        goto done;
    }
    L->nfiles++;
    *out = f;
done:
    if (fd >= 0) close(fd);
    free(real);
    free(path);
    return st;
}

/* Parses a decimal entry value (offset, length) of an external_data list. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9') return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

/* Points t->data into the mapped file (a copy only when the offset is misaligned for the dtype). */
static pp_status load_external(loader *L, const Onnx__TensorProto *tp, const char *name,
                               pp_const_tensor *t, pp_error *err)
{
    const char *loc = NULL;
    uint64_t offset = 0, length = t->nbytes;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
        if (!k) continue;
        if (!strcmp(k, "location")) loc = v;
        else if ((!strcmp(k, "offset") && !parse_u64(v, &offset)) || (!strcmp(k, "length") && !parse_u64(v, &length)))
            return pp_error_set(err, PP_ERR_PARSE, "%s: external data %s '%s' is not a number",
                                name, k, load_str_or(v, ""));
    }
    if (!loc || !*loc)
        return pp_error_set(err, PP_ERR_PARSE, "%s has external data without a location", name);
    if (length != t->nbytes)
        return pp_error_set(err, PP_ERR_PARSE,
                            "%s: external data in '%s' has length %llu, but its dtype and dims need %zu bytes",
                            name, loc, (unsigned long long)length, t->nbytes);
    const ext_file *f = NULL;
    PP_CHECK(map_external(L, name, loc, &f, err));
    if (offset > f->len || length > f->len - offset)
        return pp_error_set(err, PP_ERR_PARSE,
                            "%s: external data at offset %llu, length %llu lies beyond the end of '%s' (%zu "
                            "bytes); is the data file truncated or from another model?",
                            name, (unsigned long long)offset, (unsigned long long)length, loc, f->len);
    const uint8_t *p = f->addr ? f->addr + offset : NULL;
    t->data = p;
    if (p && (uintptr_t)p % pp_dtype_size(t->dtype)) {
        /* kernels read typed pointers; a misaligned tensor is copied once */
        void *c = pp_graph_alloc(L->g, t->nbytes);
        if (!c) return pp_error_set(err, PP_ERR_NOMEM, "out of memory copying %s", name);
        memcpy(c, p, t->nbytes);
        t->data = c;
    }
    return PP_OK;
}

/* ---- tensors ------------------------------------------------------------ */

/* Typed-field data -> packed little-endian bytes of t->dtype (t->nbytes of them). */
static pp_status load_typed(loader *L, const Onnx__TensorProto *tp, const char *name, int64_t numel,
                            pp_const_tensor *t, pp_error *err)
{
    size_t n = 0, esize = pp_dtype_size(t->dtype);
    const void *src = NULL;
    size_t src_size = 0;   /* bytes per source element */
    const char *field = NULL;
    switch (t->dtype) {
    case PP_DTYPE_F32: n = tp->n_float_data; src = tp->float_data; src_size = 4; field = "float_data"; break;
    case PP_DTYPE_I64: n = tp->n_int64_data; src = tp->int64_data; src_size = 8; field = "int64_data"; break;
    case PP_DTYPE_F64: n = tp->n_double_data; src = tp->double_data; src_size = 8; field = "double_data"; break;
    case PP_DTYPE_U32:
    case PP_DTYPE_U64: n = tp->n_uint64_data; src = tp->uint64_data; src_size = 8; field = "uint64_data"; break;
    default:           n = tp->n_int32_data; src = tp->int32_data; src_size = 4; field = "int32_data"; break;
    }
    if (n != (size_t)numel)
        return pp_error_set(err, PP_ERR_PARSE,
                            "%s (%s): %zu values in %s for %lld elements; the data does not match "
                            "the dims", name, pp_dtype_name(t->dtype), n, field, (long long)numel);
    uint8_t *dst = pp_graph_alloc(L->g, t->nbytes);
    if (!dst) return pp_error_set(err, PP_ERR_NOMEM, "out of memory loading %s", name);
    if (esize == src_size) {
        memcpy(dst, src, t->nbytes);
    } else {
        /* narrower types live in the low bytes of each 32/64-bit element (little-endian) */
        for (size_t i = 0; i < n; i++) memcpy(dst + i * esize, (const uint8_t *)src + i * src_size, esize);
    }
    t->data = dst;
    return PP_OK;
}

pp_status load_tensor(loader *L, const Onnx__TensorProto *tp, const char *name, pp_const_tensor *t,
                      pp_error *err)
{
    memset(t, 0, sizeof *t);
    int64_t dt = tp->has_data_type ? tp->data_type : 0;
    t->dtype = load_dtype(dt);
    if (t->dtype == PP_DTYPE_UNDEFINED)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s has data type %lld, which onnxpipe does "
                            "not support (numeric tensors only)", name, (long long)dt);
    if (tp->n_dims > PP_MAX_RANK)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s has rank %zu (at most %d supported)",
                            name, tp->n_dims, PP_MAX_RANK);
    if (tp->segment)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s is segmented, which is not supported", name);
    for (size_t i = 0; i < tp->n_dims; i++)
        if (tp->dims[i] < 0)
            return pp_error_set(err, PP_ERR_PARSE, "%s has negative dim %lld", name, (long long)tp->dims[i]);
    t->shape = pp_shape_make((int)tp->n_dims, tp->dims);
    PP_CHECK(pp_shape_check_size(&t->shape, t->dtype, err, "%s", name));
    int64_t numel = pp_shape_numel(&t->shape);
    t->nbytes = (size_t)numel * pp_dtype_size(t->dtype);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return load_external(L, tp, name, t, err);
    if (tp->has_raw_data) {
        if (tp->raw_data.len != t->nbytes)
            return pp_error_set(err, PP_ERR_PARSE,
                                "%s (%s): %zu bytes of raw_data for %lld elements (%zu bytes); the "
                                "data does not match the dims", name, pp_dtype_name(t->dtype), tp->raw_data.len,
                                (long long)numel, t->nbytes);
        if (in_graph_arena(L, tp->raw_data.data)) {   /* already graph memory: no copy */
            t->data = tp->raw_data.data;
            return PP_OK;
        }
        void *c = pp_graph_alloc(L->g, t->nbytes);
        if (!c) return pp_error_set(err, PP_ERR_NOMEM, "out of memory loading %s", name);
        if (t->nbytes) memcpy(c, tp->raw_data.data, t->nbytes);
        t->data = c;
        return PP_OK;
    }
    return load_typed(L, tp, name, numel, t, err);
}

/* A dataset's files: the table of open files every format reads with pread only where a
 * sample is asked for (widening token ids to int64), the small ones mapped whole (indexes,
 * cache files), and its arrays' table. The base the other dataset files stand on. */
#include "dataset_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

pp_status ds_file_open(pp_dataset *d, const char *path, int *file, int64_t *size, pp_error *err)
{
    struct pp_dataset_files *f = d->files;
    struct ds_file *more = pp_realloc_array(f->file, (size_t)f->nfiles + 1, sizeof *more);
    if (!more) return PP_NOMEM(err);
    f->file = more;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pp_error_set(err, PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat stt;
    char *name = pp_strdup(path);
    if (fstat(fd, &stt) != 0 || !name) {
        close(fd);
        free(name);
        return name ? pp_error_set(err, PP_ERR_IO, "cannot stat '%s': %s", path, strerror(errno)) : PP_NOMEM(err);
    }
    f->file[f->nfiles] = (struct ds_file){.fd = fd, .path = name};
    *file = f->nfiles++;
    *size = (int64_t)stt.st_size;
    return PP_OK;
}

const char *ds_file_path(const pp_dataset *d, int file) { return d->files->file[file].path; }
int ds_file_fd(const pp_dataset *d, int file) { return d->files->file[file].fd; }

pp_status ds_pread(const pp_dataset *d, int file, int64_t offset, size_t n, void *dst, pp_error *err)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = pread(ds_file_fd(d, file), (char *)dst + done, n - done, (off_t)(offset + (int64_t)done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return pp_error_set(err, PP_ERR_IO, "cannot read %zu bytes at byte %lld of '%s': %s", n - done,
                                (long long)(offset + (int64_t)done), ds_file_path(d, file),
                                got < 0 ? strerror(errno) : "the file ends there (was it cut short?)");
        done += (size_t)got;
    }
    return PP_OK;
}

pp_status ds_read_tokens(const pp_dataset *d, int file, int64_t offset, pp_dtype stored, int64_t n, int64_t *dst,
                         pp_error *err)
{
    size_t es = pp_dtype_size(stored);
    _Alignas(8) unsigned char buf[16384];   /* the stored tokens of a chunk, widened into dst */
    int64_t chunk = (int64_t)(sizeof buf / es);
    for (int64_t i = 0; i < n; i += chunk) {
        int64_t m = n - i < chunk ? n - i : chunk;
        PP_CHECK(ds_pread(d, file, offset + i * (int64_t)es, (size_t)m * es, buf, err));
        ds_widen(stored, buf, m, dst + i);
    }
    return PP_OK;
}

pp_status ds_map_file(pp_dataset *d, const char *path, const void **out, size_t *len, pp_error *err)
{
    struct pp_dataset_files *f = d->files;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pp_error_set(err, PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        close(fd);
        return pp_error_set(err, PP_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    }
    size_t n = (size_t)stt.st_size, mapped = n ? n : 1;
    void *m = mmap(NULL, mapped, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return pp_error_set(err, PP_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    struct ds_map *more = pp_realloc_array(f->map, (size_t)f->nmaps + 1, sizeof *more);
    if (!more) {
        munmap(m, mapped);
        return PP_NOMEM(err);
    }
    f->map = more;
    f->map[f->nmaps++] = (struct ds_map){.p = m, .len = mapped};
    *out = m;
    *len = n;
    return PP_OK;
}

pp_dataset_array *ds_add_array(pp_dataset *d, const char *name, pp_error *err)
{
    pp_dataset_array *a = pp_realloc_array(d->arrays, (size_t)d->narrays + 1, sizeof *a);
    if (!a) return PP_NOMEM(err), NULL;
    d->arrays = a;
    a = &d->arrays[d->narrays];
    memset(a, 0, sizeof *a);
    a->file = -1;
    if (!(a->name = pp_strdup(name))) return PP_NOMEM(err), NULL;
    d->narrays++;
    return a;
}

/* onnxpipe's own directory: dir/dataset.json */

void ds_widen(pp_dtype stored, const void *src, int64_t n, int64_t *dst)
{
#define WIDEN(T)                                                       \
    for (int64_t k = 0; k < n; k++) dst[k] = ((const T *)src)[k];      \
    return   /* a loop per type, so each vectorises */
    switch (stored) {
    case PP_DTYPE_U8: WIDEN(uint8_t);
    case PP_DTYPE_U16: WIDEN(uint16_t);
    case PP_DTYPE_I16: WIDEN(int16_t);
    case PP_DTYPE_I32: WIDEN(int32_t);
    case PP_DTYPE_U32: WIDEN(uint32_t);
    case PP_DTYPE_I64: WIDEN(int64_t);
    default: WIDEN(int8_t);
    }
#undef WIDEN
}

/* Shards as safetensors files (8-byte little-endian header length, a JSON header of
 * {name: {dtype, shape, data_offsets}} padded with spaces to 8 bytes, then the raw
 * little-endian data back to back), so safetensors.numpy.load_file opens them. */
#include "ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

static const struct {
    pp_dtype dt;
    const char *name;
} dtypes[] = {
    {PP_DTYPE_F32, "F32"}, {PP_DTYPE_F16, "F16"}, {PP_DTYPE_BF16, "BF16"}, {PP_DTYPE_F64, "F64"},
    {PP_DTYPE_I64, "I64"}, {PP_DTYPE_I32, "I32"}, {PP_DTYPE_I16, "I16"},  {PP_DTYPE_I8, "I8"},
    {PP_DTYPE_U8, "U8"},   {PP_DTYPE_BOOL, "BOOL"}, {PP_DTYPE_U16, "U16"}, {PP_DTYPE_U32, "U32"},
    {PP_DTYPE_U64, "U64"},
};

/* "F32", ... or NULL */
static const char *dtype_name(pp_dtype dt)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt) return dtypes[i].name;
    return NULL;
}

/* The header JSON, padded with spaces to a multiple of 8 bytes. */
static pp_status header(const ck_shard *sh, int64_t step, char **out, size_t *len, pp_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing a shard header");
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_begin_object(&j, "__metadata__");
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)step);
    pp_json_string(&j, "format", PP_CKPT_FORMAT);
    pp_json_string(&j, "step", s);
    pp_json_end_object(&j);
    for (int i = 0; i < sh->nitems; i++) {
        const ck_item *it = &sh->items[i];
        pp_json_begin_object(&j, it->name);
        pp_json_string(&j, "dtype", dtype_name(it->dtype));
        pp_json_begin_array(&j, "shape");
        for (int d = 0; d < it->shape.rank; d++) pp_json_int(&j, NULL, it->shape.dims[d]);
        pp_json_end_array(&j);
        pp_json_begin_array(&j, "data_offsets");
        pp_json_int(&j, NULL, it->offset);
        pp_json_int(&j, NULL, it->offset + it->nbytes);
        pp_json_end_array(&j);
        pp_json_end_object(&j);
    }
    pp_json_end_object(&j);
    while ((ftell(f) + 8) % 8) fputc(' ', f);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing a shard header");
    }
    *out = buf;
    *len = n;
    return PP_OK;
}

pp_status ck_shard_write(ck_shard *sh, const char *path, int64_t step, pp_error *err)
{
    char *hdr = NULL;
    size_t hlen = 0;
    double t0 = pp_now();
    PP_CHECK(header(sh, step, &hdr, &hlen, err));
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    uint32_t crc = pp_crc32c(0, len8, 8);
    crc = pp_crc32c(crc, hdr, hlen);
    /* one pass over the data: each tensor's checksum, combined into the file's */
    for (int i = 0; i < sh->nitems; i++) {
        ck_item *it = &sh->items[i];
        it->crc = pp_crc32c(0, it->data, (size_t)it->nbytes);
        crc = pp_crc32c_combine(crc, it->crc, (size_t)it->nbytes);
    }
    double t_crc = pp_now() - t0, t_write = 0;
    pp_status st = PP_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        free(hdr);
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    }
    /* the whole file's space first: a full disk fails here, naming the bytes needed */
    int64_t size = 8 + (int64_t)hlen + sh->bytes;
    PP_CHECK_GOTO(ck_reserve(fd, path, size, err), st, done);
    PP_CHECK_GOTO(ck_write_all(fd, path, len8, 8, size, err), st, done);
    PP_CHECK_GOTO(ck_write_all(fd, path, hdr, hlen, size, err), st, done);
    for (int i = 0; i < sh->nitems; i++)
        PP_CHECK_GOTO(ck_write_all(fd, path, sh->items[i].data, (size_t)sh->items[i].nbytes, size, err), st, done);
    t_write = pp_now() - t0 - t_crc;
    if (fsync(fd) != 0) st = ck_write_error(err, fd, path, size);
done:
    if (close(fd) != 0 && st == PP_OK) st = pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    free(hdr);
    sh->header_bytes = 8 + (int64_t)hlen;
    sh->file_size = sh->header_bytes + sh->bytes;
    sh->file_crc = crc;
    pp_log(PP_LOG_DEBUG, "checkpoint shard %s: %lld bytes, checksums %.3f s, write %.3f s, fsync %.3f s", path,
           (long long)sh->file_size, t_crc, t_write, pp_now() - t0 - t_crc - t_write);
    return st;
}

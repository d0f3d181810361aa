/* The datasets users already have, read in place: NumPy .npy arrays (a folder of them
 * matched by name, or one file), flat token streams (nanoGPT's raw uint16 .bin, llm.c's
 * .bin with its 1024-byte header) and Megatron-LM's indexed datasets (PREFIX.bin +
 * PREFIX.idx). Opening reads headers only; a stream is windowed into samples of seq tokens:
 * input_ids at stride seq, and the labels the same window one token on, both delivered as
 * int64. Every mismatch names the file and what to change. */
#include "dataset_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <onnxpipe/core_util.h>

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* ---- NumPy ---------------------------------------------------------------------- */

static pp_dtype npy_dtype(const char *descr)
{
    static const struct {
        const char *descr;
        pp_dtype dt;
    } map[] = {{"<i8", PP_DTYPE_I64}, {"<i4", PP_DTYPE_I32}, {"<f4", PP_DTYPE_F32}, {"<f8", PP_DTYPE_F64},
               {"<f2", PP_DTYPE_F16}, {"<u2", PP_DTYPE_U16}, {"<u4", PP_DTYPE_U32}, {"<i2", PP_DTYPE_I16},
               {"|u1", PP_DTYPE_U8},  {"|i1", PP_DTYPE_I8},  {"|b1", PP_DTYPE_BOOL}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(descr, map[i].descr)) return map[i].dt;
    return PP_DTYPE_UNDEFINED;
}

/* The text after 'key': in the header dict, or NULL. */
static const char *npy_field(const char *hdr, const char *key)
{
    char k[32];
    snprintf(k, sizeof k, "'%s':", key);
    const char *p = strstr(hdr, k);
    if (!p) return NULL;
    p += strlen(k);
    while (*p == ' ') p++;
    return p;
}

/* path: an array [N, ...] named name (NPY format 1.0-3.0, C order, little-endian). */
static pp_status open_npy(pp_dataset *d, const char *path, const char *name, pp_error *err)
{
    int file;
    int64_t size;
    unsigned char b[12] = {0};
    PP_CHECK(ds_file_open(d, path, &file, &size, err));
    if (size < 10 || ds_pread(d, file, 0, size < 12 ? 10 : 12, b, err) != PP_OK || memcmp(b, "\x93NUMPY", 6))
        return pp_error_set(err, PP_ERR_PARSE, "'%s' is not a NumPy .npy file (no \\x93NUMPY magic)", path);
    size_t len = (size_t)size;
    size_t hlen = b[6] == 1 ? (size_t)(b[8] | b[9] << 8) : (size_t)(b[8] | b[9] << 8 | b[10] << 16 | (size_t)b[11] << 24);
    size_t start = (b[6] == 1 ? 10 : 12) + hlen;
    if (b[6] < 1 || b[6] > 3 || start > len)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': a .npy header of version %d.%d and %zu bytes does not fit the file",
                            path, b[6], b[7], hlen);
    char hdr[4096];
    size_t shown = hlen < sizeof hdr ? hlen : sizeof hdr - 1;
    PP_CHECK(ds_pread(d, file, (int64_t)(start - hlen), shown, hdr, err));
    hdr[shown] = 0;
    const char *descr = npy_field(hdr, "descr"), *order = npy_field(hdr, "fortran_order"), *shape = npy_field(hdr, "shape");
    char dt[16] = "";
    if (descr && *descr == '\'') sscanf(descr + 1, "%15[^']", dt);
    pp_dtype t = npy_dtype(dt);
    if (!t)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s': dtype '%s' is not one onnxpipe reads (little-endian int64, "
                            "int32, int16, uint16, uint32, uint8, int8, bool, float16/32/64): np.save an array of one",
                            path, dt);
    if (!order || strncmp(order, "False", 5))
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s' is in Fortran order: save np.ascontiguousarray(a)", path);
    pp_dataset_array *a = ds_add_array(d, name, err);
    if (!a) return PP_ERR_NOMEM;
    a->dtype = a->stored = t;
    int64_t dims[PP_MAX_RANK + 1];
    int rank = 0;
    for (const char *p = shape && *shape == '(' ? shape + 1 : ""; *p && *p != ')';) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        if (rank == PP_MAX_RANK + 1)
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s' has more than %d dims", path, PP_MAX_RANK + 1);
        dims[rank++] = v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    if (rank < 1 || dims[0] < 1)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': shape %s: an array of samples needs a first dim of at least 1",
                            path, shape ? shape : "?");
    a->shape.rank = rank - 1;
    a->sample_bytes = pp_dtype_size(t);
    for (int k = 1; k < rank; k++) a->sample_bytes *= (size_t)(a->shape.dims[k - 1] = dims[k]);
    if (start + a->sample_bytes * (size_t)dims[0] > len)
        return pp_error_set(err, PP_ERR_PARSE, "'%s' is truncated: %lld samples of %zu bytes need %zu bytes after its "
                            "header, it has %zu", path, (long long)dims[0], a->sample_bytes,
                            a->sample_bytes * (size_t)dims[0], len - start);
    a->stride = a->sample_bytes;
    a->file = file;
    a->offset = (int64_t)start;
    if (d->samples && d->samples != dims[0])
        return pp_error_set(err, PP_ERR_SHAPE, "'%s' holds %lld samples, the dataset's other arrays %lld: every array "
                            "needs one row per sample", path, (long long)dims[0], (long long)d->samples);
    d->samples = dims[0];
    d->format = "npy";
    return PP_OK;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* Every NAME.npy of dir, in name order. */
static pp_status open_npy_dir(pp_dataset *d, const char *dir, pp_error *err)
{
    DIR *dd = opendir(dir);
    if (!dd) return pp_error_set(err, PP_ERR_IO, "cannot open dataset directory '%s'", dir);
    char **names = NULL;
    int n = 0;
    pp_status st = PP_OK;
    struct dirent *e;
    while (st == PP_OK && (e = readdir(dd)))
        if (ends_with(e->d_name, ".npy")) {
            char **p = pp_realloc_array(names, (size_t)n + 1, sizeof *p);
            if (!p || !(p[n] = pp_strdup(e->d_name))) st = PP_NOMEM(err);
            if (p) names = p;
            if (st == PP_OK) n++;
        }
    closedir(dd);
    if (st == PP_OK && n == 0)
        st = pp_error_set(err, PP_ERR_PARSE, "'%s' holds neither dataset.json nor .npy files: make a dataset with "
                          "'onnxpipe data', np.save one NAME.npy per model input there, or pass a token stream "
                          "(.bin) or a Megatron indexed dataset (PREFIX of PREFIX.bin/.idx)", dir);
    if (names) qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        names[i][strlen(names[i]) - 4] = 0;
        if (st == PP_OK) st = open_npy(d, path, names[i], err);
        free(names[i]);
    }
    free(names);
    return st;
}

/* ---- token streams ----------------------------------------------------------- */

/* input_ids and labels over ntok tokens of type t at byte base of file, in samples of o->seq
 * tokens (labels one token on): (ntok - 1) / seq samples. With --pack or --pad: the
 * documents, split after each --eos, packed or padded (dataset_pack.c). */
static pp_status window(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                        const pp_dataset_options *o, pp_error *err)
{
    if (o->docs) return ds_pack_open(d, path, file, base, ntok, t, NULL, o, err);
    if (o->seq < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "'%s' is a token stream: pass --seq T, the tokens per sample "
                            "(the model's sequence length)", path);
    if (ntok - 1 < o->seq)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "'%s' holds %lld tokens: too few for one sample of --seq %lld "
                            "plus its next-token label", path, (long long)ntok, (long long)o->seq);
    const char *names[2] = {"input_ids", o->labels ? o->labels : "labels"};
    size_t es = pp_dtype_size(t);
    for (int k = 0; k < 2; k++) {
        pp_dataset_array *a = ds_add_array(d, names[k], err);
        if (!a) return PP_ERR_NOMEM;
        a->dtype = PP_DTYPE_I64;
        a->stored = t;
        a->shape.rank = 1;
        a->shape.dims[0] = o->seq;
        a->sample_bytes = (size_t)o->seq * sizeof(int64_t);
        a->stride = (size_t)o->seq * es;
        a->file = file;
        a->offset = base + k * (int64_t)es;
    }
    d->samples = (ntok - 1) / o->seq;
    return PP_OK;
}

#define LLMC_MAGIC 20240520
#define LLMC_HEADER 1024

/* A .bin stream: llm.c's (header: magic, version 1 = uint16 or 2 = uint32, token count)
 * or raw tokens of o->token_dtype (default uint16, nanoGPT's). */
static pp_status open_stream(pp_dataset *d, const char *path, const pp_dataset_options *o, pp_error *err)
{
    int file;
    int64_t size;
    int32_t h[3] = {0};
    PP_CHECK(ds_file_open(d, path, &file, &size, err));
    size_t len = (size_t)size;
    if (len >= LLMC_HEADER) PP_CHECK(ds_pread(d, file, 0, sizeof h, h, err));
    if (len >= LLMC_HEADER && h[0] == LLMC_MAGIC) {
        pp_dtype t = h[1] == 1 ? PP_DTYPE_U16 : h[1] == 2 ? PP_DTYPE_U32 : PP_DTYPE_UNDEFINED;
        if (!t)
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s': llm.c token file version %d (onnxpipe reads 1: uint16, "
                                "2: uint32)", path, h[1]);
        int64_t ntok = (uint32_t)h[2];
        if (LLMC_HEADER + (size_t)ntok * pp_dtype_size(t) > len)
            return pp_error_set(err, PP_ERR_PARSE, "'%s': its header says %lld tokens, the file holds %zu bytes after it",
                                path, (long long)ntok, len - LLMC_HEADER);
        d->format = "llm.c";
        return window(d, path, file, LLMC_HEADER, ntok, t, o, err);
    }
    pp_dtype t = o->token_dtype ? o->token_dtype : PP_DTYPE_U16;
    if (t != PP_DTYPE_U16 && t != PP_DTYPE_U32)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "token streams are uint16 or uint32, not %s", pp_dtype_name(t));
    if (len % pp_dtype_size(t))
        return pp_error_set(err, PP_ERR_PARSE, "'%s' has %zu bytes, not a whole number of %s tokens: is it of another "
                            "token type (--token-dtype)?", path, len, pp_dtype_name(t));
    d->format = "tokens";
    return window(d, path, file, 0, (int64_t)(len / pp_dtype_size(t)), t, o, err);
}

/* ---- Megatron-LM indexed datasets ------------------------------------------- */

static const char MEGATRON_HEADER[9] = "MMIDIDX\x00\x00";

/* megatron.core.datasets.indexed_dataset.DType codes */
static pp_dtype megatron_dtype(int code)
{
    static const pp_dtype t[] = {0, PP_DTYPE_U8, PP_DTYPE_I8, PP_DTYPE_I16, PP_DTYPE_I32, PP_DTYPE_I64, 0, 0, PP_DTYPE_U16};
    return code >= 1 && code <= 8 ? t[code] : PP_DTYPE_UNDEFINED;
}

/* prefix.idx: header, version 1, dtype code, sequence and document counts, the int32
 * lengths, int64 byte pointers and int64 document indices; prefix.bin: the sequences
 * back to back, read as one stream of documents. Only the header and the last sequence's
 * place are read here (the stream's length); --pack and --pad walk the documents once
 * to build their cached plan (dataset_pack.c). */
static pp_status open_megatron(pp_dataset *d, const char *prefix, const pp_dataset_options *o, pp_error *err)
{
    char idx[4096], bin[4096];
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    const void *mi;
    size_t li;
    PP_CHECK(ds_map_file(d, idx, &mi, &li, err));
    const unsigned char *p = mi;
    if (li < 34 || memcmp(p, MEGATRON_HEADER, 9))
        return pp_error_set(err, PP_ERR_PARSE, "'%s' is not a Megatron-LM index (no MMIDIDX header)", idx);
    uint64_t version, nseq, ndoc;
    memcpy(&version, p + 9, 8);
    pp_dtype t = megatron_dtype(p[17]);
    memcpy(&nseq, p + 18, 8);
    memcpy(&ndoc, p + 26, 8);
    if (version != 1)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s': index version %llu (onnxpipe reads 1)", idx,
                            (unsigned long long)version);
    if (!t)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "'%s': token dtype code %d is not an integer type", idx, p[17]);
    if (nseq > li || ndoc > li || 34 + nseq * 12 + ndoc * 8 > li)
        return pp_error_set(err, PP_ERR_PARSE, "'%s' is truncated: %llu sequences and %llu documents need %llu bytes, "
                            "it has %zu", idx, (unsigned long long)nseq, (unsigned long long)ndoc,
                            (unsigned long long)(34 + nseq * 12 + ndoc * 8), li);
    size_t es = pp_dtype_size(t);
    int64_t ntok = 0, lb;
    if (nseq > 0) {   /* the sequences lie back to back: the last one's end is the stream's */
        int32_t len;
        int64_t ptr;
        memcpy(&len, p + 34 + 4 * (nseq - 1), sizeof len);   /* the int32 lengths start at byte 34: unaligned */
        memcpy(&ptr, p + 34 + 4 * nseq + 8 * (nseq - 1), sizeof ptr);
        ntok = ptr / (int64_t)es + len;
    }
    int file;
    PP_CHECK(ds_file_open(d, bin, &file, &lb, err));
    if (ntok < 0 || ntok * (int64_t)es != lb)
        return pp_error_set(err, PP_ERR_PARSE, "'%s' holds %lld bytes, but its index '%s' counts %lld tokens of %s (%lld "
                            "bytes): the two files are not of one dataset", bin, (long long)lb, idx, (long long)ntok,
                            pp_dtype_name(t), (long long)ntok * (long long)es);
    d->format = "megatron";
    if (!o->docs) return window(d, bin, file, 0, ntok, t, o, err);
    ds_docs x = {.n = ndoc > 0 ? (int64_t)ndoc - 1 : 0, .idx = p, .nseq = nseq, .ntok = ntok, .es = es, .path = idx};
    return ds_pack_open(d, bin, file, 0, ntok, t, &x, o, err);
}

pp_status ds_open_format(pp_dataset *d, const char *path, const pp_dataset_options *o, pp_error *err)
{
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s", path);
    if (ends_with(prefix, ".idx") || ends_with(prefix, ".bin")) prefix[strlen(prefix) - 4] = 0;
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    struct stat sb;
    if (stat(idx, &sb) == 0) return open_megatron(d, prefix, o, err);
    if (stat(path, &sb) != 0)
        return pp_error_set(err, PP_ERR_IO, "dataset '%s' does not exist (nor '%s')", path, idx);
    if (S_ISDIR(sb.st_mode)) return open_npy_dir(d, path, err);
    if (ends_with(path, ".npy")) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(strlen(base) - 4), base);
        return open_npy(d, path, name, err);
    }
    if (ends_with(path, ".bin")) return open_stream(d, path, o, err);
    return pp_error_set(err, PP_ERR_PARSE, "'%s' is not a dataset onnxpipe reads: a directory (dataset.json, or "
                        "NAME.npy files), a .npy file, a token stream (.bin) or a Megatron indexed dataset "
                        "(PREFIX with PREFIX.bin and PREFIX.idx)", path);
}

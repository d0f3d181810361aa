/* Datasets: onnxpipe's own (a JSON header naming the graph inputs plus one raw binary
 * array per input), the forms dataset_formats.c reads; reading samples (through
 * dataset_files.c's pread only where a sample is asked for), and the labels checked as
 * they are read; and the byte-level text converter behind `onnxpipe data text`. */
#include "dataset_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

static pp_status read_file(const char *path, char **out, size_t *len, pp_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (!buf || n < 0 || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return pp_error_set(err, PP_ERR_IO, "cannot read '%s'", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (len) *len = (size_t)n;
    return PP_OK;
}

static pp_status open_array(pp_dataset *d, pp_dataset_array *arr, const pp_jvalue *a, const char *hdr, pp_error *err)
{
    const pp_jvalue *name = pp_json_get(a, "name"), *dt = pp_json_get(a, "dtype"),
                    *shape = pp_json_get(a, "shape"), *file = pp_json_get(a, "file");
    if (!name || name->type != PP_JSTR || !dt || dt->type != PP_JSTR || !shape || shape->type != PP_JARR ||
        !file || file->type != PP_JSTR)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': array %d needs string name, dtype, file and a shape list",
                            hdr, (int)(arr - d->arrays));
    arr->dtype = pp_dtype_parse(dt->str);
    if (!arr->dtype || !pp_dtype_size(arr->dtype))
        return pp_error_set(err, PP_ERR_PARSE, "'%s': array '%s' has unknown dtype '%s'", hdr, name->str, dt->str);
    if (shape->n > PP_MAX_RANK)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': array '%s' has rank %d (at most %d)", hdr, name->str,
                            shape->n, PP_MAX_RANK);
    memset(&arr->shape, 0, sizeof arr->shape);
    arr->shape.rank = shape->n;
    arr->sample_bytes = pp_dtype_size(arr->dtype);
    for (int k = 0; k < shape->n; k++) {
        if (shape->items[k].type != PP_JNUM || shape->items[k].num < 1)
            return pp_error_set(err, PP_ERR_PARSE, "'%s': array '%s' has a bad dim %d", hdr, name->str, k);
        arr->shape.dims[k] = (int64_t)shape->items[k].num;
        arr->sample_bytes *= (size_t)arr->shape.dims[k];
    }
    if (strchr(file->str, '/'))
        return pp_error_set(err, PP_ERR_PARSE, "'%s': array file '%s' must be a plain name in the dataset directory",
                            hdr, file->str);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", d->dir, file->str);
    size_t need = arr->sample_bytes * (size_t)d->samples;
    int64_t have;
    PP_CHECK(ds_file_open(d, path, &arr->file, &have, err));
    if ((size_t)have < need)
        return pp_error_set(err, PP_ERR_PARSE, "'%s' holds %lld bytes, but %lld samples of '%s' need %zu", path,
                            (long long)have, (long long)d->samples, arr->name, need);
    arr->stored = arr->dtype;
    arr->stride = arr->sample_bytes;
    return PP_OK;
}

static pp_status open_own(pp_dataset *d, const char *hdr, pp_error *err)
{
    char *text = NULL;
    pp_jvalue *root = NULL;
    pp_status st = read_file(hdr, &text, NULL, err);
    if (st == PP_OK && (st = pp_json_parse(text, &root, err)) != PP_OK) pp_error_prefix(err, "'%s': ", hdr);
    const pp_jvalue *fmt = root ? pp_json_get(root, "format") : NULL, *ns = root ? pp_json_get(root, "samples") : NULL,
                    *arrays = root ? pp_json_get(root, "arrays") : NULL;
    if (st == PP_OK && (!fmt || fmt->type != PP_JSTR || strcmp(fmt->str, "onnxpipe-dataset-1") || !ns ||
                        ns->type != PP_JNUM || ns->num < 1 || !arrays || arrays->type != PP_JARR))
        st = pp_error_set(err, PP_ERR_PARSE, "'%s' is not an onnxpipe dataset header (needs format "
                          "\"onnxpipe-dataset-1\", samples >= 1 and arrays)", hdr);
    if (st == PP_OK) d->samples = (int64_t)ns->num;
    for (int i = 0; st == PP_OK && i < arrays->n; i++) {
        const pp_jvalue *name = pp_json_get(&arrays->items[i], "name");
        pp_dataset_array *a = ds_add_array(d, name && name->type == PP_JSTR ? name->str : "", err);
        st = a ? open_array(d, a, &arrays->items[i], hdr, err) : PP_ERR_NOMEM;
    }
    d->format = "onnxpipe";
    free(text);
    pp_json_free(root);
    return st;
}

pp_status pp_dataset_open_with(const char *path, const pp_dataset_options *o, pp_dataset **out, pp_error *err)
{
    *out = NULL;
    pp_dataset_options none = {0};
    pp_dataset *d = calloc(1, sizeof *d);
    if (!d || !(d->files = calloc(1, sizeof *d->files)) || !(d->dir = pp_strdup(path))) {
        if (d) free(d->files);
        free(d);
        return PP_NOMEM(err);
    }
    d->files->check = -1;
    char hdr[4096];
    snprintf(hdr, sizeof hdr, "%s/dataset.json", path);
    pp_status st = access(hdr, F_OK) == 0 ? open_own(d, hdr, err) : ds_open_format(d, path, o ? o : &none, err);
    if (st == PP_OK && d->narrays == 0)
        st = pp_error_set(err, PP_ERR_PARSE, "dataset '%s' holds no arrays", path);
    if (st == PP_OK && o && o->docs && !d->pack)
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "%s places the documents of a token stream (.bin) or a Megatron "
                          "indexed dataset in samples; '%s' (%s) holds samples already made", ds_docs_flag(o->docs),
                          path, d->format);
    if (st != PP_OK) {
        pp_dataset_close(d);
        return st;
    }
    *out = d;
    return PP_OK;
}

pp_status pp_dataset_open(const char *dir, pp_dataset **out, pp_error *err)
{
    return pp_dataset_open_with(dir, NULL, out, err);
}

void pp_dataset_close(pp_dataset *d)
{
    if (!d) return;
    struct pp_dataset_files *f = d->files;
    for (int i = 0; i < f->nmaps; i++) munmap(f->map[i].p, f->map[i].len);
    for (int i = 0; i < f->nfiles; i++) close(f->file[i].fd), free(f->file[i].path);
    free(f->map), free(f->file), free(f->who), free(f->logits);
    free(f);
    for (int i = 0; i < d->narrays; i++) free(d->arrays[i].name);
    free(d->arrays);
    ds_pack_free(d->pack);
    free(d->bucket_len);
    free(d->bucket_first);
    free(d->dir);
    free(d);
}

const char *pp_dataset_path(const pp_dataset *d) { return d->dir; }
const char *pp_dataset_format(const pp_dataset *d) { return d->format; }
int64_t pp_dataset_samples(const pp_dataset *d) { return d->samples; }
pp_docs pp_dataset_docs(const pp_dataset *d) { return d->docs; }
int pp_dataset_num_arrays(const pp_dataset *d) { return d->narrays; }
const pp_dataset_array *pp_dataset_array_at(const pp_dataset *d, int i) { return &d->arrays[i]; }

int pp_dataset_buckets(const pp_dataset *d, const int64_t **first)
{
    *first = d->bucket_first;
    return d->nbuckets;
}

const pp_dataset_array *pp_dataset_find(const pp_dataset *d, const char *name)
{
    for (int i = 0; i < d->narrays; i++)
        if (!strcmp(d->arrays[i].name, name)) return &d->arrays[i];
    return NULL;
}

size_t pp_dataset_sample_bytes(const pp_dataset_array *a, int64_t len)
{
    if (!a->packed || len <= 0) return a->sample_bytes;
    size_t n = a->sample_bytes / (size_t)a->shape.dims[a->shape.rank - 1], mask = a->shape.rank >= 2 &&
               a->shape.dims[a->shape.rank - 2] == a->shape.dims[a->shape.rank - 1];
    return mask ? n / (size_t)a->shape.dims[a->shape.rank - 1] * (size_t)(len * len) : n * (size_t)len;
}

/* Samples first .. first+count-1 of a file array (no wrap), one pread where they lie back to
 * back (windows of a stream: each sample's tokens run on into the next's). */
static pp_status read_run(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count, char *out,
                          pp_error *err)
{
    int64_t per = (int64_t)(a->sample_bytes / pp_dtype_size(a->dtype));   /* elements per sample */
    int64_t at = a->offset + first * (int64_t)a->stride;
    if (a->stored == a->dtype && a->stride == a->sample_bytes)
        return ds_pread(d, a->file, at, (size_t)count * a->sample_bytes, out, err);
    if (a->stride == (size_t)per * pp_dtype_size(a->stored))
        return ds_read_tokens(d, a->file, at, a->stored, count * per, (int64_t *)out, err);
    for (int64_t i = 0; i < count; i++)
        PP_CHECK(ds_read_tokens(d, a->file, at + i * (int64_t)a->stride, a->stored, per,
                                (int64_t *)(out + (size_t)i * a->sample_bytes), err));
    return PP_OK;
}

/* Sample s of the checked array, as read into y (n values): each in [0, classes) or ignore. */
static pp_status check_sample(const pp_dataset *d, const pp_dataset_array *a, int64_t s, const int64_t *y, int64_t n,
                              pp_error *err)
{
    const struct pp_dataset_files *f = d->files;
    int64_t j = 0;
    while (j < n && ((y[j] >= 0 && y[j] < f->classes) || y[j] == f->ignore)) j++;
    if (j == n) return PP_OK;
    int file = a->file;
    int64_t byte = a->offset + s * (int64_t)a->stride + j * (int64_t)pp_dtype_size(a->stored);
    char where[4200] = "";
    if (!a->packed || ds_pack_locate(d, s, j, &file, &byte))
        snprintf(where, sizeof where, ": '%s' byte %lld", ds_file_path(d, file), (long long)byte);
    char ig[64] = "";
    if (f->ignore != INT64_MIN) snprintf(ig, sizeof ig, " (or ignore_index %lld)", (long long)f->ignore);
    return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: array '%s' holds label %lld (sample %lld, position %lld%s), out "
                        "of range [0, %lld)%s for the %lld classes of the logits '%s': fix the labels there, or give "
                        "the model as many classes as the data has", f->who, a->name, (long long)y[j], (long long)s,
                        (long long)j, where, (long long)f->classes, ig, (long long)f->classes, f->logits);
}

pp_status pp_dataset_read_len(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count,
                              int64_t len, void *dst, pp_error *err)
{
    size_t bytes = pp_dataset_sample_bytes(a, len);
    for (int64_t i = 0; i < count;) {
        int64_t s = (first + i) % d->samples, n = 1;
        char *out = (char *)dst + (size_t)i * bytes;
        if (a->packed) PP_CHECK(ds_pack_read(d, a, s, len > 0 ? len : a->shape.dims[a->shape.rank - 1], out, err));
        else PP_CHECK(read_run(d, a, s, n = count - i < d->samples - s ? count - i : d->samples - s, out, err));
        for (int64_t k = 0; d->files->check >= 0 && a == &d->arrays[d->files->check] && k < n; k++)
            PP_CHECK(check_sample(d, a, s + k, (const int64_t *)(out + (size_t)k * bytes),
                                  (int64_t)(bytes / sizeof(int64_t)), err));
        i += n;
    }
    return PP_OK;
}

pp_status pp_dataset_read(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count, void *dst,
                          pp_error *err)
{
    return pp_dataset_read_len(d, a, first, count, 0, dst, err);
}

pp_status ds_check_labels(pp_dataset *d, const pp_dataset_array *a, int64_t classes, int64_t ignore, const char *who,
                          const char *logits, pp_error *err)
{
    struct pp_dataset_files *f = d->files;
    free(f->who), free(f->logits);
    f->who = pp_strdup(who), f->logits = pp_strdup(logits);
    if (!f->who || !f->logits) return PP_NOMEM(err);
    f->check = (int)(a - d->arrays);
    f->classes = classes, f->ignore = ignore;
    return PP_OK;
}

static pp_status write_bytes(const char *path, const void *data, size_t n, pp_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    int ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? PP_OK : pp_error_set(err, PP_ERR_IO, "cannot write '%s'", path);
}

/* Samples of seq tokens from text[0 .. len) (plus one byte of label past them). */
static pp_status write_windows(const char *text_path, const char *text, size_t len, const char *dir, int64_t seq,
                               pp_error *err)
{
    int64_t samples = len > 0 ? (int64_t)(len - 1) / seq : 0;
    if (samples < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "'%s' has %zu bytes for '%s': too short for one sample of %lld "
                            "tokens plus its next-token label", text_path, len, dir, (long long)seq);
    if (mkdir(dir, 0755) && errno != EEXIST)
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    size_t n = (size_t)(samples * seq);
    int64_t *ids = malloc(n * sizeof *ids), *labels = malloc(n * sizeof *labels);
    pp_status st = PP_OK;
    if (!ids || !labels) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = (unsigned char)text[i];
        labels[i] = (unsigned char)text[i + 1];
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/input_ids.bin", dir);
    PP_CHECK_GOTO(write_bytes(path, ids, n * sizeof *ids, err), st, done);
    snprintf(path, sizeof path, "%s/labels.bin", dir);
    PP_CHECK_GOTO(write_bytes(path, labels, n * sizeof *labels, err), st, done);
    snprintf(path, sizeof path, "%s/dataset.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        st = pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
        goto done;
    }
    pp_json j;
    pp_json_init(&j, f, 1);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "format", "onnxpipe-dataset-1");
    pp_json_string(&j, "source", text_path);
    pp_json_int(&j, "vocab", 256);
    pp_json_int(&j, "samples", samples);
    pp_json_begin_array(&j, "arrays");
    const char *names[] = {"input_ids", "labels"};
    for (int a = 0; a < 2; a++) {
        char file[64];
        snprintf(file, sizeof file, "%s.bin", names[a]);
        pp_json_begin_object(&j, NULL);
        pp_json_string(&j, "name", names[a]);
        pp_json_string(&j, "dtype", "int64");
        pp_json_begin_array(&j, "shape");
        pp_json_int(&j, NULL, seq);
        pp_json_end_array(&j);
        pp_json_string(&j, "file", file);
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
    if (fclose(f)) st = pp_error_set(err, PP_ERR_IO, "cannot write '%s'", path);
done:
    free(ids);
    free(labels);
    return st;
}

pp_status pp_dataset_write_text(const char *text_path, const char *dir, int64_t seq, pp_error *err)
{
    return pp_dataset_write_text_split(text_path, dir, seq, 1.0, err);
}

pp_status pp_dataset_write_text_split(const char *text_path, const char *dir, int64_t seq, double split,
                                      pp_error *err)
{
    if (seq < 1) return pp_error_set(err, PP_ERR_INVALID_ARG, "sequence length %lld must be >= 1", (long long)seq);
    if (!(split > 0 && split <= 1))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--split %g must be in (0, 1]", split);
    char *text;
    size_t len;
    PP_CHECK(read_file(text_path, &text, &len, err));
    pp_status st;
    if (split >= 1) {
        st = write_windows(text_path, text, len, dir, seq, err);
    } else {
        /* train: the first `split` of the bytes; valid: the rest (no window crosses the cut) */
        size_t cut = (size_t)((double)len * split);
        char sub[4096];
        if (mkdir(dir, 0755) && errno != EEXIST) {
            st = pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
        } else {
            snprintf(sub, sizeof sub, "%s/train", dir);
            st = write_windows(text_path, text, cut, sub, seq, err);
            snprintf(sub, sizeof sub, "%s/valid", dir);
            if (st == PP_OK) st = write_windows(text_path, text + cut, len - cut, sub, seq, err);
        }
    }
    free(text);
    return st;
}

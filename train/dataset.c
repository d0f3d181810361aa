/* Datasets: a JSON header naming the graph inputs plus one raw binary array per input,
 * mmapped; and the byte-level text converter behind `onnxpipe data text`. */
#include <onnxpipe/train.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static pp_status open_array(pp_dataset *d, int i, const pp_jvalue *a, const char *hdr, pp_error *err)
{
    pp_dataset_array *arr = &d->arrays[i];
    const pp_jvalue *name = pp_json_get(a, "name"), *dt = pp_json_get(a, "dtype"),
                    *shape = pp_json_get(a, "shape"), *file = pp_json_get(a, "file");
    if (!name || name->type != PP_JSTR || !dt || dt->type != PP_JSTR || !shape || shape->type != PP_JARR ||
        !file || file->type != PP_JSTR)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': array %d needs string name, dtype, file and a shape list",
                            hdr, i);
    arr->name = pp_strdup(name->str);
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
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pp_error_set(err, PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat stt;
    fstat(fd, &stt);
    size_t need = arr->sample_bytes * (size_t)d->samples;
    if ((size_t)stt.st_size < need) {
        close(fd);
        return pp_error_set(err, PP_ERR_PARSE, "'%s' holds %lld bytes, but %lld samples of '%s' need %zu",
                            path, (long long)stt.st_size, (long long)d->samples, arr->name, need);
    }
    void *m = mmap(NULL, need ? need : 1, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return pp_error_set(err, PP_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    d->maps[i] = m;
    d->map_lens[i] = need ? need : 1;
    arr->data = m;
    return PP_OK;
}

pp_status pp_dataset_open(const char *dir, pp_dataset **out, pp_error *err)
{
    *out = NULL;
    char hdr[4096];
    snprintf(hdr, sizeof hdr, "%s/dataset.json", dir);
    char *text = NULL;
    pp_jvalue *root = NULL;
    pp_status st;
    pp_dataset *d = calloc(1, sizeof *d);
    if (!d) return PP_NOMEM(err);
    d->dir = pp_strdup(dir);
    PP_CHECK_GOTO(read_file(hdr, &text, NULL, err), st, fail);
    st = pp_json_parse(text, &root, err);
    if (st != PP_OK) {
        pp_error_prefix(err, "'%s': ", hdr);
        goto fail;
    }
    const pp_jvalue *fmt = pp_json_get(root, "format"), *ns = pp_json_get(root, "samples"),
                    *arrays = pp_json_get(root, "arrays");
    if (!fmt || fmt->type != PP_JSTR || strcmp(fmt->str, "onnxpipe-dataset-1") || !ns || ns->type != PP_JNUM ||
        ns->num < 1 || !arrays || arrays->type != PP_JARR) {
        st = pp_error_set(err, PP_ERR_PARSE, "'%s' is not an onnxpipe dataset header (needs format "
                          "\"onnxpipe-dataset-1\", samples >= 1 and arrays)", hdr);
        goto fail;
    }
    d->samples = (int64_t)ns->num;
    d->narrays = arrays->n;
    d->arrays = calloc((size_t)arrays->n + 1, sizeof *d->arrays);
    d->maps = calloc((size_t)arrays->n + 1, sizeof *d->maps);
    d->map_lens = calloc((size_t)arrays->n + 1, sizeof *d->map_lens);
    if (!d->arrays || !d->maps || !d->map_lens) {
        st = PP_NOMEM(err);
        goto fail;
    }
    for (int i = 0; i < arrays->n; i++) PP_CHECK_GOTO(open_array(d, i, &arrays->items[i], hdr, err), st, fail);
    free(text);
    pp_json_free(root);
    *out = d;
    return PP_OK;
fail:
    free(text);
    pp_json_free(root);
    pp_dataset_close(d);
    return st;
}

void pp_dataset_close(pp_dataset *d)
{
    if (!d) return;
    for (int i = 0; i < d->narrays; i++) {
        if (d->maps && d->maps[i]) munmap(d->maps[i], d->map_lens[i]);
        if (d->arrays) free(d->arrays[i].name);
    }
    free(d->arrays);
    free(d->maps);
    free(d->map_lens);
    free(d->dir);
    free(d);
}

const pp_dataset_array *pp_dataset_find(const pp_dataset *d, const char *name)
{
    for (int i = 0; i < d->narrays; i++)
        if (!strcmp(d->arrays[i].name, name)) return &d->arrays[i];
    return NULL;
}

void pp_dataset_read(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count, void *dst)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t s = (first + i) % d->samples;
        memcpy((char *)dst + (size_t)i * a->sample_bytes, (const char *)a->data + (size_t)s * a->sample_bytes,
               a->sample_bytes);
    }
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

/* Reading a checkpoint's manifest into a pp_ckpt (every field checked, errors naming the
 * manifest and the entry), finding tensors by name, and mapping its shards. */
#include "ckpt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <onnxpipe/core_util.h>

typedef struct reader {
    const char *path;   /* the manifest, for messages */
    pp_error *err;
} reader;

static pp_status bad(const reader *r, const char *what, int index)
{
    if (index >= 0)
        return pp_error_set(r->err, PP_ERR_PARSE, "checkpoint manifest '%s': %s of entry %d is missing or malformed",
                            r->path, what, index);
    return pp_error_set(r->err, PP_ERR_PARSE, "checkpoint manifest '%s': '%s' is missing or malformed", r->path, what);
}

static const char *str_of(const pp_jvalue *o, const char *key)
{
    const pp_jvalue *v = pp_json_get(o, key);
    return v && v->type == PP_JSTR ? v->str : NULL;
}

static int num_of(const pp_jvalue *o, const char *key, double *out)
{
    const pp_jvalue *v = pp_json_get(o, key);
    if (!v || (v->type != PP_JNUM && v->type != PP_JBOOL)) return 0;
    *out = v->num;
    return 1;
}

/* A count, size or offset: an integer in [0, 2^53] (what a JSON number holds exactly), so
 * the casts below are defined whatever the file says. */
static int count_of(const pp_jvalue *o, const char *key, int64_t *out)
{
    double x;
    if (!num_of(o, key, &x) || !(x >= 0 && x <= 9007199254740992.0) || x != (double)(int64_t)x) return 0;
    *out = (int64_t)x;
    return 1;
}

static pp_status read_meta(pp_ckpt *c, const reader *r)
{
    const pp_jvalue *root = c->root, *model = pp_json_get(root, "model"), *opt = pp_json_get(root, "optimizer"),
                    *lay = pp_json_get(root, "layout");
    pp_ckpt_info *in = &c->info;
    pp_ckpt_meta *m = &in->meta;
    double x;
    const char *hash = model ? str_of(model, "hash") : NULL, *seed = str_of(root, "seed");
    if (!hash || strlen(hash) != 16) return bad(r, "model.hash", -1);
    in->model_hash = strtoull(hash, NULL, 16);
    m->model_path = str_of(model, "path");
    in->onnxpipe_version = str_of(root, "onnxpipe_version");
    if (!count_of(root, "step", &m->step) || m->step > ((int64_t)1 << 40)) return bad(r, "step", -1);
    if (!count_of(root, "samples", &m->samples)) return bad(r, "samples", -1);
    if (!seed) return bad(r, "seed", -1);
    m->seed = strtoull(seed, NULL, 10);
    const char *kind = opt ? str_of(opt, "kind") : NULL;
    if (!pp_optim_kind_parse(kind, &m->optim.kind)) return bad(r, "optimizer.kind", -1);
    double v[7] = {0};
    const char *names[] = {"lr", "momentum", "nesterov", "beta1", "beta2", "eps", "weight_decay"};
    for (int i = 0; i < 7; i++)
        if (!num_of(opt, names[i], &v[i])) return bad(r, "optimizer", -1);
    m->optim.lr = (float)v[0], m->optim.momentum = (float)v[1], m->optim.nesterov = (int)v[2];
    m->optim.beta1 = (float)v[3], m->optim.beta2 = (float)v[4], m->optim.eps = (float)v[5];
    m->optim.weight_decay = (float)v[6];
    m->loss_scale = num_of(root, "loss_scale", &x) ? x : 0;
    int64_t n;
    if (lay) {  /* informational */
        if (count_of(lay, "pp", &n) && n <= (1 << 20)) m->pp = (int)n;
        if (count_of(lay, "dp", &n) && n <= (1 << 20)) m->dp = (int)n;
        if (count_of(lay, "chunks", &n) && n <= (1 << 20)) m->chunks = (int)n;
        if (count_of(lay, "batch", &n)) m->batch = n;
        if (count_of(lay, "microbatches", &n)) m->microbatches = n;
        m->schedule = str_of(lay, "schedule");
    }
    in->trainer = pp_json_get(root, "trainer");
    return PP_OK;
}

static pp_status read_files(pp_ckpt *c, const reader *r)
{
    const pp_jvalue *fs = pp_json_get(c->root, "files");
    if (!fs || fs->type != PP_JARR) return bad(r, "files", -1);
    c->files = calloc((size_t)fs->n + 1, sizeof *c->files);
    c->maps = calloc((size_t)fs->n + 1, sizeof *c->maps);
    c->map_lens = calloc((size_t)fs->n + 1, sizeof *c->map_lens);
    c->checked = calloc((size_t)fs->n + 1, 1);
    if (!c->files || !c->maps || !c->map_lens || !c->checked) return PP_NOMEM(r->err);
    for (int i = 0; i < fs->n; i++) {
        pp_ckpt_file *f = &c->files[i];
        f->name = str_of(&fs->items[i], "name");
        if (!f->name || !f->name[0] || strchr(f->name, '/') || !strcmp(f->name, "..") || !strcmp(f->name, ".") ||
            !count_of(&fs->items[i], "size", &f->size) || ck_crc_parse(pp_json_get(&fs->items[i], "crc32c"), &f->crc32c) != PP_OK)
            return bad(r, "files[]: name (a plain file name), size or crc32c", i);
        c->info.bytes += f->size;   /* each at most 2^53, at most 2^31 files: no overflow */
    }
    c->info.files = c->files;
    c->info.nfiles = fs->n;
    return PP_OK;
}

static int by_name(const void *a, const void *b, void *ctx)
{
    const pp_ckpt *c = ctx;
    return strcmp(c->tensors[*(const int *)a].name, c->tensors[*(const int *)b].name);
}

static pp_status read_tensors(pp_ckpt *c, const reader *r)
{
    const pp_jvalue *ts = pp_json_get(c->root, "tensors");
    if (!ts || ts->type != PP_JARR) return bad(r, "tensors", -1);
    c->tensors = calloc((size_t)ts->n + 1, sizeof *c->tensors);
    c->by_name = calloc((size_t)ts->n + 1, sizeof *c->by_name);
    if (!c->tensors || !c->by_name) return PP_NOMEM(r->err);
    for (int i = 0; i < ts->n; i++) {
        const pp_jvalue *o = &ts->items[i], *shape = pp_json_get(o, "shape");
        pp_ckpt_tensor *t = &c->tensors[i];
        const char *file = str_of(o, "file");
        t->name = str_of(o, "name");
        t->param = str_of(o, "param");
        t->state = str_of(o, "state");
        t->dtype = pp_dtype_parse(str_of(o, "dtype"));
        t->file = -1;
        for (int f = 0; file && f < c->info.nfiles; f++)
            if (!strcmp(c->files[f].name, file)) t->file = f;
        if (!t->name || !t->param || t->file < 0 || !pp_dtype_size(t->dtype) || !count_of(o, "offset", &t->offset) ||
            !count_of(o, "nbytes", &t->nbytes) || !shape || shape->type != PP_JARR || shape->n > PP_MAX_RANK ||
            ck_crc_parse(pp_json_get(o, "crc32c"), &t->crc32c) != PP_OK)
            return bad(r, "tensors[]: name, param, file (listed in files), dtype, shape, offset, nbytes or crc32c", i);
        t->shape.rank = shape->n;
        int64_t numel = 1;
        for (int d = 0; d < shape->n; d++) {
            double x = shape->items[d].num;
            if (shape->items[d].type != PP_JNUM || !(x >= 0 && x <= 9007199254740992.0) || x != (double)(int64_t)x)
                return bad(r, "tensors[].shape", i);
            t->shape.dims[d] = (int64_t)x;
            if (t->shape.dims[d] && numel > INT64_MAX / t->shape.dims[d]) return bad(r, "tensors[].shape", i);
            numel *= t->shape.dims[d];
        }
        if (numel > INT64_MAX / 8 || t->nbytes != numel * (int64_t)pp_dtype_size(t->dtype) || t->offset < 0 ||
            t->offset > c->files[t->file].size - t->nbytes)
            return pp_error_set(r->err, PP_ERR_PARSE, "checkpoint manifest '%s': tensor '%s' (%s %lld bytes at %lld) "
                                "does not fit its shape or its file '%s' of %lld bytes", r->path, t->name,
                                pp_dtype_name(t->dtype), (long long)t->nbytes, (long long)t->offset,
                                c->files[t->file].name, (long long)c->files[t->file].size);
        c->by_name[i] = i;
    }
    c->info.tensors = c->tensors;
    c->info.ntensors = ts->n;
    qsort_r(c->by_name, (size_t)ts->n, sizeof *c->by_name, by_name, c);
    for (int i = 1; i < ts->n; i++)
        if (!strcmp(c->tensors[c->by_name[i]].name, c->tensors[c->by_name[i - 1]].name))
            return pp_error_set(r->err, PP_ERR_PARSE, "checkpoint manifest '%s': tensor '%s' is listed twice", r->path,
                                c->tensors[c->by_name[i]].name);
    return PP_OK;
}

pp_status pp_ckpt_open(const char *dir, pp_ckpt **out, pp_error *err)
{
    *out = NULL;
    pp_ckpt *c = calloc(1, sizeof *c);
    char *path = ck_path("%s/manifest.json", dir), *text = NULL;
    pp_status st;
    if (!c || !path || !(c->dir = pp_strdup(dir))) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory opening checkpoint '%s'", dir);
        goto fail;
    }
    c->info.dir = c->dir;
    reader r = {.path = path, .err = err};
    size_t len = 0;
    PP_CHECK_GOTO(ck_read_file(path, &text, &len, err), st, fail);
    /* checked before it is parsed, so a corrupt manifest is named as one */
    int checked = strstr(text, "\"" CK_MANIFEST_CRC_KEY "\"") != NULL;
    if (checked) PP_CHECK_GOTO(ck_manifest_check(path, text, len, err), st, fail);
    if ((st = pp_json_parse(text, &c->root, err)) != PP_OK) {
        pp_error_prefix(err, "checkpoint manifest '%s': ", path);
        goto fail;
    }
    const char *format = str_of(c->root, "format");
    double version;
    if (!format || strcmp(format, PP_CKPT_FORMAT) || !num_of(c->root, "version", &version)) {
        st = pp_error_set(err, PP_ERR_PARSE, "'%s' is not an onnxpipe checkpoint manifest (format '%s')", path,
                          format ? format : "none");
        goto fail;
    }
    if (!(version >= 1 && version <= 1e6) || version != (double)(int)version) {
        st = pp_error_set(err, PP_ERR_PARSE, "'%s': format version %g is not a positive integer", path, version);
        goto fail;
    }
    c->info.format_version = (int)version;
    if (version > PP_CKPT_VERSION) {
        st = pp_error_set(err, PP_ERR_UNSUPPORTED, "checkpoint '%s' has format version %d, newer than this onnxpipe "
                          "(%s) reads (up to %d): use a newer onnxpipe", dir, (int)version, PP_VERSION, PP_CKPT_VERSION);
        goto fail;
    }
    if (version >= 2 && !checked) {
        st = pp_error_set(err, PP_ERR_PARSE, "checkpoint manifest '%s' (format %d) has no \"%s\": the file is "
                          "truncated or edited; use an older checkpoint", path, (int)version, CK_MANIFEST_CRC_KEY);
        goto fail;
    }
    PP_CHECK_GOTO(read_meta(c, &r), st, fail);
    PP_CHECK_GOTO(read_files(c, &r), st, fail);
    PP_CHECK_GOTO(read_tensors(c, &r), st, fail);
    free(path);
    free(text);
    *out = c;
    return PP_OK;
fail:
    free(path);
    free(text);
    pp_ckpt_close(c);
    return st;
}

const pp_ckpt_info *pp_ckpt_inspect(const pp_ckpt *c) { return &c->info; }

const pp_ckpt_tensor *pp_ckpt_find_tensor(const pp_ckpt *c, const char *name)
{
    int lo = 0, hi = c->info.ntensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, cmp = strcmp(c->tensors[c->by_name[mid]].name, name);
        if (!cmp) return &c->tensors[c->by_name[mid]];
        if (cmp < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

pp_status ck_map_file(pp_ckpt *c, int f, pp_error *err)
{
    if (c->maps[f]) return PP_OK;
    char *path = ck_path("%s/%s", c->dir, c->files[f].name);
    if (!path) return PP_NOMEM(err);
    struct stat sb;
    pp_status st = stat(path, &sb) != 0 && errno == ENOENT
                       ? pp_error_set(err, PP_ERR_IO, "checkpoint shard '%s' is missing (the manifest lists it)", path)
                       : ck_map(path, &c->maps[f], &c->map_lens[f], err);
    if (st == PP_OK && (int64_t)c->map_lens[f] != c->files[f].size) {
        st = pp_error_set(err, PP_ERR_PARSE, "checkpoint shard '%s' has %lld bytes, the manifest says %lld: the file "
                          "is %s", path, (long long)c->map_lens[f], (long long)c->files[f].size,
                          (int64_t)c->map_lens[f] < c->files[f].size ? "truncated" : "extended or was replaced");
        ck_unmap(c->maps[f], c->map_lens[f]);
        c->maps[f] = NULL;
    }
    free(path);
    return st;
}

pp_status ck_check_tensor(const pp_ckpt *c, const pp_ckpt_tensor *t, pp_error *err)
{
    uint32_t crc = pp_crc32c(0, (const char *)c->maps[t->file] + t->offset, (size_t)t->nbytes);
    if (crc == t->crc32c) return PP_OK;
    return pp_error_set(err, PP_ERR_PARSE, "checkpoint shard '%s/%s': tensor '%s' fails its checksum (crc32c %08x, "
                        "the manifest says %08x): the file is corrupt; use an older checkpoint", c->dir,
                        c->files[t->file].name, t->name, crc, t->crc32c);
}

void pp_ckpt_close(pp_ckpt *c)
{
    if (!c) return;
    for (int f = 0; c->maps && f < c->info.nfiles; f++) ck_unmap(c->maps[f], c->map_lens[f]);
    free(c->maps);
    free(c->map_lens);
    free(c->checked);
    free(c->files);
    free(c->tensors);
    free(c->by_name);
    pp_json_free(c->root);
    free(c->dir);
    free(c);
}

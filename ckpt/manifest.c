/* The JSON of a checkpoint: each shard's marker (its tensors and checksums, written by
 * the rank that wrote the shard), the manifest rank 0 makes of them and the manifest's
 * own checksum. Checksums are CRC32C as 8 hex digits. */
#include "ckpt_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

static void crc_string(pp_json *j, const char *key, uint32_t crc)
{
    char s[16];
    snprintf(s, sizeof s, "%08x", crc);
    pp_json_string(j, key, s);
}

pp_status ck_crc_parse(const pp_jvalue *v, uint32_t *out)
{
    if (!v || v->type != PP_JSTR || strlen(v->str) != 8) return PP_ERR_PARSE;
    char *end;
    unsigned long x = strtoul(v->str, &end, 16);
    if (*end) return PP_ERR_PARSE;
    *out = (uint32_t)x;
    return PP_OK;
}

/* The manifest's last bytes: its checksum member and the closing brace (what pp_json
 * writes for the last member of a pretty-printed object). */
#define TAIL_HEAD "\"" CK_MANIFEST_CRC_KEY "\": \""
#define TAIL_LEN (sizeof TAIL_HEAD - 1 + 8 + 4)   /* head, 8 hex digits, "\n}\n (4 bytes) */
#define TAIL_HEX (sizeof TAIL_HEAD - 1)

static void manifest_tail(char *out, uint32_t crc)
{
    char s[TAIL_LEN + 1];
    snprintf(s, sizeof s, TAIL_HEAD "%08x\"\n}\n", crc);
    memcpy(out, s, TAIL_LEN);
    out[TAIL_LEN] = 0;
}

/* Closes the memory stream f (over *buf, *n) and writes what it holds to path, fsynced. */
static pp_status write_stream(FILE *f, char **buf, size_t *n, const char *path, pp_error *err)
{
    if (fclose(f) != 0 || !*buf) {
        free(*buf);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing '%s'", path);
    }
    pp_status st = ck_write_file(path, *buf, *n, err);
    free(*buf);
    return st;
}

pp_status ck_marker_write(const ck_shard *sh, const char *path, pp_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing '%s'", path);
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_int(&j, "stage", sh->stage);
    pp_json_int(&j, "replica", sh->replica);
    if (sh->file[0]) pp_json_string(&j, "file", sh->file);
    else pp_json_null(&j, "file");
    pp_json_int(&j, "size", sh->file_size);
    crc_string(&j, "crc32c", sh->file_crc);
    pp_json_begin_array(&j, "tensors");
    for (int i = 0; i < sh->nitems; i++) {
        const ck_item *it = &sh->items[i];
        pp_json_begin_object(&j, NULL);
        pp_json_string(&j, "name", it->name);
        pp_json_string(&j, "param", it->param);
        if (it->state) pp_json_string(&j, "state", it->state);
        else pp_json_null(&j, "state");
        pp_json_string(&j, "dtype", pp_dtype_name(it->dtype));
        pp_json_begin_array(&j, "shape");
        for (int d = 0; d < it->shape.rank; d++) pp_json_int(&j, NULL, it->shape.dims[d]);
        pp_json_end_array(&j);
        pp_json_int(&j, "offset", sh->header_bytes + it->offset);
        pp_json_int(&j, "nbytes", it->nbytes);
        crc_string(&j, "crc32c", it->crc);
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
    return write_stream(f, &buf, &n, path, err);
}

pp_status ck_manifest_write(const char *path, const pp_ckpt_meta *m, uint64_t model_hash,
                            const pp_jvalue *const *markers, int nmarkers, pp_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing '%s'", path);
    pp_json j;
    pp_json_init(&j, f, 1);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "format", PP_CKPT_FORMAT);
    pp_json_int(&j, "version", PP_CKPT_VERSION);
    pp_json_string(&j, "onnxpipe_version", PP_VERSION);
    pp_json_begin_object(&j, "model");
    pp_json_string(&j, "path", m->model_path ? m->model_path : "");
    char h[24];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)model_hash);
    pp_json_string(&j, "hash", h);
    pp_json_end_object(&j);
    pp_json_int(&j, "step", m->step);
    pp_json_int(&j, "samples", m->samples);
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    pp_json_string(&j, "seed", seed);
    pp_json_begin_object(&j, "optimizer");
    pp_json_string(&j, "kind", pp_optim_kind_name(m->optim.kind));
    pp_json_double(&j, "lr", m->optim.lr);
    pp_json_double(&j, "momentum", m->optim.momentum);
    pp_json_bool(&j, "nesterov", m->optim.nesterov);
    pp_json_double(&j, "beta1", m->optim.beta1);
    pp_json_double(&j, "beta2", m->optim.beta2);
    pp_json_double(&j, "eps", m->optim.eps);
    pp_json_double(&j, "weight_decay", m->optim.weight_decay);
    pp_json_end_object(&j);
    if (m->loss_scale > 0) pp_json_double(&j, "loss_scale", m->loss_scale);
    else pp_json_null(&j, "loss_scale");
    pp_json_begin_object(&j, "layout");
    pp_json_int(&j, "pp", m->pp);
    pp_json_int(&j, "dp", m->dp);
    pp_json_string(&j, "schedule", m->schedule ? m->schedule : "");
    pp_json_int(&j, "chunks", m->chunks);
    pp_json_int(&j, "batch", m->batch);
    pp_json_int(&j, "microbatches", m->microbatches);
    pp_json_end_object(&j);
    if (m->trainer_json) pp_json_raw(&j, "trainer", m->trainer_json);
    pp_json_string(&j, "checksum", "crc32c");
    pp_json_begin_array(&j, "files");
    for (int i = 0; i < nmarkers; i++) {
        const pp_jvalue *file = pp_json_get(markers[i], "file");
        if (!file || file->type != PP_JSTR) continue;
        pp_json_begin_object(&j, NULL);
        pp_json_string(&j, "name", file->str);
        pp_json_int(&j, "size", (int64_t)pp_json_get(markers[i], "size")->num);
        pp_json_string(&j, "crc32c", pp_json_get(markers[i], "crc32c")->str);
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_begin_array(&j, "tensors");
    for (int i = 0; i < nmarkers; i++) {
        const pp_jvalue *file = pp_json_get(markers[i], "file"), *ts = pp_json_get(markers[i], "tensors");
        for (int k = 0; file && file->type == PP_JSTR && ts && k < ts->n; k++) {
            const pp_jvalue *t = &ts->items[k];
            pp_json_begin_object(&j, NULL);
            for (int a = 0; a < t->n; a++) {
                const pp_jvalue *v = &t->items[a];
                if (!strcmp(t->keys[a], "offset")) pp_json_string(&j, "file", file->str);
                if (v->type == PP_JSTR) pp_json_string(&j, t->keys[a], v->str);
                else if (v->type == PP_JNUM) pp_json_int(&j, t->keys[a], (int64_t)v->num);
                else if (v->type == PP_JNULL) pp_json_null(&j, t->keys[a]);
                else if (v->type == PP_JARR) {
                    pp_json_begin_array(&j, t->keys[a]);
                    for (int d = 0; d < v->n; d++) pp_json_int(&j, NULL, (int64_t)v->items[d].num);
                    pp_json_end_array(&j);
                }
            }
            pp_json_end_object(&j);
        }
    }
    pp_json_end_array(&j);
    pp_json_string(&j, CK_MANIFEST_CRC_KEY, "00000000");   /* a placeholder, patched below */
    pp_json_end_object(&j);
    pp_json_finish(&j);
    if (fflush(f) != 0 || !buf || n < TAIL_LEN) {
        fclose(f);
        free(buf);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory writing '%s'", path);
    }
    manifest_tail(buf + n - TAIL_LEN, pp_crc32c(0, buf, n - TAIL_LEN));
    return write_stream(f, &buf, &n, path, err);
}

pp_status ck_manifest_check(const char *path, const char *text, size_t n, pp_error *err)
{
    const char *tail = n >= TAIL_LEN ? text + n - TAIL_LEN : text;
    char hex[9] = "", *end = NULL, want[TAIL_LEN + 1];
    uint32_t crc = 0;
    if (n >= TAIL_LEN) {
        memcpy(hex, tail + TAIL_HEX, 8);
        crc = (uint32_t)strtoul(hex, &end, 16);
        manifest_tail(want, crc);
    }
    if (n < TAIL_LEN || !end || *end || memcmp(want, tail, TAIL_LEN))
        return pp_error_set(err, PP_ERR_PARSE, "checkpoint manifest '%s' does not end with its checksum (\"%s\": "
                            "\"<crc32c>\", then \"}\"): the file is truncated, extended or edited; use an older "
                            "checkpoint", path, CK_MANIFEST_CRC_KEY);
    uint32_t mine = pp_crc32c(0, text, n - TAIL_LEN);
    if (mine != crc)
        return pp_error_set(err, PP_ERR_PARSE, "checkpoint manifest '%s' fails its checksum (crc32c %08x, it says "
                            "%08x): the file is corrupt; use an older checkpoint", path, mine, crc);
    return PP_OK;
}

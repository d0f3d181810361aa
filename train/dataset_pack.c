/* --pack and --pad: the documents of a token stream (split after each --eos token) or of
 * a Megatron indexed dataset (its document index) placed in sequences of seq tokens.
 *
 * The rule (tests/ref/pack_ref.py is the same rule in Python):
 * - a document longer than seq is cut into pieces of seq tokens (the last one shorter);
 *   empty documents are dropped;
 * - --pack, first-fit decreasing: pieces by length, longest first (ties: document order),
 *   each into the first sequence (in order of creation) with room for it, or a new one;
 *   within a sequence the pieces stay in the order they were placed;
 * - --pad: each piece a sequence of its own, in document order;
 * - a sample's input_ids are its pieces' tokens, then the pad token (eos, or 0);
 *   labels are the next token of the same document (across a piece's cut too), else
 *   ignore_index (document ends, padding); position_ids count from 0 in each piece (0 in
 *   padding); an attention mask (ds_pack_add_mask) lets a token see the tokens of its own
 *   piece up to itself, and a padding token only itself (no row is empty); a padding mask
 *   [seq] is 1 for tokens, 0 for padding.
 * The plan is built once (dataset_plan.c), cached beside the data and mapped by every rank
 * and later job, so every layout reads the same samples; a sample's tokens are read when
 * it is. */
#include "dataset_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <onnxpipe/core_util.h>

enum { PACK_INPUT = 1, PACK_LABELS, PACK_POSITIONS, PACK_MASK, PACK_PADDING_MASK };

struct pp_dataset_pack {
    ds_docs docs;
    int file;                   /* the tokens: token t at byte base + t x es of file */
    int64_t base;
    pp_dtype stored;
    int64_t seq, pad, ignore;
    int64_t region, region_first;   /* the plan (dataset_internal.h), mapped */
    const int64_t *region_before, *efirst, *epieces;
};

/* Tokens [start, start + len) of the stream; cont: the token after them is their document's. */
typedef struct piece {
    int64_t start, len;
    int cont;
} piece;

/* Sample s: a region sample (first -1) is the piece at token off of document doc; an
 * explicit one the last pieces of documents epieces[first .. first + n). */
typedef struct sample_ref {
    int64_t n, first, doc, off;
} sample_ref;

const char *ds_docs_flag(pp_docs docs) { return docs == PP_DOCS_PAD ? "--pad" : "--pack"; }

void ds_pack_free(pp_dataset_pack *p) { free(p); }

static sample_ref ref_of(const pp_dataset_pack *p, int64_t s)
{
    int64_t i = s - p->region_first;
    if (i >= 0 && i < p->region) {   /* the document: the last k with region_before[k] <= i */
        int64_t lo = 0, hi = p->docs.n;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            *(p->region_before[mid] <= i ? &lo : &hi) = mid;
        }
        return (sample_ref){.n = 1, .first = -1, .doc = lo, .off = (i - p->region_before[lo]) * p->seq};
    }
    int64_t e = i < 0 ? s : s - p->region;
    return (sample_ref){.n = p->efirst[e + 1] - p->efirst[e], .first = p->efirst[e]};
}

static piece piece_at(const pp_dataset_pack *p, const sample_ref *r, int64_t j)
{
    int64_t doc = r->first < 0 ? r->doc : p->epieces[r->first + j];
    int64_t a = ds_docs_first(&p->docs, doc), n = ds_docs_first(&p->docs, doc + 1) - a;
    int64_t off = r->first < 0 ? r->off : n / p->seq * p->seq, len = n - off < p->seq ? n - off : p->seq;
    return (piece){.start = a + off, .len = len, .cont = off + len < n};
}

static pp_status add(pp_dataset *d, const char *name, int role, int64_t seq, pp_error *err)
{
    pp_dataset_array *a = ds_add_array(d, name, err);
    if (!a) return PP_ERR_NOMEM;
    a->dtype = a->stored = PP_DTYPE_I64;
    a->shape = (pp_shape){.rank = 1, .dims = {seq}};
    a->sample_bytes = a->stride = (size_t)seq * sizeof(int64_t);
    a->packed = role;
    return PP_OK;
}

/* The plan of x under o: cached beside the data, keyed by the data's (and the .idx's) size
 * and mtime and the options that shape it. */
static pp_status open_plan(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                           const ds_docs *x, const pp_dataset_options *o, const int64_t **counts, const int64_t **body,
                           size_t *len, pp_error *err)
{
    char suffix[96], eos[32] = "", buckets[16] = "";
    if (!x->idx) snprintf(eos, sizeof eos, ".eos%lld", (long long)o->eos);
    uint32_t bcrc = pp_crc32c(0, o->buckets, (size_t)o->nbuckets * sizeof *o->buckets);
    if (o->nbuckets) snprintf(buckets, sizeof buckets, ".b%08x", bcrc);
    snprintf(suffix, sizeof suffix, "%s.%s%lld%s.samples", eos, o->docs == PP_DOCS_PAD ? "pad" : "pack",
             (long long)o->seq, buckets);
    ds_plan_args args = {.x = x, .o = o};
    ds_cache c = {.data = path, .suffix = suffix, .what = "sample plan", .dir = o->cache_dir, .build = ds_plan_build,
                  .user = &args,
                  .key = {2, 0, 0, 0, 0, t, base, ntok, x->idx ? -1 : o->eos, o->seq, o->docs, o->nbuckets * 4294967296LL + bcrc}};
    PP_CHECK(ds_cache_source(d, file, &c.key[1], &c.key[2], err));
    struct stat st;
    if (x->idx && stat(x->path, &st) == 0)
        c.key[3] = (int64_t)st.st_size, c.key[4] = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    const char *b;
    PP_CHECK(ds_cache_get(d, &c, counts, &b, len, err));
    *body = (const int64_t *)b;
    return PP_OK;
}

pp_status ds_pack_open(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                       const ds_docs *x, const pp_dataset_options *o, pp_error *err)
{
    const char *flag = ds_docs_flag(o->docs);
    if (o->seq < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: pass --seq T, the tokens per sample (the model's sequence "
                            "length)", flag);
    for (int b = 0; b < o->nbuckets; b++)
        if (o->buckets[b] < 1 || (b > 0 && o->buckets[b] <= o->buckets[b - 1]) ||
            (b == o->nbuckets - 1 && o->buckets[b] != o->seq))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "--seq-buckets: the lengths must rise and the last be --seq "
                                "%lld (bucket %d is %lld)", (long long)o->seq, b + 1, (long long)o->buckets[b]);
    if (!x && o->eos < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: '%s' is a flat token stream; pass --eos ID, the token "
                            "that ends each document (e.g. 50256 for GPT-2's <|endoftext|>)", flag, path);
    pp_dataset_pack *p = calloc(1, sizeof *p);
    if (!p) return PP_NOMEM(err);
    d->pack = p;
    d->docs = o->docs;
    *p = (pp_dataset_pack){.file = file, .base = base, .stored = t, .seq = o->seq, .pad = o->eos >= 0 ? o->eos : 0,
                           .ignore = o->ignore_index};
    if (x) p->docs = *x;
    else PP_CHECK(ds_docs_of_stream(d, path, file, base, ntok, t, o, &p->docs, err));
    const int64_t *c, *body;
    size_t len;
    PP_CHECK(open_plan(d, path, file, base, ntok, t, &p->docs, o, &c, &body, &len, err));
    p->docs.path = NULL;   /* the caller's: for the build's messages only */
    int nb = o->nbuckets > 0 ? o->nbuckets : 1;
    if (c[DS_PLAN_DOCS] != p->docs.n || c[DS_PLAN_BUCKETS] != nb ||
        len != (size_t)(nb + 1 + c[DS_PLAN_DOCS] + 1 + c[DS_PLAN_EXPLICIT] + 1 + c[DS_PLAN_PIECES]) * sizeof *body)
        return pp_error_set(err, PP_ERR_PARSE, "the %s sample plan of '%s' does not fit its documents: remove its "
                            "file (it is rebuilt)", flag, path);
    if (c[DS_PLAN_SAMPLES] == 0) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: '%s' holds no tokens", flag, path);
    p->region = c[DS_PLAN_REGION];
    p->region_first = body[nb - 1];
    p->region_before = body + nb + 1;
    p->efirst = p->region_before + p->docs.n + 1;
    p->epieces = p->efirst + c[DS_PLAN_EXPLICIT] + 1;
    d->samples = c[DS_PLAN_SAMPLES];
    d->documents = c[DS_PLAN_DOCUMENTS];
    d->real_tokens = c[DS_PLAN_TOKENS];
    d->nbuckets = o->nbuckets;
    d->bucket_first = malloc((size_t)(nb + 1) * sizeof *d->bucket_first);
    d->bucket_len = malloc((size_t)nb * sizeof *d->bucket_len);
    if (!d->bucket_first || !d->bucket_len) return PP_NOMEM(err);
    memcpy(d->bucket_first, body, (size_t)(nb + 1) * sizeof *body);
    for (int b = 0; b < nb; b++) d->bucket_len[b] = o->nbuckets > 0 ? o->buckets[b] : o->seq;
    PP_CHECK(add(d, "input_ids", PACK_INPUT, o->seq, err));
    PP_CHECK(add(d, o->labels ? o->labels : "labels", PACK_LABELS, o->seq, err));
    return add(d, "position_ids", PACK_POSITIONS, o->seq, err);
}

pp_status ds_pack_add_mask(pp_dataset *d, const char *name, const pp_shape *per_sample, pp_dtype t, pp_error *err)
{
    int r = per_sample->rank;
    int64_t n = d->pack->seq;
    int padding = r == 1 && per_sample->dims[0] == n;   /* [batch, seq]: 1 for tokens, 0 for padding */
    if (!padding && (r < 2 || per_sample->dims[r - 1] != n || per_sample->dims[r - 2] != n))
        return pp_error_set(err, PP_ERR_SHAPE, "%s: the model's mask input '%s' is %d-D per sample; onnxpipe writes a "
                            "[%lld] padding mask or a [.., %lld, %lld] attention mask", ds_docs_flag(d->docs), name, r,
                            (long long)n, (long long)n, (long long)n);
    if (t != PP_DTYPE_BOOL && t != PP_DTYPE_I64 && t != PP_DTYPE_I32 && t != PP_DTYPE_F32)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s: the model's mask input '%s' is %s; onnxpipe writes "
                            "bool, int64, int32 (1: attend) or float32 (0 or -3.4e38, added to the scores)",
                            ds_docs_flag(d->docs), name, pp_dtype_name(t));
    pp_dataset_array *a = ds_add_array(d, name, err);
    if (!a) return PP_ERR_NOMEM;
    a->dtype = a->stored = t;
    a->shape = *per_sample;
    a->sample_bytes = a->stride = (size_t)pp_shape_numel(per_sample) * pp_dtype_size(t);
    a->packed = padding ? PACK_PADDING_MASK : PACK_MASK;
    return PP_OK;
}

/* count copies of the es-byte value v at dst, by doubling (a few copies, not count). */
static void fill(char *dst, const void *v, size_t es, int64_t count)
{
    size_t all = (size_t)count * es;
    if (all == 0) return;
    memcpy(dst, v, es);
    for (size_t done = es; done < all; done *= 2) memcpy(dst + done, dst, done < all - done ? done : all - done);
}

/* One sample's mask at length n: row i may see column j when both are in one piece and
 * j <= i; a padding row sees only itself. Written for one [n, n] block, row by row,
 * copied to the leading dims' others. */
static void write_mask(const pp_dataset_pack *p, const pp_dataset_array *a, const sample_ref *r, int64_t n, char *dst)
{
    int64_t lead = 1, i = 0;
    for (int k = 0; k < a->shape.rank - 2; k++) lead *= a->shape.dims[k];
    size_t es = pp_dtype_size(a->dtype), row = (size_t)n * es;
    float keep_f = 0.0f, drop_f = -3.4028234663852886e38f;
    int64_t keep_i = 1, drop_i = 0;   /* little-endian: its low bytes are a bool's or an int32's 1 and 0 */
    const void *keep = a->dtype == PP_DTYPE_F32 ? (const void *)&keep_f : &keep_i;
    const void *drop = a->dtype == PP_DTYPE_F32 ? (const void *)&drop_f : &drop_i;
    for (int64_t k = 0, b = 0; k < r->n; k++) {
        int64_t len = piece_at(p, r, k).len;
        for (; i < b + len; i++) {   /* row i sees its piece's columns b .. i */
            fill(dst + (size_t)i * row, drop, es, n);
            fill(dst + (size_t)i * row + (size_t)b * es, keep, es, i - b + 1);
        }
        b += len;
    }
    for (; i < n; i++) {   /* padding sees itself */
        fill(dst + (size_t)i * row, drop, es, n);
        memcpy(dst + (size_t)i * row + (size_t)i * es, keep, es);
    }
    for (int64_t k = 1; k < lead; k++) memcpy(dst + (size_t)k * n * row, dst, (size_t)n * row);
}

const char *pp_dataset_pack_summary(const pp_dataset *d, char *buf, size_t len)
{
    if (!d->pack) return len ? (buf[0] = 0, buf) : buf;
    double total = (double)d->samples * (double)d->pack->seq;
    snprintf(buf, len, "%s %lld documents (%lld tokens) into %lld samples of %lld tokens: %.2f%% padding",
             d->docs == PP_DOCS_PAD ? "padded" : "packed", (long long)d->documents, (long long)d->real_tokens,
             (long long)d->samples, (long long)d->pack->seq, 100.0 * (total - (double)d->real_tokens) / total);
    return buf;
}

int64_t ds_pack_tokens(const pp_dataset *d, int64_t s)
{
    const pp_dataset_pack *p = d->pack;
    sample_ref r = ref_of(p, s);
    int64_t n = 0;
    for (int64_t k = 0; k < r.n; k++) n += piece_at(p, &r, k).len;
    return n;
}

void ds_pack_set_ignore(pp_dataset *d, int64_t ignore_index) { d->pack->ignore = ignore_index; }

int ds_pack_locate(const pp_dataset *d, int64_t s, int64_t j, int *file, int64_t *byte)
{
    const pp_dataset_pack *p = d->pack;
    sample_ref r = ref_of(p, s);
    for (int64_t k = 0, at = 0; k < r.n; k++) {
        piece c = piece_at(p, &r, k);
        if (j < at + c.len) {
            if (j == at + c.len - 1 && !c.cont) return 0;   /* a document's end */
            *file = p->file;
            *byte = p->base + (c.start + j - at + 1) * (int64_t)pp_dtype_size(p->stored);
            return 1;
        }
        at += c.len;
    }
    return 0;
}

pp_status ds_pack_read(const pp_dataset *d, const pp_dataset_array *a, int64_t s, int64_t len, void *dst,
                       pp_error *err)
{
    const pp_dataset_pack *p = d->pack;
    sample_ref r = ref_of(p, s);
    if (a->packed == PACK_MASK) {
        write_mask(p, a, &r, len, dst);
        return PP_OK;
    }
    if (a->packed == PACK_PADDING_MASK) {   /* 1 (in the mask's dtype) for tokens, 0 for padding */
        size_t es = pp_dtype_size(a->dtype);
        float one_f = 1.0f;
        int64_t one_i = 1;
        memset(dst, 0, (size_t)len * es);
        fill(dst, a->dtype == PP_DTYPE_F32 ? (const void *)&one_f : &one_i, es, ds_pack_tokens(d, s));
        return PP_OK;
    }
    int64_t *out = dst, at = 0, es = (int64_t)pp_dtype_size(p->stored);
    for (int64_t k = 0; k < r.n; k++) {
        piece c = piece_at(p, &r, k);
        if (a->packed == PACK_INPUT) {
            PP_CHECK(ds_read_tokens(d, p->file, p->base + c.start * es, p->stored, c.len, out + at, err));
        } else if (a->packed == PACK_LABELS) {   /* the next tokens of the document */
            PP_CHECK(ds_read_tokens(d, p->file, p->base + (c.start + 1) * es, p->stored, c.len - 1 + c.cont, out + at,
                                    err));
            if (!c.cont) out[at + c.len - 1] = p->ignore;
        } else {
            for (int64_t j = 0; j < c.len; j++) out[at + j] = j;
        }
        at += c.len;
    }
    int64_t fill = a->packed == PACK_INPUT ? p->pad : a->packed == PACK_LABELS ? p->ignore : 0;
    for (; at < len; at++) out[at] = fill;
    return PP_OK;
}

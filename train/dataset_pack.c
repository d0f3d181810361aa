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
 * Every rank packs the same way at open, so every layout reads the same samples. */
#include "train_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

enum { PACK_INPUT = 1, PACK_LABELS, PACK_POSITIONS, PACK_MASK, PACK_PADDING_MASK };

typedef struct piece {
    int64_t doc;                /* the document's first token in the stream */
    int64_t doc_len;
    int64_t off;                /* the piece's first token within the document */
    int64_t len;
} piece;

struct pp_dataset_pack {
    const void *tokens;
    pp_dtype stored;
    int64_t seq, pad, ignore;
    int64_t *first;             /* [samples + 1]: sample s holds pieces[first[s] .. first[s + 1]) */
    piece *pieces;
    int64_t npieces;
};

const char *ds_docs_flag(pp_docs docs) { return docs == PP_DOCS_PAD ? "--pad" : "--pack"; }

void ds_pack_free(pp_dataset_pack *p)
{
    if (!p) return;
    free(p->first);
    free(p->pieces);
    free(p);
}

/* Document boundaries: token offsets [ndocs + 1], from the caller's index or split after
 * each eos in the stream. */
static pp_status split_docs(const void *tokens, pp_dtype t, int64_t ntok, int64_t eos, int64_t **out, int64_t *ndocs,
                            pp_error *err)
{
    int64_t n = 0, cap = 1024, *b = malloc((size_t)cap * sizeof *b), chunk[4096];
    if (!b) return PP_NOMEM(err);
    b[n++] = 0;
    for (int64_t i = 0; i < ntok; i += 4096) {
        int64_t m = ntok - i < 4096 ? ntok - i : 4096;
        ds_widen(t, (const char *)tokens + (size_t)i * pp_dtype_size(t), m, chunk);
        for (int64_t k = 0; k < m; k++) {
            if (chunk[k] != eos && i + k + 1 != ntok) continue;
            if (n == cap) {
                int64_t *nb = pp_realloc_array(b, (size_t)(cap *= 2), sizeof *b);
                if (!nb) return free(b), PP_NOMEM(err);
                b = nb;
            }
            b[n++] = i + k + 1;
        }
    }
    *out = b;
    *ndocs = n - 1;
    return PP_OK;
}

static int by_length(const void *x, const void *y)
{
    const piece *a = x, *b = y;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->doc < b->doc ? -1 : a->doc > b->doc ? 1 : (a->off > b->off) - (a->off < b->off);
}

/* First-fit decreasing over a max tree of the sequences' free room: the first sequence
 * with room for len is found in log(sequences) steps. Unused sequences have room seq,
 * so the first of them is where a piece nothing else takes goes. bin[i]: piece i's. */
static int64_t first_fit(pp_dataset_pack *p, int64_t *room, int64_t leaves, int64_t *bin)
{
    qsort(p->pieces, (size_t)p->npieces, sizeof *p->pieces, by_length);
    for (int64_t i = 0; i < 2 * leaves; i++) room[i] = p->seq;
    int64_t used = 0;
    for (int64_t i = 0; i < p->npieces; i++) {
        int64_t node = 1, len = p->pieces[i].len;
        while (node < leaves) node = room[2 * node] >= len ? 2 * node : 2 * node + 1;
        bin[i] = node - leaves;
        if (bin[i] + 1 > used) used = bin[i] + 1;
        for (room[node] -= len, node /= 2; node >= 1; node /= 2)
            room[node] = room[2 * node] > room[2 * node + 1] ? room[2 * node] : room[2 * node + 1];
    }
    return used;
}

/* The smallest of the n buckets (ascending) that holds len tokens. */
static int bucket_of(const int64_t *buckets, int n, int64_t len)
{
    int b = 0;
    while (b < n - 1 && buckets[b] < len) b++;
    return b;
}

/* Pieces into samples (--pack: first_fit; --pad: one each, in document order), then the
 * samples in order of their bucket (stable; d->bucket_first[b] is bucket b's first), and
 * p->first / p->pieces in that order. */
static pp_status place(pp_dataset *d, pp_dataset_pack *p, const pp_dataset_options *o, pp_error *err)
{
    int64_t leaves = 1, n = p->npieces, used = n;
    while (leaves < n) leaves *= 2;
    int64_t *bin = malloc((size_t)n * sizeof *bin), *work = malloc((size_t)(2 * leaves + 1) * sizeof *work);
    piece *sorted = malloc((size_t)n * sizeof *sorted);
    p->first = calloc((size_t)n + 1, sizeof *p->first);
    int nb = o->nbuckets > 0 ? o->nbuckets : 1;
    d->bucket_first = calloc((size_t)nb + 1, sizeof *d->bucket_first);
    if (!bin || !work || !sorted || !p->first || !d->bucket_first) {
        free(bin), free(work), free(sorted);
        return PP_NOMEM(err);
    }
    if (o->docs == PP_DOCS_PAD)
        for (int64_t i = 0; i < n; i++) bin[i] = i;
    else
        used = first_fit(p, work, leaves, bin);
    /* fill of each sample (in work), its bucket, and its place: bucket by bucket */
    memset(work, 0, (size_t)used * sizeof *work);
    for (int64_t i = 0; i < n; i++) work[bin[i]] += p->pieces[i].len;
    for (int64_t s = 0; s < used; s++) {
        work[s] = o->nbuckets > 0 ? bucket_of(o->buckets, o->nbuckets, work[s]) : 0;
        d->bucket_first[work[s] + 1]++;
    }
    for (int b = 0; b < nb; b++) d->bucket_first[b + 1] += d->bucket_first[b];
    int64_t *at = calloc((size_t)nb, sizeof *at), *order = malloc((size_t)used * sizeof *order);
    if (!at || !order) {
        free(bin), free(work), free(sorted), free(at), free(order);
        return PP_NOMEM(err);
    }
    for (int64_t s = 0; s < used; s++) order[s] = d->bucket_first[work[s]] + at[work[s]]++;
    /* p->first by counting pieces per sample, then the pieces in sample order */
    for (int64_t i = 0; i < n; i++) p->first[order[bin[i]] + 1]++;
    for (int64_t s = 0; s < used; s++) p->first[s + 1] += p->first[s];
    memcpy(work, p->first, (size_t)used * sizeof *work);
    for (int64_t i = 0; i < n; i++) sorted[work[order[bin[i]]]++] = p->pieces[i];
    free(p->pieces);
    p->pieces = sorted;
    d->samples = used;
    free(bin), free(work), free(at), free(order);
    if (!(d->bucket_len = malloc((size_t)nb * sizeof *d->bucket_len))) return PP_NOMEM(err);
    for (int b = 0; b < nb; b++) d->bucket_len[b] = o->nbuckets > 0 ? o->buckets[b] : p->seq;
    d->nbuckets = o->nbuckets;
    return PP_OK;
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

pp_status ds_pack_open(pp_dataset *d, const char *path, const void *tokens, int64_t ntok, pp_dtype t,
                       const int64_t *doc_first, int64_t ndocs, const pp_dataset_options *o, pp_error *err)
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
    if (!doc_first && o->eos < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: '%s' is a flat token stream; pass --eos ID, the token "
                            "that ends each document (e.g. 50256 for GPT-2's <|endoftext|>)", flag, path);
    int64_t *split = NULL;
    if (!doc_first) {
        PP_CHECK(split_docs(tokens, t, ntok, o->eos, &split, &ndocs, err));
        doc_first = split;
    }
    pp_dataset_pack *p = calloc(1, sizeof *p);
    int64_t npieces = 0;
    for (int64_t i = 0; i < ndocs; i++) npieces += (doc_first[i + 1] - doc_first[i] + o->seq - 1) / o->seq;
    if (p) p->pieces = malloc((size_t)(npieces > 0 ? npieces : 1) * sizeof *p->pieces);
    if (!p || !p->pieces) {
        free(split);
        ds_pack_free(p);
        return PP_NOMEM(err);
    }
    d->pack = p;
    d->docs = o->docs;
    *p = (pp_dataset_pack){.tokens = tokens, .stored = t, .seq = o->seq, .pad = o->eos >= 0 ? o->eos : 0,
                           .ignore = o->ignore_index, .pieces = p->pieces};
    for (int64_t i = 0; i < ndocs; i++) {
        int64_t len = doc_first[i + 1] - doc_first[i];
        for (int64_t off = 0; off < len; off += o->seq)
            p->pieces[p->npieces++] = (piece){.doc = doc_first[i], .doc_len = len, .off = off,
                                              .len = len - off < o->seq ? len - off : o->seq};
        d->documents += len > 0;
        d->real_tokens += len;
    }
    free(split);
    if (p->npieces == 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: '%s' holds no tokens", flag, path);
    PP_CHECK(place(d, p, o, err));
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
static void write_mask(const pp_dataset_pack *p, const pp_dataset_array *a, int64_t s, int64_t n, char *dst)
{
    int64_t lead = 1, i = 0;
    for (int k = 0; k < a->shape.rank - 2; k++) lead *= a->shape.dims[k];
    size_t es = pp_dtype_size(a->dtype), row = (size_t)n * es;
    float keep_f = 0.0f, drop_f = -3.4028234663852886e38f;
    int64_t keep_i = 1, drop_i = 0;   /* little-endian: its low bytes are a bool's or an int32's 1 and 0 */
    const void *keep = a->dtype == PP_DTYPE_F32 ? (const void *)&keep_f : &keep_i;
    const void *drop = a->dtype == PP_DTYPE_F32 ? (const void *)&drop_f : &drop_i;
    for (int64_t k = p->first[s], b = 0; k < p->first[s + 1]; b += p->pieces[k++].len)
        for (; i < b + p->pieces[k].len; i++) {   /* row i sees its piece's columns b .. i */
            fill(dst + (size_t)i * row, drop, es, n);
            fill(dst + (size_t)i * row + (size_t)b * es, keep, es, i - b + 1);
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
    int64_t n = 0;
    for (int64_t k = p->first[s]; k < p->first[s + 1]; k++) n += p->pieces[k].len;
    return n;
}

void ds_pack_set_ignore(pp_dataset *d, int64_t ignore_index) { d->pack->ignore = ignore_index; }

void ds_pack_read(const pp_dataset *d, const pp_dataset_array *a, int64_t s, int64_t len, void *dst)
{
    const pp_dataset_pack *p = d->pack;
    if (a->packed == PACK_MASK) {
        write_mask(p, a, s, len, dst);
        return;
    }
    if (a->packed == PACK_PADDING_MASK) {   /* 1 (in the mask's dtype) for tokens, 0 for padding */
        size_t es = pp_dtype_size(a->dtype);
        float one_f = 1.0f;
        int64_t one_i = 1;
        memset(dst, 0, (size_t)len * es);
        fill(dst, a->dtype == PP_DTYPE_F32 ? (const void *)&one_f : &one_i, es, ds_pack_tokens(d, s));
        return;
    }
    int64_t *out = dst, at = 0;
    size_t es = pp_dtype_size(p->stored);
    for (int64_t k = p->first[s]; k < p->first[s + 1]; k++) {
        const piece *c = &p->pieces[k];
        const char *tok = (const char *)p->tokens + (size_t)(c->doc + c->off) * es;
        if (a->packed == PACK_INPUT) {
            ds_widen(p->stored, tok, c->len, out + at);
        } else if (a->packed == PACK_LABELS) {
            int64_t have = c->doc_len - c->off - 1 < c->len ? c->doc_len - c->off - 1 : c->len;
            ds_widen(p->stored, tok + es, have, out + at);
            for (int64_t j = have; j < c->len; j++) out[at + j] = p->ignore;
        } else {
            for (int64_t j = 0; j < c->len; j++) out[at + j] = j;
        }
        at += c->len;
    }
    int64_t fill = a->packed == PACK_INPUT ? p->pad : a->packed == PACK_LABELS ? p->ignore : 0;
    for (; at < len; at++) out[at] = fill;
}

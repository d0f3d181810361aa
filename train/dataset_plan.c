/* The sample plan of --pack and --pad, built once from the documents and cached (the rule:
 * dataset_pack.c). A piece of seq tokens fills a sample alone, so the pieces of seq tokens
 * need no record: first-fit decreasing puts them first, one per sample, in document order,
 * and only each document's last, shorter piece is placed (a counting sort by length, then
 * a max tree of the samples' room). Memory: a few words per short piece while it builds;
 * the plan on disk is one word per document and per short piece. */
#include "dataset_internal.h"

#include <stdlib.h>
#include <string.h>

/* The smallest of the n buckets (ascending) that holds len tokens. */
static int bucket_of(const int64_t *buckets, int n, int64_t len)
{
    int b = 0;
    while (b < n - 1 && buckets[b] < len) b++;
    return b;
}

/* --pad: the short pieces of the buckets before the last, bucket by bucket, each in
 * document order: sample e holds epieces[e]. */
static pp_status place_pad(const ds_plan_args *a, int64_t *count, int64_t npieces, ds_writer *w, pp_error *err)
{
    const ds_docs *x = a->x;
    int nb = a->o->nbuckets > 0 ? a->o->nbuckets : 1, last = nb - 1;
    int64_t *docs = malloc((size_t)(npieces > 0 ? npieces : 1) * sizeof *docs), at[32] = {0};
    if (!docs) return PP_NOMEM(err);
    for (int b = 1; b < nb; b++) at[b] = at[b - 1] + count[b - 1];
    for (int64_t k = 0; k < x->n; k++) {
        int64_t part = (ds_docs_first(x, k + 1) - ds_docs_first(x, k)) % a->o->seq;
        int b = part ? bucket_of(a->o->buckets, nb, part) : last;
        if (b != last) docs[at[b]++] = k;
    }
    pp_status st = PP_OK;
    for (int64_t e = 0; e <= npieces && st == PP_OK; e++) st = ds_write(w, &e, sizeof e, err);
    if (st == PP_OK) st = ds_write(w, docs, (size_t)npieces * sizeof *docs, err);
    free(docs);
    return st;
}

/* --pack: first-fit decreasing of the short pieces (by length, longest first, ties in
 * document order) into samples after the full ones; the samples in order of their bucket
 * (stable), their pieces in the order placed. count[b]: bucket b's samples of them. */
static pp_status place_pack(const ds_plan_args *a, const int64_t *per_len, int64_t npieces, int64_t *count,
                            int64_t *nsamples, ds_writer *w, pp_error *err)
{
    const ds_docs *x = a->x;
    int64_t seq = a->o->seq, n = npieces > 0 ? npieces : 1, leaves = 1, used = 0;
    int nb = a->o->nbuckets > 0 ? a->o->nbuckets : 1;
    while (leaves < n) leaves *= 2;
    int64_t *order = malloc((size_t)n * sizeof *order), *key = malloc((size_t)n * sizeof *key);
    int64_t *at = malloc((size_t)(seq + 1) * sizeof *at);
    int32_t *room = malloc((size_t)(2 * leaves) * sizeof *room);
    int64_t *place = NULL, *first = NULL, *pieces = NULL;
    pp_status st = PP_OK;
    if (!order || !key || !at || !room) {
        st = PP_NOMEM(err);
        goto done;
    }
    /* the short pieces by length, longest first, each length in document order */
    at[seq - 1] = 0;
    for (int64_t len = seq - 1; len > 1; len--) at[len - 1] = at[len] + per_len[len];
    for (int64_t k = 0; k < x->n; k++) {
        int64_t part = (ds_docs_first(x, k + 1) - ds_docs_first(x, k)) % seq;
        if (part) order[at[part]++] = k;
    }
    /* first fit over a max tree of the samples' room: leaf i is short sample i */
    for (int64_t i = 0; i < 2 * leaves; i++) room[i] = (int32_t)seq;
    for (int64_t len = seq - 1, i = 0; len >= 1; len--)
        for (int64_t k = 0; k < per_len[len]; k++, i++) {
            int64_t node = 1;
            while (node < leaves) node = room[2 * node] >= len ? 2 * node : 2 * node + 1;
            key[i] = node - leaves;
            if (key[i] + 1 > used) used = key[i] + 1;
            for (room[node] -= (int32_t)len, node /= 2; node >= 1; node /= 2)
                room[node] = room[2 * node] > room[2 * node + 1] ? room[2 * node] : room[2 * node + 1];
        }
    /* each sample's place among the short ones, bucket by bucket (stable) */
    if (!(place = malloc((size_t)(used > 0 ? used : 1) * sizeof *place))) {
        st = PP_NOMEM(err);
        goto done;
    }
    int64_t base[32] = {0}, filled[32] = {0};
    for (int64_t s = 0; s < used; s++) count[bucket_of(a->o->buckets, a->o->nbuckets, seq - room[leaves + s])]++;
    for (int b = 1; b < nb; b++) base[b] = base[b - 1] + count[b - 1];
    for (int64_t s = 0; s < used; s++) {
        int b = bucket_of(a->o->buckets, a->o->nbuckets, seq - room[leaves + s]);
        place[s] = base[b] + filled[b]++;
    }
    free(room), room = NULL;
    /* first[e]: sample e's first piece; pieces in sample order, each sample's as placed */
    first = calloc((size_t)used + 1, sizeof *first);
    pieces = malloc((size_t)n * sizeof *pieces);
    if (!first || !pieces) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int64_t i = 0; i < npieces; i++) first[(key[i] = place[key[i]]) + 1]++;
    for (int64_t e = 0; e < used; e++) first[e + 1] += first[e];
    st = ds_write(w, first, (size_t)(used + 1) * sizeof *first, err);
    for (int64_t i = 0; i < npieces; i++) pieces[first[key[i]]++] = order[i];
    if (st == PP_OK) st = ds_write(w, pieces, (size_t)npieces * sizeof *pieces, err);
    *nsamples = used;
done:
    free(order), free(key), free(at), free(room), free(place), free(first), free(pieces);
    return st;
}

pp_status ds_plan_build(void *user, ds_writer *w, int64_t *counts, pp_error *err)
{
    const ds_plan_args *a = user;
    const ds_docs *x = a->x;
    const pp_dataset_options *o = a->o;
    int64_t seq = o->seq, region = 0, npieces = 0, documents = 0, tokens = 0, count[32] = {0}, first[33] = {0};
    int nb = o->nbuckets > 0 ? o->nbuckets : 1, last = nb - 1, pad = o->docs == PP_DOCS_PAD;
    int64_t *per_len = pad ? NULL : calloc((size_t)seq + 1, sizeof *per_len);   /* short pieces by length */
    if (!pad && !per_len) return PP_NOMEM(err);
    pp_status st = ds_write(w, first, (size_t)(nb + 1) * sizeof *first, err);   /* filled in at the end */
    if (st == PP_OK) st = ds_docs_check(x, 0, err);
    if (st == PP_OK) st = ds_write(w, &region, sizeof region, err);
    /* each document's samples of one piece (the region): --pack its full pieces, --pad all
     * its pieces of the last bucket; region_before[k + 1] after document k */
    for (int64_t k = 0, at = ds_docs_first(x, 0); k < x->n && st == PP_OK; k++) {
        if ((st = ds_docs_check(x, k + 1, err)) != PP_OK) break;
        int64_t next = ds_docs_first(x, k + 1), n = next - at, part = n % seq, mine = n / seq;
        at = next;
        documents += n > 0, tokens += n;
        if (part && pad && bucket_of(o->buckets, o->nbuckets, part) == last) mine++;
        else if (part && pad) count[bucket_of(o->buckets, o->nbuckets, part)]++, npieces++;
        else if (part) per_len[part]++, npieces++;
        region += mine;
        st = ds_write(w, &region, sizeof region, err);
    }
    int64_t nexplicit = npieces;
    if (st == PP_OK) st = pad ? place_pad(a, count, npieces, w, err) : place_pack(a, per_len, npieces, count, &nexplicit, w, err);
    free(per_len);
    count[last] += region;   /* the region opens the last bucket */
    for (int b = 0; b < nb; b++) first[b + 1] = first[b] + count[b];
    if (st == PP_OK) st = ds_write_at(w, 0, first, (size_t)(nb + 1) * sizeof *first, err);
    int64_t c[DS_PLAN_NCOUNTS] = {[DS_PLAN_DOCS] = x->n, [DS_PLAN_DOCUMENTS] = documents, [DS_PLAN_TOKENS] = tokens,
                                  [DS_PLAN_SAMPLES] = region + nexplicit, [DS_PLAN_REGION] = region,
                                  [DS_PLAN_EXPLICIT] = nexplicit, [DS_PLAN_PIECES] = npieces, [DS_PLAN_BUCKETS] = nb};
    memcpy(counts, c, sizeof c);
    return st;
}

/* The documents of a token stream: where each starts, from a Megatron .idx (its document
 * index over its sequences' byte pointers) or from a stream's own index, split after each
 * --eos token by one pass over the stream in chunks of bounded memory, written as it goes
 * and cached beside the stream (dataset_cache.c) for every rank and every later job. */
#include "dataset_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Megatron's .idx, after its 34-byte header: int32 lengths [nseq], int64 byte pointers
 * [nseq], int64 document indices [n + 1] (unaligned: read with memcpy) */
static int64_t idx_doc(const ds_docs *x, int64_t k)
{
    int64_t v;
    memcpy(&v, x->idx + 34 + 12 * x->nseq + 8 * (uint64_t)k, sizeof v);
    return v;
}

int64_t ds_docs_first(const ds_docs *x, int64_t k)
{
    if (x->first) return x->first[k];
    int64_t seq = idx_doc(x, k), ptr;
    if (seq < 0 || (uint64_t)seq >= x->nseq) return x->ntok;
    memcpy(&ptr, x->idx + 34 + 4 * x->nseq + 8 * (uint64_t)seq, sizeof ptr);
    return ptr / (int64_t)x->es;
}

pp_status ds_docs_check(const ds_docs *x, int64_t k, pp_error *err)
{
    if (!x->idx) return PP_OK;   /* a stream's: made in order */
    int64_t seq = idx_doc(x, k), at = ds_docs_first(x, k);
    if (seq < 0 || (uint64_t)seq > x->nseq)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': document %lld starts at sequence %lld of %llu", x->path,
                            (long long)k, (long long)seq, (unsigned long long)x->nseq);
    if (at < 0 || at > x->ntok || (k > 0 && at < ds_docs_first(x, k - 1)))
        return pp_error_set(err, PP_ERR_PARSE, "'%s': document %lld starts at token %lld, before the one before it "
                            "or past the %lld tokens", x->path, (long long)k, (long long)at, (long long)x->ntok);
    if (k == x->n && at != x->ntok)
        return pp_error_set(err, PP_ERR_PARSE, "'%s': its document index ends at token %lld of %lld", x->path,
                            (long long)at, (long long)x->ntok);
    return PP_OK;
}

typedef struct scan {
    const pp_dataset *d;
    int file;
    int64_t base, ntok, eos;
    pp_dtype t;
} scan;

/* Whether any of the n tokens (uint16 or uint32: a stream's) at raw is eos: a compare the
 * compiler vectorises in the stored type. */
static int any_eos(const unsigned char *raw, size_t es, int64_t n, int64_t eos)
{
    int any = 0;
    if (es == 2)
        for (int64_t j = 0; j < n; j++) any |= ((const uint16_t *)raw)[j] == (uint16_t)eos;
    else
        for (int64_t j = 0; j < n; j++) any |= ((const uint32_t *)raw)[j] == (uint32_t)eos;
    return any;
}

/* The index: token offsets [n + 1], 0 first, after each eos, and ntok last. The stream is
 * read in chunks of 256 KiB (cache-sized), tested 64 tokens at a time; a block that holds
 * an eos is widened to find where. */
static pp_status build_index(void *user, ds_writer *w, int64_t *counts, pp_error *err)
{
    const scan *x = user;
    enum { CHUNK = 256 << 10, BLOCK = 64 };
    int64_t es = (int64_t)pp_dtype_size(x->t), per = CHUNK / es, n = 0, tok[BLOCK];
    int never = x->eos < 0 || (es < 8 && x->eos >> (8 * es) != 0);   /* no token of this type is eos */
    unsigned char *raw = malloc(CHUNK);
    if (!raw) return PP_NOMEM(err);
    pp_status st = ds_write(w, &n, sizeof n, err);
    posix_fadvise(ds_file_fd(x->d, x->file), 0, 0, POSIX_FADV_SEQUENTIAL);   /* a larger read-ahead */
    for (int64_t i = 0; st == PP_OK && !never && i < x->ntok; i += per) {
        int64_t m = x->ntok - i < per ? x->ntok - i : per;
        st = ds_pread(x->d, x->file, x->base + i * es, (size_t)(m * es), raw, err);
        for (int64_t k = 0; st == PP_OK && k < m; k += BLOCK) {
            int64_t e = m - k < BLOCK ? m - k : BLOCK;
            if (!any_eos(raw + k * es, (size_t)es, e, x->eos)) continue;
            ds_widen(x->t, raw + k * es, e, tok);
            for (int64_t j = 0; j < e && st == PP_OK; j++) {
                int64_t b = i + k + j + 1;
                if (tok[j] == x->eos && b != x->ntok && (st = ds_write(w, &b, sizeof b, err)) == PP_OK) n++;
            }
        }
    }
    if (st == PP_OK && x->ntok > 0 && (st = ds_write(w, &x->ntok, sizeof x->ntok, err)) == PP_OK) n++;
    free(raw);
    counts[0] = n;
    return st;
}

pp_status ds_docs_of_stream(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                            const pp_dataset_options *o, ds_docs *out, pp_error *err)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".eos%lld.docs", (long long)o->eos);
    scan x = {.d = d, .file = file, .base = base, .ntok = ntok, .eos = o->eos, .t = t};
    ds_cache c = {.data = path, .suffix = suffix, .what = "document index", .dir = o->cache_dir,
                  .build = build_index, .user = &x,
                  .key = {1, 0, 0, t, base, ntok, o->eos}};
    PP_CHECK(ds_cache_source(d, file, &c.key[1], &c.key[2], err));
    const int64_t *counts;
    const char *body;
    size_t len;
    PP_CHECK(ds_cache_get(d, &c, &counts, &body, &len, err));
    if (counts[0] < 0 || len != (size_t)(counts[0] + 1) * sizeof(int64_t))
        return pp_error_set(err, PP_ERR_PARSE, "the document index of '%s' holds %zu bytes for %lld documents: remove "
                            "it (it is rebuilt)", path, len, (long long)counts[0]);
    *out = (ds_docs){.n = counts[0], .first = (const int64_t *)body, .ntok = ntok, .es = pp_dtype_size(t),
                     .path = path};
    return PP_OK;
}

/* Which dataset sample each place of the training stream reads: epochs of whole global
 * batches (the samples past the last whole batch wait for the next epoch), optionally in
 * a seeded permutation per epoch that is a pure function of (seed, epoch, index), so
 * every layout and a resumed job read the same global order and no rank stores one. */
#include "dataset_internal.h"

static uint64_t mix64(uint64_t x)   /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A balanced Feistel network over 2^(2h) >= n values, walked until it lands below n
 * (cycle walking: a bijection of [0, 2^(2h)) restricted to [0, n) is one of [0, n)).
 * The domain is below 4n, so a walk takes under four rounds on average. */
uint64_t pp_shuffle_index(uint64_t seed, uint64_t epoch, uint64_t i, uint64_t n)
{
    if (n <= 1 || i >= n) return i;
    int h = 1;
    while (h < 32 && (1ULL << (2 * h)) < n) h++;
    uint64_t mask = (1ULL << h) - 1, key = mix64(seed ^ mix64(epoch + 0x9e3779b97f4a7c15ULL));
    do {
        uint64_t l = i >> h, r = i & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t f = mix64(key + round * 0x632be59bd9b4e019ULL + r) & mask;
            uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        i = l << h | r;
    } while (i >= n);
    return i;
}

void pp_sampler_init(pp_sampler *s, int64_t samples, int64_t batch, int shuffle, uint64_t seed)
{
    s->samples = samples;
    s->batch = batch;
    s->steps_per_epoch = batch > 0 && samples >= batch ? samples / batch : 1;
    s->shuffle = shuffle;
    s->seed = seed;
    s->start = 0;
    s->nbuckets = 0;
    s->bucket_first = NULL;
}

void pp_sampler_set_buckets(pp_sampler *s, int nbuckets, const int64_t *bucket_first)
{
    s->nbuckets = nbuckets;
    s->bucket_first = bucket_first;
    s->steps_per_epoch = 0;
    for (int b = 0; b < nbuckets && s->batch > 0; b++) s->steps_per_epoch += (bucket_first[b + 1] - bucket_first[b]) / s->batch;
}

/* Place `offset` of step's global batch in the stream of samples read since the start
 * of the first run; an epoch is steps_per_epoch x batch of them. */
static int64_t position(const pp_sampler *s, int64_t step, int64_t offset)
{
    return s->start + (step - 1) * s->batch + offset;
}

int64_t pp_sampler_epoch(const pp_sampler *s, int64_t step)
{
    return position(s, step, 0) / (s->steps_per_epoch * s->batch);
}

/* Bucketed: the epoch's j-th batch is batch `*index` of bucket b (the epoch's batches
 * bucket by bucket, taken in a seeded order). */
static int bucket_batch(const pp_sampler *s, int64_t epoch, int64_t j, int64_t *index)
{
    int64_t k = (int64_t)pp_shuffle_index(s->seed ^ 0x5bd1e995ULL, (uint64_t)epoch, (uint64_t)j,
                                          (uint64_t)s->steps_per_epoch);
    int b = 0;
    for (int64_t n; b < s->nbuckets - 1 && k >= (n = (s->bucket_first[b + 1] - s->bucket_first[b]) / s->batch); b++)
        k -= n;
    *index = k;
    return b;
}

int pp_sampler_bucket(const pp_sampler *s, int64_t step)
{
    if (s->nbuckets == 0 || s->steps_per_epoch == 0) return 0;
    int64_t p = position(s, step, 0), per_epoch = s->steps_per_epoch * s->batch, index;
    return bucket_batch(s, p / per_epoch, p % per_epoch / s->batch, &index);
}

int64_t pp_sampler_sample(const pp_sampler *s, int64_t step, int64_t offset)
{
    int64_t per_epoch = s->steps_per_epoch * s->batch, p = position(s, step, offset);
    if (s->nbuckets > 0 && s->steps_per_epoch > 0) {
        int64_t epoch = p / per_epoch, index;
        int b = bucket_batch(s, epoch, p % per_epoch / s->batch, &index);
        int64_t first = s->bucket_first[b], n = s->bucket_first[b + 1] - first, k = index * s->batch + p % s->batch;
        return first + (s->shuffle ? (int64_t)pp_shuffle_index(s->seed + (uint64_t)b, (uint64_t)epoch, (uint64_t)k,
                                                                (uint64_t)n) : k);
    }
    int64_t epoch = p / per_epoch, i = p % per_epoch;
    i %= s->samples;   /* only a batch larger than the dataset wraps */
    return s->shuffle ? (int64_t)pp_shuffle_index(s->seed, (uint64_t)epoch, (uint64_t)i, (uint64_t)s->samples) : i;
}

int64_t pp_sampler_len(const pp_sampler *s, const pp_dataset *d, int64_t step)
{
    return s->nbuckets > 0 ? d->bucket_len[pp_sampler_bucket(s, step)] : 0;
}

pp_status pp_sampler_read(const pp_sampler *s, const pp_dataset *d, const pp_dataset_array *a, int64_t step,
                          int64_t offset, int64_t count, void *dst, pp_error *err)
{
    int64_t per_epoch = s->steps_per_epoch * s->batch, len = pp_sampler_len(s, d, step);
    if (!s->shuffle && position(s, step, offset) % per_epoch + count <= per_epoch)   /* contiguous: one read */
        return pp_dataset_read_len(d, a, pp_sampler_sample(s, step, offset), count, len, dst, err);
    size_t bytes = pp_dataset_sample_bytes(a, len);
    for (int64_t k = 0; k < count; k++)
        PP_CHECK(pp_dataset_read_len(d, a, pp_sampler_sample(s, step, offset + k), 1, len,
                                     (char *)dst + (size_t)k * bytes, err));
    return PP_OK;
}

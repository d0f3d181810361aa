/* Overflow-checked allocation, a monotonic clock, human-readable numbers, CRC32C. */
#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *pp_malloc(size_t n) { return malloc(n ? n : 1); }

void *pp_calloc(size_t count, size_t size)
{
    return calloc(count ? count : 1, size ? size : 1);
}

void *pp_realloc_array(void *p, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    size_t n = count * size;
    return realloc(p, n ? n : 1);
}

char *pp_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

double pp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *pp_format_bytes(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; u++; }
    if (u == 0) snprintf(buf, len, "%.0f B", bytes);
    else snprintf(buf, len, "%.2f %s", bytes, units[u]);
    return buf;
}

const char *pp_format_seconds(double s, char *buf, size_t len)
{
    if (s == 0 || s >= 1) snprintf(buf, len, "%.4g s", s);
    else if (s >= 1e-3) snprintf(buf, len, "%.4g ms", s * 1e3);
    else snprintf(buf, len, "%.4g us", s * 1e6);
    return buf;
}

const char *pp_format_count(double n, char *buf, size_t len)
{
    static const char *const units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (n >= 1000.0 && u < 4) { n /= 1000.0; u++; }
    if (u == 0) snprintf(buf, len, "%.0f", n);
    else snprintf(buf, len, "%.2f%s", n, units[u]);
    return buf;
}

/* CRC32C: the SSE4.2 crc32 instruction where the CPU has it (checkpoints checksum
 * gigabytes, ~8 bytes per cycle there), else a table built once (thread-safe: the
 * checkpoint writer thread calls this too). */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
#if defined(__x86_64__)
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; n--, p++) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
#endif

#if defined(__x86_64__)
/* Three independent chains over three equal blocks of len bytes (a multiple of 8): the
 * crc32 instruction's latency is three times its issue rate, so one chain runs at a
 * third of the speed. Raw (inverted) states in, the blocks' raw states out. */
__attribute__((target("sse4.2"))) static void crc_sse42_x3(uint32_t *s, const uint8_t *p, size_t len)
{
    uint64_t a = s[0], b = s[1], c = s[2];
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x, y, z;
        memcpy(&x, p + i, 8);
        memcpy(&y, p + len + i, 8);
        memcpy(&z, p + 2 * len + i, 8);
        a = __builtin_ia32_crc32di(a, x);
        b = __builtin_ia32_crc32di(b, y);
        c = __builtin_ia32_crc32di(c, z);
    }
    s[0] = (uint32_t)a, s[1] = (uint32_t)b, s[2] = (uint32_t)c;
}
#endif

uint32_t pp_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
#if defined(__x86_64__)
    if (crc_hw && n >= ((size_t)3 << 16)) {
        size_t len = n / 3 / 8 * 8;
        uint32_t s[3] = {~crc, ~0u, ~0u};
        crc_sse42_x3(s, p, len);
        crc = pp_crc32c_combine(pp_crc32c_combine(~s[0], ~s[1], len), ~s[2], len);
        return pp_crc32c(crc, p + 3 * len, n - 3 * len);
    }
    if (crc_hw) return ~crc_sse42(~crc, p, n);
#endif
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* crc of A || B from crc(A), crc(B) and |B|: zlib's method (multiply by x^(8|B|) with a
 * matrix squared per bit of |B|), for the reflected Castagnoli polynomial. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++) sq[n] = gf2_times(mat, mat[n]);
}

uint32_t pp_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
    if (len2 == 0) return crc1;
    uint32_t even[32], odd[32], row = 1;
    odd[0] = 0x82F63B78u;   /* one zero bit */
    for (int n = 1; n < 32; n++, row <<= 1) odd[n] = row;
    gf2_square(even, odd);  /* two zero bits */
    gf2_square(odd, even);  /* four */
    for (;;) {
        gf2_square(even, odd);
        if (len2 & 1) crc1 = gf2_times(even, crc1);
        if (!(len2 >>= 1)) break;
        gf2_square(odd, even);
        if (len2 & 1) crc1 = gf2_times(odd, crc1);
        if (!(len2 >>= 1)) break;
    }
    return crc1 ^ crc2;
}

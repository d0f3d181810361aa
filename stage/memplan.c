/* Static memory planning: buffers with known sizes and lifetimes (op index intervals)
 * get offsets in one arena, reusing memory between buffers that are never live together.
 * Greedy by size, first fit (the usual heuristic; within a few percent of optimal on
 * transformer graphs). */
#include "stage_places.h"

#include <stdlib.h>

static int by_size_desc(const void *a, const void *b)
{
    const mem_interval *x = *(const mem_interval *const *)a, *y = *(const mem_interval *const *)b;
    return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

static int by_offset(const void *a, const void *b)
{
    const mem_interval *x = *(const mem_interval *const *)a, *y = *(const mem_interval *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

#define ALIGN 64

size_t stage_memplan(mem_interval *iv, int n)
{
    if (n <= 0) return 0;
    mem_interval **order = malloc((size_t)n * sizeof *order);
    mem_interval **placed = malloc((size_t)n * sizeof *placed);
    if (!order || !placed) {   /* fall back to no reuse */
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            iv[i].offset = off;
            off += (iv[i].size + ALIGN - 1) / ALIGN * ALIGN;
        }
        free(order);
        free(placed);
        return off;
    }
    for (int i = 0; i < n; i++) order[i] = &iv[i];
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    size_t total = 0;
    int nplaced = 0;
    for (int i = 0; i < n; i++) {
        mem_interval *b = order[i];
        size_t size = (b->size + ALIGN - 1) / ALIGN * ALIGN;
        /* placed buffers are kept sorted by offset; find the first gap that fits */
        size_t off = 0;
        for (int j = 0; j < nplaced; j++) {
            mem_interval *p = placed[j];
            if (p->end < b->start || b->end < p->start) continue;   /* never live together */
            if (p->offset >= off + size) break;
            size_t pend = p->offset + (p->size + ALIGN - 1) / ALIGN * ALIGN;
            if (pend > off) off = pend;
        }
        b->offset = off;
        if (off + size > total) total = off + size;
        placed[nplaced++] = b;
        qsort(placed, (size_t)nplaced, sizeof *placed, by_offset);
    }
    free(order);
    free(placed);
    return total;
}

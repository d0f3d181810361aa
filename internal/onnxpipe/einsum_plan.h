/* Private to kernels/ (graph/'s shape rule reads the parser too): Einsum of one or two
 * operands, parsed once (pp_einsum_parse, header-only) and run as a strided contraction
 * whose element function both devices call: out[e] = sum over the summed labels of
 * X[...] * Y[...]. Backward is the same contraction: dA = contraction of (dZ, B) onto A's
 * labels, dB of (dZ, A) onto B's. Repeated labels within an operand (diagonals) and
 * broadcasting a dim of 1 against a larger one are refused, naming the equation. */
#ifndef PP_KERNELS_EINSUM_PLAN_H
#define PP_KERNELS_EINSUM_PLAN_H

#include <onnxpipe/core.h>
#include <onnxpipe/tensor.h>

#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_EINSUM_LABELS (52 + PP_MAX_RANK)   /* a-z, A-Z, the ellipsis' dims */

/* An equation over operands of known ranks, as label ids (letters 0..51, the k-th dim of
 * the ellipsis, right-aligned, 52 + k). */
typedef struct pp_einsum_eq {
    int nops;
    int nl[2], lab[2][PP_MAX_RANK];
    int nout, out[PP_MAX_RANK];
} pp_einsum_eq;

static inline int pp_einsum_letter(char ch)
{
    return ch >= 'a' && ch <= 'z' ? ch - 'a' : ch >= 'A' && ch <= 'Z' ? 26 + ch - 'A' : -1;
}

/* labels of one term (s .. end) for a tensor of rank (ell: the ellipsis' dims overall;
 * rank < 0: the output, whose ellipsis takes all ell of them); returns the count or -1 */
static inline int pp_einsum_term(const char *s, const char *end, int rank, int ell, int *lab)
{
    int n = 0, letters = 0;
    for (const char *p = s; p < end; p++) letters += pp_einsum_letter(*p) >= 0;
    for (const char *p = s; p < end; p++) {
        if (*p == ' ') continue;
        if (*p == '.') {
            if (end - p < 3 || p[1] != '.' || p[2] != '.') return -1;
            const int e = rank < 0 ? ell : rank - letters;
            if (e < 0 || e > ell) return -1;
            for (int k = ell - e; k < ell; k++) {
                if (n == PP_MAX_RANK) return -1;
                lab[n++] = 52 + k;
            }
            p += 2;
            continue;
        }
        const int l = pp_einsum_letter(*p);
        if (l < 0 || n == PP_MAX_RANK) return -1;
        lab[n++] = l;
    }
    return n;
}

/* Parses eq for nops operands of the given ranks; 0, or -1 with the reason in msg. */
static inline int pp_einsum_parse(const char *eq, int nops, const int *ranks, pp_einsum_eq *q, char *msg, size_t msz)
{
    memset(q, 0, sizeof *q);
    const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + strlen(eq);
    const char *comma = (const char *)memchr(eq, ',', (size_t)(lhs_end - eq));
    const int found = comma ? 2 : 1;
    if (nops < 1 || nops > 2 || found != nops || (comma && memchr(comma + 1, ',', (size_t)(lhs_end - comma - 1)))) {
        snprintf(msg, msz, "equation '%s' with %d operands is not supported (one or two)", eq, nops);
        return -1;
    }
    const char *term[2][2] = {{eq, comma ? comma : lhs_end}, {comma ? comma + 1 : lhs_end, lhs_end}};
    int ell = 0;
    for (int i = 0; i < nops; i++) {
        int letters = 0, dots = 0;
        for (const char *p = term[i][0]; p < term[i][1]; p++) letters += pp_einsum_letter(*p) >= 0, dots += *p == '.';
        if (dots && ranks[i] - letters > ell) ell = ranks[i] - letters;
    }
    q->nops = nops;
    int count[PP_EINSUM_LABELS] = {0};
    for (int i = 0; i < nops; i++) {
        q->nl[i] = pp_einsum_term(term[i][0], term[i][1], ranks[i], ell, q->lab[i]);
        if (q->nl[i] != ranks[i]) {
            snprintf(msg, msz, "equation '%s': term %d does not fit an input of rank %d", eq, i, ranks[i]);
            return -1;
        }
        int seen[PP_EINSUM_LABELS] = {0};
        for (int k = 0; k < q->nl[i]; k++) {
            if (seen[q->lab[i][k]]++) {
                snprintf(msg, msz, "equation '%s': a label repeated within an operand (a diagonal) is not supported",
                         eq);
                return -1;
            }
            count[q->lab[i][k]]++;
        }
    }
    if (arrow) {
        q->nout = pp_einsum_term(arrow + 2, arrow + 2 + strlen(arrow + 2), -1, ell, q->out);
    } else {   /* implicit: the ellipsis, then the letters seen once, in alphabetical order */
        for (int k = 0; k < ell; k++) q->out[q->nout++] = 52 + k;
        for (int l = 0; l < 52 && q->nout < PP_MAX_RANK; l++)
            if (count[l] == 1) q->out[q->nout++] = l;
    }
    int seen[PP_EINSUM_LABELS] = {0};
    for (int k = 0; q->nout >= 0 && k < q->nout; k++)
        if (seen[q->out[k]]++ || !count[q->out[k]]) q->nout = -1;
    if (q->nout < 0) {
        snprintf(msg, msz, "equation '%s': the output names a label twice, or one no input has", eq);
        return -1;
    }
    return 0;
}

/* Each label's size from the operands' dims; 0, or -1 when two disagree (msg says which). */
static inline int pp_einsum_sizes(const char *eq, const pp_einsum_eq *q, const int64_t *const *dims, int64_t *size,
                                  char *msg, size_t msz)
{
    for (int l = 0; l < PP_EINSUM_LABELS; l++) size[l] = -2;
    for (int i = 0; i < q->nops; i++)
        for (int k = 0; k < q->nl[i]; k++) {
            int64_t *s = &size[q->lab[i][k]];
            if (*s != -2 && *s != dims[i][k] && *s >= 0 && dims[i][k] >= 0) {
                snprintf(msg, msz, "equation '%s': a label has sizes %lld and %lld (broadcasting is not supported)", eq,
                         (long long)*s, (long long)dims[i][k]);
                return -1;
            }
            if (*s < 0) *s = dims[i][k];
        }
    return 0;
}

/* ---- the strided contraction ---- */

/* out (rank nout, row-major) = sum over the summed labels of X * Y (Y absent: X alone);
 * strides in elements of X and Y along each output and summed label (0: not theirs) */
typedef struct pp_einsum_map {
    int nout, nsum, has_y;
    int64_t out_dims[PP_MAX_RANK], xo[PP_MAX_RANK], yo[PP_MAX_RANK];
    int64_t sum_dims[2 * PP_MAX_RANK], xs[2 * PP_MAX_RANK], ys[2 * PP_MAX_RANK];
} pp_einsum_map;

static inline PP_HD float pp_einsum_at(const pp_einsum_map *m, const float *x, const float *y, int64_t e)
{
    int64_t ox = 0, oy = 0, idx[2 * PP_MAX_RANK];
    for (int d = m->nout - 1; d >= 0; d--) {
        const int64_t i = e % m->out_dims[d];
        e /= m->out_dims[d];
        ox += i * m->xo[d];
        oy += i * m->yo[d];
    }
    for (int d = 0; d < m->nsum; d++) {
        if (!m->sum_dims[d]) return 0.f;
        idx[d] = 0;
    }
    float acc = 0.f;
    for (;;) {
        acc += m->has_y ? x[ox] * y[oy] : x[ox];
        int d = m->nsum - 1;
        for (; d >= 0; d--) {
            ox += m->xs[d], oy += m->ys[d];
            if (++idx[d] < m->sum_dims[d]) break;
            ox -= idx[d] * m->xs[d], oy -= idx[d] * m->ys[d];
            idx[d] = 0;
        }
        if (d < 0) return acc;
    }
}

/* Einsum node c: the forward map (inputs 0 and 1 onto the output) and the gradient maps of
 * input 0 (dZ and input 1 onto its labels) and input 1 (dZ and input 0), or an error naming
 * the equation. Defined in kernels/einsum_plan.c. */
struct pp_kernel_ctx;
pp_status pp_args_einsum(const struct pp_kernel_ctx *c, pp_einsum_map *fwd, pp_einsum_map *grad, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif

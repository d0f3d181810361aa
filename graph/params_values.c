/* What an initializer's values say about whether it is trained, for files without the export
 * recipe's metadata (graph/params.c asks): the exporter's constants (scalars, fills, tables
 * that are exact functions of positions, rotary frequencies) and its second copies of a
 * parameter (bit for bit, or transposed), which are tied to the parameter they copy. */
#include "graph_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

#define TIE_MIN_EQUAL 1024   /* elements: an equal (not transposed) copy is tied only from this size */

/* Element i of a float initializer as double. */
static double elem(const pp_const_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case PP_DTYPE_F32: return ((const float *)t->data)[i];
    case PP_DTYPE_F64: return ((const double *)t->data)[i];
    default: return 0;   /* 16-bit initializers: read as ordinary values (never scalars or fills in practice) */
    }
}

int graph_constant_by_value(const pp_const_tensor *t)
{
    int64_t n = pp_shape_numel(&t->shape);
    if (n <= 1) return 1;
    for (int64_t i = 0; i < n; i++) {
        double x = elem(t, i);
        if (!isfinite(x) || fabs(x) >= 1e30) return 1;
    }
    return 0;
}

int graph_all_equal(const pp_const_tensor *t)
{
    int64_t n = pp_shape_numel(&t->shape);
    size_t es = pp_dtype_size(t->dtype);
    for (int64_t i = 1; i < n; i++)
        if (memcmp((const char *)t->data + (size_t)i * es, t->data, es)) return 0;
    return 1;
}

/* t as one [R, C] matrix (every dim before the last two is 1), float32 or float64. */
static int as_matrix(const pp_const_tensor *t, int64_t *R, int64_t *C)
{
    int r = t->shape.rank;
    if (r < 2 || (t->dtype != PP_DTYPE_F32 && t->dtype != PP_DTYPE_F64)) return 0;
    for (int k = 0; k < r - 2; k++)
        if (t->shape.dims[k] != 1) return 0;
    *R = t->shape.dims[r - 2];
    *C = t->shape.dims[r - 1];
    return 1;
}

/* Column j of the [R, C] matrix x is a sinusoid of the row p, A cos(p theta + phi): then
 * x[p+1] + x[p-1] = 2 cos(theta) x[p] for every p. Within float32's rounding of the angle
 * p theta (what a table computed as cos(p * inv_freq) carries), which grows with p theta.
 * *theta: the column's angle per row (0 for a zero column). */
static int sinusoid_column(const pp_const_tensor *t, int64_t R, int64_t C, int64_t j, double *theta_out)
{
    double amp = 0, num = 0, den = 0;
    *theta_out = 0;
    for (int64_t p = 0; p < R; p++) amp = fmax(amp, fabs(elem(t, p * C + j)));
    if (amp == 0) return 1;
    for (int64_t p = 1; p + 1 < R; p++) {
        double x = elem(t, p * C + j);
        num += x * (elem(t, (p - 1) * C + j) + elem(t, (p + 1) * C + j));
        den += x * x;
    }
    double c = den > 0 ? num / (2 * den) : 0;   /* cos(theta), least squares over the rows */
    if (fabs(c) > 1 + 1e-6) return 0;
    double theta = acos(fmin(1, fmax(-1, c)));
    for (int64_t p = 1; p + 1 < R; p++) {
        double r = elem(t, (p + 1) * C + j) + elem(t, (p - 1) * C + j) - 2 * c * elem(t, p * C + j);
        if (fabs(r) > amp * 4e-6 * (1 + (double)(p + 1) * theta)) return 0;
    }
    *theta_out = theta;
    return 1;
}

int graph_position_table(const pp_const_tensor *t)
{
    int64_t R, C;
    if (!as_matrix(t, &R, &C) || R < 2 || graph_all_equal(t)) return 0;
    if (t->shape.rank >= 3 && R == C) {   /* [1, .., T, T]: the same value along every diagonal */
        size_t es = pp_dtype_size(t->dtype);
        const char *d = t->data;
        int diagonal = 1;
        for (int64_t i = 0; i + 1 < R && diagonal; i++)
            diagonal = !memcmp(d + (size_t)(i * C) * es, d + (size_t)((i + 1) * C + 1) * es, (size_t)(C - 1) * es);
        if (diagonal) return 1;
    }
    /* A sinusoid needs two equations for its one unknown; slow ones look linear over few rows
     * (sin(p theta) ~ p theta), so one column at least must turn (theta >= 0.1 rad per row:
     * rotary tables and sinusoidal encodings have theta = 1 in their first). */
    if (R < 4) return 0;
    double fastest = 0;
    for (int64_t j = 0; j < C; j++) {
        double theta;
        if (!sinusoid_column(t, R, C, j, &theta)) return 0;
        fastest = fmax(fastest, theta);
    }
    return fastest >= 0.1;
}

int graph_angle_rates(const pp_const_tensor *t)
{
    int64_t n = pp_shape_numel(&t->shape);
    if (n < 2 || (t->dtype != PP_DTYPE_F32 && t->dtype != PP_DTYPE_F64)) return 0;
    for (int k = 0; k < t->shape.rank; k++)
        if (t->shape.dims[k] != 1 && t->shape.dims[k] != n) return 0;
    if (!(elem(t, 0) > 0 && elem(t, 0) <= 1)) return 0;
    for (int64_t i = 1; i < n; i++)
        if (!(elem(t, i) > 0 && elem(t, i) <= elem(t, i - 1))) return 0;
    return 1;
}

/* ---- second copies, tied -------------------------------------------------------- */

/* 1 when b ([n, m]) is a ([m, n]) transposed, bit for bit. */
static int is_transpose(const pp_const_tensor *a, const pp_const_tensor *b)
{
    int64_t m = a->shape.dims[0], n = a->shape.dims[1];
    size_t es = pp_dtype_size(a->dtype);
    const char *x = a->data, *y = b->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            if (memcmp(x + (size_t)(i * n + j) * es, y + (size_t)(j * m + i) * es, es)) return 0;
    return 1;
}

/* How b copies a: 1 bit for bit, 2 transposed, 0 not. A cheap look at a few elements first. */
static int copies(const pp_const_tensor *a, const pp_const_tensor *b)
{
    if (a->dtype != b->dtype || a->nbytes != b->nbytes || !a->nbytes) return 0;
    size_t es = pp_dtype_size(a->dtype), last = a->nbytes - es;
    const char *x = a->data, *y = b->data;
    if (memcmp(x, y, es) || memcmp(x + last, y + last, es)) return 0;   /* both layouts keep the corners */
    if (pp_shape_equal(&a->shape, &b->shape) && pp_shape_numel(&a->shape) >= TIE_MIN_EQUAL &&
        !memcmp(x, y, a->nbytes))
        return 1;
    if (a->shape.rank == 2 && b->shape.rank == 2 && a->shape.dims[0] == b->shape.dims[1] &&
        a->shape.dims[1] == b->shape.dims[0] && a->shape.dims[0] > 1 && a->shape.dims[1] > 1 && is_transpose(a, b))
        return 2;
    return 0;
}

/* A name an exporter made up (TorchScript's "onnx::MatMul_12", dynamo's "val_12"), not a
 * module's parameter name: the copy, where the other is the parameter's. */
static int made_up(const char *name)
{
    if (strstr(name, "::")) return 1;
    if (strncmp(name, "val_", 4)) return 0;
    for (const char *p = name + 4; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return name[4] != 0;
}

/* Makes value `copy` (an initializer) the output of a node that copies `keep`. */
static pp_status make_copy(pp_graph *g, int keep, int copy, int transposed, pp_error *err)
{
    pp_value *c = &g->values[copy];
    for (int i = c->init; i + 1 < g->ninits; i++) {
        g->inits[i] = g->inits[i + 1];
        g->values[g->inits[i].value].init = i;
    }
    g->ninits--;
    c->init = -1;
    c->kind = PP_VALUE_NODE;
    c->is_param = 0;
    c->copy_of = keep + 1;
    char name[512];
    snprintf(name, sizeof name, "%s/tied", c->name);
    const char *in = g->values[keep].name, *out = g->values[copy].name;
    int id;
    PP_CHECK(pp_graph_add_node(g, transposed ? "Transpose" : "Identity", "", name, &in, 1, &out, 1, &id, err));
    if (transposed) {
        const int64_t perm[2] = {1, 0};
        PP_CHECK(pp_graph_set_attr_ints(g, id, "perm", perm, 2, err));
    }
    return PP_OK;
}

pp_status graph_tie_copies(pp_graph *g, const pp_param_rules *rules, int *tied, pp_error *err)
{
    *tied = 0;
    int *cand = malloc(((size_t)g->ninits + 1) * sizeof *cand), n = 0;
    if (!cand) return PP_NOMEM(err);
    for (int i = 0; i < g->ninits; i++) {
        const pp_value *v = &g->values[g->inits[i].value];
        if (v->is_param && !graph_all_equal(&g->inits[i].t)) cand[n++] = g->inits[i].value;
    }
    pp_status st = PP_OK;
    for (int i = 0; i < n && st == PP_OK; i++)
        for (int j = i + 1; j < n && cand[i] >= 0 && st == PP_OK; j++) {
            if (cand[j] < 0) continue;
            int a = cand[i], b = cand[j];
            int how = copies(&g->inits[g->values[a].init].t, &g->inits[g->values[b].init].t);
            if (!how || graph_rule_matches(rules->untie, g->values[a].name, NULL) ||
                graph_rule_matches(rules->untie, g->values[b].name, NULL))
                continue;
            int keep = a, copy = b;   /* the module's name stays; else the first in the file */
            if (made_up(g->values[a].name) && !made_up(g->values[b].name)) keep = b, copy = a;
            st = make_copy(g, keep, copy, how == 2, err);
            if (copy == a) cand[i] = -1;
            else cand[j] = -1;
            ++*tied;
        }
    free(cand);
    return st;
}

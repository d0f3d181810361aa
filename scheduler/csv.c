/* CSV import / export in the text form of torch.distributed.pipelining schedules: one
 * row per rank, one action per cell ("0F1", "1B0", "2I0", "2W0", "0SEND_F1", "1RECV_F1",
 * "1SEND_B0", "0RECV_B0", "1REDUCE_GRADS"), empty cells for idle steps. PyTorch spells
 * the gradient reduction "REDUCE_GRAD": read as REDUCE_GRADS. */
#include "sched_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

/* Longest names first so that "SEND_F" is not read as a stage followed by "S...". */
static const struct {
    const char *name;
    int kind;
    int has_mb;
} tokens[] = {
    {"REDUCE_GRADS", PP_ACT_REDUCE_GRADS, 0}, {"REDUCE_GRAD", PP_ACT_REDUCE_GRADS, 0},
    {"SEND_F", PP_ACT_SEND_ACT, 1},           {"RECV_F", PP_ACT_RECV_ACT, 1},
    {"SEND_B", PP_ACT_SEND_GRAD, 1},          {"RECV_B", PP_ACT_RECV_GRAD, 1},
    {"F", PP_ACT_FORWARD, 1},                 {"B", PP_ACT_BACKWARD, 1},
    {"I", PP_ACT_BACKWARD_INPUT, 1},          {"W", PP_ACT_BACKWARD_WEIGHT, 1},
};
#define NTOKENS ((int)(sizeof tokens / sizeof tokens[0]))
#define MAX_INDEX (1 << 20)

pp_status pp_schedule_write_csv(const pp_schedule *s, FILE *out, int compute_only, pp_error *err)
{
    char a[48];
    for (int r = 0; r < s->pp; r++) {
        int first = 1;
        for (int i = 0; i < s->count[r]; i++) {
            int k = s->actions[r][i].kind;
            if (k == PP_ACT_OPTIMIZER_STEP || (compute_only && !action_is_compute(k))) continue;
            fprintf(out, "%s%s", first ? "" : ",", pp_action_format(&s->actions[r][i], a, sizeof a));
            first = 0;
        }
        fputc('\n', out);
    }
    if (fflush(out) != 0 || ferror(out)) return pp_error_set(err, PP_ERR_IO, "writing the schedule CSV failed");
    return PP_OK;
}

/* Parses one cell ("3SEND_F12") into a (peer-less) action; 0 = empty cell. */
static pp_status parse_cell(const char *cell, pp_action *a, int *empty, const char *where, pp_error *err)
{
    *empty = 0;
    if (!*cell) {
        *empty = 1;
        return PP_OK;
    }
    if (!strcmp(cell, "OPTIMIZER_STEP")) {
        pp_action o = {PP_ACT_OPTIMIZER_STEP, -1, -1, -1};
        *a = o;
        return PP_OK;
    }
    const char *p = cell;
    char *end;
    if (!isdigit((unsigned char)*p)) goto bad;
    long stage = strtol(p, &end, 10);
    p = end;
    for (int t = 0; t < NTOKENS; t++) {
        size_t n = strlen(tokens[t].name);
        if (strncmp(p, tokens[t].name, n) != 0) continue;
        p += n;
        long mb = -1;
        if (tokens[t].has_mb) {
            if (!isdigit((unsigned char)*p)) goto bad;
            mb = strtol(p, &end, 10);
            p = end;
        }
        if (*p || stage >= MAX_INDEX || mb >= MAX_INDEX) goto bad;
        pp_action r = {tokens[t].kind, (int32_t)stage, (int32_t)mb, -1};
        *a = r;
        return PP_OK;
    }
bad:
    return pp_error_set(err, PP_ERR_PARSE,
                        "%s: cannot read action '%s' (expected [stage][F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B]"
                        "[microbatch] or [stage]REDUCE_GRADS, e.g. 2F0; UNSHARD/RESHARD and WAIT_* are not supported)",
                        where, cell);
}

/* Copies the cell text between p and q into buf without spaces and quotes. */
static void clean_cell(const char *p, const char *q, char *buf, size_t len)
{
    while (p < q && (isspace((unsigned char)*p) || *p == '"')) p++;
    while (q > p && (isspace((unsigned char)q[-1]) || q[-1] == '"')) q--;
    size_t n = (size_t)(q - p) < len - 1 ? (size_t)(q - p) : len - 1;
    memcpy(buf, p, n);
    buf[n] = 0;
}

typedef struct rows {
    pp_action **a;   /* [nrows][n[r]] */
    int *n, *cap, nrows, rowcap;
} rows;

static void rows_free(rows *t)
{
    for (int r = 0; r < t->nrows; r++) free(t->a[r]);
    free(t->a);
    free(t->n);
    free(t->cap);
}

static int rows_push(rows *t, int r, pp_action a)
{
    if (r == t->nrows) {
        if (t->nrows == t->rowcap) {
            int c = t->rowcap ? 2 * t->rowcap : 16;
            pp_action **na = pp_realloc_array(t->a, (size_t)c, sizeof *na);
            if (!na) return 0;
            t->a = na;
            int *nn = pp_realloc_array(t->n, (size_t)c, sizeof *nn);
            if (!nn) return 0;
            t->n = nn;
            int *nc = pp_realloc_array(t->cap, (size_t)c, sizeof *nc);
            if (!nc) return 0;
            t->cap = nc;
            t->rowcap = c;
        }
        t->a[r] = NULL;
        t->n[r] = t->cap[r] = 0;
        t->nrows++;
    }
    if (a.kind < 0) return 1;  /* only opens the row */
    if (t->n[r] == t->cap[r]) {
        int c = t->cap[r] ? 2 * t->cap[r] : 64;
        pp_action *na = pp_realloc_array(t->a[r], (size_t)c, sizeof *na);
        if (!na) return 0;
        t->a[r] = na;
        t->cap[r] = c;
    }
    t->a[r][t->n[r]++] = a;
    return 1;
}

static pp_status read_rows(FILE *in, rows *t, pp_error *err)
{
    char *line = NULL, cell[64], where[64];
    size_t lcap = 0;
    ssize_t len;
    int lineno = 0, blank_run = 0;
    pp_status st = PP_OK;
    while ((len = getline(&line, &lcap, in)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) {
            blank_run++;
            continue;
        }
        for (; blank_run > 0; blank_run--) {  /* blank rows in the middle are ranks with nothing */
            pp_action none = {-1, 0, 0, 0};
            if (!rows_push(t, t->nrows, none)) goto nomem;
        }
        int r = t->nrows, col = 0;
        pp_action none = {-1, 0, 0, 0};
        if (!rows_push(t, r, none)) goto nomem;
        for (const char *p = line;; col++) {
            const char *q = strchr(p, ',');
            if (!q) q = p + strlen(p);
            clean_cell(p, q, cell, sizeof cell);
            snprintf(where, sizeof where, "line %d, cell %d", lineno, col + 1);
            pp_action a = {0, 0, 0, -1};
            int empty;
            PP_CHECK_GOTO(parse_cell(cell, &a, &empty, where, err), st, done);
            if (!empty && !rows_push(t, r, a)) goto nomem;
            if (!*q) break;
            p = q + 1;
        }
    }
    if (t->nrows == 0) st = pp_error_set(err, PP_ERR_PARSE, "no ranks (the file is empty)");
    goto done;
nomem:
    st = PP_NOMEM(err);
done:
    free(line);
    return st;
}

/* Stage -> rank from where each stage's actions are; all stages must appear. */
static pp_status place_stages(const rows *t, int *S, int *m, int **stage_rank, pp_error *err)
{
    int ms = -1, mm = -1;
    for (int r = 0; r < t->nrows; r++)
        for (int i = 0; i < t->n[r]; i++) {
            if (t->a[r][i].stage > ms) ms = t->a[r][i].stage;
            if (t->a[r][i].microbatch > mm) mm = t->a[r][i].microbatch;
        }
    if (ms < 0 || mm < 0) return pp_error_set(err, PP_ERR_PARSE, "no FORWARD/BACKWARD actions");
    int *sr = pp_malloc((size_t)(ms + 1) * sizeof *sr);
    if (!sr) return PP_NOMEM(err);
    for (int s = 0; s <= ms; s++) sr[s] = -1;
    for (int r = 0; r < t->nrows; r++)
        for (int i = 0; i < t->n[r]; i++) {
            int s = t->a[r][i].stage;
            if (s < 0) continue;
            if (sr[s] >= 0 && sr[s] != r) {
                int other = sr[s];
                free(sr);
                return pp_error_set(err, PP_ERR_PARSE, "stage %d has actions on rank %d and on rank %d", s,
                                    other, r);
            }
            sr[s] = r;
        }
    for (int s = 0; s <= ms; s++)
        if (sr[s] < 0) {
            free(sr);
            return pp_error_set(err, PP_ERR_PARSE, "stage %d appears on no rank (stages 0..%d)", s, ms);
        }
    *S = ms + 1;
    *m = mm + 1;
    *stage_rank = sr;
    return PP_OK;
}

static int peer_of(const pp_schedule *s, const pp_action *a)
{
    int d = (a->kind == PP_ACT_SEND_ACT || a->kind == PP_ACT_RECV_GRAD) ? 1
            : (a->kind == PP_ACT_RECV_ACT || a->kind == PP_ACT_SEND_GRAD) ? -1 : 0;
    int t = a->stage + d;
    return (d == 0 || t < 0 || t >= s->num_stages) ? -1 : s->stage_rank[t];
}

pp_status pp_schedule_read_csv(FILE *in, const char *name, pp_schedule **out, pp_error *err)
{
    rows t = {0};
    int S = 0, m = 0, *stage_rank = NULL, has_comm = 0, has_reduce = 0;
    pp_schedule *s = NULL;
    pp_status st = PP_OK;
    *out = NULL;
    PP_CHECK_GOTO(read_rows(in, &t, err), st, done);
    PP_CHECK_GOTO(place_stages(&t, &S, &m, &stage_rank, err), st, done);
    PP_CHECK_GOTO(pp_schedule_new(t.nrows, S, m, stage_rank, &s, err), st, done);
    for (int r = 0; r < t.nrows; r++)
        for (int i = 0; i < t.n[r]; i++) {
            has_comm |= action_is_comm(t.a[r][i].kind);
            has_reduce |= t.a[r][i].kind == PP_ACT_REDUCE_GRADS;
        }
    s->lowered = has_comm;
    for (int r = 0; r < t.nrows; r++)
        for (int i = 0; i < t.n[r]; i++) {
            pp_action a = t.a[r][i];
            /* A compute-only file gets its REDUCE_GRADS / OPTIMIZER_STEP from lowering. */
            if (!has_comm && !action_is_compute(a.kind)) continue;
            a.peer = peer_of(s, &a);
            PP_CHECK_GOTO(pp_schedule_append(s, r, a, err), st, done);
        }
    if (!has_comm) {
        PP_CHECK_GOTO(pp_schedule_lower(s, err), st, done);
    } else if (!has_reduce) {
        PP_CHECK_GOTO(pp_schedule_finish(s, err), st, done);
    } else {
        pp_action opt = {PP_ACT_OPTIMIZER_STEP, -1, -1, -1};
        for (int r = 0; r < s->pp; r++)
            if (s->count[r] == 0 || s->actions[r][s->count[r] - 1].kind != PP_ACT_OPTIMIZER_STEP)
                PP_CHECK_GOTO(pp_schedule_append(s, r, opt, err), st, done);
    }
    *out = s;
    s = NULL;
done:
    if (st != PP_OK) pp_error_prefix(err, "reading schedule '%s': ", name);
    pp_schedule_destroy(s);
    free(stage_rank);
    rows_free(&t);
    return st;
}

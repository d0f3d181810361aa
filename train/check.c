/* Checks at start: every way the dataset can fail to fit the model is found before step 1
 * on every rank (each rank holds the whole graph and opens the whole dataset, reading no
 * sample: the labels' range is checked as they are read), with a message that says what
 * to change; and the symbolic dims the data binds (a sequence length the arrays already
 * say). The job's (what counts as a token is model_io.c's). */
#include "job_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

static const char *per_sample(pp_dtype t, const pp_shape *s, int skip, char *buf, size_t len)
{
    pp_shape ps = {.rank = s->rank - skip};
    for (int k = 0; k < ps.rank; k++) ps.dims[k] = s->dims[k + skip];
    char sh[96];
    snprintf(buf, len, "%s %s", pp_dtype_name(t), pp_shape_format(&ps, sh, sizeof sh));
    return buf;
}

/* One model input against its array. */
static pp_status check_input(const pp_value *v, const pp_dataset *d, const char *opt, const char *dir, int64_t mb,
                             pp_error *err)
{
    char want[128], have[128], names[512] = "";
    const pp_dataset_array *a = pp_dataset_find(d, v->name);
    if (!a) {
        for (int i = 0; i < pp_dataset_num_arrays(d); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "", pp_dataset_array_at(d, i)->name);
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s '%s' has no array '%s' for the model's input '%s' (%s per "
                            "sample); it has %s: add the array, or name the model's input like the data",
                            opt, dir, v->name, v->name, per_sample(v->dtype, &v->shape, 1, want, sizeof want), names);
    }
    per_sample(v->dtype, &v->shape, 1, want, sizeof want);
    per_sample(a->dtype, &a->shape, 0, have, sizeof have);
    int same = a->dtype == v->dtype && a->shape.rank + 1 == v->shape.rank;
    for (int k = 0; same && k < a->shape.rank; k++) same = a->shape.dims[k] == v->shape.dims[k + 1];
    if (!same) {
        char full[128];
        return pp_error_set(err, PP_ERR_SHAPE, "%s '%s': array '%s' is %s per sample, but the model's input '%s' is "
                            "%s per microbatch of %lld (%s per sample): write the data with that dtype and shape "
                            "(e.g. 'onnxpipe data text --seq'), or bind the model's dims with --dim", opt, dir,
                            a->name, have, v->name, per_sample(v->dtype, &v->shape, 0, full, sizeof full),
                            (long long)mb, want);
    }
    if (v->shape.rank < 1 || v->shape.dims[0] != mb)
        return pp_error_set(err, PP_ERR_SHAPE, "the model's input '%s' has a fixed batch of %lld but the microbatch "
                            "is %lld: export with a dynamic batch axis or use --batch/--microbatches so that the "
                            "microbatch is %lld", v->name, (long long)(v->shape.rank ? v->shape.dims[0] : 1),
                            (long long)mb, (long long)(v->shape.rank ? v->shape.dims[0] : 1));
    return PP_OK;
}

/* Labels named by --labels that the model does not declare: int64, shaped like the logits
 * without the batch and class dims. */
static pp_status check_free_labels(const pp_graph *g, const train_io *io, const pp_dataset *d, const char *opt,
                                   const char *dir, pp_error *err)
{
    const pp_dataset_array *a = pp_dataset_find(d, io->labels);
    const pp_shape *L = &g->values[io->logits].shape;
    pp_shape want = {.rank = L->rank - 2};
    for (int k = 0; k < want.rank; k++) want.dims[k] = L->dims[k + 1];
    int same = a && a->dtype == PP_DTYPE_I64 && a->shape.rank == want.rank;
    for (int k = 0; same && k < want.rank; k++) same = a->shape.dims[k] == want.dims[k];
    if (same) return PP_OK;
    char sh[96], have[128] = "missing";
    if (a) per_sample(a->dtype, &a->shape, 0, have, sizeof have);
    return pp_error_set(err, PP_ERR_SHAPE, "%s '%s': the labels array '%s' must be int64 %s per sample (the logits "
                        "'%s' without batch and class dims), but it is %s: write labels of that shape, or name "
                        "another array with --labels", opt, dir, io->labels, pp_shape_format(&want, sh, sizeof sh),
                        g->values[io->logits].name, have);
}

/* Every label read in [0, classes) or ignore_index: checked as the samples are read
 * (pp_dataset_read), so a bad token fails the step that reads it, naming its file and byte,
 * and start-up reads nothing of a corpus of any size. */
static pp_status check_label_range(const pp_graph *g, const train_io *io, pp_dataset *d, const char *opt,
                                   const char *dir, pp_error *err)
{
    const pp_dataset_array *a = pp_dataset_find(d, io->labels);
    if (!a || a->dtype != PP_DTYPE_I64 || io->classes < 1) return PP_OK;
    char who[4200];
    snprintf(who, sizeof who, "%s '%s'", opt, dir);
    return ds_check_labels(d, a, io->classes, io->ignore_index, who, g->values[io->logits].name, err);
}

/* A packed or padded dataset's inputs the model takes beyond input_ids, labels and
 * position_ids: a mask input (its name holds "mask") gets the samples' block-diagonal
 * causal mask ([.., seq, seq] per sample) or their padding mask ([seq]). Packed documents
 * that can see each other (a padding mask only, or no mask and no position_ids) are said. Padding and document ends are
 * labelled with the loss's ignore_index. */
static pp_status bind_pack(const pp_graph *g, const train_io *io, pp_dataset *d, const char *opt, pp_error *err)
{
    if (io->ignore_index == INT64_MIN)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%s %s: the model's loss ignores no label, so padding and "
                            "document ends would count: export its SoftmaxCrossEntropyLoss with an ignore_index, or "
                            "give the loss with --loss cross_entropy --logits --labels", opt, ds_docs_flag(pp_dataset_docs(d)));
    ds_pack_set_ignore(d, io->ignore_index);
    const char *mask2d = NULL, *mask = NULL;
    int positions = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        if (v->nconsumers == 0) continue;
        positions |= !strcmp(v->name, "position_ids");
        if (pp_dataset_find(d, v->name) || !strstr(v->name, "mask")) continue;
        pp_shape ps = {.rank = v->shape.rank - 1};
        for (int k = 0; k < ps.rank; k++) ps.dims[k] = v->shape.dims[k + 1];
        PP_CHECK(ds_pack_add_mask(d, v->name, &ps, v->dtype, err));
        *(ps.rank == 1 ? &mask2d : &mask) = v->name;
    }
    if (pp_dataset_docs(d) == PP_DOCS_PACK && !mask && mask2d)
        pp_log(PP_LOG_WARN, "%s --pack: the model's '%s' is a [batch, seq] padding mask, so the documents packed into "
               "one sequence attend to each other: export it with a 4-D mask to keep them apart (docs/exporting.md)",
               opt, mask2d);
    else if (pp_dataset_docs(d) == PP_DOCS_PACK && !mask && !positions)
        pp_log(PP_LOG_WARN, "%s --pack: the model takes neither an attention mask nor position_ids, so the documents "
               "packed into one sequence attend to each other and their positions run on", opt);
    return PP_OK;
}

pp_status train_check_data(const pp_graph *g, const pp_loss_spec *loss, pp_dataset *d, const char *opt,
                           const char *dir, int64_t mb, train_io *io, pp_error *err)
{
    train_find_io(g, loss, io);
    if (pp_dataset_docs(d) != PP_DOCS_WINDOWS) PP_CHECK(bind_pack(g, io, d, opt, err));
    int labels_declared = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        int is_labels = io->labels && !strcmp(v->name, io->labels);
        labels_declared |= is_labels;
        if (v->nconsumers > 0 || is_labels) PP_CHECK(check_input(v, d, opt, dir, mb, err));
    }
    if (io->labels && io->logits >= 0 && !labels_declared) PP_CHECK(check_free_labels(g, io, d, opt, dir, err));
    if (io->labels && io->logits >= 0) PP_CHECK(check_label_range(g, io, d, opt, dir, err));
    return PP_OK;
}

/* Adds binding {name, value} to dims (names owned, freed by train_dims_free). */
static pp_status add_dim(pp_dim_binding **dims, int *n, const char *name, int64_t value, pp_error *err)
{
    pp_dim_binding *p = realloc(*dims, ((size_t)*n + 1) * sizeof *p);
    if (!p) return PP_NOMEM(err);
    *dims = p;
    if (!(p[*n].name = strdup(name))) return PP_NOMEM(err);
    p[(*n)++].value = value;
    return PP_OK;
}

static const pp_dim_binding *find_dim(const pp_dim_binding *dims, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(dims[i].name, name)) return &dims[i];
    return NULL;
}

/* Binds input v's open dims from array a (same rank per sample); from[] names the array
 * that bound each data-bound dim (after the first nuser, which --dim gave). */
static pp_status bind_from(const pp_value *v, const pp_dataset_array *a, const char *skip, pp_dim_binding **dims,
                           int *n, int nuser, const char **from, char *note, size_t len, pp_error *err)
{
    for (int k = 1; k < v->shape.rank; k++) {
        const char *sym = v->shape.syms[k];
        if (v->shape.dims[k] >= 0 || !sym || (skip && !strcmp(sym, skip))) continue;
        const int64_t have = a->shape.dims[k - 1];
        const pp_dim_binding *b = find_dim(*dims, *n, sym);
        if (b && b < *dims + nuser && b->value != have)
            return pp_error_set(err, PP_ERR_SHAPE, "--dim %s=%lld, but --data array '%s' has %lld along dim %d ('%s') "
                                "of the model's input '%s': make them agree (or leave --dim %s out: the data binds "
                                "it)", sym, (long long)b->value, a->name, (long long)have, k, sym, v->name, sym);
        if (b && b->value != have)
            return pp_error_set(err, PP_ERR_SHAPE, "--data array '%s' binds %s = %lld, but array '%s' has %lld along "
                                "dim %d ('%s') of the model's input '%s': make the arrays agree", from[b - *dims], sym,
                                (long long)b->value, a->name, (long long)have, k, sym, v->name);
        if (b) continue;
        from[*n] = a->name;
        PP_CHECK(add_dim(dims, n, sym, have, err));
        snprintf(note + strlen(note), len - strlen(note), "%s%s = %lld (from --data %s)", *n - 1 > nuser ? ", " : "",
                 sym, (long long)have, a->name);
    }
    return PP_OK;
}

pp_status train_data_dims(const pp_trainer_config *c, const pp_dataset *d, pp_dim_binding **dims, int *ndims,
                          char *note, size_t note_len, pp_error *err)
{
    *dims = NULL;
    *ndims = 0;
    note[0] = 0;
    for (int i = 0; i < c->ndims; i++) PP_CHECK(add_dim(dims, ndims, c->dims[i].name, c->dims[i].value, err));
    const char *bucketed = c->nbuckets ? c->bucket_dim ? c->bucket_dim : "seq" : NULL;   /* each step binds it */
    pp_graph *g = NULL;   /* the model's inputs with their symbolic dims: loaded unbound, unfolded */
    pp_graph_options unbound = {.no_fold = 1, .allow_unknown_dims = 1, .params = c->params};
    PP_CHECK(pp_graph_load(c->model, &unbound, &g, err));
    const char **from = calloc((size_t)c->ndims + (size_t)g->ninputs * PP_MAX_RANK + 1, sizeof *from);
    pp_status st = from ? PP_OK : PP_NOMEM(err);
    for (int i = 0; st == PP_OK && i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        const pp_dataset_array *a = pp_dataset_find(d, v->name);
        if (a && a->shape.rank + 1 == v->shape.rank)   /* else train_check_data says what is wrong */
            st = bind_from(v, a, bucketed, dims, ndims, c->ndims, from, note, note_len, err);
    }
    free(from);
    pp_graph_destroy(g);
    return st;
}

void train_dims_free(pp_dim_binding *dims, int ndims)
{
    for (int i = 0; i < ndims; i++) free((char *)dims[i].name);
    free(dims);
}

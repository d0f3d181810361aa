/* Sequence buckets (pp_trainer_config.buckets): the model loaded once per length of its
 * symbolic dim, partitioned once at the largest and split the same way at the others,
 * and the bucket the following steps run at. The driver builds every bucket's stages
 * over one copy of the parameters (pp_driver_config.shapes). */
#include <onnxpipe/trainer.h>
#include <onnxpipe/graph_ir.h>

#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *dim_name(const pp_trainer_config *c) { return c->bucket_dim ? c->bucket_dim : "seq"; }

static int has_dim(const pp_graph *g, const char *name)
{
    for (int i = 0; i < g->ninputs; i++) {
        const pp_shape *s = &g->values[g->inputs[i]].shape;
        for (int d = 0; d < s->rank; d++)
            if (s->syms[d] && !strcmp(s->syms[d], name)) return 1;
    }
    return 0;
}

static pp_status check_buckets(const pp_trainer_config *c, pp_error *err)
{
    if (!c->model)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "sequence buckets need a model file with a symbolic dim '%s' "
                            "(a graph in memory has one length)", dim_name(c));
    for (int k = 0; k < c->nbuckets; k++)
        if (c->buckets[k] < 1 || (k && c->buckets[k] <= c->buckets[k - 1]))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "--seq-buckets: bucket %d is %lld; give lengths >= 1 in "
                                "ascending order", k, (long long)c->buckets[k]);
    for (int i = 0; i < c->ndims; i++)
        if (!strcmp(c->dims[i].name, dim_name(c)))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "--dim %s=%lld and sequence buckets bind the same dim; drop "
                                "the --dim", c->dims[i].name, (long long)c->dims[i].value);
    return PP_OK;
}

pp_status train_load_buckets(pp_trainer *t, const pp_graph_options *gopt, pp_error *err)
{
    const pp_trainer_config *c = &t->c;
    PP_CHECK(check_buckets(c, err));
    int n = c->nbuckets;
    t->bucket_g = calloc((size_t)n, sizeof *t->bucket_g);
    t->bucket_part = calloc((size_t)n, sizeof *t->bucket_part);
    pp_dim_binding *dims = malloc(((size_t)c->ndims + 1) * sizeof *dims);
    pp_status st = t->bucket_g && t->bucket_part && dims ? PP_OK : PP_NOMEM(err);
    for (int k = n - 1; k >= 0 && st == PP_OK; k--) {   /* the largest first: a model too large fails early */
        if (c->ndims) memcpy(dims, c->dims, (size_t)c->ndims * sizeof *dims);
        dims[c->ndims] = (pp_dim_binding){.name = dim_name(c), .value = c->buckets[k]};
        pp_graph_options o = *gopt;
        o.dims = dims;
        o.ndims = c->ndims + 1;
        st = pp_graph_load(c->model, &o, &t->bucket_g[k], err);
        if (st != PP_OK) pp_error_prefix(err, "bucket %s=%lld: ", dim_name(c), (long long)c->buckets[k]);
        else if (!has_dim(t->bucket_g[k], dim_name(c)))
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "sequence buckets: no input of '%s' has a dim named '%s'; "
                              "name the model's sequence dim", c->model, dim_name(c));
    }
    free(dims);
    if (t->bucket_g) t->owned = t->bucket_g[n - 1];   /* freed as the model is */
    return st;
}

pp_status train_partition_buckets(pp_trainer *t, pp_error *err)
{
    int n = t->c.nbuckets;
    t->bucket_part[n - 1] = t->part;
    pp_partition_options o = {.balance = PP_BALANCE_UNIFORM, .same_split = t->part};
    for (int k = 0; k < n - 1; k++) {
        pp_status st = pp_partition_create(t->bucket_g[k], t->part->nstages, &o, &t->bucket_part[k], err);
        if (st != PP_OK)
            return pp_error_prefix(err, "bucket %s=%lld, split as %s=%lld: ", dim_name(&t->c),
                                   (long long)t->c.buckets[k], dim_name(&t->c), (long long)t->c.buckets[n - 1]);
    }
    t->bucket = n - 1;
    return PP_OK;
}

void train_free_buckets(pp_trainer *t)
{
    for (int k = 0; k < t->c.nbuckets - 1; k++) {   /* the largest's are t->part and t->owned */
        if (t->bucket_part) pp_partition_destroy(t->bucket_part[k]);
        if (t->bucket_g) pp_graph_destroy(t->bucket_g[k]);
    }
    free(t->bucket_part);
    free(t->bucket_g);
}

pp_status pp_trainer_set_bucket(pp_trainer *t, int bucket, pp_error *err)
{
    if (bucket < 0 || bucket >= (t->c.nbuckets ? t->c.nbuckets : 1))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "bucket %d out of range (0..%d)", bucket,
                            (t->c.nbuckets ? t->c.nbuckets : 1) - 1);
    if (!t->c.nbuckets || bucket == t->bucket) return PP_OK;
    PP_CHECK(pp_driver_set_shape(t->drv, bucket, err));
    t->bucket = bucket;
    t->g = t->bucket_g[bucket];
    train_find_io(t->g, &t->c.loss, &t->io);
    for (int i = 0; i < pp_driver_num_stages(t->drv); i++)   /* what checkpoints read: that bucket's stages */
        t->ck.stages[i] = pp_driver_stage(t->drv, i);
    return PP_OK;
}

int pp_trainer_bucket(const pp_trainer *t) { return t->c.nbuckets ? t->bucket : 0; }

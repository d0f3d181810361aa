/* Running a stage: forward of a microbatch into its stash slot, backward (whole or in
 * input / weight halves) accumulating gradients from the loss's seed, with what recompute
 * dropped run again first; what each kernel call is given and needs for itself. */
#include "stage_run.h"

#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

static pp_tensor tensor_of(const tslot *t, void *data)
{
    pp_tensor x;
    x.dtype = t->dtype;
    x.rank = t->rank;
    memcpy(x.dims, t->dims, sizeof x.dims);
    x.data = data;
    return x;
}

static pp_status check_slot(const pp_stage *s, int slot, pp_error *err)
{
    if (slot < 0 || slot >= s->opt.slots)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "stash slot %d out of range (0..%d)", slot, s->opt.slots - 1);
    return PP_OK;
}

#define MAX_IO 16

/* Where a call's tensor t (or its gradient) is in slot; slot -1 is planning (stage_op_work_bytes):
 * a placeholder where the call would get data, NULL where it would not. */
static char planned;
static void *call_data(pp_stage *s, int slot, int t, int grad)
{
    if (slot >= 0) return grad ? stage_grad_data(s, slot, t) : stage_tensor_data(s, slot, t);
    return grad && !s->t[t].needs_grad ? NULL : &planned;
}

/* Whether backward of op reads its forward input k (stage_run.h). */
int stage_op_saves_in(const pp_stage *s, const stage_op *op, int k)
{
    const pp_op_info *info = pp_op_get(op->op);
    if (!(info->saves_in >> k & 1)) return 0;
    if (!(info->saves_for_other >> k & 1)) return 1;
    for (int j = 0; j < op->nin; j++)
        if (j != k && op->in[j] >= 0 && pp_op_input_differentiable(op->op, j) && s->t[op->in[j]].needs_grad) return 1;
    return 0;
}


/* Fills the kernel context of op o for slot; in backward, inputs and outputs the kernel
 * did not ask to keep are passed as NULL (their memory may hold another tensor now). */
static pp_status make_ctx(pp_stage *s, int o, int slot, int backward, pp_kernel_ctx *c, pp_tensor *in,
                          pp_tensor *out, int64_t step, int64_t mb, pp_error *err)
{
    stage_op *op = &s->ops[o];
    if (op->nin > MAX_IO || op->nout > MAX_IO)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' has more than %d inputs or outputs", op->name, MAX_IO);
    for (int k = 0; k < op->nin; k++) {
        memset(&in[k], 0, sizeof in[k]);
        if (op->in[k] < 0) continue;
        const tslot *t = &s->t[op->in[k]];
        int keep = !backward || stage_op_saves_in(s, op, k) || t->at.loc == LOC_PARAM ||
                   t->at.loc == LOC_PARAM16 || t->at.loc == LOC_CONST;
        in[k] = tensor_of(t, keep ? call_data(s, slot, op->in[k], 0) : NULL);
    }
    for (int k = 0; k < op->nout; k++) {
        memset(&out[k], 0, sizeof out[k]);
        if (op->out[k] < 0) continue;
        const tslot *t = &s->t[op->out[k]];
        int keep = !backward || (pp_op_get(op->op)->saves_out >> k & 1);
        out[k] = tensor_of(t, keep ? call_data(s, slot, op->out[k], 0) : NULL);
    }
    *c = (pp_kernel_ctx){
        .node = op->name, .op = op->op, .op_type = op->op_type, .opset = s->g->opset, .attrs = op->attrs,
        .nattrs = op->nattrs, .in = in, .nin = op->nin, .host_in = op->host_in, .out = out, .nout = op->nout,
        .aux = op->aux_bytes && slot >= 0 ? stage_ptr(s, slot, op->aux) : NULL, .dev = s->dev,
        .training = s->opt.training,
        .rng = {s->opt.seed, (uint64_t)step, (uint64_t)(s->opt.first_sample + mb * s->opt.microbatch),
                (uint64_t)(op->node >= 0 ? op->node : s->g->nnodes), (uint64_t)s->opt.microbatch},
    };
    /* what the kernel needs for itself: the device's work memory, reserved at creation */
    if (slot >= 0 && op->work_bytes) c->work = pp_device_work(s->dev, &c->work_size);
    return PP_OK;
}

/* BatchNormalization in training mode returns its updated running mean and variance
 * as outputs 1 and 2; they become the node's running-stat inputs for the next step. */
static pp_status keep_running_stats(pp_stage *s, int o, const pp_tensor *in, const pp_tensor *out, pp_error *err)
{
    const stage_op *op = &s->ops[o];
    if (op->op != PP_OP_BATCH_NORMALIZATION || op->nin < 5 || op->nout < 3) return PP_OK;
    for (int k = 1; k <= 2; k++) {
        if (!out[k].data || op->in[k + 2] < 0 || s->t[op->in[k + 2]].at.loc != LOC_CONST) continue;
        PP_CHECK(pp_device_copy(s->dev, in[k + 2].data, out[k].data, pp_tensor_nbytes(&out[k]), err));
    }
    return PP_OK;
}

/* Runs forward op o of slot (rerun: as recompute does, no BatchNorm running-stat update) with
 * the RNG key of (step, microbatch). */
static pp_status run_forward_op(pp_stage *s, int o, int slot, int64_t step, int64_t microbatch, int rerun,
                                pp_error *err)
{
    pp_tensor in[MAX_IO], out[MAX_IO];
    pp_kernel_ctx c;
    PP_CHECK(make_ctx(s, o, slot, 0, &c, in, out, step, microbatch, err));
    int t0 = 0;
    if (s->prof) PP_CHECK(stage_profile_begin(s, &t0, err));
    pp_status st = s->ops[o].k->forward(&c, err);
    if (s->prof && st == PP_OK) st = stage_profile_add(s, o, NULL, rerun, t0, err);
    if (s->progress) s->progress(s->progress_user);
    if (st != PP_OK)
        return pp_error_prefix(err, "step %lld, microbatch %lld%s: ", (long long)step, (long long)microbatch,
                               rerun ? " (recomputing before backward)" : "");
    /* the statistics move once, in the microbatch's first forward */
    if (s->opt.training && !rerun) PP_CHECK(keep_running_stats(s, o, in, out, err));
    return PP_OK;
}

/* The 16-bit copy of the parameters (precision.c) brought up to date, before a forward. */
static pp_status refresh_params16(pp_stage *s, pp_error *err)
{
    if (!s->param16_buf || !s->param16_stale) return PP_OK;
    PP_CHECK(pp_kernel_convert(s->dev, s->param16_buf, s->opt.precision, s->param_buf, PP_DTYPE_F32, s->param_elems,
                               err));
    s->param16_stale = 0;
    return PP_OK;
}


pp_status pp_stage_forward(pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err)
{
    PP_CHECK(check_slot(s, slot, err));
    PP_CHECK(refresh_params16(s, err));
    s->slot_step[slot] = step;
    s->slot_mb[slot] = microbatch;
    s->recomp_owner = -1;   /* until every op, so the whole arena, has run for this slot */
    for (int o = 0; o < s->nops; o++) PP_CHECK(run_forward_op(s, o, slot, step, microbatch, 0, err));
    /* a training forward leaves what backward reads in the arena: no recompute when the
     * slot's backward comes next (the last stage's 1F1B) */
    s->recomp_owner = s->opt.training ? slot : -1;
    /* outputs that pass through from an input share its memory: nothing to copy */
    return PP_OK;
}

/* Bit k: input k's gradient is one op o is the first to write (not received ones, not
 * parameters, which are zeroed once per step). */
static unsigned first_touched(const pp_stage *s, int o)
{
    const stage_op *op = &s->ops[o];
    int b = s->nops - 1 - o;
    unsigned mask = 0;
    for (int k = 0; k < op->nin && k < MAX_IO; k++) {
        if (op->in[k] < 0) continue;
        int t = stage_base(s, op->in[k]);
        const tslot *ts = &s->t[t];
        if (ts->needs_grad && !ts->grad_received && ts->grad.loc != LOC_PARAM && ts->first_bw == b) mask |= 1u << k;
    }
    return mask;
}

/* Of the first-touched inputs, those the kernel may assign instead of add to (the ctx's
 * grad_fresh): it gets their whole gradient (not a smaller view), and once (an input
 * read twice gets two additions). The others are zeroed here. */
static pp_status fresh_or_zero(pp_stage *s, int o, int slot, unsigned first, const pp_tensor *gin, unsigned *fresh,
                               pp_error *err)
{
    const stage_op *op = &s->ops[o];
    *fresh = 0;
    for (int k = 0; k < op->nin && k < MAX_IO; k++) {
        if (!(first >> k & 1)) continue;
        int t = stage_base(s, op->in[k]), once = 1;
        for (int j = 0; j < op->nin; j++) once &= j == k || op->in[j] < 0 || op->in[j] != op->in[k];
        if ((op->k->caps & PP_KCAP_ASSIGNS_FRESH) && gin && gin[k].data && once && s->t[op->in[k]].nbytes == s->t[t].nbytes) {
            *fresh |= 1u << k;
            continue;
        }
        PP_CHECK(pp_device_memset(s->dev, stage_grad_data(s, slot, t), 0, s->t[t].nbytes, err));
    }
    return PP_OK;
}

/* Where op o's input k's gradient goes instead of its own place (a later use of a parameter:
 * uses.c), or NULL. */
static void *use_grad(pp_stage *s, int o, int k)
{
    const stage_op *op = &s->ops[o];
    return op->grad_at && op->grad_at[k] >= 0 ? s->grad_buf + op->grad_at[k] : NULL;
}


/* The gradients a backward call of op o gets (make_ctx's slot convention): of its outputs,
 * and of the inputs asked for (weights, activations or both). */
static void make_grads(pp_stage *s, int o, int slot, int want_act, int want_weight, pp_tensor *gout, pp_tensor *gin)
{
    const stage_op *op = &s->ops[o];
    for (int k = 0; k < op->nout; k++) {
        memset(&gout[k], 0, sizeof gout[k]);
        if (op->out[k] >= 0) gout[k] = tensor_of(&s->t[op->out[k]], call_data(s, slot, op->out[k], 1));
    }
    for (int k = 0; k < op->nin; k++) {
        memset(&gin[k], 0, sizeof gin[k]);
        if (op->in[k] < 0 || !pp_op_input_differentiable(op->op, k)) continue;
        const tslot *t = &s->t[op->in[k]];
        int is_param = t->param >= 0;
        if (((is_param && want_weight) || (!is_param && want_act)) && t->grad_of < 0) {   /* alias: already holds it */
            void *use = slot >= 0 ? use_grad(s, o, k) : NULL;
            gin[k] = tensor_of(t, use ? use : call_data(s, slot, op->in[k], 1));
            if (is_param) gin[k].dtype = PP_DTYPE_F32;   /* a 16-bit weight copy's gradient is the fp32 master's */
        }
    }
}

size_t stage_op_work_bytes(pp_stage *s, int o)
{
    const stage_op *op = &s->ops[o];
    pp_tensor in[MAX_IO], out[MAX_IO], gout[MAX_IO], gin[MAX_IO];
    pp_kernel_ctx c;
    if (!op->k->work_bytes || make_ctx(s, o, -1, 0, &c, in, out, 0, 0, &(pp_error){0}) != PP_OK) return 0;
    size_t n = op->k->work_bytes(&c, NULL, NULL);
    if (op->backward && op->k->backward) {
        make_ctx(s, o, -1, 1, &c, in, out, 0, 0, &(pp_error){0});
        make_grads(s, o, -1, op->has_act, op->has_weight, gout, gin);
        const size_t b = op->k->work_bytes(&c, gout, gin);
        n = b > n ? b : n;
    }
    return n;
}

/* Recompute (recompute.c marked the ops): backward of slot reads the arena; fill it with the
 * slot's tensors unless it holds them (the slot's forward or a re-run was the last to write
 * it). With zero-bubble schedules a weight half can find the arena taken by other slots since
 * its input half: it runs again. */
static pp_status recompute(pp_stage *s, int slot, pp_backward_part part, pp_error *err)
{
    if (s->opt.recompute == PP_RECOMPUTE_NONE || s->recomp_owner == slot) return PP_OK;
    double t0 = pp_now();
    s->recomp_owner = -1;
    for (int o = 0; o < s->nops; o++)
        if (s->ops[o].rerun)
            PP_CHECK(run_forward_op(s, o, slot, s->slot_step[slot], s->slot_mb[slot], 1, err));
    s->recomp_owner = slot;
    s->recomp_stats.runs++;
    s->recomp_stats.weight_reruns += part == PP_BACKWARD_WEIGHT;
    s->recomp_stats.seconds += pp_now() - t0;
    return PP_OK;
}

/* The slot's seed (loss.c says the convention) written as the loss's gradient, where
 * backward starts. */
static pp_status seed_backward(pp_stage *s, int slot, pp_error *err)
{
    if (s->loss_t < 0) return PP_OK;
    float *g = stage_grad_data(s, slot, s->loss_t);
    if (s->seeds) {   /* the driver's, on the device: seed x loss_scale rounded once, as below */
        PP_CHECK(pp_device_copy(s->dev, g, s->seeds + s->slot_mb[slot], sizeof(float), err));
        return s->loss_scale != 1.0f ? pp_kernel_scale(s->dev, g, 1, s->loss_scale, err) : PP_OK;
    }
    float seed = s->slot_seed[slot] * s->loss_scale;
    return pp_device_copy_from_host(s->dev, g, &seed, sizeof(float), err);
}


static pp_status run_backward_op(pp_stage *s, int o, int slot, int want_act, int want_weight, unsigned first,
                                 pp_error *err)
{
    stage_op *op = &s->ops[o];
    pp_tensor in[MAX_IO], out[MAX_IO], gout[MAX_IO], gin[MAX_IO];
    pp_kernel_ctx c;
    PP_CHECK(make_ctx(s, o, slot, 1, &c, in, out, s->slot_step[slot], s->slot_mb[slot], err));
    make_grads(s, o, slot, want_act, want_weight, gout, gin);
    PP_CHECK(fresh_or_zero(s, o, slot, first, gin, &c.grad_fresh, err));
    int t0 = 0;
    if (s->prof) PP_CHECK(stage_profile_begin(s, &t0, err));
    pp_status st = op->k->backward(&c, gout, gin, err);
    if (s->prof && st == PP_OK) st = stage_profile_add(s, o, gin, 0, t0, err);
    if (st != PP_OK) return pp_error_prefix(err, "backward of node '%s': ", op->name);
    return PP_OK;
}

pp_status pp_stage_backward(pp_stage *s, int slot, pp_backward_part part, pp_error *err)
{
    PP_CHECK(check_slot(s, slot, err));
    if (s->opt.whole_backward && part != PP_BACKWARD_FULL)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "backward part %d of a stage planned with whole_backward (its "
                            "weight half's gradients are not kept): plan it with whole_backward = 0", (int)part);
    PP_CHECK(recompute(s, slot, part, err));
    int act = part & PP_BACKWARD_INPUT, weight = part & PP_BACKWARD_WEIGHT;
    /* every gradient is received, seeded (the loss) or made by the first op writing it */
    if (act) PP_CHECK(seed_backward(s, slot, err));
    int done = 0;
    for (int o = s->nops - 1; o >= 0; o--) {
        stage_op *op = &s->ops[o];
        if (!op->backward) continue;
        unsigned first = act ? first_touched(s, o) : 0, none;
        int a = act && op->has_act, w = weight && op->has_weight;
        if (a || w)
            PP_CHECK(run_backward_op(s, o, slot, a, w, first, err));
        else
            PP_CHECK(fresh_or_zero(s, o, slot, first, NULL, &none, err));
        if (w && s->hook) s->hook(s->hook_user, ++done);
        if (s->progress) s->progress(s->progress_user);
    }
    return PP_OK;
}

void pp_stage_set_grad_hook(pp_stage *s, pp_stage_grad_hook fn, void *user)
{
    s->hook = fn;
    s->hook_user = user;
}

void pp_stage_set_progress_hook(pp_stage *s, pp_stage_progress_hook fn, void *user)
{
    s->progress = fn;
    s->progress_user = user;
}

int pp_stage_param_ready(const pp_stage *s, int i) { return i >= 0 && i < s->nparams ? s->param_ready[i] : 0; }

/* First non-finite element of a float tensor in the slot's memory, or -1 (a 16-bit one
 * is widened into scratch memory first). */
static pp_status nonfinite_at(pp_stage *s, const pp_tensor *t, int64_t *bad, pp_error *err)
{
    *bad = -1;
    int64_t n = pp_tensor_numel(t);
    if (!t->data || !pp_dtype_is_float(t->dtype) || t->dtype == PP_DTYPE_F64) return PP_OK;
    if (t->dtype == PP_DTYPE_F32) return pp_kernel_find_nonfinite(s->dev, t->data, n, bad, err);
    float *wide;
    PP_CHECK(pp_device_alloc(s->dev, (size_t)n * sizeof(float) + 1, (void **)&wide, err));
    pp_status st = pp_kernel_convert(s->dev, wide, PP_DTYPE_F32, t->data, t->dtype, n, err);
    if (st == PP_OK) st = pp_kernel_find_nonfinite(s->dev, wide, n, bad, err);
    pp_device_free(s->dev, wide);
    return st;
}

pp_status pp_stage_diagnose(pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err)
{
    PP_CHECK(check_slot(s, slot, err));
    s->recomp_owner = -1;   /* it writes the arena */
    pp_error found = {0};
    int64_t bad;
    for (int i = 0; i < s->ninputs; i++) {
        pp_tensor t = tensor_of(&s->t[s->input_t[i]], stage_tensor_data(s, slot, s->input_t[i]));
        PP_CHECK(nonfinite_at(s, &t, &bad, err));
        if (bad >= 0 && found.status == PP_OK)   /* the first finding is kept */
            pp_error_set(&found, PP_ERR_NUMERIC, "step %lld, microbatch %lld: input '%s' of the stage holds NaN or "
                         "Inf (element %lld)%s", (long long)step, (long long)microbatch, s->inputs[i].name,
                         (long long)bad, s->inputs[i].is_data ? "" : "; it comes from the previous stage");
    }
    /* every op runs, so the outputs a later stage gets are this forward's */
    pp_tensor in[MAX_IO], out[MAX_IO];
    pp_kernel_ctx c;
    for (int o = 0; o < s->nops; o++) {
        PP_CHECK(make_ctx(s, o, slot, 0, &c, in, out, step, microbatch, err));
        PP_CHECK(s->ops[o].k->forward(&c, err));
        for (int k = 0; k < s->ops[o].nout && found.status == PP_OK; k++) {
            PP_CHECK(nonfinite_at(s, &out[k], &bad, err));
            if (bad < 0) continue;
            const int v = s->t[s->ops[o].out[k]].value;
            pp_error_set(&found, PP_ERR_NUMERIC, "step %lld, microbatch %lld: node '%s' (%s) produced NaN or Inf in "
                         "'%s' (element %lld)", (long long)step, (long long)microbatch, s->ops[o].name,
                         s->ops[o].op_type, v >= 0 ? s->g->values[v].name : "the loss", (long long)bad);
        }
    }
    if (found.status == PP_OK) return PP_OK;
    if (err) *err = found;
    return PP_ERR_NUMERIC;
}

/* The calibration as a file: JSON written through the core writer and read back with the
 * core reader (format "onnxpipe-calibration", version 1), the table it prints, and its
 * lifecycle. A missing or mistyped field is an error naming the file and the field. */
#include "planner_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/report_json.h>
#include <onnxpipe/stage_lib.h>

#define FORMAT "onnxpipe-calibration"
#define VERSION 1

void calib_free_points(pp_calibration *c)
{
    for (int i = 0; i < c->npoints; i++) {
        for (int k = 0; k < c->points[i].nops; k++) free(c->points[i].ops[k].type);
        free(c->points[i].ops);
    }
    free(c->points);
    c->points = NULL;
    c->npoints = 0;
}

void pp_calibration_destroy(pp_calibration *c)
{
    if (!c) return;
    calib_free_points(c);
    free(c->model);
    free(c);
}

uint64_t pp_calibration_model_hash(const pp_calibration *c)
{
    return c ? c->model_hash : 0;
}

int pp_calibration_has_precision(const pp_calibration *c, pp_dtype p)
{
    if (p == 0) p = PP_DTYPE_F32;
    for (int i = 0; c && i < c->npoints; i++)
        if (c->points[i].precision == p) return 1;
    return 0;
}

void pp_calibration_write_json(const pp_calibration *c, pp_json *j)
{
    char hash[32];
    snprintf(hash, sizeof hash, "%016" PRIx64, c->model_hash);
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "format", FORMAT);
    pp_json_int(j, "version", VERSION);
    pp_json_string(j, "model", c->model ? c->model : "");
    pp_json_string(j, "model_hash", hash);
    pp_json_string(j, "host", c->host);
    pp_json_string(j, "device", c->device);
    pp_json_string(j, "optimizer", c->optimizer);
    pp_json_int(j, "stages_timed", c->stages_timed);
    pp_json_int(j, "stages_of", c->stages_of);
    pp_json_double(j, "memcpy_gbps", c->memcpy_gbps);
    pp_json_double(j, "optimizer_s_per_param", c->optimizer_s_per_param);
    pp_json_begin_array(j, "points");
    for (int i = 0; i < c->npoints; i++) {
        const calib_point *p = &c->points[i];
        pp_json_begin_object(j, NULL);
        pp_json_string(j, "precision", pp_precision_name(p->precision));
        pp_json_int(j, "microbatch", p->microbatch);
        pp_json_begin_array(j, "ops");
        for (int k = 0; k < p->nops; k++) {
            const calib_op *o = &p->ops[k];
            pp_json_begin_object(j, NULL);
            pp_json_string(j, "op", o->type);
            pp_json_double(j, "calls", o->calls);
            pp_json_double(j, "flops", o->flops);
            pp_json_double(j, "bytes", o->bytes);
            pp_json_double(j, "forward_s", o->forward_s);
            pp_json_double(j, "backward_s", o->backward_s);
            pp_json_end_object(j);
        }
        pp_json_end_array(j);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_end_object(j);
}

pp_status pp_calibration_save(const pp_calibration *c, const char *path, pp_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "calibration path too long: '%s'", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot write calibration '%s': %s", tmp, strerror(errno));
    pp_json j;
    pp_json_init(&j, f, 1);
    pp_calibration_write_json(c, &j);
    pp_json_finish(&j);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return pp_error_set(err, PP_ERR_IO, "writing calibration '%s' failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        pp_status st = pp_error_set(err, PP_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        remove(tmp);
        return st;
    }
    return PP_OK;
}

/* A member of obj of type t, or NULL after setting err naming file and key. */
static const pp_jvalue *need(const pp_jvalue *obj, const char *key, pp_jtype t, const char *path, const char *where,
                             pp_error *err)
{
    const pp_jvalue *v = pp_json_get(obj, key);
    if (!v || v->type != t)
        pp_error_set(err, PP_ERR_PARSE, "calibration '%s': %s\"%s\" is %s", path, where, key,
                     v ? "of the wrong type" : "missing");
    return v && v->type == t ? v : NULL;
}

static int finite_nonneg(double x)
{
    return x >= 0 && x < 1e300;
}

pp_status calib_from_json(const pp_jvalue *root, const char *path, pp_calibration **out, pp_error *err)
{
    *out = NULL;
    const pp_jvalue *v;
    if (root->type != PP_JOBJ) return pp_error_set(err, PP_ERR_PARSE, "calibration '%s': not a JSON object", path);
    if (!(v = need(root, "format", PP_JSTR, path, "", err))) return err->status;
    if (strcmp(v->str, FORMAT))
        return pp_error_set(err, PP_ERR_PARSE, "calibration '%s': format '%s', expected '%s'", path, v->str, FORMAT);
    if (!(v = need(root, "version", PP_JNUM, path, "", err))) return err->status;
    if (v->num != VERSION)
        return pp_error_set(err, PP_ERR_PARSE, "calibration '%s': version %g, this onnxpipe reads %d", path, v->num,
                            VERSION);
    pp_calibration *c = pp_calloc(1, sizeof *c);
    if (!c) return PP_NOMEM(err);
    pp_status st = PP_OK;
    const pp_jvalue *model = need(root, "model", PP_JSTR, path, "", err), *hash, *mc, *opt, *points;
    if (!model || !(hash = need(root, "model_hash", PP_JSTR, path, "", err)) ||
        !(mc = need(root, "memcpy_gbps", PP_JNUM, path, "", err)) ||
        !(opt = need(root, "optimizer_s_per_param", PP_JNUM, path, "", err)) ||
        !(points = need(root, "points", PP_JARR, path, "", err))) {
        st = err->status;
        goto fail;
    }
    if (!(c->model = pp_strdup(model->str))) goto nomem;
    c->model_hash = strtoull(hash->str, NULL, 16);
    c->memcpy_gbps = mc->num;
    c->optimizer_s_per_param = opt->num;
    const pp_jvalue *s;
    if ((s = pp_json_get(root, "host")) && s->type == PP_JSTR) snprintf(c->host, sizeof c->host, "%s", s->str);
    if ((s = pp_json_get(root, "device")) && s->type == PP_JSTR) snprintf(c->device, sizeof c->device, "%s", s->str);
    if ((s = pp_json_get(root, "optimizer")) && s->type == PP_JSTR)
        snprintf(c->optimizer, sizeof c->optimizer, "%s", s->str);
    if ((s = pp_json_get(root, "stages_timed")) && s->type == PP_JNUM) c->stages_timed = (int)s->num;
    if ((s = pp_json_get(root, "stages_of")) && s->type == PP_JNUM) c->stages_of = (int)s->num;
    if (!(c->memcpy_gbps > 0 && c->memcpy_gbps < 1e9) || !finite_nonneg(c->optimizer_s_per_param)) {
        st = pp_error_set(err, PP_ERR_PARSE, "calibration '%s': memcpy_gbps %g or optimizer_s_per_param %g out of range",
                          path, c->memcpy_gbps, c->optimizer_s_per_param);
        goto fail;
    }
    if (points->n < 1) {
        st = pp_error_set(err, PP_ERR_PARSE, "calibration '%s': no points", path);
        goto fail;
    }
    if (!(c->points = pp_calloc((size_t)points->n, sizeof *c->points))) goto nomem;
    for (int i = 0; i < points->n; i++) {
        const pp_jvalue *p = &points->items[i], *prec, *mb, *ops;
        char where[48];
        snprintf(where, sizeof where, "points[%d].", i);
        if (p->type != PP_JOBJ || !(prec = need(p, "precision", PP_JSTR, path, where, err)) ||
            !(mb = need(p, "microbatch", PP_JNUM, path, where, err)) || !(ops = need(p, "ops", PP_JARR, path, where, err))) {
            st = p->type != PP_JOBJ ? pp_error_set(err, PP_ERR_PARSE, "calibration '%s': points[%d] is not an object",
                                                   path, i)
                                    : err->status;
            goto fail;
        }
        calib_point *pt = &c->points[c->npoints++];
        if (!pp_precision_parse(prec->str, &pt->precision) || !(mb->num >= 1 && mb->num < 1e15)) {
            st = pp_error_set(err, PP_ERR_PARSE, "calibration '%s': %sprecision '%s' / microbatch %g not valid", path,
                              where, prec->str, mb->num);
            goto fail;
        }
        pt->microbatch = (int64_t)mb->num;
        if (!(pt->ops = pp_calloc((size_t)ops->n + 1, sizeof *pt->ops))) goto nomem;
        for (int k = 0; k < ops->n; k++) {
            const pp_jvalue *o = &ops->items[k], *name;
            static const char *const keys[] = {"calls", "flops", "bytes", "forward_s", "backward_s"};
            snprintf(where, sizeof where, "points[%d].ops[%d].", i, k);
            if (o->type != PP_JOBJ || !(name = need(o, "op", PP_JSTR, path, where, err))) {
                st = o->type != PP_JOBJ ? pp_error_set(err, PP_ERR_PARSE, "calibration '%s': %s is not an object", path,
                                                       where)
                                        : err->status;
                goto fail;
            }
            calib_op *co = &pt->ops[pt->nops++];
            if (!(co->type = pp_strdup(name->str))) goto nomem;
            double *dst[] = {&co->calls, &co->flops, &co->bytes, &co->forward_s, &co->backward_s};
            for (int q = 0; q < 5; q++) {
                const pp_jvalue *x = need(o, keys[q], PP_JNUM, path, where, err);
                if (!x) {
                    st = err->status;
                    goto fail;
                }
                if (!finite_nonneg(x->num)) {
                    st = pp_error_set(err, PP_ERR_PARSE, "calibration '%s': %s%s = %g, expected a number >= 0", path,
                                      where, keys[q], x->num);
                    goto fail;
                }
                *dst[q] = x->num;
            }
        }
    }
    *out = c;
    return PP_OK;
nomem:
    st = PP_NOMEM(err);
fail:
    pp_calibration_destroy(c);
    return st;
}

pp_status pp_calibration_load(const char *path, pp_calibration **out, pp_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot read calibration '%s': %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    pp_status st = PP_OK;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *grown = realloc(text, cap);
            if (!grown) {
                st = PP_NOMEM(err);
                break;
            }
            text = grown;
        }
        size_t n = fread(text + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
    }
    if (st == PP_OK && ferror(f)) st = pp_error_set(err, PP_ERR_IO, "reading calibration '%s' failed", path);
    fclose(f);
    pp_jvalue *root = NULL;
    if (st == PP_OK) {
        text[len] = 0;
        st = pp_json_parse(text, &root, err);
        if (st != PP_OK) pp_error_prefix(err, "calibration '%s': ", path);
    }
    if (st == PP_OK) st = calib_from_json(root, path, out, err);
    pp_json_free(root);
    free(text);
    return st;
}

void pp_calibration_print(const pp_calibration *c, FILE *out)
{
    fprintf(out, "calibration of '%s' on %s (%s): %d of %d stage(s) timed, optimizer %s %.3g ns/parameter, memcpy "
                 "%.1f GB/s\n", c->model ? c->model : "?", c->host, c->device, c->stages_timed, c->stages_of,
            c->optimizer, c->optimizer_s_per_param * 1e9, c->memcpy_gbps);
    for (int i = 0; i < c->npoints; i++) {
        const calib_point *p = &c->points[i];
        double f = 0, b = 0, fl = 0;
        for (int k = 0; k < p->nops; k++) f += p->ops[k].forward_s, b += p->ops[k].backward_s, fl += p->ops[k].flops;
        fprintf(out, "  %-4s microbatch %-5lld forward %9.3f ms  backward %9.3f ms  %7.2f GFLOP/s forward\n",
                pp_precision_name(p->precision), (long long)p->microbatch, 1e3 * f, 1e3 * b, f > 0 ? fl / f * 1e-9 : 0);
    }
    if (c->npoints < 1) return;
    const calib_point *p = &c->points[c->npoints - 1];
    fprintf(out, "  op types at %s microbatch %lld:\n  %-24s %7s %11s %11s %10s\n", pp_precision_name(p->precision),
            (long long)p->microbatch, "op", "calls", "forward ms", "backward ms", "GFLOP/s");
    for (int k = 0; k < p->nops; k++) {
        const calib_op *o = &p->ops[k];
        char gf[32] = "-";
        if (o->flops > 0 && o->forward_s > 0) snprintf(gf, sizeof gf, "%.2f", o->flops / o->forward_s * 1e-9);
        fprintf(out, "  %-24s %7.0f %11.3f %11.3f %10s\n", o->type, o->calls, 1e3 * o->forward_s, 1e3 * o->backward_s,
                gf);
    }
}

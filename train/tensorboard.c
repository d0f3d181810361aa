/* TensorBoard event files without TensorFlow: Event protobufs (train/tensorboard.proto,
 * TensorBoard's field numbers, protoc-c) in TFRecord framing: length (uint64 LE), masked
 * CRC32C of the length, data, masked CRC32C of the data. */
#include <onnxpipe/core_util.h>
#include "tensorboard.h"

#include "tensorboard.pb-c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct pp_tb_writer {
    FILE *f;
    char path[4096];
};

uint32_t pp_tb_masked_crc(const void *data, size_t n)
{
    uint32_t c = pp_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static pp_status write_event(pp_tb_writer *w, Tensorboard__Event *ev, pp_error *err)
{
    size_t n = tensorboard__event__get_packed_size(ev);
    unsigned char stack[1024], *buf = n + 16 <= sizeof stack ? stack : malloc(n + 16);
    if (!buf) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a TensorBoard event");
    put_le(buf, n, 8);
    put_le(buf + 8, pp_tb_masked_crc(buf, 8), 4);
    tensorboard__event__pack(ev, buf + 12);
    put_le(buf + 12 + n, pp_tb_masked_crc(buf + 12, n), 4);
    int ok = fwrite(buf, 1, n + 16, w->f) == n + 16;
    if (buf != stack) free(buf);
    return ok ? PP_OK : pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
}

pp_status pp_tb_open(const char *dir, pp_tb_writer **out, pp_error *err)
{
    *out = NULL;
    if (mkdir(dir, 0755) && errno != EEXIST)
        return pp_error_set(err, PP_ERR_IO, "--logdir '%s': cannot create it: %s", dir, strerror(errno));
    pp_tb_writer *w = calloc(1, sizeof *w);
    if (!w) return PP_NOMEM(err);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d", dir, (long long)time(NULL), host,
             (int)getpid());
    if (!(w->f = fopen(w->path, "wb"))) {
        pp_status st = pp_error_set(err, PP_ERR_IO, "--logdir: cannot create '%s': %s", w->path, strerror(errno));
        free(w);
        return st;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    pp_status st = write_event(w, &ev, err);
    if (st == PP_OK) st = pp_tb_flush(w, err);
    if (st != PP_OK) {
        pp_tb_close(w, NULL);
        return st;
    }
    *out = w;
    return PP_OK;
}

const char *pp_tb_path(const pp_tb_writer *w) { return w->path; }

/* One event at step holding the n values. */
static pp_status write_values(pp_tb_writer *w, int64_t step, Tensorboard__Summary__Value **vals, size_t n,
                              pp_error *err)
{
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = n;
    sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(w, &ev, err);
}

#define MAX_SCALARS 256

pp_status pp_tb_scalars(pp_tb_writer *w, int64_t step, int n, const char *const *tags, const double *values,
                        pp_error *err)
{
    if (n > MAX_SCALARS) return pp_error_set(err, PP_ERR_INVALID_ARG, "%d scalars in one event (at most %d)", n,
                                             MAX_SCALARS);
    Tensorboard__Summary__Value v[MAX_SCALARS], *pv[MAX_SCALARS];
    for (int i = 0; i < n; i++) {
        tensorboard__summary__value__init(&v[i]);
        v[i].tag = (char *)tags[i];
        v[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        v[i].simple_value = (float)values[i];
        pv[i] = &v[i];
    }
    return write_values(w, step, pv, (size_t)n, err);
}

pp_status pp_tb_text(pp_tb_writer *w, const char *tag, int64_t step, const char *text, pp_error *err)
{
    Tensorboard__SummaryMetadata__PluginData plugin = TENSORBOARD__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    plugin.plugin_name = "text";
    Tensorboard__SummaryMetadata meta = TENSORBOARD__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    Tensorboard__TensorShapeProto shape = TENSORBOARD__TENSOR_SHAPE_PROTO__INIT;
    ProtobufCBinaryData s = {strlen(text), (uint8_t *)text};
    Tensorboard__TensorProto t = TENSORBOARD__TENSOR_PROTO__INIT;
    t.dtype = 7;   /* DT_STRING */
    t.tensor_shape = &shape;
    t.n_string_val = 1;
    t.string_val = &s;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT, *pv = &v;
    v.tag = (char *)tag;
    v.metadata = &meta;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR;
    v.tensor = &t;
    return write_values(w, step, &pv, 1, err);
}

pp_status pp_tb_write_histogram(pp_tb_writer *w, const char *tag, int64_t step, const pp_tb_histogram *h, pp_error *err)
{
    Tensorboard__HistogramProto hp = TENSORBOARD__HISTOGRAM_PROTO__INIT;
    hp.min = h->min;
    hp.max = h->max;
    hp.num = h->num;
    hp.sum = h->sum;
    hp.sum_squares = h->sum_squares;
    hp.n_bucket_limit = hp.n_bucket = (size_t)h->nbuckets;
    hp.bucket_limit = (double *)h->limits;
    hp.bucket = (double *)h->counts;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT, *pv = &v;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO;
    v.histo = &hp;
    return write_values(w, step, &pv, 1, err);
}

pp_status pp_tb_flush(pp_tb_writer *w, pp_error *err)
{
    if (w && fflush(w->f)) return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
    return PP_OK;
}

pp_status pp_tb_close(pp_tb_writer *w, pp_error *err)
{
    if (!w) return PP_OK;
    pp_status st = PP_OK;
    if (fclose(w->f)) st = pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
    free(w);
    return st;
}

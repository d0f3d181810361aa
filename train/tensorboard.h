/* Private to train/: TensorBoard event files, written by the job's metrics (metrics.c) and
 * histograms (histogram.c). */
#ifndef PP_TENSORBOARD_H
#define PP_TENSORBOARD_H

#include <onnxpipe/core.h>

#include <stddef.h>
#include <stdint.h>

/* ---- TensorBoard event files ---------------------------------------------------
 * DIR/events.out.tfevents.<time>.<host>.<pid>: TFRecord-framed Event protobufs with
 * TensorBoard's field numbers, readable by TensorBoard and its EventAccumulator. */
typedef struct pp_tb_writer pp_tb_writer;
/* Creates DIR when missing, the file, and its file_version event. Local. The caller frees it
 * with pp_tb_close; the path belongs to w. */
pp_status pp_tb_open(const char *dir, pp_tb_writer **out, pp_error *err);
const char *pp_tb_path(const pp_tb_writer *w);
/* One event at step with n scalar values (simple_value, stored as float32). Local. */
pp_status pp_tb_scalars(pp_tb_writer *w, int64_t step, int n, const char *const *tags, const double *values,
                               pp_error *err);
/* A text summary (the text plugin's string tensor). Local. */
pp_status pp_tb_text(pp_tb_writer *w, const char *tag, int64_t step, const char *text, pp_error *err);
/* A histogram: counts[i] values in (limits[i-1], limits[i]] (the first from -inf). */
typedef struct pp_tb_histogram {
    double min, max, num, sum, sum_squares;
    int nbuckets;
    const double *limits, *counts;
} pp_tb_histogram;
/* Writing a histogram, flushing and closing (close frees w, accepts NULL): Local. */
pp_status pp_tb_write_histogram(pp_tb_writer *w, const char *tag, int64_t step, const pp_tb_histogram *h,
                                       pp_error *err);
pp_status pp_tb_flush(pp_tb_writer *w, pp_error *err);
pp_status pp_tb_close(pp_tb_writer *w, pp_error *err);   /* accepts NULL */
/* TFRecord's checksum: CRC32C rotated right by 15 plus 0xa282ead8. Local. Thread-safe. */
uint32_t pp_tb_masked_crc(const void *data, size_t n);

#endif

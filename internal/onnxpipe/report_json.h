/* The JSON forms of a partition preview and a calibration (the CLI's --json output and
 * the calibration file), written with core_util.h's pp_json (internal tier). */
#ifndef ONNXPIPE_REPORT_JSON_H
#define ONNXPIPE_REPORT_JSON_H

#include <onnxpipe/core_util.h>
#include <onnxpipe/partition_lib.h>
#include <onnxpipe/plan.h>

/* The partition preview (pp_partition_print) as JSON with stable keys. Local. */
void pp_partition_write_json(const pp_partition *p, pp_json *j);
/* The calibration as JSON (format "onnxpipe-calibration", version 1): model, its hash, host,
 * device, memcpy rate, optimizer seconds per parameter, and per (precision, microbatch) the
 * op types' calls, flops, bytes, forward_s and backward_s. Local. */
void pp_calibration_write_json(const pp_calibration *c, pp_json *j);

#endif

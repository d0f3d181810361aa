/* Status codes and the pp_error message buffer that carries context to the user. */
#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <stdarg.h>
#include <string.h>

static const char *const status_names[PP_STATUS_COUNT] = {
    [PP_OK] = "ok",
    [PP_ERR_INVALID_ARG] = "invalid argument",
    [PP_ERR_IO] = "I/O error",
    [PP_ERR_PARSE] = "parse error",
    [PP_ERR_UNSUPPORTED] = "unsupported",
    [PP_ERR_SHAPE] = "shape error",
    [PP_ERR_NOMEM] = "out of memory",
    [PP_ERR_COMM] = "communication error",
    [PP_ERR_DEVICE] = "device error",
    [PP_ERR_NUMERIC] = "numeric error",
    [PP_ERR_DEADLOCK] = "deadlock",
    [PP_ERR_TIMEOUT] = "timeout",
    [PP_ERR_INTERNAL] = "internal error",
};

const char *pp_status_string(pp_status st)
{
    if ((int)st < 0 || st >= PP_STATUS_COUNT) return "unknown status";
    return status_names[st];
}

/* Messages quote names from model files: formatted in full first, then escaped into
 * err->msg (newlines and tabs of multi-line messages kept). */
pp_status pp_error_set(pp_error *err, pp_status st, const char *fmt, ...)
{
    if (!err) return st;
    char msg[PP_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err->status = st;
    pp_text_escape(msg, 1, err->msg, sizeof err->msg);
    return st;
}

pp_status pp_error_prefix(pp_error *err, const char *fmt, ...)
{
    if (!err) return PP_OK;
    char msg[PP_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof msg) snprintf(msg + n, sizeof msg - (size_t)n, "%s", err->msg);
    pp_text_escape(msg, 1, err->msg, sizeof err->msg);   /* the old part was escaped: no change there */
    return err->status;
}

void pp_error_clear(pp_error *err)
{
    if (!err) return;
    err->status = PP_OK;
    err->msg[0] = '\0';
}

/* The last two parts of a source path: "ckpt/writer.c" */
static const char *short_path(const char *file)
{
    const char *last = NULL, *prev = NULL;
    for (const char *p = file; *p; p++)
        if (*p == '/') prev = last, last = p;
    return prev ? prev + 1 : last ? last + 1 : file;
}

pp_status pp_error_nomem(pp_error *err, const char *file, int line)
{
    return pp_error_set(err, PP_ERR_NOMEM, "out of memory (%s:%d)", short_path(file), line);
}

void pp_check_trace(const char *file, int line, const char *expr, pp_status st)
{
    if (pp_log_enabled(PP_LOG_DEBUG))
        pp_log(PP_LOG_DEBUG, "%s:%d: %s: %s", short_path(file), line, expr, pp_status_string(st));
}

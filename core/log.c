/* Leveled logging to stderr. The level comes from PP_LOG, read once in pp_log_init. */
#include <onnxpipe/env.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

static pp_log_level log_level = PP_LOG_WARN;
static char log_prefix[64];

void pp_log_init(void)
{
    const char *s = pp_env_get("PP_LOG");
    if (!s) return;
    if (!strcmp(s, "error")) log_level = PP_LOG_ERROR;
    else if (!strcmp(s, "warn")) log_level = PP_LOG_WARN;
    else if (!strcmp(s, "info")) log_level = PP_LOG_INFO;
    else if (!strcmp(s, "debug")) log_level = PP_LOG_DEBUG;
}

void pp_log_set_level(pp_log_level level) { log_level = level; }
int pp_log_enabled(pp_log_level level) { return level <= log_level; }

void pp_log_set_prefix(const char *prefix)
{
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix ? prefix : "");
}

void pp_log(pp_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (!pp_log_enabled(level)) return;
    char buf[1024], *msg = buf;   /* names quoted from a model are escaped, as in pp_error */
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n >= (int)sizeof buf && (msg = malloc((size_t)n + 1))) vsnprintf(msg, (size_t)n + 1, fmt, again);
    else if (!msg) msg = buf;   /* cut where no memory is left */
    va_end(again);
    va_end(ap);
    flockfile(stderr);   /* one line, whole, when threads log at once (the checkpoint writer) */
    fprintf(stderr, "%sonnxpipe: %s: ", log_prefix, names[level]);
    pp_text_fputs(msg, 1, stderr);
    fputc('\n', stderr);
    funlockfile(stderr);
    if (msg != buf) free(msg);
}

/* onnxpipe core: status codes, errors with context, dtypes, logging, small utilities.
 * Every fallible library call returns pp_status and fills a caller-owned pp_error.
 *
 * The rules of the whole API, which a function's comment states again only where it
 * departs from them:
 * - Ownership. An object returned through an out-parameter (`**out`) belongs to the
 *   caller and is freed by its module's destroy/close/free, which accepts NULL. Pointer
 *   arguments are borrowed for the call; an object that keeps one (a stage keeps its
 *   partition and device, a driver its grid) says so, and what it keeps must outlive it.
 *   Strings and arrays returned by a const accessor belong to the object and live as long.
 * - Threads. No call blocks other threads on hidden global state: the registries (ops,
 *   backends) are constant, logging is serialised. An object is used by one thread at a
 *   time; different objects may be used by different threads at once. MPI is initialised
 *   FUNNELED: the calls that communicate are made from the thread that created the world.
 * - Collectives. A call marked "Collective over C" must be made by every rank of
 *   communicator C, in the same order on each, or the job waits until PP_COMM_TIMEOUT
 *   ends it; a call marked "Local" involves this rank alone. Every function's comment
 *   says which (tests/test_api_docs.sh checks), who frees what it returns, and
 *   "Thread-safe" where it may run on several threads at once with the same arguments. */
#ifndef ONNXPIPE_CORE_H
#define ONNXPIPE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <onnxpipe/version.h>   /* ONNXPIPE_VERSION_*, generated from CMakeLists.txt */

#ifdef __cplusplus
extern "C" {
#endif

/* Per-element math shared by the cpu and cuda kernels (DESIGN.md: one element
 * function, two devices). Under nvcc it becomes __host__ __device__. */
#if defined(__CUDACC__)
#define PP_HD __host__ __device__
#else
#define PP_HD
#endif

/* What libonnxpipe.a exports: the functions the public headers declare, and nothing else.
 * The library is compiled with -fvisibility=hidden and its one object has every other
 * symbol made local (CMakeLists.txt), so a program's own iter_next never meets ours. */
#define PP_API __attribute__((visibility("default")))

#define PP_VERSION ONNXPIPE_VERSION_STRING   /* the headers' version: "0.1.0" */

/* The version of the library linked at run time ("0.1.0"; as a number 100, see
 * ONNXPIPE_VERSION_NUMBER): a program built against other headers can compare. A static string.
 * Local; thread-safe. */
PP_API const char *pp_version(void);
PP_API int pp_version_number(void);

typedef enum {
    PP_OK = 0,
    PP_ERR_INVALID_ARG,   /* a caller passed a bad value */
    PP_ERR_IO,            /* file system or OS error */
    PP_ERR_PARSE,         /* malformed input file */
    PP_ERR_UNSUPPORTED,   /* op, dtype or attribute we do not implement */
    PP_ERR_SHAPE,         /* shapes do not fit */
    PP_ERR_NOMEM,         /* allocation failed */
    PP_ERR_COMM,          /* communication backend error */
    PP_ERR_DEVICE,        /* device backend error (CUDA, cuBLAS, cuDNN) */
    PP_ERR_NUMERIC,       /* NaN / Inf */
    PP_ERR_DEADLOCK,      /* a schedule that cannot complete */
    PP_ERR_TIMEOUT,       /* no progress within the allowed time */
    PP_ERR_INTERNAL,      /* a bug in onnxpipe */
    PP_STATUS_COUNT
} pp_status;

/* The name of st, as text. A static string. Local; thread-safe. */
PP_API const char *pp_status_string(pp_status st);

#define PP_ERROR_LEN 1024
/* The message carries the context a user needs (file, node, rank, value). */
typedef struct pp_error {
    pp_status status;
    char msg[PP_ERROR_LEN];
} pp_error;

/* Fills err (may be NULL) and returns st, so `return pp_error_set(err, ...)` reads well.
 * The message is escaped as pp_text_escape does, keeping its newlines and tabs: names
 * quoted from a model file cannot put control bytes on the user's terminal. Local. */
PP_API pp_status pp_error_set(pp_error *err, pp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends context ("while loading 'x.onnx': ") to an error already set; pp_error_clear empties err. Local. */
PP_API pp_status pp_error_prefix(pp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
PP_API void pp_error_clear(pp_error *err);

/* An allocation that failed: "out of memory (module/file.c:LINE)", so a report says where. */
#define PP_NOMEM(err) pp_error_nomem((err), __FILE__, __LINE__)
PP_API pp_status pp_error_nomem(pp_error *err, const char *file, int line);   /* PP_NOMEM's call. Local. */
/* With PP_LOG=debug, every failing PP_CHECK leaves a line "file:line: expr: status" (NCCL's
 * habit), so the path an error took back up is visible; otherwise it costs nothing. Local; thread-safe. */
PP_API void pp_check_trace(const char *file, int line, const char *expr, pp_status st);

/* Return on failure. */
#define PP_CHECK(expr)                                                 \
    do {                                                               \
        pp_status pp_check_st_ = (expr);                               \
        if (pp_check_st_ != PP_OK) {                                   \
            pp_check_trace(__FILE__, __LINE__, #expr, pp_check_st_);   \
            return pp_check_st_;                                       \
        }                                                              \
    } while (0)
/* Record the status and jump to the single exit path of a function that owns resources. */
#define PP_CHECK_GOTO(expr, st, label)                       \
    do {                                                     \
        (st) = (expr);                                       \
        if ((st) != PP_OK) {                                 \
            pp_check_trace(__FILE__, __LINE__, #expr, (st)); \
            goto label;                                      \
        }                                                    \
    } while (0)

/* Data types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum {
    PP_DTYPE_UNDEFINED = 0,
    PP_DTYPE_F32 = 1,
    PP_DTYPE_U8 = 2,
    PP_DTYPE_I8 = 3,
    PP_DTYPE_U16 = 4,
    PP_DTYPE_I16 = 5,
    PP_DTYPE_I32 = 6,
    PP_DTYPE_I64 = 7,
    PP_DTYPE_STRING = 8,
    PP_DTYPE_BOOL = 9,
    PP_DTYPE_F16 = 10,
    PP_DTYPE_F64 = 11,
    PP_DTYPE_U32 = 12,
    PP_DTYPE_U64 = 13,
    PP_DTYPE_BF16 = 16,
} pp_dtype;

PP_API size_t pp_dtype_size(pp_dtype dt);          /* bytes per element; 0 if unknown or string. Local; thread-safe. */
PP_API const char *pp_dtype_name(pp_dtype dt);     /* "float32", "int64", ...: a static string. Local; thread-safe. */
PP_API pp_dtype pp_dtype_parse(const char *name);  /* the inverse; PP_DTYPE_UNDEFINED if unknown. Local; thread-safe. */
PP_API int pp_dtype_is_float(pp_dtype dt);         /* f16, bf16, f32, f64. Local; thread-safe. */

/* Logging. PP_LOG=error|warn|info|debug (default warn); read once in pp_log_init. */
typedef enum { PP_LOG_ERROR = 0, PP_LOG_WARN, PP_LOG_INFO, PP_LOG_DEBUG } pp_log_level;
/* pp_log_init reads PP_LOG; it and pp_log_set_level set the process-wide level: call them before other
 * threads log. pp_log_enabled is thread-safe. Local. */
PP_API void pp_log_init(void);
PP_API void pp_log_set_level(pp_log_level level);
PP_API int pp_log_enabled(pp_log_level level);
/* One line on stderr, escaped as error messages are; lines from several threads do not mix. Local;
 * thread-safe. */
PP_API void pp_log(pp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix of every log line, e.g. "[rank 3] " (empty by default); copied (63 bytes at most). Call it before
 * other threads log. Local. */
PP_API void pp_log_set_prefix(const char *prefix);

/* Wall-clock seconds from a monotonic clock. Local; thread-safe. */
PP_API double pp_now(void);

#ifdef __cplusplus
}
#endif
#endif

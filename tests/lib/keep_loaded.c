/* Preloaded (LD_PRELOAD) into the processes of the sanitizer build's tests only
 * (CMakeLists.txt), so that every leak third-party code keeps by design has a frame in a
 * module tests/lsan.supp names, and LeakSanitizer needs no symbolizer (the tests run it
 * with symbolize=0: GCC's libbacktrace symbolizer reads the DWARF of every loaded module,
 * libc's from libc6-dbg included, 0.2 s of CPU per process; tests/lib/sanitized.sh
 * symbolizes a report that fails a test). The programs under test are the same binaries.
 * - dlclose leaves a library mapped: MPI_Finalize unloads Open MPI's components (mca_*.so)
 *   before LeakSanitizer looks at what is left at exit, and their frames would read
 *   "<unknown module>" (the slow unwinder that would reach libmpi's frames instead costs
 *   0.35 s of CPU per MPI process).
 * - asprintf and vasprintf (and their _FORTIFY_SOURCE _chk forms) allocate here, with
 *   vsnprintf and malloc: MPI_Init's binding report leaks an asprintf string, and Open MPI,
 *   built without frame pointers, leaves a stack that ends in libc's vasprintf; its
 *   allocation now has this module as frame #1. onnxpipe never calls asprintf (ckpt/fs.c
 *   uses vsnprintf for that reason), so the line that names this module hides none of ours. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}

int vasprintf(char **out, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!s) return -1;
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    *out = s;
    return n;
}

int __vasprintf_chk(char **out, int flag, const char *fmt, va_list ap)
{
    (void)flag;
    return vasprintf(out, fmt, ap);
}

int asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

int __asprintf_chk(char **out, int flag, const char *fmt, ...)
{
    (void)flag;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

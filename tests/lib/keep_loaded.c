/* Preloaded (LD_PRELOAD) into the processes of the sanitizer build's tests only
 * (CMakeLists.txt): dlclose leaves a library mapped. MPI_Finalize unloads Open MPI's
 * components (mca_*.so) before LeakSanitizer looks at what is left at exit, and without
 * this their frames read "<unknown module>", which tests/lsan.supp cannot name (and the
 * slow unwinder that would reach libmpi's frames instead costs 0.35 s of CPU per MPI
 * process). The programs under test are the same binaries; only unloading is skipped. */
#include <dlfcn.h>

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}

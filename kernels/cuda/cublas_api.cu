/* cuBLAS and cuBLASLt loaded on the first CUDA device (cublas_api.h says why). */
#include "cublas_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PP_STR_(x) #x
#define PP_STR(x) PP_STR_(x)

static pp_cublas_api api;
static pp_status load_status = PP_OK;
static char load_error[768];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* the soname on the library path, else the toolkit's copy this build linked against */
static void *open_lib(const char *soname)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PP_CUDA_LIBDIR, soname);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int fail(const char *what)
{
    const char *why = dlerror();
    load_status = PP_ERR_DEVICE;
    snprintf(load_error, sizeof load_error,
             "cuBLAS: %s (%s): the CUDA device needs CUDA %d's cuBLAS (%s, %s) on the library path "
             "(LD_LIBRARY_PATH) or in %s",
             what, why ? why : "no reason given", CUDART_VERSION / 1000, PP_CUBLAS_SONAME, PP_CUBLASLT_SONAME,
             PP_CUDA_LIBDIR);
    return 0;
}

/* resolves each function of the list from lib h; the field's type is the function's own */
#define PP_CUBLAS_RESOLVE(f)                                                             \
    if (!(api.f = (__typeof__(api.f))dlsym(h, PP_STR(f)))) return fail("no " PP_STR(f) " in its library");

#define PP_CUBLAS_RESOLVE_TYPED(f, type) PP_CUBLAS_RESOLVE(f)

static int resolve_blas(void *h) { PP_CUBLAS_FUNCS(PP_CUBLAS_RESOLVE, PP_CUBLAS_RESOLVE_TYPED) return 1; }
static int resolve_lt(void *h) { PP_CUBLASLT_FUNCS(PP_CUBLAS_RESOLVE) return 1; }

static void load(void)
{
    void *lt = open_lib(PP_CUBLASLT_SONAME);
    if (!lt) {
        fail("cannot load " PP_CUBLASLT_SONAME);
        return;
    }
    void *blas = open_lib(PP_CUBLAS_SONAME);
    if (!blas) {
        fail("cannot load " PP_CUBLAS_SONAME);
        return;
    }
    if (resolve_lt(lt)) resolve_blas(blas);   /* the handles stay open for the process's life */
}

pp_status pp_cublas_load(pp_error *err)
{
    pthread_once(&load_once, load);
    if (load_status != PP_OK) return pp_error_set(err, load_status, "%s", load_error);
    return PP_OK;
}

const pp_cublas_api *pp_cublas(void) { return &api; }

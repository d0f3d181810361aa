/* The cache files of --pack and --pad (a stream's document index, the sample plan): found
 * beside the data (or in --data-cache, or HOME/.cache/onnxpipe/data where the data's folder
 * is read-only), valid while their key matches, else built once: into a temporary file of
 * this host and process, fsynced and renamed into place, so readers see a whole file or none
 * and processes building at once each rename a whole one. */
#include "dataset_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/env.h>

#define FORMAT_VERSION 1
static const char MAGIC[8] = "PPDSIDX1";
enum { H_MAGIC, H_VERSION, H_BODY, H_KEY, H_COUNT = H_KEY + DS_NKEY, H_CRC = H_COUNT + DS_NCOUNT };
_Static_assert(H_CRC == DS_HDR - 1, "the header's fields fill it");

struct ds_writer {
    int fd;
    const char *path;
    int64_t end;                /* body bytes appended */
    size_t n;                   /* of buf, not yet written */
    char buf[1 << 16];
};

static pp_status put(ds_writer *w, int64_t at, const void *p, size_t n, pp_error *err)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = pwrite(w->fd, (const char *)p + done, n - done, (off_t)(at + (int64_t)done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
        done += (size_t)k;
    }
    return PP_OK;
}

static pp_status flush(ds_writer *w, pp_error *err)
{
    int64_t at = (int64_t)(DS_HDR * sizeof(int64_t)) + w->end - (int64_t)w->n;
    size_t n = w->n;
    w->n = 0;
    return put(w, at, w->buf, n, err);
}

pp_status ds_write(ds_writer *w, const void *p, size_t n, pp_error *err)
{
    if (w->n + n > sizeof w->buf) PP_CHECK(flush(w, err));
    w->end += (int64_t)n;
    if (n > sizeof w->buf) return put(w, (int64_t)(DS_HDR * sizeof(int64_t)) + w->end - (int64_t)n, p, n, err);
    memcpy(w->buf + w->n, p, n);
    w->n += n;
    return PP_OK;
}

pp_status ds_write_at(ds_writer *w, int64_t off, const void *p, size_t n, pp_error *err)
{
    PP_CHECK(flush(w, err));   /* what is appended may lie there */
    return put(w, (int64_t)(DS_HDR * sizeof(int64_t)) + off, p, n, err);
}

pp_status ds_cache_source(const pp_dataset *d, int file, int64_t *size, int64_t *mtime_ns, pp_error *err)
{
    struct stat st;
    if (fstat(ds_file_fd(d, file), &st) != 0)
        return pp_error_set(err, PP_ERR_IO, "cannot stat '%s': %s", ds_file_path(d, file), strerror(errno));
    *size = (int64_t)st.st_size;
    *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return PP_OK;
}

/* Where c's file is: beside the data, or in dir (--data-cache, the HOME cache) under the
 * data's name and a CRC of its full path, so two datasets of one name do not meet. */
static void cache_path(const ds_cache *c, const char *dir, char *out, size_t len)
{
    if (!dir) {
        snprintf(out, len, "%s%s", c->data, c->suffix);
        return;
    }
    char full[PATH_MAX];
    const char *abs = realpath(c->data, full) ? full : c->data, *base = strrchr(c->data, '/');
    snprintf(out, len, "%s/%s.%08x%s", dir, base ? base + 1 : c->data, pp_crc32c(0, abs, strlen(abs)), c->suffix);
}

/* HOME/.cache/onnxpipe/data, made if missing; "" without HOME. */
static void home_cache(char *out, size_t len)
{
    const char *home = pp_env_get("HOME");
    out[0] = 0;
    if (!home || !*home) return;
    snprintf(out, len, "%s/.cache/onnxpipe/data", home);
    for (char *p = out + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(out, 0755);
            *p = '/';
        }
    mkdir(out, 0755);
}

static uint32_t header_crc(const int64_t *h) { return pp_crc32c(0, h, H_CRC * sizeof *h); }

/* path's header and size fit c: the same format, key and a whole body. */
static int valid(const char *path, const ds_cache *c, int64_t *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && pread(fd, h, DS_HDR * sizeof *h, 0) == (ssize_t)(DS_HDR * sizeof *h);
    close(fd);
    return ok && !memcmp(&h[H_MAGIC], MAGIC, sizeof MAGIC) && h[H_VERSION] == FORMAT_VERSION &&
           (uint32_t)h[H_CRC] == header_crc(h) && !memcmp(&h[H_KEY], c->key, sizeof c->key) &&
           h[H_BODY] == (int64_t)st.st_size - (int64_t)(DS_HDR * sizeof *h);
}

/* Builds c into path (through a temporary file beside it). EACCES and the like come back
 * as PP_ERR_IO with *denied set, so the caller may try another folder. */
static pp_status build(const ds_cache *c, const char *path, int *denied, pp_error *err)
{
    char tmp[4400], host[128] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s.%d", path, host, (int)getpid());
    ds_writer *w = calloc(1, sizeof *w);
    if (!w) return PP_NOMEM(err);
    *w = (ds_writer){.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), .path = tmp};
    if (w->fd < 0) {
        *denied = errno == EACCES || errno == EROFS || errno == EPERM;
        pp_status st = pp_error_set(err, PP_ERR_IO, "cannot create '%s' for the %s of '%s': %s", tmp, c->what,
                                    c->data, strerror(errno));
        free(w);
        return st;
    }
    double t0 = pp_now();
    int64_t h[DS_HDR] = {0};
    memcpy(&h[H_MAGIC], MAGIC, sizeof MAGIC);
    h[H_VERSION] = FORMAT_VERSION;
    memcpy(&h[H_KEY], c->key, sizeof c->key);
    pp_status st = c->build(c->user, w, &h[H_COUNT], err);
    if (st == PP_OK) st = flush(w, err);
    h[H_BODY] = w->end;
    h[H_CRC] = header_crc(h);
    if (st == PP_OK) st = put(w, 0, h, sizeof h, err);
    if (st == PP_OK && fsync(w->fd) != 0)
        st = pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    close(w->fd);
    free(w);
    if (st == PP_OK && rename(tmp, path) != 0)
        st = pp_error_set(err, PP_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != PP_OK) {
        unlink(tmp);
        return st;
    }
    pp_log(PP_LOG_INFO, "the %s of '%s': built in %.2f s, cached in '%s'", c->what, c->data, pp_now() - t0, path);
    return PP_OK;
}

pp_status ds_cache_get(pp_dataset *d, const ds_cache *c, const int64_t **counts, const char **body, size_t *body_len,
                       pp_error *err)
{
    char home[PATH_MAX], paths[2][4200];
    int64_t h[DS_HDR];
    if (c->dir) {
        cache_path(c, c->dir, paths[0], sizeof paths[0]);
    } else {
        home_cache(home, sizeof home);
        cache_path(c, NULL, paths[0], sizeof paths[0]);
        cache_path(c, home[0] ? home : NULL, paths[1], sizeof paths[1]);
    }
    int n = c->dir || !home[0] ? 1 : 2, at = 0;
    while (at < n && !valid(paths[at], c, h)) at++;
    if (at == n) {   /* none: build it beside the data (or in --data-cache), else in the HOME cache */
        int denied = 0;
        at = 0;
        pp_status st = build(c, paths[0], &denied, err);
        if (st != PP_OK && denied && n == 2) {
            at = 1;
            st = build(c, paths[1], &denied, err);
        } else if (st != PP_OK && denied && !c->dir) {
            return pp_error_set(err, PP_ERR_IO, "the folder of '%s' is read-only and HOME is not set: give --data-cache "
                                "DIR, a folder for its %s", c->data, c->what);
        }
        PP_CHECK(st);
        if (!valid(paths[at], c, h))
            return pp_error_set(err, PP_ERR_IO, "the %s '%s' just built is not whole: is its folder shared with "
                                "another writer?", c->what, paths[at]);
    } else {
        pp_log(PP_LOG_INFO, "the %s of '%s': reusing '%s'", c->what, c->data, paths[at]);
    }
    const void *m;
    size_t len;
    PP_CHECK(ds_map_file(d, paths[at], &m, &len, err));
    if (len != DS_HDR * sizeof(int64_t) + (size_t)h[H_BODY])
        return pp_error_set(err, PP_ERR_IO, "the %s '%s' changed while it was opened", c->what, paths[at]);
    *counts = (const int64_t *)m + H_COUNT;
    *body = (const char *)m + DS_HDR * sizeof(int64_t);
    *body_len = (size_t)h[H_BODY];
    return PP_OK;
}

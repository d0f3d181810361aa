/* The file-system steps of a checkpoint: fsynced writes, directory fsyncs after a rename
 * (what makes a rename durable), removal of a tree, read-only maps. Errors carry the path
 * and strerror. */
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* vsnprintf twice, not vasprintf: libc's vasprintf keeps no frame pointer, so a leak of
 * its string would read as the Open MPI one that tests/lsan.supp suppresses */
char *ck_path(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *p = n < 0 ? NULL : malloc((size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    return p;
}

static pp_status io_error(pp_error *err, const char *what, const char *path)
{
    return pp_error_set(err, PP_ERR_IO, "cannot %s '%s': %s", what, path, strerror(errno));
}

pp_status ck_write_error(pp_error *err, int fd, const char *path, int64_t need)
{
    int e = errno;
    struct statvfs vs;
    if ((e == ENOSPC || e == EDQUOT) && fstatvfs(fd, &vs) == 0)
        return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s (it needs %lld bytes; %llu bytes are free there)",
                            path, strerror(e), (long long)need, (unsigned long long)vs.f_bavail * vs.f_frsize);
    errno = e;
    return io_error(err, "write", path);
}

pp_status ck_reserve(int fd, const char *path, int64_t n, pp_error *err)
{
    if (n <= 0 || fallocate(fd, 0, 0, n) == 0 || errno == EOPNOTSUPP || errno == ENOSYS) return PP_OK;
    return ck_write_error(err, fd, path, n);
}

pp_status ck_mkdir(const char *path, pp_error *err)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST) return PP_OK;
    return io_error(err, "create directory", path);
}

pp_status ck_fsync_path(const char *path, pp_error *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return io_error(err, "open", path);
    int bad = fsync(fd) != 0;
    int e = errno;
    close(fd);
    errno = e;
    return bad ? io_error(err, "fsync", path) : PP_OK;
}

pp_status ck_write_file(const char *path, const void *data, size_t n, pp_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return io_error(err, "create", path);
    pp_status st = ck_reserve(fd, path, (int64_t)n, err);
    if (st == PP_OK) st = ck_write_all(fd, path, data, n, (int64_t)n, err);
    if (st == PP_OK && fsync(fd) != 0) st = ck_write_error(err, fd, path, (int64_t)n);
    if (close(fd) != 0 && st == PP_OK) st = io_error(err, "write", path);
    return st;
}

pp_status ck_write_all(int fd, const char *path, const void *data, size_t n, int64_t need, pp_error *err)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n < (64u << 20) ? n : (64u << 20));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return ck_write_error(err, fd, path, need);
        }
        p += w, n -= (size_t)w;
    }
    return PP_OK;
}

pp_status ck_read_file(const char *path, char **out, size_t *n, pp_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return io_error(err, "open", path);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - 1 - len, f);
        if (len < cap - 1) break;
        char *b = realloc(buf, cap *= 2);
        if (!b) free(buf);
        buf = b;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return pp_error_set(err, PP_ERR_NOMEM, "out of memory reading '%s'", path);
    if (bad) {
        free(buf);
        return io_error(err, "read", path);
    }
    buf[len] = 0;
    *out = buf;
    if (n) *n = len;
    return PP_OK;
}

pp_status ck_rename(const char *from, const char *to, pp_error *err)
{
    if (rename(from, to) == 0) return PP_OK;
    return pp_error_set(err, PP_ERR_IO, "cannot rename '%s' to '%s': %s", from, to, strerror(errno));
}

pp_status ck_remove_tree(const char *path, pp_error *err)
{
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT) return PP_OK;
        if (errno == ENOTDIR) return unlink(path) == 0 ? PP_OK : io_error(err, "remove", path);
        return io_error(err, "open directory", path);
    }
    pp_status st = PP_OK;
    struct dirent *e;
    while (st == PP_OK && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *sub = ck_path("%s/%s", path, e->d_name);
        if (!sub) {
            st = pp_error_set(err, PP_ERR_NOMEM, "out of memory removing '%s'", path);
            break;
        }
        st = ck_remove_tree(sub, err);
        free(sub);
    }
    closedir(d);
    if (st == PP_OK && rmdir(path) != 0 && errno != ENOENT) st = io_error(err, "remove", path);
    return st;
}

pp_status ck_map(const char *path, const void **out, size_t *n, pp_error *err)
{
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return io_error(err, "open", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return io_error(err, "stat", path);
    }
    void *p = NULL;
    if (sb.st_size > 0) {
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            errno = e;
            return io_error(err, "map", path);
        }
    }
    close(fd);
    *out = p;
    *n = (size_t)sb.st_size;
    return PP_OK;
}

void ck_unmap(const void *p, size_t n)
{
    if (p) munmap((void *)p, n);
}

int64_t ck_step_of(const char *name)
{
    if (strncmp(name, "step-", 5) || !name[5] || (name[5] == '0' && name[6])) return -1;   /* as written: no "step-007" */
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > INT64_MAX / 10 - 1) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* Offline checks of checkpoints: verify (the manifest's own checksum when it is opened,
 * every shard's size and checksum, and on a mismatch the tensor whose bytes changed; no
 * file the manifest does not list), the list of checkpoints in a directory, and
 * the newest one that verifies (what --resume auto takes). */
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

pp_status ck_check_file(pp_ckpt *c, int f, pp_error *err)
{
    if (c->checked[f]) return PP_OK;
    PP_CHECK(ck_map_file(c, f, err));
    uint32_t crc = pp_crc32c(0, c->maps[f], c->map_lens[f]);
    if (crc == c->files[f].crc32c) {
        c->checked[f] = 1;
        return PP_OK;
    }
    for (int i = 0; i < c->info.ntensors; i++)   /* name the tensor whose bytes changed */
        if (c->tensors[i].file == f) PP_CHECK(ck_check_tensor(c, &c->tensors[i], err));
    return pp_error_set(err, PP_ERR_PARSE, "checkpoint shard '%s/%s' fails its checksum (crc32c %08x, the manifest "
                        "says %08x) outside its tensors' data: its header is corrupt", c->dir, c->files[f].name,
                        crc, c->files[f].crc32c);
}

pp_status ck_check_listing(const pp_ckpt *c, pp_error *err)
{
    DIR *d = opendir(c->dir);
    if (!d) return pp_error_set(err, PP_ERR_IO, "cannot list checkpoint '%s': %s", c->dir, strerror(errno));
    pp_status st = PP_OK;
    struct dirent *de;
    while (st == PP_OK && (de = readdir(d))) {
        const char *n = de->d_name;
        int known = !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "manifest.json");
        for (int f = 0; !known && f < c->info.nfiles; f++) known = !strcmp(n, c->files[f].name);
        if (!known)
            st = pp_error_set(err, PP_ERR_PARSE, "checkpoint '%s' holds '%s', which its manifest does not list: "
                              "something else wrote into it; move that file out or use an older checkpoint", c->dir, n);
    }
    closedir(d);
    return st;
}

pp_status pp_ckpt_verify(const char *dir, pp_error *err) { return pp_ckpt_verify_part(dir, 0, 1, err); }

pp_status pp_ckpt_verify_part(const char *dir, int part, int parts, pp_error *err)
{
    if (parts < 1 || part < 0 || part >= parts)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "verify part %d of %d: need 0 <= part < parts", part, parts);
    pp_ckpt *c = NULL;
    PP_CHECK(pp_ckpt_open(dir, &c, err));
    pp_status st = part == 0 ? ck_check_listing(c, err) : PP_OK;
    for (int f = part; f < c->info.nfiles && st == PP_OK; f += parts) {
        st = ck_check_file(c, f, err);
        /* one file at a time: a verify of a large checkpoint maps no more than one shard */
        ck_unmap(c->maps[f], c->map_lens[f]);
        c->checked[f] = 0;
        c->maps[f] = NULL;
    }
    pp_ckpt_close(c);
    return st;
}

static int by_step_desc(const void *a, const void *b)
{
    int64_t x = ((const pp_ckpt_entry *)a)->step, y = ((const pp_ckpt_entry *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

pp_status pp_ckpt_list(const char *root, pp_ckpt_entry **out, int *n, pp_error *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return PP_OK;
        return pp_error_set(err, PP_ERR_IO, "cannot open checkpoint directory '%s': %s", root, strerror(errno));
    }
    char latest[64] = "";
    char *lpath = ck_path("%s/latest", root), *text = NULL;
    if (lpath) {
        if (ck_read_file(lpath, &text, NULL, NULL) == PP_OK) {
            snprintf(latest, sizeof latest, "%s", text);
            latest[strcspn(latest, "\n")] = 0;
        }
    }
    free(text);
    free(lpath);
    pp_ckpt_entry *e = NULL;
    int cnt = 0;
    pp_status st = PP_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t step = ck_step_of(de->d_name);
        if (step < 0) continue;
        pp_ckpt_entry *p = pp_realloc_array(e, (size_t)cnt + 1, sizeof *p);
        char *dir = ck_path("%s/%s", root, de->d_name);
        if (!p || !dir) {
            free(dir);
            if (p) e = p;
            st = pp_error_set(err, PP_ERR_NOMEM, "out of memory listing '%s'", root);
            break;
        }
        e = p;
        e[cnt++] = (pp_ckpt_entry){.step = step, .dir = dir, .latest = !strcmp(latest, de->d_name)};
    }
    closedir(d);
    if (st != PP_OK) {
        pp_ckpt_list_free(e, cnt);
        return st;
    }
    if (cnt) qsort(e, (size_t)cnt, sizeof *e, by_step_desc);   /* e is NULL when there is none */
    *out = e;
    *n = cnt;
    return PP_OK;
}

void pp_ckpt_list_free(pp_ckpt_entry *e, int n)
{
    for (int i = 0; e && i < n; i++) free(e[i].dir);
    free(e);
}

pp_status pp_ckpt_resume_candidates(const char *root, pp_ckpt_entry **out, int *n, pp_error *err)
{
    PP_CHECK(pp_ckpt_list(root, out, n, err));
    int at = -1;
    for (int i = 0; i < *n; i++)
        if ((*out)[i].latest) at = i;
    if (at < 0) return PP_OK;
    /* drop the newer ones (an abandoned run's), keeping `latest` first */
    for (int i = 0; i < at; i++) free((*out)[i].dir);
    memmove(*out, *out + at, (size_t)(*n - at) * sizeof **out);
    *n -= at;
    return PP_OK;
}

pp_status pp_ckpt_find_resume(const char *root, char *dir, size_t len, pp_error *err)
{
    pp_ckpt_entry *e;
    int n;
    dir[0] = 0;
    PP_CHECK(pp_ckpt_resume_candidates(root, &e, &n, err));
    for (int i = 0; i < n; i++) {
        pp_error why = {0};
        if (pp_ckpt_verify(e[i].dir, &why) == PP_OK) {
            snprintf(dir, len, "%s", e[i].dir);
            break;
        }
        pp_log(PP_LOG_WARN, "skipping checkpoint '%s': %s", e[i].dir, why.msg);
    }
    pp_ckpt_list_free(e, n);
    return PP_OK;
}

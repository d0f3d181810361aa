/* Rank 0 commits a checkpoint once every (stage, replica) has left its marker in the
 * temporary directory: manifest.json (fsynced), the directory renamed to step-<N> and
 * the parent fsynced, then `latest` replaced by rename, then --keep pruning. A crash at
 * any point leaves the previous checkpoint whole and `latest` naming a complete one. */
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

/* A rank whose shards failed leaves rank-<R>.failed in tmp (writer.c): its number, or -1. */
static int failed_rank(const ck_commit *c)
{
    DIR *d = opendir(c->tmp);
    int rank = -1;
    struct dirent *e;
    while (d && rank < 0 && (e = readdir(d)))
        if (sscanf(e->d_name, "rank-%d.failed", &rank) != 1) rank = -1;
    if (d) closedir(d);
    return rank;
}

/* Waits for the markers of every (stage, replica), then reads them. */
static pp_status gather(const ck_commit *c, pp_jvalue **markers, pp_error *err)
{
    int replicas = c->replicas, stages = c->expected / replicas;
    double t0 = pp_now();
    for (int i = 0; i < c->expected; i++) {
        char name[64];
        snprintf(name, sizeof name, "shard-s%03d-r%03d.json", i / replicas, i % replicas);
        char *path = ck_path("%s/%s", c->tmp, name), *text = NULL;
        if (!path) return PP_NOMEM(err);
        struct stat sb;
        for (int polls = 0; stat(path, &sb) != 0; polls++) {
            int bad = polls % 20 == 19 ? failed_rank(c) : -1;   /* a readdir every 0.1 s */
            if (bad >= 0) {
                free(path);
                return pp_error_set(err, PP_ERR_IO, "rank %d could not write its shards (its error says why)", bad);
            }
            if (pp_now() - t0 > c->timeout_s) {
                pp_status st = pp_error_set(err, PP_ERR_TIMEOUT, "stage %d replica %d did not write its shard into "
                                            "'%s' within %.0f s (of %d stages x %d replicas)", i / replicas,
                                            i % replicas, c->tmp, c->timeout_s, stages, replicas);
                free(path);
                return st;
            }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pp_status st = ck_read_file(path, &text, NULL, err);
        if (st == PP_OK && (st = pp_json_parse(text, &markers[i], err)) != PP_OK)
            pp_error_prefix(err, "checkpoint marker '%s': ", path);
        free(text);
        free(path);
        PP_CHECK(st);
    }
    return PP_OK;
}

static pp_status remove_markers(const ck_commit *c, pp_error *err)
{
    int replicas = c->replicas;
    for (int i = 0; i < c->expected; i++) {
        char name[64];
        snprintf(name, sizeof name, "shard-s%03d-r%03d.json", i / replicas, i % replicas);
        char *path = ck_path("%s/%s", c->tmp, name);
        if (!path) return PP_NOMEM(err);
        unlink(path);
        free(path);
    }
    return PP_OK;
}

/* step-<N> takes the new directory; one already there (a run resumed from an older
 * checkpoint that reaches N again) is moved aside first and removed after. */
/* The temporary directory becomes step-<N>. When step-<N> exists (the step is saved
 * again, e.g. by a run resumed from an older checkpoint), the two directories swap in one
 * atomic renameat2(RENAME_EXCHANGE), so `latest` never names a missing directory; on a
 * filesystem without the exchange, the old one is renamed aside first. */
static pp_status move_into_place(const ck_commit *c, pp_error *err)
{
    struct stat sb;
    if (stat(c->final_dir, &sb) != 0) {
        PP_CHECK(ck_rename(c->tmp, c->final_dir, err));
        return ck_fsync_path(c->root, err);
    }
    if (renameat2(AT_FDCWD, c->tmp, AT_FDCWD, c->final_dir, RENAME_EXCHANGE) == 0) {
        PP_CHECK(ck_fsync_path(c->root, err));
        return ck_remove_tree(c->tmp, err);   /* the old checkpoint, now at the temporary name */
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return pp_error_set(err, PP_ERR_IO, "cannot swap '%s' into '%s': %s", c->tmp, c->final_dir, strerror(errno));
    char *aside = ck_path("%s.old-%s", c->final_dir, c->run_id);
    pp_status st = aside ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK) st = ck_rename(c->final_dir, aside, err);
    if (st == PP_OK) st = ck_rename(c->tmp, c->final_dir, err);
    if (st == PP_OK) st = ck_fsync_path(c->root, err);
    if (st == PP_OK) st = ck_remove_tree(aside, err);
    free(aside);
    return st;
}

static pp_status move_latest(const ck_commit *c, pp_error *err)
{
    char text[64], name[96];
    snprintf(text, sizeof text, "step-%lld\n", (long long)c->meta->step);
    snprintf(name, sizeof name, "latest.tmp-%.60s", c->run_id);
    char *tmp = ck_path("%s/%s", c->root, name), *latest = ck_path("%s/latest", c->root);
    pp_status st = tmp && latest ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK) st = ck_write_file(tmp, text, strlen(text), err);
    if (st == PP_OK) st = ck_rename(tmp, latest, err);
    if (st == PP_OK) st = ck_fsync_path(c->root, err);
    free(tmp);
    free(latest);
    return st;
}

static int by_step_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* After `latest` has moved: the oldest checkpoints beyond keep, and the temporary
 * directories and files that killed jobs left behind. Checkpoints of later steps than
 * this one belong to a run this one resumed before the end of: never counted, never
 * deleted (and never resumed from while `latest` names an older one). A checkpoint is
 * renamed aside before it is removed, so a crash halfway leaves no broken step-<N>. */
static pp_status prune(const ck_commit *c, pp_error *err)
{
    DIR *d = opendir(c->root);
    if (!d) return PP_OK;
    int64_t *steps = NULL;
    int n = 0, cap = 0;
    char **stale = NULL;
    int nstale = 0;
    struct dirent *e;
    pp_status st = PP_OK;
    while ((e = readdir(d))) {
        int64_t s = ck_step_of(e->d_name);
        if (s >= 0) {
            if (n == cap) {
                int64_t *p = pp_realloc_array(steps, (size_t)(cap = cap ? 2 * cap : 16), sizeof *p);
                if (!p) break;
                steps = p;
            }
            steps[n++] = s;
        } else if ((!strncmp(e->d_name, "latest.tmp-", 11) ||
                    (!strncmp(e->d_name, "step-", 5) && (strstr(e->d_name, ".tmp-") || strstr(e->d_name, ".old-")))) &&
                   !strstr(e->d_name, c->run_id)) {
            char **p = pp_realloc_array(stale, (size_t)nstale + 1, sizeof *p);
            if (!p) break;
            stale = p;
            stale[nstale++] = ck_path("%s/%s", c->root, e->d_name);
        }
    }
    closedir(d);
    if (n) qsort(steps, (size_t)n, sizeof *steps, by_step_desc);
    int kept = 0;
    for (int i = 0; c->keep > 0 && i < n && st == PP_OK; i++) {
        if (steps[i] > c->meta->step || ++kept <= c->keep) continue;
        char name[64], aside[160];
        snprintf(name, sizeof name, "step-%lld", (long long)steps[i]);
        snprintf(aside, sizeof aside, "step-%lld.old-%.60s", (long long)steps[i], c->run_id);
        char *p = ck_path("%s/%s", c->root, name), *q = ck_path("%s/%s", c->root, aside);
        st = p && q ? ck_rename(p, q, err) : PP_NOMEM(err);
        if (st == PP_OK) st = ck_remove_tree(q, err);
        free(p);
        free(q);
    }
    for (int i = 0; i < nstale; i++) {
        if (st == PP_OK && stale[i]) st = ck_remove_tree(stale[i], err);
        free(stale[i]);
    }
    free(stale);
    free(steps);
    return st;
}

pp_status ck_commit_run(const ck_commit *c, pp_error *err)
{
    pp_jvalue **markers = calloc((size_t)c->expected + 1, sizeof *markers);
    char *manifest = ck_path("%s/manifest.json", c->tmp);
    pp_status st = markers && manifest ? PP_OK : PP_NOMEM(err);
    double t0 = pp_now();
    if (st == PP_OK) st = gather(c, markers, err);
    double t_gather = pp_now() - t0;
    if (st == PP_OK)
        st = ck_manifest_write(manifest, c->meta, c->model_hash, (const pp_jvalue *const *)markers, c->expected, err);
    if (st == PP_OK) st = remove_markers(c, err);
    if (st == PP_OK) st = ck_fsync_path(c->tmp, err);
    if (st == PP_OK) st = pp_ckpt_lock_check(c->root, c->run_id, err);   /* still this job's directory */
    if (st == PP_OK) st = move_into_place(c, err);
    if (st == PP_OK) st = move_latest(c, err);
    if (st == PP_OK) st = prune(c, err);
    pp_log(PP_LOG_DEBUG, "checkpoint step %lld: waited %.3f s for the other shards, committed in %.3f s",
           (long long)c->meta->step, t_gather, pp_now() - t0 - t_gather);
    /* a save that did not commit leaves nothing: its space back, `latest` as it was */
    if (st != PP_OK && stat(c->tmp, &(struct stat){0}) == 0 && pp_ckpt_lock_check(c->root, c->run_id, NULL) == PP_OK)
        ck_remove_tree(c->tmp, NULL);
    for (int i = 0; markers && i < c->expected; i++) pp_json_free(markers[i]);
    free(markers);
    free(manifest);
    return st;
}

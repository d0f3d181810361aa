/* A save directory has one owner: root/onnxpipe.lock, a write lock on an open file
 * description (fcntl F_OFD_SETLK, which NFS also honours) held by one process of the job from before its first write until it ends, and
 * a JSON line naming the owner (run id, host, pid, start time, the scheduler's job id).
 * The kernel drops the lock when the owner dies, so a lock that can be taken while the
 * text still names a running owner is a dead job's: taken over with a warning. Every rank
 * checks the text before it writes a shard and rank 0 again before it commits, so the
 * ranks of a job whose directory another job took stop writing. The file is never
 * removed (a waiter would lock a removed inode); a clean release marks it "released". */
#include "ckpt_internal.h"
#include <onnxpipe/env.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

struct pp_ckpt_lock {
    int fd;
    char *path, *run_id;
    char started[32];           /* when it was taken (UTC) */
};

static char *lock_path(const char *root) { return ck_path("%s/onnxpipe.lock", root); }

/* The batch system's name for the job, when there is one. */
static const char *job_id(void)
{
    static const char *vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID", "FLUX_JOB_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = pp_env_get(vars[i]);
        if (v && v[0]) return v;
    }
    return NULL;
}

static int set_lock(int fd, int type)
{
    struct flock fl = {.l_type = (short)type, .l_whence = SEEK_SET};
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* What the lock file says: its run id ("" when none), whether its owner released it, and
 * "run R on host H, pid P, started T (job J)" for messages. */
typedef struct owner {
    char run[128];
    int released;
    char who[512];
} owner;

/* The lock file, read through fd or, when fd < 0, path. */
static void read_owner(int fd, const char *path, owner *o)
{
    char text[1024];
    int own = fd < 0;
    if (own) fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : pread(fd, text, sizeof text - 1, 0);
    if (own && fd >= 0) close(fd);
    text[n > 0 ? n : 0] = 0;
    char *nl = strchr(text, '\n');
    if (nl) *nl = 0;
    memset(o, 0, sizeof *o);
    pp_jvalue *j = NULL;
    pp_error e = {0};
    if (!text[0] || pp_json_parse(text, &j, &e) != PP_OK) {
        snprintf(o->who, sizeof o->who, "an unreadable owner ('%.80s')", text);
        return;
    }
    const pp_jvalue *run = pp_json_get(j, "run_id"), *host = pp_json_get(j, "host"), *pid = pp_json_get(j, "pid"),
                    *t = pp_json_get(j, "started"), *job = pp_json_get(j, "job_id"), *state = pp_json_get(j, "state");
    if (run && run->type == PP_JSTR) snprintf(o->run, sizeof o->run, "%s", run->str);
    o->released = state && state->type == PP_JSTR && !strcmp(state->str, "released");
    int m = snprintf(o->who, sizeof o->who, "run %s on host %s, pid %lld, started %s", o->run[0] ? o->run : "?",
                     host && host->type == PP_JSTR ? host->str : "?", pid && pid->type == PP_JNUM ? (long long)pid->num : -1,
                     t && t->type == PP_JSTR ? t->str : "?");
    if (job && job->type == PP_JSTR && m > 0 && (size_t)m < sizeof o->who)
        snprintf(o->who + m, sizeof o->who - (size_t)m, " (job %s)", job->str);
    pp_json_free(j);
}

static pp_status write_owner(pp_ckpt_lock *l, const char *state, pp_error *err)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return PP_NOMEM(err);
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "run_id", l->run_id);
    pp_json_string(&j, "host", host);
    pp_json_int(&j, "pid", getpid());
    pp_json_string(&j, "started", l->started);
    if (job_id()) pp_json_string(&j, "job_id", job_id());
    else pp_json_null(&j, "job_id");
    pp_json_string(&j, "state", state);
    pp_json_end_object(&j);
    fputc('\n', f);
    if (fclose(f) != 0 || !text) {
        free(text);
        return PP_NOMEM(err);
    }
    int bad = ftruncate(l->fd, 0) != 0 || pwrite(l->fd, text, n, 0) != (ssize_t)n || fsync(l->fd) != 0;
    free(text);
    return bad ? pp_error_set(err, PP_ERR_IO, "cannot write the lock file '%s': %s", l->path, strerror(errno)) : PP_OK;
}

void pp_ckpt_lock_release(pp_ckpt_lock *l)
{
    if (!l) return;
    if (l->fd >= 0) {
        pp_error e = {0};
        write_owner(l, "released", &e);   /* best effort: a released lock is taken without a warning */
        close(l->fd);
    }
    free(l->path);
    free(l->run_id);
    free(l);
}

pp_status pp_ckpt_lock_acquire(const char *root, const char *run_id, double wait_s, pp_ckpt_lock **out, pp_error *err)
{
    *out = NULL;
    PP_CHECK(ck_mkdir(root, err));
    pp_ckpt_lock *l = calloc(1, sizeof *l);
    if (!l || !(l->path = lock_path(root)) || !(l->run_id = pp_strdup(run_id))) {
        if (l) l->fd = -1;
        pp_ckpt_lock_release(l);
        return PP_NOMEM(err);
    }
    l->fd = open(l->path, O_RDWR | O_CREAT, 0644);
    if (l->fd < 0) {
        pp_status st = pp_error_set(err, PP_ERR_IO, "cannot open the lock file '%s': %s", l->path, strerror(errno));
        pp_ckpt_lock_release(l);
        return st;
    }
    owner o;
    double t0 = pp_now();
    int said = 0;
    while (set_lock(l->fd, F_WRLCK) != 0) {
        int e = errno;
        read_owner(l->fd, l->path, &o);
        if (e != EAGAIN && e != EACCES) {
            pp_status st = pp_error_set(err, PP_ERR_IO, "cannot lock '%s': %s", l->path, strerror(e));
            close(l->fd), l->fd = -1;
            pp_ckpt_lock_release(l);
            return st;
        }
        if (pp_now() - t0 >= wait_s) {
            pp_status st = pp_error_set(err, PP_ERR_IO, "save directory '%s' is in use by another job: %s; stop that "
                                        "job or pass another --save directory (a job that is ending lets go of it: "
                                        "--lock-wait S waits up to S seconds, now %.0f)", root, o.who, wait_s);
            close(l->fd), l->fd = -1;
            pp_ckpt_lock_release(l);
            return st;
        }
        if (!said++)
            pp_log(PP_LOG_WARN, "save directory '%s' is in use by %s: waiting up to %.0f s for it to end", root,
                   o.who, wait_s);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    read_owner(l->fd, l->path, &o);
    if (o.run[0] && !o.released && strcmp(o.run, run_id))
        pp_log(PP_LOG_WARN, "save directory '%s': taking it over from a job that ended without letting go of it (%s)",
               root, o.who);
    time_t now = time(NULL);
    struct tm tm;
    strftime(l->started, sizeof l->started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    pp_status st = write_owner(l, "running", err);
    if (st != PP_OK) {
        pp_ckpt_lock_release(l);
        return st;
    }
    *out = l;
    return PP_OK;
}

pp_status pp_ckpt_lock_check(const char *root, const char *run_id, pp_error *err)
{
    char *path = lock_path(root);
    if (!path) return PP_NOMEM(err);
    struct stat sb;
    if (stat(path, &sb) != 0) {   /* a directory no job locks (a library user's) */
        free(path);
        return PP_OK;
    }
    owner o;
    read_owner(-1, path, &o);
    free(path);
    if (!strcmp(o.run, run_id) && !o.released) return PP_OK;
    return pp_error_set(err, PP_ERR_IO, "save directory '%s' is no longer this job's (run %s): its lock names %s%s; "
                        "this job stops writing there", root, run_id, o.who, o.released ? " (released)" : "");
}

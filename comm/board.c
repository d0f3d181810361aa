/* The status board: every rank keeps a small record in a memory-mapped file (what it is
 * running, the last action it completed, what it waits for, since when), updated with
 * plain stores under a sequence counter. A wait that times out reads every record it can
 * and follows the wait-for chain to the rank that holds the job up, which need not answer:
 * it may be stopped, stuck in compute or dead. */
#include "comm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BOARD_MAGIC 0x62737070u   /* "ppsb" */
#define GROUP_MAX 64              /* members a record lists of the collective it waits in */

/* One rank's record, the whole of its file. Times are wall seconds (CLOCK_REALTIME), so
 * records of several hosts compare on a shared --save directory. */
typedef struct board_record {
    uint32_t magic, size;         /* size: sizeof(board_record), a layout check */
    uint64_t seq;                 /* odd while its owner writes */
    char job[32];                 /* the job's id (rank 0's clock and pid): older jobs' records are ignored */
    char host[64];
    int32_t rank, pid;
    int64_t running_step, done_step;
    double running_since, done_at;    /* running_since 0: between actions */
    char running[32], done[32];       /* the caller's labels ("1B3", the schedule's notation) */
    char op[16];                  /* the wait under way ("recv", "allreduce"); empty: none */
    int32_t peer, tag;            /* point-to-point: the peer's world rank; a collective: -1 */
    uint64_t bytes;
    double wait_since;
    uint32_t group_id;            /* a collective: its communicator's (the same on every member) */
    int32_t ngroup;               /* members; the first GROUP_MAX are listed */
    uint64_t coll_seq;            /* a collective: how many this rank began on that communicator */
    int32_t group[GROUP_MAX];
} board_record;

static struct {
    board_record *me;             /* mmapped; NULL when no board is open */
    char dir[512];
    char path[600];
    int nranks;
    char job[32];
} board;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void write_begin(void)
{
    __atomic_store_n(&board.me->seq, board.me->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(void)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&board.me->seq, board.me->seq + 1, __ATOMIC_RELAXED);
}

static void record_path(char *buf, size_t len, int rank, const char *suffix)
{
    snprintf(buf, len, "%s/rank-%d%s", board.dir, rank, suffix);
}

/* Creates this rank's record beside its final name and renames it into place, so a rank
 * of an older job still writing there keeps its own (now nameless) file. */
static pp_status create_record(int rank, pp_error *err)
{
    char tmp[600];
    char suffix[48];
    snprintf(suffix, sizeof suffix, ".%s", board.job);
    record_path(tmp, sizeof tmp, rank, suffix);
    record_path(board.path, sizeof board.path, rank, "");
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return pp_error_set(err, PP_ERR_IO, "rank %d: cannot create status record '%s': %s", rank, tmp, strerror(errno));
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(board_record)) == 0)
        p = mmap(NULL, sizeof(board_record), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED || rename(tmp, board.path) != 0) {
        e = p == MAP_FAILED ? e : errno;
        if (p != MAP_FAILED) munmap(p, sizeof(board_record));
        unlink(tmp);
        return pp_error_set(err, PP_ERR_IO, "rank %d: cannot map status record '%s': %s", rank, board.path, strerror(e));
    }
    board_record *r = p;
    *r = (board_record){.magic = BOARD_MAGIC, .size = sizeof(board_record), .rank = rank, .pid = (int32_t)getpid(),
                        .running_step = -1, .done_step = -1, .peer = -1};
    snprintf(r->job, sizeof r->job, "%s", board.job);
    gethostname(r->host, sizeof r->host - 1);
    board.me = r;
    return PP_OK;
}

pp_status pp_comm_board_open(pp_comm *world, const char *dir, pp_error *err)
{
    pp_comm_board_close();
    char id[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id, sizeof id, "%llx%05lx", (unsigned long long)ts.tv_sec, (unsigned long)getpid() & 0xfffff);
    PP_CHECK(pp_comm_broadcast(world, id, sizeof id, 0, err));
    int rank = 0, size = 1;
    pp_comm_mpi_world_rank(&rank, &size);
    snprintf(board.job, sizeof board.job, "%s", id);
    if (dir) snprintf(board.dir, sizeof board.dir, "%s/.status", dir);
    else snprintf(board.dir, sizeof board.dir, "%s/onnxpipe-status-%s", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", id);
    board.nranks = size;
    if (mkdir(board.dir, 0755) != 0 && errno != EEXIST)
        return pp_error_set(err, PP_ERR_IO, "rank %d: cannot create the status board '%s': %s", rank, board.dir,
                            strerror(errno));
    return create_record(rank, err);
}

void pp_comm_board_close(void)
{
    if (!board.me) return;
    munmap(board.me, sizeof(board_record));
    board.me = NULL;
    unlink(board.path);
    rmdir(board.dir);   /* the last rank out removes it */
}

void pp_comm_board_begin(int64_t step, const char *action)
{
    board_record *r = board.me;
    if (!r) return;
    write_begin();
    r->running_step = step;
    snprintf(r->running, sizeof r->running, "%s", action);
    r->running_since = wall_now();
    write_end();
}

void pp_comm_board_end(void)
{
    board_record *r = board.me;
    if (!r || !r->running_since) return;
    write_begin();
    memcpy(r->done, r->running, sizeof r->done);
    r->done_step = r->running_step;
    r->done_at = wall_now();
    r->running_since = 0;
    write_end();
}

void comm_board_wait_begin(const char *op, int peer, const comm_group *group, size_t bytes, int tag)
{
    board_record *r = board.me;
    if (!r) return;
    write_begin();
    snprintf(r->op, sizeof r->op, "%s", op);
    r->peer = peer;
    r->tag = tag;
    r->bytes = bytes;
    r->ngroup = group ? group->n : 0;
    r->group_id = group ? group->id : 0;
    r->coll_seq = group ? group->seq : 0;
    if (group) memcpy(r->group, group->world_ranks, (size_t)(r->ngroup < GROUP_MAX ? r->ngroup : GROUP_MAX) * sizeof(int));
    r->wait_since = wall_now();
    write_end();
}

void comm_board_wait_end(void)
{
    board_record *r = board.me;
    if (!r || !r->op[0]) return;
    write_begin();
    r->op[0] = 0;
    write_end();
}

/* ---- reading the board after a timeout ---------------------------------------- */

/* Rank r's record of this job, copied whole (retried while its owner writes; a stopped
 * owner's half-written record is taken as it is). 0 when there is none. */
static int read_record(int r, board_record *out)
{
    if (board.me && r == board.me->rank) {
        *out = *board.me;
        return 1;
    }
    char path[600];
    record_path(path, sizeof path, r, "");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    void *p = mmap(NULL, sizeof(board_record), PROT_READ, MAP_SHARED, fd, 0);
    struct stat sb;
    int ok = p != MAP_FAILED && fstat(fd, &sb) == 0 && sb.st_size >= (off_t)sizeof(board_record);
    close(fd);
    if (ok) {
        const board_record *src = p;
        for (int tries = 0; tries < 1000; tries++) {
            uint64_t s0 = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
            memcpy(out, src, sizeof *out);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (!(s0 & 1) && s0 == __atomic_load_n(&src->seq, __ATOMIC_RELAXED)) break;
        }
        ok = out->magic == BOARD_MAGIC && out->size == sizeof(board_record) && !strcmp(out->job, board.job);
        out->job[sizeof out->job - 1] = out->host[sizeof out->host - 1] = 0;
        out->running[sizeof out->running - 1] = out->done[sizeof out->done - 1] = out->op[sizeof out->op - 1] = 0;
    }
    if (p != MAP_FAILED) munmap(p, sizeof(board_record));
    return ok;
}

/* What the process of a record on this host is doing, from /proc: "" when it runs or
 * sleeps as usual (or lives on another host). */
static const char *process_state(const board_record *r)
{
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    if (strcmp(host, r->host)) return "";
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)r->pid);
    FILE *f = fopen(path, "r");
    if (!f) return "gone (the process has exited)";
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    const char *paren = strrchr(stat, ')');
    char s = paren && paren[1] == ' ' ? paren[2] : '?';
    return s == 'T' ? "stopped (SIGSTOP or a job-control stop)" : s == 't' ? "stopped by a debugger"
         : s == 'Z' ? "gone (a zombie)" : "";
}

/* Appends to the text in buf (size len), cutting what does not fit. */
static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

/* "recv of 4096 bytes with rank 1 (tag 12)", "allreduce of 64 bytes over ranks 1,3" */
static void describe_wait(const board_record *r, char *buf, size_t len)
{
    buf[0] = 0;
    if (r->peer >= 0) {
        append(buf, len, "%s of %llu bytes with rank %d (tag %d)", r->op, (unsigned long long)r->bytes, r->peer, r->tag);
        return;
    }
    append(buf, len, "%s of %llu bytes over ranks ", r->op, (unsigned long long)r->bytes);
    for (int i = 0; i < r->ngroup && i < GROUP_MAX; i++) append(buf, len, "%s%d", i ? "," : "", r->group[i]);
    if (r->ngroup > GROUP_MAX) append(buf, len, ",...");
}

/* One line about a record: its step and actions, and its wait. */
static void describe_rank(const board_record *r, double now, char *buf, size_t len)
{
    buf[0] = 0;
    append(buf, len, "rank %d (pid %d on %s): ", r->rank, (int)r->pid, r->host);
    if (r->running_since > 0)
        append(buf, len, "running %s of step %lld for %.1f s", r->running, (long long)r->running_step,
               now - r->running_since);
    else if (r->done_at > 0)
        append(buf, len, "last completed %s of step %lld, %.1f s ago", r->done, (long long)r->done_step, now - r->done_at);
    else
        append(buf, len, "no step action yet");
    if (r->op[0]) {
        char what[200];
        describe_wait(r, what, sizeof what);
        append(buf, len, "; waiting %.1f s for %s", now - r->wait_since, what);
    } else {
        const char *state = process_state(r);
        append(buf, len, "; not waiting%s%s", *state ? ", its process is " : "", state);
    }
}

/* Whether rank m is in a collective on r's communicator at least as far as r's. */
static int reached(const board_record *r, const board_record *o)
{
    return o->op[0] && o->peer < 0 && o->group_id == r->group_id && o->coll_seq >= r->coll_seq;
}

/* The rank a waiting record waits on: its peer; for a collective, the first member that
 * is stopped or gone or left no record, else the first not in a collective of the same
 * communicator, else the first in an earlier one; -1 when every member has reached it. */
static int waits_on(const board_record *r, const board_record *recs, const int *have)
{
    if (r->peer >= 0) return r->peer;
    int n = r->ngroup < GROUP_MAX ? r->ngroup : GROUP_MAX, behind = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            int m = r->group[i];
            if (m == r->rank || m < 0 || m >= board.nranks) continue;
            if (pass == 0 && (!have[m] || *process_state(&recs[m]))) return m;
            if (pass == 1 && !reached(r, &recs[m])) {
                if (!recs[m].op[0] || recs[m].group_id != r->group_id) return m;
                if (behind < 0) behind = m;
            }
        }
    return behind;
}

/* The verdict on the rank at the end of the chain. */
static void name_culprit(const board_record *recs, const int *have, int c, double now, char *buf, size_t len)
{
    if (!have[c]) {
        snprintf(buf, len, "rank %d never arrived, and left no status record in %.200s (on another host? without --save the "
                 "board is local to each host)", c, board.dir);
        return;
    }
    const board_record *r = &recs[c];
    const char *state = process_state(r);
    buf[0] = 0;
    append(buf, len, "rank %d never arrived: ", c);
    if (r->done_at > 0)
        append(buf, len, "its last completed action was %s of step %lld, %.1f s ago", r->done, (long long)r->done_step,
               now - r->done_at);
    else
        append(buf, len, "it completed no step action yet");
    if (r->running_since > 0) append(buf, len, "; it has been running %s for %.1f s", r->running, now - r->running_since);
    if (*state) append(buf, len, "; its process %d on %s is %s", (int)r->pid, r->host, state);
    else append(buf, len, "; it is not waiting for anything (stopped, or stuck in compute)");
}

pp_status comm_board_explain(pp_error *err)
{
    if (!board.me || !err) return err ? err->status : PP_OK;
    int n = board.nranks;
    board_record *recs = calloc((size_t)n, sizeof *recs);
    int *have = calloc((size_t)n, sizeof *have), *seen = calloc((size_t)n, sizeof *seen);
    if (!recs || !have || !seen) {
        free(recs), free(have), free(seen);
        return err->status;
    }
    const double now = wall_now();
    char line[400];
    pp_log(PP_LOG_ERROR, "the job's ranks, from the status board %s:", board.dir);
    for (int r = 0; r < n; r++) {
        have[r] = read_record(r, &recs[r]);
        if (have[r]) describe_rank(&recs[r], now, line, sizeof line);
        else snprintf(line, sizeof line, "rank %d: no status record", r);
        pp_log(PP_LOG_ERROR, "  %s", line);
    }
    /* follow who waits on whom from this rank */
    char chain[160] = "";
    int cur = board.me->rank, next;
    char verdict[400];
    for (;;) {
        seen[cur] = 1;
        append(chain, sizeof chain, "%s%d", chain[0] ? " -> " : "", cur);
        if (!have[cur] || !recs[cur].op[0] || *process_state(&recs[cur])) {
            name_culprit(recs, have, cur, now, verdict, sizeof verdict);
            break;
        }
        next = waits_on(&recs[cur], recs, have);
        if (next < 0) {
            describe_wait(&recs[cur], line, sizeof line);
            snprintf(verdict, sizeof verdict, "rank %d waits for the %.300s, which every other member has reached%s",
                     cur, line, cur == board.me->rank ? " (the network, or MPI?)" : ": it is behind (stopped?)");
            break;
        }
        if (next >= n) {
            snprintf(verdict, sizeof verdict, "rank %d waits for rank %d, which is not a rank of this job", cur, next);
            break;
        }
        if (seen[next]) {
            snprintf(verdict, sizeof verdict, "a cycle: rank %d waits for rank %d, which waits (via the chain) for it: "
                     "every rank on it is waiting, in different operations (their lines above say which)", cur, next);
            break;
        }
        cur = next;
    }
    char own[PP_ERROR_LEN];
    snprintf(own, sizeof own, "%s", err->msg);
    pp_status st = pp_error_set(err, err->status, "%s\n  %s (who waits for whom: %s)", own, verdict, chain);
    free(recs), free(have), free(seen);
    return st;
}

/* Checks for the multi-rank comm tests (test_comm.c, test_grid.c): a failed check
 * prints the rank, place and values, then ends the whole job with MPI_Abort, so a
 * failing rank never leaves the others waiting in a collective. */
#ifndef PP_TEST_COMM_CHECK_H
#define PP_TEST_COMM_CHECK_H

#include <onnxpipe/backend/comm_backend.h>
#include <onnxpipe/comm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pp_comm *check_world;   /* set by main once the world exists */

#define CHECK(cond, ...)                                                                               \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", check_world ? check_world->rank : -1, \
                    __FILE__, __LINE__, #cond);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                              \
            fputc('\n', stderr);                                                                       \
            fflush(stderr);                                                                            \
            if (check_world) pp_comm_abort(check_world, 1);                                            \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

/* A call that must succeed. */
#define CHECK_OK(expr)                                                                    \
    do {                                                                                  \
        pp_error check_err_ = {0};                                                        \
        pp_error *err = &check_err_;                                                      \
        pp_status check_st_ = (expr);                                                     \
        CHECK(check_st_ == PP_OK, "%s: %s", pp_status_string(check_st_), check_err_.msg); \
    } while (0)

/* A call that must fail with status `want` and a message containing `needle`. */
#define CHECK_FAILS(expr, want, needle)                                                              \
    do {                                                                                             \
        pp_error check_err_ = {0};                                                                   \
        pp_error *err = &check_err_;                                                                 \
        pp_status check_st_ = (expr);                                                                \
        CHECK(check_st_ == (want) && strstr(check_err_.msg, (needle)), "got %s '%s', want %s '%s'", \
              pp_status_string(check_st_), check_err_.msg, pp_status_string(want), (needle));       \
    } while (0)

/* Prints from rank 0 only. */
#define SAY(...)                                                 \
    do {                                                         \
        if (!check_world || check_world->rank == 0) {            \
            printf(__VA_ARGS__);                                 \
            fflush(stdout);                                      \
        }                                                        \
    } while (0)

#endif

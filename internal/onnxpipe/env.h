/* Private to the library (no PP_API; every module may include it): the one reader of the
 * environment. core/env.c holds the table of every variable the library reads (name,
 * what it does, default), from which scripts/gen-env-doc.py writes docs/environment.md;
 * tests/test_env_doc.sh fails when a name the library reads is missing from the table. */
#ifndef PP_CORE_ENV_H
#define PP_CORE_ENV_H

#include <onnxpipe/core.h>

/* The variable's value, NULL when it is unset; the caller parses it. name must be in
 * core/env.c's table. Local. */
const char *pp_env_get(const char *name);

/* 1 when the variable is set to exactly value. Local. */
int pp_env_is(const char *name, const char *value);

/* Seconds, a finite number > 0; unset or empty gives the table's default. An error names
 * the variable and its bad value. Local. */
pp_status pp_env_seconds(const char *name, double *seconds, pp_error *err);

#endif

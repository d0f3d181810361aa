/* The version of the library a program runs against (include/onnxpipe/core.h): with a
 * shared libonnxpipe it can differ from the ONNXPIPE_VERSION_* macros the program was
 * compiled with, which is what a caller compares them for. */
#include <onnxpipe/core.h>

const char *pp_version(void) { return ONNXPIPE_VERSION_STRING; }

int pp_version_number(void) { return ONNXPIPE_VERSION_NUMBER; }

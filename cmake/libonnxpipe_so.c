/* libonnxpipe.so's own translation unit, empty on purpose: all of the library's code comes
 * from the one localized object libonnxpipe.a is made of (cmake/install.cmake), and CMake
 * wants at least one source for a shared library target. */
typedef int libonnxpipe_so_unit;   /* ISO C wants a declaration in every translation unit */

# What `cmake --install` and `cpack -G DEB` ship (included by CMakeLists.txt): libonnxpipe.so
# and libonnxpipe.a, the public headers, the onnxpipe command, the CMake package
# (onnxpipe::onnxpipe, onnxpipe::onnxpipe_static) and onnxpipe.pc. tests/test_install.sh checks it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library is linked from the same object as libonnxpipe.a, made by
# cmake/public_archive.cmake: hidden symbols and the target_clones ifuncs are local there
# already, so the .so exports exactly what the archive does (the PP_API functions).
add_library(onnxpipe_shared SHARED ${CMAKE_SOURCE_DIR}/cmake/libonnxpipe_so.c)
add_dependencies(onnxpipe_shared onnxpipe_public)
set_target_properties(onnxpipe_shared PROPERTIES OUTPUT_NAME onnxpipe VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} C_VISIBILITY_PRESET hidden
                      LINK_DEPENDS ${PP_PUBLIC_OBJECT}
                      # keep the link path of non-system dependencies (/usr/local/cuda/lib64)
                      INSTALL_RPATH_USE_LINK_PATH ON)
# --no-undefined: a dependency missing from onnxpipe_deps fails here, not in a user's link
target_link_libraries(onnxpipe_shared PRIVATE ${PP_PUBLIC_OBJECT} onnxpipe_deps -Wl,--no-undefined)
set_target_properties(onnxpipe_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# A program linking an ASan/UBSan build of the library (PP_SANITIZE) needs the runtimes first.
set(PP_USER_LINK_FLAGS "")
if(PP_SANITIZE)
  set(PP_USER_LINK_FLAGS "-fsanitize=address,undefined")
endif()

install(TARGETS onnxpipe_shared onnxpipe_cli
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_BINARY_DIR}/libonnxpipe.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/onnxpipe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${GEN_DIR}/onnxpipe/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/onnxpipe)

# CMake package. onnxpipe.a's targets are not CMake-built (a custom command), so the config
# file makes both imported targets itself; the dependencies a static link needs are found
# with find_dependency, the same way CMakeLists.txt finds them.
set(PP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/onnxpipe)
set(PP_CUDNN_LIBRARY "${CUDNN_LIBRARY}")
set(PP_NCCL_LIBRARY "${NCCL_LIBRARY}")
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/onnxpipeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/pkg/onnxpipeConfig.cmake INSTALL_DESTINATION ${PP_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# before 1.0 a minor release may break the API (docs/library.md: ABI), hence SameMinorVersion
write_basic_package_version_file(${CMAKE_BINARY_DIR}/pkg/onnxpipeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/pkg/onnxpipeConfig.cmake ${CMAKE_BINARY_DIR}/pkg/onnxpipeConfigVersion.cmake
        DESTINATION ${PP_CMAKE_DIR})

# pkg-config. The prefix is where onnxpipe.pc lies, so the file is right for any
# `--install --prefix` and for the .deb. Libs.private lists what a static link adds.
file(RELATIVE_PATH PP_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" PP_PC_TO_PREFIX "${PP_PC_TO_PREFIX}")
# hwloc and protobuf-c by library, not Requires.private: --static would then add their own
# private libraries (-ludev) as for a fully static program, where only libonnxpipe.a is static.
set(PP_PC_LIBS_PRIVATE ${PROTOBUF_C_LINK_LIBRARIES} ${HWLOC_LINK_LIBRARIES} ${MPI_C_LIBRARIES} ${BLAS_LIBRARIES})
if(PP_HAVE_CUDA)
  list(APPEND PP_PC_LIBS_PRIVATE ${CUDAToolkit_LIBRARY_DIR}/libcudart_static.a
       ${CUDNN_LIBRARY} ${NCCL_LIBRARY} -ldl -lrt -lpthread -lstdc++)
endif()
list(APPEND PP_PC_LIBS_PRIVATE -lm)
list(JOIN PP_PC_LIBS_PRIVATE " " PP_PC_LIBS_PRIVATE)
configure_file(${CMAKE_SOURCE_DIR}/cmake/onnxpipe.pc.in ${CMAKE_BINARY_DIR}/pkg/onnxpipe.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/pkg/onnxpipe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` (from the build directory) or `make deb`: one package with all of the above
# under /usr. It ships headers and the CMake/pkg-config files, so it depends on the -dev
# packages a program built against it needs; CUDA (not a Debian package here) is not listed.
set(CPACK_PACKAGE_NAME onnxpipe)
set(CPACK_PACKAGE_VENDOR onnxpipe)
set(CPACK_PACKAGE_CONTACT "onnxpipe developers <onnxpipe@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "pipeline x data parallel training of ONNX models (library and CLI)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenmpi-dev, libhwloc-dev, libprotobuf-c-dev, libopenblas-dev, pkg-config")
# a shlibs file for packages built against it, and the ldconfig trigger for the SONAME link
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/deb)
set(CPACK_GENERATOR DEB)
include(CPack)
add_custom_target(deb COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
                  DEPENDS onnxpipe_shared onnxpipe_cli onnxpipe_public
                  WORKING_DIRECTORY ${CMAKE_BINARY_DIR} COMMENT "cpack -G DEB into ${CMAKE_BINARY_DIR}/deb")

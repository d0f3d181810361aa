# The CUDA backend (included by CMakeLists.txt when nvcc is found): kernels/cuda/*.cu
# (device, cuBLAS/cuBLASLt/cuDNN kernels, fused optimizer) and comm/nccl*.c into libonnxpipe,
# cudart linked statically, cuDNN/NCCL as shared libraries, cuBLAS/cuBLASLt loaded by the first
# CUDA device (kernels/cuda/cublas_api.h: linked, they cost every process ~220 MiB). The libcuda stub is
# never linked: cudart loads the driver at run time, so a binary built here still starts
# (and runs on the CPU) on a machine with no GPU driver.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures the CUDA backend is compiled for")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(CUDA_LIB_HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_TARGET_DIR}/lib
    /usr/lib/x86_64-linux-gnu /usr/local/lib)
set(CUDA_INC_HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/include)
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDA_INC_HINTS} REQUIRED)
find_library(CUDNN_LIBRARY cudnn HINTS ${CUDA_LIB_HINTS} REQUIRED)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDA_INC_HINTS} REQUIRED)
find_library(NCCL_LIBRARY nccl HINTS ${CUDA_LIB_HINTS} REQUIRED)

# The cuda backend joins the kernels' backend list, and the NCCL communicator the comm/
# list, through gen/pp_backends.h (CMakeLists.txt): no source is swapped.
set_target_properties(onnxpipe_internal PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")

file(GLOB PP_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
file(GLOB PP_NCCL_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/comm/nccl*.c ${CMAKE_SOURCE_DIR}/comm/nccl*.cu)

# nvcc gets its own flags: the directory's C options (-Wall, -fsanitize=...) are for gcc.
add_library(onnxpipe_cuda OBJECT ${PP_CUDA_SRC})
set_target_properties(onnxpipe_cuda PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                      CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
# hidden like the C objects (CMakeLists.txt): of the .cu files' functions only those the
# public headers declare (PP_API) stay global in libonnxpipe.a
target_compile_options(onnxpipe_cuda PRIVATE -D_GNU_SOURCE -Xcompiler=-Wall,-Wextra,-fvisibility=hidden
                       --expt-relaxed-constexpr)
if(PP_WERROR)
  target_compile_options(onnxpipe_cuda PRIVATE -Werror=all-warnings -Xcompiler=-Werror)
endif()
# the per-module include rule of CMakeLists.txt (pp_module_includes): kernels/cuda and kernels/
target_include_directories(onnxpipe_cuda PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/internal ${GEN_DIR}
                           ${CMAKE_SOURCE_DIR}/kernels ${CMAKE_SOURCE_DIR}/kernels/cuda ${CUDNN_INCLUDE_DIR})
target_link_libraries(onnxpipe_cuda PRIVATE CUDA::toolkit)
# what kernels/cuda/cublas_api.cu dlopens: the sonames of this toolkit, then its directory
target_compile_definitions(onnxpipe_cuda PRIVATE
    PP_CUBLAS_SONAME="libcublas.so.${CUDAToolkit_VERSION_MAJOR}"
    PP_CUBLASLT_SONAME="libcublasLt.so.${CUDAToolkit_VERSION_MAJOR}"
    PP_CUDA_LIBDIR="${CUDAToolkit_LIBRARY_DIR}")
# the same sonames for scripts/gpu-bundle.sh, which finds the linked ones with ldd
file(WRITE ${CMAKE_BINARY_DIR}/cuda-dlopen.txt
     "libcublas.so.${CUDAToolkit_VERSION_MAJOR}\nlibcublasLt.so.${CUDAToolkit_VERSION_MAJOR}\n")

target_sources(onnxpipe_internal PRIVATE $<TARGET_OBJECTS:onnxpipe_cuda> ${PP_NCCL_SRC})
target_include_directories(onnxpipe_internal PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE_DIR} ${CUDNN_INCLUDE_DIR})
target_link_libraries(onnxpipe_deps INTERFACE CUDA::cudart_static ${CUDNN_LIBRARY} ${NCCL_LIBRARY}
                      ${CMAKE_DL_LIBS} stdc++)

# Makes libonnxpipe.a, the archive a user links, out of libonnxpipe_internal.a (run by
# CMakeLists.txt as cmake -P, with LD, OBJCOPY, NM, AR, RANLIB, INTERNAL, OBJECT and OUT):
# all objects linked into one relocatable object, whose hidden symbols become local. A
# static archive keeps hidden symbols global otherwise, and a user's own iter_next would
# clash with ours at link time. Only what the public headers declare (PP_API) stays global.
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "public_archive.cmake: '${cmd}' failed (${rc}):\n${out}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

run(${LD} -r --whole-archive ${INTERNAL} -o ${OBJECT})

# GCC (12) gives a target_clones function (PP_CPU_CLONES, kernels/cpu/cpu_math.h) and its
# resolver default visibility whatever the code or -fvisibility says, so these ifuncs are
# localized by name. None is public; tests/test_symbols.sh fails if a public one ever is.
run(${NM} -g --defined-only ${OBJECT})
string(REGEX MATCHALL "[0-9a-f]+ i [^\n]+" ifuncs "${run_out}")
set(localize)
foreach(line ${ifuncs})
  string(REGEX REPLACE "^[0-9a-f]+ i " "" name "${line}")
  list(APPEND localize --localize-symbol=${name} --localize-symbol=${name}.resolver)
endforeach()

run(${OBJCOPY} --localize-hidden ${localize} ${OBJECT})
file(REMOVE ${OUT})
run(${AR} qc ${OUT} ${OBJECT})
run(${RANLIB} ${OUT})

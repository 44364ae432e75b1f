# The install_consumer test (tests/install/CMakeLists.txt): install the outer build into WORK_DIR/prefix, then
# configure, build and run the consumer project against it. The consumer uses the outer build's generator, make
# program and compilers (OUTER_*), never CMake's defaults: a default generator needs a build tool the quick start
# may not have installed (Unix Makefiles needs `make`; the quick start installs ninja-build only).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR OUTER_GENERATOR OUTER_MAKE_PROGRAM OUTER_CXX_COMPILER)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "consumer_test.cmake: -D${var}=... not given (run it through ctest: install_consumer)")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

set(configure_args -G "${OUTER_GENERATOR}" "-DCMAKE_MAKE_PROGRAM=${OUTER_MAKE_PROGRAM}"
                   "-DCMAKE_CXX_COMPILER=${OUTER_CXX_COMPILER}")
if(NOT "${OUTER_GENERATOR_PLATFORM}" STREQUAL "")
  list(APPEND configure_args -A "${OUTER_GENERATOR_PLATFORM}")
endif()
if(NOT "${OUTER_GENERATOR_TOOLSET}" STREQUAL "")
  list(APPEND configure_args -T "${OUTER_GENERATOR_TOOLSET}")
endif()
# locksim is a C++-only project, so the outer build usually has no C compiler; pass it when it has one.
if(NOT "${OUTER_C_COMPILER}" STREQUAL "")
  list(APPEND configure_args "-DCMAKE_C_COMPILER=${OUTER_C_COMPILER}")
endif()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build ${configure_args} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_BUILD_TYPE=Release)
# The consumer really was configured with the outer generator (not a default that happens to work here).
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt gen_line REGEX "^CMAKE_GENERATOR:INTERNAL=")
if(NOT gen_line STREQUAL "CMAKE_GENERATOR:INTERNAL=${OUTER_GENERATOR}")
  message(FATAL_ERROR "the consumer was configured with '${gen_line}', not the outer '${OUTER_GENERATOR}'")
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --config Release)
# Single-config generators put the program in the build folder, multi-config ones in a folder per configuration.
if(EXISTS ${WORK_DIR}/build/Release/consumer)
  run(${WORK_DIR}/build/Release/consumer)
else()
  run(${WORK_DIR}/build/consumer)
endif()

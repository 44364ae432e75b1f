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
# The installed package is relocatable: its CMake files name no path of this machine (the source or build tree, a
# library file found by path), and it installs no empty folder.
file(GLOB package_files ${WORK_DIR}/prefix/lib*/cmake/locksim/*.cmake ${WORK_DIR}/prefix/lib/*/cmake/locksim/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "no CMake package files under ${WORK_DIR}/prefix")
endif()
get_filename_component(source_root ${SOURCE_DIR}/../../.. ABSOLUTE)
foreach(f ${package_files})
  file(READ ${f} text)
  foreach(path ${source_root} ${BUILD_DIR})
    string(FIND "${text}" "${path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names ${path}, a path of the machine that built it")
    endif()
  endforeach()
  # Headers are included as <locksim/...> from include/ alone: include/locksim itself on the path would let our
  # sim/, protocols/, scenarios/ and reports/ shadow a user's folders of the same names.
  if(text MATCHES "include/locksim[\";]")
    message(FATAL_ERROR "${f} puts include/locksim on the include path")
  endif()
  if(text MATCHES "[\"; ](/[^\"; ]+\\.(so|a)(\\.[0-9]+)*)[\"; ]")
    message(FATAL_ERROR "${f} links ${CMAKE_MATCH_1} by its absolute path (use an imported target)")
  endif()
endforeach()
file(GLOB_RECURSE installed_dirs LIST_DIRECTORIES true ${WORK_DIR}/prefix/include/*)
foreach(d ${installed_dirs})
  if(IS_DIRECTORY ${d})
    file(GLOB entries ${d}/*)
    if(NOT entries)
      message(FATAL_ERROR "the install made an empty folder: ${d}")
    endif()
  endif()
endforeach()
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

# The examples (examples/CMakeLists.txt) built against the install as a user builds them: the property test of
# a user's own protocol runs, its durable version passing a few cases and its buggy one failing with the
# story and a replay file.
if(NOT "${EXAMPLES_DIR}" STREQUAL "")
  run(${CMAKE_COMMAND} -S ${EXAMPLES_DIR} -B ${WORK_DIR}/examples ${configure_args}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
  file(STRINGS ${WORK_DIR}/examples/CMakeCache.txt dir_line REGEX "^locksim_DIR:PATH=")
  if(NOT dir_line MATCHES "^locksim_DIR:PATH=${WORK_DIR}/prefix/")
    message(FATAL_ERROR "the examples did not find the installed locksim ('${dir_line}')")
  endif()
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/examples --config Release --target token_lease_property_test
      token_lease_locksim)
  set(bin ${WORK_DIR}/examples)
  if(EXISTS ${WORK_DIR}/examples/Release/token_lease_property_test)
    set(bin ${WORK_DIR}/examples/Release)
  endif()
  set(example ${bin}/token_lease_property_test)
  run(${CMAKE_COMMAND} -E env "RC_PARAMS=max_success=20" ${example})
  file(MAKE_DIRECTORY ${WORK_DIR}/replays)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "RC_PARAMS=seed=2" "LOCKSIM_REPLAY_DIR=${WORK_DIR}/replays"
                          ${example} --gtest_also_run_disabled_tests --gtest_filter=TokenLease.*
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(GLOB replays ${WORK_DIR}/replays/replay-*.toml)
  if(rc EQUAL 0 OR NOT out MATCHES "token-regression" OR NOT out MATCHES "replay it with: token_lease_locksim replay "
     OR NOT replays)
    message(FATAL_ERROR "the buggy example protocol's property did not fail as it should (${rc}):\n${out}\n${err}")
  endif()
  # The user's binary (cli_main with the protocol registered) replays the file to its trace hash.
  list(GET replays 0 replay_file)
  run(${bin}/token_lease_locksim replay ${replay_file})
  message(STATUS "the buggy example protocol's property failed as it should; ${replay_file} replays")
  # The user's binary runs every command on a scenario file whose fault names the protocol's own declared
  # server (lockd1): check (its expectations), explore (a failure shrunk into a replay file), replay.
  set(me ${bin}/token_lease_locksim)
  execute_process(COMMAND ${me} list RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "token-lease-durable" OR NOT out MATCHES "service: lockd1 \\(server\\)")
    message(FATAL_ERROR "the user's binary does not list its protocol and the service it declares (${rc}):\n${out}")
  endif()
  run(${me} check ${EXAMPLES_DIR}/scenarios)
  execute_process(COMMAND ${me} explore ${EXAMPLES_DIR}/scenarios/token-lease-restart.toml -p token-lease --seeds 40
                          --keep-faults --no-progress --replay-out ${WORK_DIR}/replays/explored.toml
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT out MATCHES "replay      token_lease_locksim replay ")
    message(FATAL_ERROR "the user's binary did not explore its protocol as it should (${rc}):\n${out}\n${err}")
  endif()
  file(READ ${WORK_DIR}/replays/explored.toml explored)
  if(NOT explored MATCHES "lockd1")
    message(FATAL_ERROR "the replay file of the user's protocol names no fault on its server lockd1")
  endif()
  run(${me} replay ${WORK_DIR}/replays/explored.toml)
endif()

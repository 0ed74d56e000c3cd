# ctest driver: install the built trainscope into a fresh prefix, move the
# prefix (an install tree must not name the machine's paths it was built
# with), then configure, build and run tests/consumer against it.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/installed")
file(RENAME "${WORK_DIR}/installed" "${WORK_DIR}/prefix")
set(prefix "${WORK_DIR}/prefix")

# The exported targets name their dependencies as targets, not as files.
file(GLOB targets_files "${prefix}/lib*/cmake/trainscope/trainscopeTargets*.cmake")
foreach(f IN LISTS targets_files)
  file(READ "${f}" text)
  foreach(bad "/usr/lib" "/usr/local" "${WORK_DIR}/installed" "$<LINK_ONLY:>" "\\$<LINK_ONLY:>")
    string(FIND "${text}" "${bad}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names '${bad}': the install tree does not move")
    endif()
  endforeach()
endforeach()

step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
     "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j 2)
step("${WORK_DIR}/build/consumer" "${WORK_DIR}/out")
if(NOT EXISTS "${WORK_DIR}/out/report.json" OR NOT EXISTS "${WORK_DIR}/out/trace.json")
  message(FATAL_ERROR "the consumer wrote no report.json / trace.json")
endif()
if(EXISTS "${BUILD_DIR}/integrations/torch")
  if(NOT EXISTS "${WORK_DIR}/build/consumer_torch")
    message(FATAL_ERROR "trainscope::torch was built but the consumer found no trainscope::torch")
  endif()
  step("${WORK_DIR}/build/consumer_torch" "${WORK_DIR}/out_torch")
  # The trainer `trainscope tune` tunes (tests/tune_outside_test.cc), with
  # find_package(trainscope COMPONENTS torch).
  step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer/tune" -B "${WORK_DIR}/tune"
       "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release)
  step(${CMAKE_COMMAND} --build "${WORK_DIR}/tune" -j 2)
endif()
message(STATUS "outside consumer built against ${prefix} (moved after install) and ran")

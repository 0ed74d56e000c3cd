# sdk/cupti: the CUPTI activity collector, added to the trainscope target.
#
# Compiled against the CUDA toolkit's CUPTI headers when they are found
# (the CUDA::cupti target of FindCUDAToolkit). libcupti itself is never
# linked: collector.cc loads it with dlopen at run time (library.h), so the
# library and its consumers run on machines without CUDA. Without the headers
# the same API builds as a stub whose Start reports
# "CUPTI unavailable: built without the CUDA toolkit".
if(TARGET CUDA::cupti)
  target_sources(trainscope PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/buffer_pool.cc
    ${CMAKE_CURRENT_LIST_DIR}/collector.cc
    ${CMAKE_CURRENT_LIST_DIR}/library.cc
    ${CMAKE_CURRENT_LIST_DIR}/records.cc)
  target_compile_definitions(trainscope PRIVATE TRAINSCOPE_WITH_CUPTI=1)
  # Headers only, as system headers (CUPTI's own warnings are not ours).
  target_include_directories(trainscope SYSTEM PRIVATE
    $<BUILD_INTERFACE:$<TARGET_PROPERTY:CUDA::cupti,INTERFACE_INCLUDE_DIRECTORIES>>)
  message(STATUS "trainscope: CUPTI collector on (headers of CUDA ${CUDAToolkit_VERSION}; "
                 "libcupti is loaded at run time)")
else()
  target_sources(trainscope PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/buffer_pool.cc
    ${CMAKE_CURRENT_LIST_DIR}/collector_stub.cc)
  message(STATUS "trainscope: CUPTI collector off (no CUPTI headers); the same API builds")
endif()

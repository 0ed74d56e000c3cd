# sdk/cupti: the CUPTI activity collector: the sources of the cupti room
# (trainscope_cupti_objects).
#
# Compiled against the CUDA toolkit's CUPTI headers when they are found
# (the CUDA::cupti target of FindCUDAToolkit). libcupti itself is never
# linked: collector.cc loads it with dlopen at run time (library.h), so the
# library and its consumers run on machines without CUDA. Without the headers
# the same API builds as a stub whose Start reports
# "CUPTI unavailable: built without the CUDA toolkit".
if(TARGET CUDA::cupti)
  trainscope_room(cupti USES ground
    SOURCES cupti/buffer_pool.cc cupti/collector.cc cupti/collector_setup.cc cupti/library.cc
            cupti/records.cc)
  target_compile_definitions(trainscope_cupti_objects PRIVATE TRAINSCOPE_WITH_CUPTI=1)
  # Headers only, as system headers (CUPTI's own warnings are not ours).
  target_include_directories(trainscope_cupti_objects SYSTEM PRIVATE
    $<BUILD_INTERFACE:$<TARGET_PROPERTY:CUDA::cupti,INTERFACE_INCLUDE_DIRECTORIES>>)
  message(STATUS "trainscope: CUPTI collector on (headers of CUDA ${CUDAToolkit_VERSION}; "
                 "libcupti is loaded at run time)")
else()
  trainscope_room(cupti USES ground SOURCES cupti/buffer_pool.cc cupti/collector_stub.cc)
  message(STATUS "trainscope: CUPTI collector off (no CUPTI headers); the same API builds")
endif()

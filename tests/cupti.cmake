# tests for sdk/cupti. The converter and buffer-pool tests build real CUPTI
# activity structs, so they need the CUPTI headers; without them only the
# stub's behaviour is checked. The buffer-walk test uses the toolkit's own
# libcupti (cuptiActivityGetNextRecord needs no driver in CUPTI 13.0).
trainscope_test(cupti_test cupti_test.cc)
target_link_libraries(cupti_test PRIVATE ${CMAKE_DL_LIBS})
if(TARGET CUDA::cupti)
  target_compile_definitions(cupti_test PRIVATE TRAINSCOPE_WITH_CUPTI=1
                             TRAINSCOPE_TEST_LIBCUPTI="$<TARGET_FILE:CUDA::cupti>"
                             TRAINSCOPE_CUPTI_WHEELS_DIR="${PROJECT_SOURCE_DIR}/.cache/cupti")
  target_include_directories(cupti_test SYSTEM PRIVATE
                             $<TARGET_PROPERTY:CUDA::cupti,INTERFACE_INCLUDE_DIRECTORIES>)
endif()

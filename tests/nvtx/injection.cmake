# ---- trainscope_nvtx_injection: NVTX recording injection used by tests ----
# Paste after project(); works from any CMakeLists (paths use PROJECT_SOURCE_DIR).
# Needs CUDA::nvtx3 (FindCUDAToolkit, CMake >= 3.25); NVTX3 is header-only.
if(NOT TARGET CUDA::nvtx3)
  find_package(CUDAToolkit REQUIRED)
endif()

set(TRAINSCOPE_NVTX_TEST_DIR "${PROJECT_SOURCE_DIR}/tests/nvtx")

# MODULE: only ever dlopen'ed (by NVTX via NVTX_INJECTION64_PATH), never linked.
add_library(trainscope_nvtx_injection MODULE
  "${TRAINSCOPE_NVTX_TEST_DIR}/injection_recorder.cc")
target_compile_features(trainscope_nvtx_injection PRIVATE cxx_std_17)
target_include_directories(trainscope_nvtx_injection PRIVATE "${TRAINSCOPE_NVTX_TEST_DIR}")
# Include dirs only (the library defines NVTX_NO_IMPL; it calls no dlopen itself).
target_link_libraries(trainscope_nvtx_injection PRIVATE CUDA::nvtx3)
target_compile_options(trainscope_nvtx_injection PRIVATE -Wall -Wextra -Werror)
set_target_properties(trainscope_nvtx_injection PROPERTIES
  OUTPUT_NAME trainscope_nvtx_injection        # -> libtrainscope_nvtx_injection.so
  CXX_VISIBILITY_PRESET hidden                 # -fvisibility=hidden
  VISIBILITY_INLINES_HIDDEN ON
  POSITION_INDEPENDENT_CODE ON
  LINK_DEPENDS "${TRAINSCOPE_NVTX_TEST_DIR}/injection_exports.map")
# -fvisibility=hidden alone still exports libstdc++ template instances; the
# version script limits the dynamic symbols to InitializeInjectionNvtx2 + tsnvtx_*.
target_link_options(trainscope_nvtx_injection PRIVATE
  "LINKER:--version-script=${TRAINSCOPE_NVTX_TEST_DIR}/injection_exports.map"
  "LINKER:--no-undefined")


# Finds LibTorch 2.x: the C++ library inside PyPI's `torch` wheel.
#
# Torch_DIR / CMAKE_PREFIX_PATH win; otherwise python3 is asked for
# torch.utils.cmake_prefix_path. Debian's libtorch-dev (1.13) is a fallback
# only (docs/install.md). The PyPI wheel is CUDA-built, so find_package(Torch)
# needs the CUDA toolkit at configure time; the result still runs without a GPU.
set(TRAINSCOPE_HAVE_TORCH OFF)
if(TRAINSCOPE_TORCH STREQUAL "OFF")
  return()
endif()

include(trainscopeTorchRuntime)
trainscope_locate_torch()

# Torch's CMake config looks for the CUDA toolkit through the old FindCUDA
# variables and warns about policies; keep configure output readable.
set(_ts_saved_warn ${CMAKE_WARN_DEPRECATED})
set(CMAKE_WARN_DEPRECATED OFF CACHE BOOL "" FORCE)
if(TRAINSCOPE_TORCH STREQUAL "ON")
  find_package(Torch REQUIRED)
else()
  find_package(Torch QUIET)
endif()
set(CMAKE_WARN_DEPRECATED ${_ts_saved_warn} CACHE BOOL "" FORCE)

if(Torch_FOUND)
  set(TRAINSCOPE_HAVE_TORCH ON)
  # The wheel's C++ ABI comes from TORCH_CXX_FLAGS (never hard-coded).
  string(REGEX MATCH "_GLIBCXX_USE_CXX11_ABI=([01])" _abi "${TORCH_CXX_FLAGS}")
  set(TRAINSCOPE_TORCH_CXX11_ABI "${CMAKE_MATCH_1}")
  if(TRAINSCOPE_TORCH_CXX11_ABI STREQUAL "")
    # Recent wheels leave the flag out: they use the compiler's default (1).
    set(TRAINSCOPE_TORCH_CXX11_ABI "1 (compiler default; TORCH_CXX_FLAGS sets none)")
  endif()
  message(STATUS "trainscope: LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX} "
                 "(_GLIBCXX_USE_CXX11_ABI=${TRAINSCOPE_TORCH_CXX11_ABI})")
  if(TRAINSCOPE_TORCH_CXX11_ABI STREQUAL "0")
    message(WARNING "LibTorch uses the old C++ ABI; abseil and fmt from Debian use the new "
                    "one, so trainscope::torch cannot link them together.")
  endif()
  # Programs that link LibTorch find the wheel's libraries (the rule and
  # why: cmake/trainscopeTorchRuntime.cmake).
  add_library(trainscope_torch_runtime INTERFACE)
  trainscope_torch_runtime(trainscope_torch_runtime)
else()
  message(STATUS "trainscope: LibTorch not found; trainscope::torch and the samples are off "
                 "(pip install torch, or set Torch_DIR)")
endif()

# Locating LibTorch (PyPI's torch wheel) and running what links it: shared by
# trainscope's build (cmake/TrainscopeTorch.cmake) and its installed package
# (trainscopeConfig.cmake), so that a user's find_package(trainscope) links
# trainscope::torch the way our own targets do.

# trainscope_locate_torch(): unless Torch_DIR is set, appends the wheel's
# torch.utils.cmake_prefix_path (asked of python3) to CMAKE_PREFIX_PATH.
macro(trainscope_locate_torch)
  if(NOT Torch_DIR)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(
        COMMAND "${Python3_EXECUTABLE}" -c
                "import torch.utils; print(torch.utils.cmake_prefix_path)"
        OUTPUT_VARIABLE _ts_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
        ERROR_QUIET RESULT_VARIABLE _ts_torch_rc)
      if(_ts_torch_rc EQUAL 0 AND _ts_torch_prefix)
        list(APPEND CMAKE_PREFIX_PATH "${_ts_torch_prefix}")
      endif()
    endif()
  endif()
endmacro()

# trainscope_torch_runtime(TARGET): gives the INTERFACE target TARGET the
# link options a program that links the found LibTorch needs. The wheel's
# libtorch_cuda.so has no RUNPATH: Python preloads the CUDA libraries from
# the nvidia-* wheels beside it. A C++ program must find them itself, also
# for libtorch's own dependencies, so it gets an old-style DT_RPATH
# (searched for transitive libraries too) naming torch/lib and every
# nvidia/*/lib, and -rpath-link so that the linker resolves libtorch_cuda's
# NCCL symbols against the wheel's NCCL, not an older system one (without
# it: "libtorch_cuda.so: undefined reference to 'ncclCommResume'").
# Sets TRAINSCOPE_TORCH_RUNTIME_DIRS in the caller. Needs
# TORCH_INSTALL_PREFIX (find_package(Torch) sets it).
function(trainscope_torch_runtime target)
  get_filename_component(_site "${TORCH_INSTALL_PREFIX}" DIRECTORY)
  file(GLOB _nvidia_dirs LIST_DIRECTORIES true "${_site}/nvidia/*/lib")
  set(_dirs "${TORCH_INSTALL_PREFIX}/lib" ${_nvidia_dirs})
  target_link_options(${target} INTERFACE "LINKER:--disable-new-dtags")
  foreach(_dir IN LISTS _dirs)
    target_link_options(${target} INTERFACE "LINKER:-rpath,${_dir}" "LINKER:-rpath-link,${_dir}")
  endforeach()
  set(TRAINSCOPE_TORCH_RUNTIME_DIRS "${_dirs}" PARENT_SCOPE)
endfunction()

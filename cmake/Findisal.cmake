# Findisal: ISA-L (Intel's Intelligent Storage Acceleration Library; Debian
# libisal-dev ships no CMake package). Defines the imported target isal::isal
# and isal_FOUND. Set isal_USE_STATIC_LIBS to prefer libisal.a. Installed
# with trainscope's package so that find_package(trainscope) finds it the
# same way on the user's machine (no path of the build machine is kept).
if(isal_USE_STATIC_LIBS)
  set(_isal_names libisal.a isal)
else()
  set(_isal_names isal)
endif()
find_library(isal_LIBRARY NAMES ${_isal_names})
find_path(isal_INCLUDE_DIR isa-l/igzip_lib.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(isal REQUIRED_VARS isal_LIBRARY isal_INCLUDE_DIR)
if(isal_FOUND AND NOT TARGET isal::isal)
  add_library(isal::isal UNKNOWN IMPORTED)
  set_target_properties(isal::isal PROPERTIES IMPORTED_LOCATION "${isal_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${isal_INCLUDE_DIR}")
endif()
mark_as_advanced(isal_LIBRARY isal_INCLUDE_DIR)

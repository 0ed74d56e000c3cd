# Findxxhash: xxHash (Debian libxxhash-dev ships no CMake package). Defines
# the imported target xxhash::xxhash and xxhash_FOUND. Set
# xxhash_USE_STATIC_LIBS to prefer libxxhash.a. Installed with trainscope's
# package, like Findisal.cmake.
if(xxhash_USE_STATIC_LIBS)
  set(_xxhash_names libxxhash.a xxhash)
else()
  set(_xxhash_names xxhash)
endif()
find_library(xxhash_LIBRARY NAMES ${_xxhash_names})
find_path(xxhash_INCLUDE_DIR xxhash.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(xxhash REQUIRED_VARS xxhash_LIBRARY xxhash_INCLUDE_DIR)
if(xxhash_FOUND AND NOT TARGET xxhash::xxhash)
  add_library(xxhash::xxhash UNKNOWN IMPORTED)
  set_target_properties(xxhash::xxhash PROPERTIES
                        IMPORTED_LOCATION "${xxhash_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${xxhash_INCLUDE_DIR}")
endif()
mark_as_advanced(xxhash_LIBRARY xxhash_INCLUDE_DIR)

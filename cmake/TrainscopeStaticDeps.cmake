# TRAINSCOPE_STATIC_DEPS: link Abseil, zlib and xxHash (and ISA-L, where
# there is an archive of it) into trainscope's programs from their static
# archives (Debian ships them beside the shared libraries). The `trainscope`
# CLI then loads 9 shared objects instead of 52: on a 2-vCPU VM a run starts in about 4 ms instead of 10 ms
# (most of it the dynamic loader's mmap, relocation and symbol lookup), which
# is a sixth of `trainscope analyze` on a 26 MB trace and most of it on a
# small one. fmt, simdjson and ISA-L stay shared (Debian has no archives of
# them).
# The exported package is unchanged: a user's find_package(trainscope)
# resolves absl::, ZLIB::, isal:: and xxhash:: again on their machine.
#
# Include after find_package(absl) and before find_package(ZLIB), isal and
# xxhash.
option(TRAINSCOPE_STATIC_DEPS
       "Link Abseil, zlib, xxHash and ISA-L statically where archives exist" ON)

if(TRAINSCOPE_STATIC_DEPS)
  set(ZLIB_USE_STATIC_LIBS ON)  # FindZLIB, CMake >= 3.24
  set(isal_USE_STATIC_LIBS ON)  # cmake/Findisal.cmake
  set(xxhash_USE_STATIC_LIBS ON)  # cmake/Findxxhash.cmake
  # Every shared absl:: target imported here whose archive sits beside it
  # points at the archive instead. Their INTERFACE_LINK_LIBRARIES already
  # list each one's dependencies after it, the order a static link needs.
  get_directory_property(_ts_imported IMPORTED_TARGETS)
  set(_ts_switched 0)
  foreach(_ts_target IN LISTS _ts_imported)
    if(NOT _ts_target MATCHES "^absl::")
      continue()
    endif()
    get_target_property(_ts_type ${_ts_target} TYPE)
    if(NOT _ts_type STREQUAL "SHARED_LIBRARY")
      continue()
    endif()
    get_target_property(_ts_configs ${_ts_target} IMPORTED_CONFIGURATIONS)
    foreach(_ts_config IN LISTS _ts_configs)
      string(TOUPPER "${_ts_config}" _ts_config)
      get_target_property(_ts_so ${_ts_target} IMPORTED_LOCATION_${_ts_config})
      string(REGEX REPLACE "\\.so(\\.[0-9.]*)?$" ".a" _ts_archive "${_ts_so}")
      if(_ts_so AND NOT _ts_archive STREQUAL _ts_so AND EXISTS "${_ts_archive}")
        set_target_properties(${_ts_target} PROPERTIES IMPORTED_LOCATION_${_ts_config}
                                                       "${_ts_archive}")
        math(EXPR _ts_switched "${_ts_switched} + 1")
      endif()
    endforeach()
  endforeach()
  message(STATUS "trainscope: static Abseil (${_ts_switched} archives), zlib, xxHash")
endif()

# Installs the headers, the library and the CLI, and exports a CMake package
# so that a user's project can find_package(trainscope).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY include/trainscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES "${PROJECT_BINARY_DIR}/include/trainscope/version.h"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/trainscope)
install(TARGETS trainscope EXPORT trainscopeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS trainscope_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY integrations/polyaxon/include/trainscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(TARGETS trainscope_polyaxon EXPORT trainscopeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET trainscope_torch)
  install(DIRECTORY integrations/torch/include/trainscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h")
  install(TARGETS trainscope_torch EXPORT trainscopeTorchTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/trainscope)
install(EXPORT trainscopeTargets NAMESPACE trainscope:: DESTINATION ${_cmake_dir})
if(TARGET trainscope_torch)
  # Its own file: the config loads it only where LibTorch is found.
  install(EXPORT trainscopeTorchTargets NAMESPACE trainscope:: DESTINATION ${_cmake_dir})
endif()
configure_package_config_file(cmake/trainscopeConfig.cmake.in
  "${PROJECT_BINARY_DIR}/trainscopeConfig.cmake" INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/trainscopeConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/trainscopeConfig.cmake"
              "${PROJECT_BINARY_DIR}/trainscopeConfigVersion.cmake"
              cmake/Findisal.cmake cmake/Findxxhash.cmake cmake/trainscopeTorchRuntime.cmake
        DESTINATION ${_cmake_dir})

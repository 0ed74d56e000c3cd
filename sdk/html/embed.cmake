# sdk/html/embed.cmake: the files a page of `trainscope html` inlines,
# embedded in the program at build time; sets _html_embedded to the
# generated sources (for the html room in sdk/CMakeLists.txt).
#
# Each file becomes build/generated/html_<symbol>.cc, defining <symbol> and
# <symbol>Size (cmake/TrainscopeEmbed.cmake), re-generated when the file or
# the script changes:
#   page.css       kPageCss       the style of every page
#   common.js      kCommonJs      TS, the helpers every page's script uses
#   run.js ...     kRunJs ...     each page kind's own script
#   chart.min.js   kChartJs       Chart.js, from Debian's libjs-chart.js
# Without Chart.js the room still builds (kChartJsSize is 0), and the
# command says what it was built without.
find_file(TRAINSCOPE_CHARTJS chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH
          DOC "Chart.js (Debian libjs-chart.js), embedded in `trainscope html`")
if(TRAINSCOPE_CHARTJS)
  message(STATUS "trainscope: trainscope html embeds ${TRAINSCOPE_CHARTJS}")
else()
  message(STATUS "trainscope: trainscope html without Chart.js (install libjs-chart.js)")
endif()
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/generated)

set(_html_embedded "")
foreach(_embed kChartJs=${TRAINSCOPE_CHARTJS}
               kPageCss=${CMAKE_CURRENT_LIST_DIR}/page.css
               kCommonJs=${CMAKE_CURRENT_LIST_DIR}/common.js
               kRunJs=${CMAKE_CURRENT_LIST_DIR}/run.js
               kTraceJs=${CMAKE_CURRENT_LIST_DIR}/trace.js
               kRanksJs=${CMAKE_CURRENT_LIST_DIR}/ranks.js
               kExperimentJs=${CMAKE_CURRENT_LIST_DIR}/experiment.js)
  string(REGEX REPLACE "=.*" "" _symbol "${_embed}")
  string(REGEX REPLACE "^[^=]*=" "" _file "${_embed}")
  set(_generated ${PROJECT_BINARY_DIR}/generated/html_${_symbol}.cc)
  add_custom_command(OUTPUT ${_generated}
    COMMAND ${CMAKE_COMMAND} -DIN=${_file} -DOUT=${_generated} -DNAME=${_symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/TrainscopeEmbed.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/cmake/TrainscopeEmbed.cmake $<$<BOOL:${_file}>:${_file}>
    COMMENT "Embedding ${_symbol} for trainscope html")
  list(APPEND _html_embedded ${_generated})
endforeach()

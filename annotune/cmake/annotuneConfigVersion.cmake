# The version of annotune's CMake package, for `find_package(annotune <version> CONFIG)`.
#
# Kept equal to annotune.__version__ (a test checks). Before 1.0 a minor release may change
# annotune_tuned_header, so a 0.x request takes only the same minor version; from 1.0 on, the
# same major one. A version range (`find_package(annotune 0.1...0.3)`) takes what lies in it.

set(PACKAGE_VERSION "0.1.0")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)

if(PACKAGE_FIND_VERSION_RANGE)
  if(PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MIN
     AND ((PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE"
           AND PACKAGE_VERSION VERSION_LESS_EQUAL PACKAGE_FIND_VERSION_MAX)
          OR (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "EXCLUDE"
              AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MAX)))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
elseif(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _annotune_match "${PACKAGE_VERSION}")
  if(PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION
     AND PACKAGE_FIND_VERSION_MAJOR EQUAL CMAKE_MATCH_1
     AND (NOT CMAKE_MATCH_1 EQUAL 0
          OR PACKAGE_FIND_VERSION_COUNT LESS 2
          OR PACKAGE_FIND_VERSION_MINOR EQUAL CMAKE_MATCH_2))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
  unset(_annotune_match)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()

# annotune's CMake package: build a target with the header tuned for the device at hand.
#
#   find_package(annotune 0.1 CONFIG REQUIRED)   # cmake -Dannotune_DIR="$(annotune --cmake-dir)"
#   include(<annotune --cmake-dir>/annotuneConfig.cmake)   # or include it directly
#
#   annotune_tuned_header(<target> SOURCE <file> [DEVICE <name> | PER_ARCH] [OUTPUT <header>]
#                         [SHADOW])
#
# The CMake form of the Makefile rule in annotune's README: the build runs
# `annotune build <file> -o <header> [--device <name>]` and force-includes <header> in the
# target's C, C++ and CUDA sources. The step reruns when <file> or one of its committed tuned
# headers (tuned/*/<stem>.h beside it) changes, or a new one appears; `annotune build` rewrites
# <header> only when its content changes, so the target recompiles only when the header it gets
# really changed. Without DEVICE the device is found when the step runs ($ANNOTUNE_DEVICE, else
# this machine's GPU or CPU): a build directory belongs to one machine. PER_ARCH, for a CUDA
# target built for several architectures, runs `annotune build --per-arch` instead: one header
# holding every committed GPU's values, chosen by __CUDA_ARCH__ on the device side.
#
# SHADOW is for code you must not edit whose knobs are unguarded #defines (declared in
# annotune.toml), which a force-included header cannot override: the step runs
# `annotune build --shadow-dir`, which writes tuned copies of <file> and the local headers it
# reads, and the target compiles the copy of <file> in place of <file>, with the copies'
# directories first on its include path. Where the copies go and what they are made from is
# asked of `annotune build` when CMake configures; a change to any of those files configures
# again (vendored files seldom change).
#
#   annotune_check_tuning(<test> SOURCE <file> [DEVICE <name>] [MEASURE])
#
# A CTest test, `ctest -R <test>`, that runs `annotune check <file> [--device <name>]
# [--measure]`: it passes while the committed tuned header of <file> for the device at hand
# still holds (nothing it was tuned from changed; with MEASURE, re-measured still faster than
# the defaults) and fails naming what changed. Call enable_testing() (or include(CTest)) first.
#
# Sets ANNOTUNE_EXECUTABLE (cache: the annotune the build runs; first the one installed beside
# this module's Python, then PATH) and annotune_INCLUDE_DIR (annotune_timing.h, for programs
# that report their own times). When no annotune command is found, find_package fails with the
# reason (REQUIRED) or leaves annotune_FOUND false.

cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)

get_filename_component(annotune_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)

# <prefix>/lib/pythonX.Y/site-packages/annotune/cmake: scripts in <prefix>/bin (a venv, --user,
# a system install); on Windows <prefix>/Lib/site-packages/annotune/cmake, scripts in Scripts.
# An editable install has neither, and finds the annotune on PATH.
get_filename_component(_annotune_bin "${CMAKE_CURRENT_LIST_DIR}/../../../../../bin" ABSOLUTE)
get_filename_component(_annotune_scripts "${CMAKE_CURRENT_LIST_DIR}/../../../../Scripts" ABSOLUTE)
find_program(
  ANNOTUNE_EXECUTABLE
  NAMES annotune
  HINTS "${_annotune_bin}" "${_annotune_scripts}"
  NO_CMAKE_FIND_ROOT_PATH
  DOC "The annotune command that writes the tuned headers (annotune build)")
string(CONCAT _annotune_missing
  "no annotune command was found, neither beside this module's Python (${_annotune_bin}) nor "
  "on PATH: install annotune into the environment this module comes from, put its annotune "
  "on PATH, or configure with -DANNOTUNE_EXECUTABLE=/path/to/annotune")
set_property(GLOBAL PROPERTY ANNOTUNE_MISSING_MESSAGE "${_annotune_missing}")
if(NOT ANNOTUNE_EXECUTABLE)
  set(annotune_FOUND FALSE)
  set(annotune_NOT_FOUND_MESSAGE "${_annotune_missing}")
endif()
unset(_annotune_bin)
unset(_annotune_scripts)
unset(_annotune_missing)

function(annotune_tuned_header)
  set(usage "annotune_tuned_header(<target> SOURCE <file> [DEVICE <name> | PER_ARCH] "
            "[OUTPUT <header>] [SHADOW])")
  string(CONCAT usage ${usage})
  if(ARGC LESS 1)
    message(FATAL_ERROR "annotune_tuned_header: no arguments; usage: ${usage}")
  endif()
  set(target "${ARGV0}")
  set(where "annotune_tuned_header(${target})")
  if(target MATCHES "^(SOURCE|DEVICE|OUTPUT|PER_ARCH|SHADOW)$")
    message(FATAL_ERROR "annotune_tuned_header: the target is missing: the first argument "
                        "names it, before ${target}; usage: ${usage}")
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 arg "PER_ARCH;SHADOW" "SOURCE;DEVICE;OUTPUT" "")
  if(arg_UNPARSED_ARGUMENTS)
    list(GET arg_UNPARSED_ARGUMENTS 0 first)
    message(FATAL_ERROR "${where}: unknown argument '${first}'; usage: ${usage}")
  endif()
  foreach(keyword IN LISTS arg_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "${where}: ${keyword} needs a value; usage: ${usage}")
  endforeach()
  if(NOT DEFINED arg_SOURCE)
    message(FATAL_ERROR "${where}: SOURCE <file> is missing (the annotated source whose tuned "
                        "header the target gets); usage: ${usage}")
  endif()
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "${where}: '${target}' is not a target: the first argument names the "
                        "target to build with the tuned header; usage: ${usage}")
  endif()
  get_target_property(aliased "${target}" ALIASED_TARGET)
  if(aliased)
    set(target "${aliased}")
  endif()
  get_target_property(type "${target}" TYPE)
  get_target_property(imported "${target}" IMPORTED)
  if(imported)
    set(type "imported ${type}")
  endif()
  if(NOT type MATCHES "^(EXECUTABLE|(STATIC|SHARED|MODULE|OBJECT)_LIBRARY)$")
    message(FATAL_ERROR "${where}: '${target}' is a target of type ${type}, which compiles "
                        "nothing here; give the executable or library whose sources use the knobs")
  endif()
  if(NOT ANNOTUNE_EXECUTABLE)
    get_property(missing GLOBAL PROPERTY ANNOTUNE_MISSING_MESSAGE)
    message(FATAL_ERROR "${where}: ${missing}")
  endif()

  get_filename_component(source "${arg_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}" OR IS_DIRECTORY "${source}")
    message(FATAL_ERROR "${where}: SOURCE ${source} is not a file")
  endif()
  get_filename_component(stem "${source}" NAME_WLE)
  get_filename_component(source_dir "${source}" DIRECTORY)
  if(NOT DEFINED arg_OUTPUT)
    set(arg_OUTPUT "annotune/${stem}.tuned.h")
  endif()
  get_filename_component(output "${arg_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(device_args "")
  set(device "this device")
  if(DEFINED arg_DEVICE)
    set(device_args --device "${arg_DEVICE}")
    set(device "${arg_DEVICE}")
  endif()
  if(arg_PER_ARCH)
    if(DEFINED arg_DEVICE)
      message(FATAL_ERROR "${where}: DEVICE and PER_ARCH exclude each other: PER_ARCH holds "
                          "every device's values; usage: ${usage}")
    endif()
    if(arg_SHADOW)
      message(FATAL_ERROR "${where}: SHADOW and PER_ARCH exclude each other: a copy of the "
                          "source holds one value of each parameter; usage: ${usage}")
    endif()
    set(device_args --per-arch)
    set(device "every architecture")
  endif()
  if(arg_SHADOW)
    _annotune_compile_copy(CHECK)
  endif()

  # One step per header: targets that share a header share its step, so no two rules write one
  # file; the same header from another source or device is a mistake.
  string(MD5 key "${output}")
  string(SUBSTRING "${key}" 0 12 key)
  get_property(made GLOBAL PROPERTY "ANNOTUNE_HEADER_${key}")
  if(made)
    list(GET made 0 step)
    list(GET made 1 made_from)
    if(NOT made_from STREQUAL "${source}|${arg_DEVICE}|${arg_PER_ARCH}|${arg_SHADOW}")
      message(FATAL_ERROR "${where}: ${output} is already the tuned header of another source or "
                          "device (${made_from}); give this one its own OUTPUT")
    endif()
  else()
    set(step "annotune_${stem}")
    if(TARGET "${step}")
      string(APPEND step "_${key}")
    endif()
    # The committed headers of every device; CONFIGURE_DEPENDS notices one added after this.
    file(GLOB tuned CONFIGURE_DEPENDS "${source_dir}/tuned/*/${stem}.h")
    set(shadow_outputs "")
    set(shadow_inputs "")
    if(arg_SHADOW)
      set(shadow_dir "${CMAKE_CURRENT_BINARY_DIR}/annotune/${step}.shadow")
      list(APPEND device_args --shadow-dir "${shadow_dir}")
      _annotune_shadow_layout()
      set_property(GLOBAL PROPERTY "ANNOTUNE_SHADOW_${key}" "${shadow_copy};${shadow_dirs}")
      set(shadow_outputs "${shadow_copy}")
      # Another include, or a header moved, changes where the copies go: configure again.
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${shadow_inputs})
      set(device "${device}, in tuned copies")
    endif()
    add_custom_command(
      OUTPUT "${output}" ${shadow_outputs}
      COMMAND "${ANNOTUNE_EXECUTABLE}" build "${source}" -o "${output}" ${device_args}
      DEPENDS "${source}" ${tuned} ${shadow_inputs}
      COMMENT "annotune build ${stem}: the tuned header for ${device}"
      VERBATIM)
    add_custom_target("${step}" DEPENDS "${output}" ${shadow_outputs})
    set_property(GLOBAL PROPERTY "ANNOTUNE_HEADER_${key}" "${step}"
                 "${source}|${arg_DEVICE}|${arg_PER_ARCH}|${arg_SHADOW}")
  endif()
  add_dependencies("${target}" "${step}")
  if(arg_SHADOW)
    get_property(shadow GLOBAL PROPERTY "ANNOTUNE_SHADOW_${key}")
    list(POP_FRONT shadow shadow_copy)
    _annotune_compile_copy(REPLACE)
    target_include_directories("${target}" BEFORE PRIVATE ${shadow})
  endif()

  # The header's path inside a generator expression: these three characters would end it.
  string(REPLACE ">" "$<ANGLE-R>" escaped "${output}")
  string(REPLACE "," "$<COMMA>" escaped "${escaped}")
  string(REPLACE ";" "$<SEMICOLON>" escaped "${escaped}")
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  foreach(lang IN ITEMS C CXX CUDA)
    if(NOT lang IN_LIST languages)
      continue()
    endif()
    set(id "${CMAKE_${lang}_COMPILER_ID}")
    if(id STREQUAL "MSVC" OR CMAKE_${lang}_COMPILER_FRONTEND_VARIANT STREQUAL "MSVC")
      set(option "/FI${escaped}")
    elseif(id MATCHES "^(GNU|Clang|AppleClang|Intel|IntelLLVM|NVIDIA|NVHPC|IBMClang|XLClang|LCC)$")
      # SHELL: keeps "-include <header>" one option: CMake removes repeated options, and a
      # second header's "-include" would otherwise go.
      set(option "SHELL:-include \"${escaped}\"")
    else()
      message(WARNING "${where}: annotune does not know how the ${id} ${lang} compiler includes a "
                      "header before the source; add that option for ${output} yourself")
      continue()
    endif()
    target_compile_options("${target}" PRIVATE "$<$<COMPILE_LANGUAGE:${lang}>:${option}>")
  endforeach()
endfunction()

function(annotune_check_tuning)
  set(usage "annotune_check_tuning(<test> SOURCE <file> [DEVICE <name>] [MEASURE])")
  if(ARGC LESS 1 OR ARGV0 MATCHES "^(SOURCE|DEVICE|MEASURE)$")
    message(FATAL_ERROR "annotune_check_tuning: the test's name comes first; usage: ${usage}")
  endif()
  set(test "${ARGV0}")
  set(where "annotune_check_tuning(${test})")
  cmake_parse_arguments(PARSE_ARGV 1 arg "MEASURE" "SOURCE;DEVICE" "")
  if(arg_UNPARSED_ARGUMENTS)
    list(GET arg_UNPARSED_ARGUMENTS 0 first)
    message(FATAL_ERROR "${where}: unknown argument '${first}'; usage: ${usage}")
  endif()
  foreach(keyword IN LISTS arg_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "${where}: ${keyword} needs a value; usage: ${usage}")
  endforeach()
  if(NOT DEFINED arg_SOURCE)
    message(FATAL_ERROR "${where}: SOURCE <file> is missing (the annotated source whose tuned "
                        "header is checked); usage: ${usage}")
  endif()
  if(NOT ANNOTUNE_EXECUTABLE)
    get_property(missing GLOBAL PROPERTY ANNOTUNE_MISSING_MESSAGE)
    message(FATAL_ERROR "${where}: ${missing}")
  endif()
  get_filename_component(source "${arg_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}" OR IS_DIRECTORY "${source}")
    message(FATAL_ERROR "${where}: SOURCE ${source} is not a file")
  endif()
  set(args "")
  if(DEFINED arg_DEVICE)
    list(APPEND args --device "${arg_DEVICE}")
  endif()
  if(arg_MEASURE)
    list(APPEND args --measure)
  endif()
  add_test(NAME "${test}" COMMAND "${ANNOTUNE_EXECUTABLE}" check "${source}" ${args})
endfunction()

# SHADOW, when CMake configures: `annotune build --shadow-dir` writes the copies (and the
# header) once to say where they are: sets shadow_copy (the copy of the source to compile),
# shadow_dirs (the include directories that must come first) and shadow_inputs (every file the
# copies are made from) in the caller.
macro(_annotune_shadow_layout)
  execute_process(
    COMMAND "${ANNOTUNE_EXECUTABLE}" build "${source}" -o "${output}" ${device_args} --json
    WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
    RESULT_VARIABLE _annotune_status
    OUTPUT_VARIABLE _annotune_json
    ERROR_VARIABLE _annotune_said)
  string(STRIP "${_annotune_said}" _annotune_said)
  if(NOT _annotune_status EQUAL 0)
    message(FATAL_ERROR "${where}: SHADOW: annotune build could not make the tuned copies of "
                        "${source}:\n${_annotune_said}")
  elseif(_annotune_said)
    message(STATUS "${_annotune_said}")
  endif()
  string(JSON _annotune_count ERROR_VARIABLE _annotune_bad LENGTH "${_annotune_json}" shadow)
  if(_annotune_bad OR _annotune_count LESS 1)
    message(FATAL_ERROR "${where}: SHADOW: ${ANNOTUNE_EXECUTABLE} did not say where the copies "
                        "are (${_annotune_bad}); is it the annotune of this module?")
  endif()
  math(EXPR _annotune_last "${_annotune_count} - 1")
  set(shadow_dirs "")
  foreach(_annotune_i RANGE ${_annotune_last})
    string(JSON _annotune_arg GET "${_annotune_json}" shadow ${_annotune_i})
    if(_annotune_i EQUAL _annotune_last)
      set(shadow_copy "${_annotune_arg}")
    elseif(_annotune_arg MATCHES "^-I(.+)$")
      list(APPEND shadow_dirs "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  file(READ "${shadow_dir}/.annotune-shadow.json" _annotune_manifest)
  string(JSON _annotune_count LENGTH "${_annotune_manifest}" inputs)
  set(shadow_inputs "")
  if(_annotune_count GREATER 0)
    math(EXPR _annotune_last "${_annotune_count} - 1")
    foreach(_annotune_i RANGE ${_annotune_last})
      string(JSON _annotune_input MEMBER "${_annotune_manifest}" inputs ${_annotune_i})
      list(APPEND shadow_inputs "${_annotune_input}")
    endforeach()
  endif()
endmacro()

# SHADOW: the target compiles shadow_copy in place of source, with the properties set on
# source (its language, definitions, options, include directories). CHECK only checks that the
# target compiles source, before the copies are made.
function(_annotune_compile_copy mode)
  get_target_property(_annotune_sources "${target}" SOURCES)
  get_target_property(_annotune_base "${target}" SOURCE_DIR)
  set(_annotune_kept "")
  set(_annotune_found FALSE)
  foreach(_annotune_item IN LISTS _annotune_sources)
    if(NOT _annotune_item MATCHES "[$]<")
      get_filename_component(_annotune_path "${_annotune_item}" ABSOLUTE
                             BASE_DIR "${_annotune_base}")
      if(_annotune_path STREQUAL source OR
         (mode STREQUAL "REPLACE" AND _annotune_path STREQUAL shadow_copy))
        if(mode STREQUAL "REPLACE")
          set(_annotune_item "${shadow_copy}")
        endif()
        set(_annotune_found TRUE)
      endif()
    endif()
    list(APPEND _annotune_kept "${_annotune_item}")
  endforeach()
  if(NOT _annotune_found)
    message(FATAL_ERROR "${where}: SHADOW compiles a tuned copy of ${source} in its place, but "
                        "${source} is not one of '${target}''s sources; give SOURCE the file "
                        "the target compiles")
  endif()
  if(mode STREQUAL "CHECK")
    return()
  endif()
  set_property(TARGET "${target}" PROPERTY SOURCES "${_annotune_kept}")
  set_source_files_properties("${shadow_copy}" TARGET_DIRECTORY "${target}"
                              PROPERTIES GENERATED TRUE)
  foreach(_annotune_property IN ITEMS LANGUAGE COMPILE_DEFINITIONS COMPILE_OPTIONS
                                      INCLUDE_DIRECTORIES)
    get_source_file_property(_annotune_value "${source}" TARGET_DIRECTORY "${target}"
                             ${_annotune_property})
    if(NOT _annotune_value STREQUAL "NOTFOUND")
      set_source_files_properties("${shadow_copy}" TARGET_DIRECTORY "${target}"
                                  PROPERTIES ${_annotune_property} "${_annotune_value}")
    endif()
  endforeach()
endfunction()

cmake_policy(POP)

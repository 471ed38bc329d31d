# annotune's CMake package: build a target with the header tuned for the device at hand.
#
#   find_package(annotune 0.1 CONFIG REQUIRED)   # cmake -Dannotune_DIR="$(annotune --cmake-dir)"
#   include(<annotune --cmake-dir>/annotuneConfig.cmake)   # or include it directly
#
#   annotune_tuned_header(<target> SOURCE <file> [DEVICE <name> | PER_ARCH] [OUTPUT <header>])
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
            "[OUTPUT <header>])")
  string(CONCAT usage ${usage})
  if(ARGC LESS 1)
    message(FATAL_ERROR "annotune_tuned_header: no arguments; usage: ${usage}")
  endif()
  set(target "${ARGV0}")
  set(where "annotune_tuned_header(${target})")
  if(target MATCHES "^(SOURCE|DEVICE|OUTPUT|PER_ARCH)$")
    message(FATAL_ERROR "annotune_tuned_header: the target is missing: the first argument "
                        "names it, before ${target}; usage: ${usage}")
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 arg "PER_ARCH" "SOURCE;DEVICE;OUTPUT" "")
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
    set(device_args --per-arch)
    set(device "every architecture")
  endif()

  # One step per header: targets that share a header share its step, so no two rules write one
  # file; the same header from another source or device is a mistake.
  string(MD5 key "${output}")
  string(SUBSTRING "${key}" 0 12 key)
  get_property(made GLOBAL PROPERTY "ANNOTUNE_HEADER_${key}")
  if(made)
    list(GET made 0 step)
    list(GET made 1 made_from)
    if(NOT made_from STREQUAL "${source}|${arg_DEVICE}|${arg_PER_ARCH}")
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
    add_custom_command(
      OUTPUT "${output}"
      COMMAND "${ANNOTUNE_EXECUTABLE}" build "${source}" -o "${output}" ${device_args}
      DEPENDS "${source}" ${tuned}
      COMMENT "annotune build ${stem}: the tuned header for ${device}"
      VERBATIM)
    add_custom_target("${step}" DEPENDS "${output}")
    set_property(GLOBAL PROPERTY "ANNOTUNE_HEADER_${key}" "${step}"
                 "${source}|${arg_DEVICE}|${arg_PER_ARCH}")
  endif()
  add_dependencies("${target}" "${step}")

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

cmake_policy(POP)

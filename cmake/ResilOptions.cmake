# Build options. The three backends take AUTO|ON|OFF: AUTO enables what this machine can build,
# ON fails the configure when it cannot, OFF never builds it.
set(RESIL_ENABLE_CUDA AUTO CACHE STRING "Build the CUDA backend (AUTO|ON|OFF)")
set(RESIL_ENABLE_NCCL AUTO CACHE STRING "Use NCCL for GPU collectives (AUTO|ON|OFF)")
set(RESIL_ENABLE_MPI  AUTO CACHE STRING "Build the MPI parts (AUTO|ON|OFF)")
foreach(opt RESIL_ENABLE_CUDA RESIL_ENABLE_NCCL RESIL_ENABLE_MPI)
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
  if(NOT ${opt} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt} must be AUTO, ON or OFF (got '${${opt}}')")
  endif()
endforeach()

option(RESIL_BUILD_TESTS "Build the tests and benchmarks" ON)
# The interpreter of the Python tests in tests/train and tests/gpu (they need numpy and h5py): on a
# machine whose packages live in a virtual environment, point it there.
set(RESIL_PYTHON /usr/bin/python3 CACHE FILEPATH "Python 3 with numpy and h5py for tests/train and tests/gpu")
option(RESIL_WERROR "Treat compiler warnings as errors" OFF)
option(RESIL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

add_library(resil_warnings INTERFACE)
target_compile_options(resil_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RESIL_WERROR}>>:-Werror>)
add_library(resil::warnings ALIAS resil_warnings)

if(RESIL_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()

# resil_resolve_option(<opt> <found-bool> <what>): turn AUTO|ON|OFF + availability into RESIL_HAVE_<X>.
function(resil_resolve_option opt found what outvar)
  if(${opt} STREQUAL "OFF")
    set(${outvar} 0 PARENT_SCOPE)
  elseif(${found})
    set(${outvar} 1 PARENT_SCOPE)
  elseif(${opt} STREQUAL "ON")
    message(FATAL_ERROR "${opt}=ON but ${what} was not found")
  else()
    set(${outvar} 0 PARENT_SCOPE)
  endif()
endfunction()

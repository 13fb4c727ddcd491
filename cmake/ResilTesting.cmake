# Test registration functions (BLT/SCR style). Labels: unit, integration, mpi, gpu, perf.
# resil_add_test(NAME <name> COMMAND <cmd...> LABELS <labels...> [TIMEOUT s] [WORKING_DIRECTORY d]
#                [PROPERTIES <k v ...>])
function(resil_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;WORKING_DIRECTORY" "COMMAND;LABELS;PROPERTIES" ${ARGN})
  if(NOT T_WORKING_DIRECTORY)
    set(T_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND} WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "RESIL_SOURCE_DIR=${PROJECT_SOURCE_DIR};RESIL_BINARY_DIR=${PROJECT_BINARY_DIR};PYTHON=/usr/bin/python3")
  if(T_PROPERTIES)
    set_tests_properties(${T_NAME} PROPERTIES ${T_PROPERTIES})
  endif()
endfunction()

# resil_add_mpi_test(NAME <name> NPROCS <n> COMMAND <exe args...> [LABELS ...] [TIMEOUT s] [PROPERTIES ...])
# Runs under mpiexec; the label 'mpi' is always added.
function(resil_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NPROCS;TIMEOUT" "COMMAND;LABELS;PROPERTIES" ${ARGN})
  if(NOT RESIL_HAVE_MPI)
    return()
  endif()
  resil_add_test(NAME ${T_NAME} TIMEOUT ${T_TIMEOUT}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS} ${MPIEXEC_PREFLAGS} ${T_COMMAND}
    LABELS mpi ${T_LABELS} PROPERTIES PROCESSORS ${T_NPROCS} ${T_PROPERTIES})
endfunction()

# resil_add_catch_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <labels...>)
# One Catch2 executable registered as one CTest test (fast to run, fast to register).
function(resil_add_catch_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE resil_catch_main ${T_LIBS} resil::warnings)
  resil_add_test(NAME ${T_NAME} COMMAND ${T_NAME} --order lex LABELS ${T_LABELS} TIMEOUT ${T_TIMEOUT})
endfunction()

# Every dependency comes from Debian's packages (scripts/setup.sh); see docs/reference/dependencies.md.
# HDF5 is linked statically by default: Debian's shared libhdf5 needs ~30 more shared libraries
# (curl, gnutls, krb5, ... for its S3 driver, which resil never uses), and loading them doubled
# the start of every process (ckpt-flip --version 6.0 ms vs 2.9 ms), which injection campaigns pay
# per trial. The archive comes with the same package (libhdf5-dev); the linker keeps only what is
# used, so libcurl & co. are not even loaded.
option(RESIL_STATIC_HDF5 "Link HDF5 statically (faster process start)" ON)
if(RESIL_STATIC_HDF5)
  set(HDF5_USE_STATIC_LIBRARIES ON)
endif()
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT TARGET HDF5::HDF5)
  add_library(HDF5::HDF5 INTERFACE IMPORTED)
  target_include_directories(HDF5::HDF5 INTERFACE ${HDF5_INCLUDE_DIRS})
  target_link_libraries(HDF5::HDF5 INTERFACE ${HDF5_LIBRARIES})
  target_compile_definitions(HDF5::HDF5 INTERFACE ${HDF5_DEFINITIONS})
endif()

find_path(ISAL_INCLUDE_DIR isa-l.h REQUIRED)
find_library(ISAL_LIBRARY NAMES isal REQUIRED)
add_library(ISAL::ISAL UNKNOWN IMPORTED)
set_target_properties(ISAL::ISAL PROPERTIES IMPORTED_LOCATION "${ISAL_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${ISAL_INCLUDE_DIR}")

find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)

find_package(PkgConfig REQUIRED)
# OpenMP: the CPU GEMM's threads for --threads > 1 (the bits do not depend on them).
find_package(OpenMP REQUIRED COMPONENTS CXX)

# MPI
set(_mpi_found FALSE)
if(NOT RESIL_ENABLE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C CXX)
  if(MPI_CXX_FOUND)
    set(_mpi_found TRUE)
  endif()
endif()
resil_resolve_option(RESIL_ENABLE_MPI _mpi_found "MPI (libmpich-dev)" RESIL_HAVE_MPI)

# CUDA: enabled by default wherever nvcc exists, even without a GPU (the code must compile here).
set(_cuda_found FALSE)
if(NOT RESIL_ENABLE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100; set it on the command line for other GPUs
    endif()
    enable_language(CUDA)
    # Debian 12's CMake 3.25.1 sets a property on CUDA::nvToolsExt even where the toolkit has no
    # libnvToolsExt (CUDA 13 has none) and fails; resil never links it, so an empty target stands in.
    if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
      add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    endif()
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(_cuda_found TRUE)
      # CMake 3.25 does not know nvcc's C++20 dialect flag: CUDA targets set CUDA_STANDARD 17 (their headers are C++17).
    endif()
  endif()
endif()
resil_resolve_option(RESIL_ENABLE_CUDA _cuda_found "the CUDA toolkit (nvcc)" RESIL_HAVE_CUDA)

# NCCL has no CUDAToolkit target; its library sits in the toolkit's lib/ (not lib64) here.
set(_nccl_found FALSE)
if(RESIL_HAVE_CUDA AND NOT RESIL_ENABLE_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    set(_nccl_found TRUE)
  endif()
endif()
resil_resolve_option(RESIL_ENABLE_NCCL _nccl_found "NCCL (needs CUDA)" RESIL_HAVE_NCCL)

function(resil_print_summary)
  message(STATUS "")
  message(STATUS "resil ${PROJECT_VERSION} configuration summary")
  message(STATUS "  build type        : ${CMAKE_BUILD_TYPE}")
  message(STATUS "  HDF5              : ${HDF5_VERSION}")
  message(STATUS "  ISA-L             : ${ISAL_LIBRARY}")
  message(STATUS "  MPI   (${RESIL_ENABLE_MPI})  : ${RESIL_HAVE_MPI} ${MPIEXEC_EXECUTABLE}")
  message(STATUS "  CUDA  (${RESIL_ENABLE_CUDA})  : ${RESIL_HAVE_CUDA} ${CMAKE_CUDA_COMPILER} arch=${CMAKE_CUDA_ARCHITECTURES}")
  message(STATUS "  NCCL  (${RESIL_ENABLE_NCCL})  : ${RESIL_HAVE_NCCL} ${NCCL_LIBRARY}")
  message(STATUS "  tests             : ${RESIL_BUILD_TESTS}")
  message(STATUS "  sanitizers        : ${RESIL_SANITIZE}")
  message(STATUS "  warnings as errors: ${RESIL_WERROR}")
  message(STATUS "")
endfunction()

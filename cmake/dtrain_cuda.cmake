# dtrain_cuda.cmake - the DTRAIN_CUDA switch: whether the GPU path
# (runtime/gpu/: CUDA kernels, cuBLAS, NCCL) is built. Included once by the
# top-level CMakeLists.txt, before the runtime.
#
#   DTRAIN_CUDA=AUTO  (default) build it when the CUDA toolkit (nvcc, cudart,
#                     cuBLAS) and NCCL (nccl.h, libnccl) are found
#   DTRAIN_CUDA=ON    build it; a missing piece is a configure error naming it
#   DTRAIN_CUDA=OFF   never build it
#
# Where to look: CUDAToolkit_ROOT (default /usr/local/cuda when it exists),
# NCCL_ROOT (default: the CUDA toolkit, then the system's paths).
#
# Sets DTRAIN_GPU (ON or OFF) and DTRAIN_GPU_SUMMARY (the status line), and
# when ON: the CUDA language enabled with the CUDA flags below, the targets
# CUDA::cudart, CUDA::cublas and dtrain_nccl, DTRAIN_CUDA_ARCHITECTURES,
# DTRAIN_CUDA_VERSION ("13.0") and DTRAIN_NCCL_VERSION ("2.28.9").

set(DTRAIN_CUDA AUTO CACHE STRING "Build the GPU path (CUDA, cuBLAS, NCCL): AUTO, ON or OFF")
set_property(CACHE DTRAIN_CUDA PROPERTY STRINGS AUTO ON OFF)
# A100 (sm_80), H100 and H200 (sm_90)
set(DTRAIN_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures of the GPU path")

string(TOUPPER "${DTRAIN_CUDA}" dtrain_cuda_mode)
if(dtrain_cuda_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(dtrain_cuda_mode ON)
elseif(dtrain_cuda_mode MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(dtrain_cuda_mode OFF)
elseif(NOT dtrain_cuda_mode STREQUAL "AUTO")
  message(FATAL_ERROR "DTRAIN_CUDA: want AUTO, ON or OFF (got \"${DTRAIN_CUDA}\")")
endif()

set(DTRAIN_GPU OFF)
set(dtrain_gpu_missing "")

if(dtrain_cuda_mode STREQUAL "OFF")
  set(DTRAIN_GPU_SUMMARY "OFF (DTRAIN_CUDA=OFF)")
else()
  # --- the CUDA toolkit: nvcc, cudart, cuBLAS ---
  if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT}
     AND IS_DIRECTORY /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND OR NOT CUDAToolkit_NVCC_EXECUTABLE)
    list(APPEND dtrain_gpu_missing "the CUDA toolkit's nvcc (set CUDAToolkit_ROOT)")
  else()
    if(NOT TARGET CUDA::cudart)
      list(APPEND dtrain_gpu_missing "libcudart in ${CUDAToolkit_LIBRARY_DIR}")
    endif()
    if(NOT TARGET CUDA::cublas)
      list(APPEND dtrain_gpu_missing "libcublas in ${CUDAToolkit_LIBRARY_DIR}")
    endif()
  endif()

  # --- NCCL: nccl.h and libnccl ---
  set(dtrain_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_ROOT}
      ${CUDAToolkit_LIBRARY_ROOT})
  find_path(DTRAIN_NCCL_INCLUDE_DIR nccl.h
            HINTS ${dtrain_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(DTRAIN_NCCL_LIBRARY nccl
               HINTS ${dtrain_nccl_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
  if(NOT DTRAIN_NCCL_INCLUDE_DIR OR NOT EXISTS ${DTRAIN_NCCL_INCLUDE_DIR}/nccl.h)
    list(APPEND dtrain_gpu_missing "NCCL's nccl.h (set NCCL_ROOT)")
  endif()
  if(NOT DTRAIN_NCCL_LIBRARY OR NOT EXISTS ${DTRAIN_NCCL_LIBRARY})
    list(APPEND dtrain_gpu_missing "NCCL's libnccl (set NCCL_ROOT)")
  endif()

  if(dtrain_gpu_missing)
    list(JOIN dtrain_gpu_missing ", " dtrain_gpu_why)
    if(dtrain_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "DTRAIN_CUDA=ON but not found: ${dtrain_gpu_why} (hint: install them, or configure with -DDTRAIN_CUDA=OFF or AUTO)")
    endif()
    set(DTRAIN_GPU_SUMMARY "OFF (not found: ${dtrain_gpu_why})")
  else()
    set(DTRAIN_GPU ON)
  endif()
endif()

if(DTRAIN_GPU)
  # --- the CUDA language, with the nvcc of the toolkit found above ---
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${DTRAIN_CUDA_ARCHITECTURES})
  endif()
  # One CUDA runtime in the process: the shared libcudart that the C files
  # link (CUDA::cudart), not also the static one CMake gives .cu files
  # (two runtimes would not share the device chosen by cudaSetDevice).
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # The project's -Wall -Wextra -Werror and sanitizer options are C-only
  # (gcc's spelling); nvcc gets its own: the host compiler's warnings for the
  # host half of .cu files, and with DTRAIN_WERROR every warning an error.
  if(DTRAIN_WERROR)
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Wall,-Wextra,-Werror>")
  else()
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  endif()
  # no a * b + c fused into one rounding: the element math shared with the
  # CPU (runtime/kernels/elem.h) then gives the CPU's bits, which the CPU
  # (the x86-64 baseline and AVX2, no FMA) computes unfused too
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

  add_library(dtrain_nccl INTERFACE IMPORTED)
  set_target_properties(dtrain_nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${DTRAIN_NCCL_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES ${DTRAIN_NCCL_LIBRARY})

  set(dtrain_nccl_version "")
  file(STRINGS ${DTRAIN_NCCL_INCLUDE_DIR}/nccl.h dtrain_nccl_defs
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${part} +([0-9]+).*" "\\1" v "${dtrain_nccl_defs}")
    list(APPEND dtrain_nccl_version ${v})
  endforeach()
  list(JOIN dtrain_nccl_version "." dtrain_nccl_version)
  get_filename_component(dtrain_nccl_dir ${DTRAIN_NCCL_LIBRARY} DIRECTORY)
  # programs find the CUDA libraries and NCCL where they were found, also
  # where the loader's configuration does not name them
  list(APPEND CMAKE_BUILD_RPATH ${CUDAToolkit_LIBRARY_DIR} ${dtrain_nccl_dir})
  set(DTRAIN_CUDA_VERSION "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  set(DTRAIN_NCCL_VERSION "${dtrain_nccl_version}")
  set(DTRAIN_GPU_SUMMARY
      "ON (CUDA ${DTRAIN_CUDA_VERSION}, NCCL ${DTRAIN_NCCL_VERSION} from ${dtrain_nccl_dir}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
endif()

message(STATUS "dtrain: GPU path ${DTRAIN_GPU_SUMMARY}")

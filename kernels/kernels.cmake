# drk's own device code (kernels/*.cu) as one fatbin embedded in the
# library (kernels/README.md): nvcc builds kernels/kernels.cu, the one
# translation unit, into SASS for each arch of DRK_KERNELS_SASS the toolkit
# knows plus PTX for the lowest of them (any newer GPU JITs it), and
# kernels/embed.cmake writes it as a C array. Included by the top-level
# CMakeLists.txt, which makes the drk_kernels target of the result; sets
# DRK_KERNELS_FATBIN (the .fatbin), DRK_KERNELS_FATBIN_C (the generated .c),
# DRK_KERNELS_SASS_ARCHS (the SM numbers with SASS) and DRK_KERNELS_PTX_ARCH.
# Every build needs nvcc, the sanitizer build included: the library carries
# the fatbin.
set(DRK_KERNELS_SASS "80;90;100;120" CACHE STRING
  "SM archs drk's own kernels get SASS for (those the toolkit lacks are left out; 90, the H200, is required)")
set(DRK_KERNELS_COMPRESS "default" CACHE STRING
  "nvcc --compress-mode of drk's own fatbin: default (PTX compressed), none, speed, balance, size (smallest; driver >= 580)")

if(NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  message(FATAL_ERROR "drk builds its own kernels (kernels/) with nvcc, which was not found with the CUDA toolkit")
endif()
set(nvcc ${CUDAToolkit_NVCC_EXECUTABLE})
execute_process(COMMAND ${nvcc} --list-gpu-code OUTPUT_VARIABLE codes RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${nvcc} --list-gpu-code failed (${rc})")
endif()
string(REGEX MATCHALL "sm_[0-9]+" codes "${codes}")

set(DRK_KERNELS_SASS_ARCHS "")
set(gencode "")
set(archs_text "")
foreach(sm IN LISTS DRK_KERNELS_SASS)
  if("sm_${sm}" IN_LIST codes)
    list(APPEND DRK_KERNELS_SASS_ARCHS ${sm})
    list(APPEND gencode -gencode arch=compute_${sm},code=sm_${sm})
    string(APPEND archs_text "sm_${sm} ")
  else()
    message(STATUS "drk: nvcc has no sm_${sm}; drk's kernels get no SASS for it")
  endif()
endforeach()
if(NOT "90" IN_LIST DRK_KERNELS_SASS_ARCHS)
  message(FATAL_ERROR "drk's kernels need SASS for sm_90 (DRK_KERNELS_SASS: ${DRK_KERNELS_SASS}; nvcc knows ${codes})")
endif()
list(SORT DRK_KERNELS_SASS_ARCHS COMPARE NATURAL)
list(GET DRK_KERNELS_SASS_ARCHS 0 DRK_KERNELS_PTX_ARCH)
list(APPEND gencode -gencode arch=compute_${DRK_KERNELS_PTX_ARCH},code=compute_${DRK_KERNELS_PTX_ARCH})
string(APPEND archs_text "compute_${DRK_KERNELS_PTX_ARCH}")
message(STATUS "drk: own kernels for ${archs_text}")

set(kdir ${CMAKE_CURRENT_LIST_DIR})
set(DRK_KERNELS_SOURCES ${kdir}/kernels.cu ${kdir}/compare.cu ${kdir}/hash.cu ${kdir}/poison.cu ${kdir}/device.cuh
  ${kdir}/kernels.h)
set(out ${CMAKE_BINARY_DIR}/kernels)
set(DRK_KERNELS_FATBIN ${out}/drk_kernels.fatbin)
set(DRK_KERNELS_FATBIN_C ${out}/drk_kernels_fatbin.c)
set(werror "")
if(DRK_WERROR)
  set(werror -Werror all-warnings)
endif()
add_custom_command(OUTPUT ${DRK_KERNELS_FATBIN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
  COMMAND ${nvcc} -fatbin -O3 ${gencode} --compress-mode=${DRK_KERNELS_COMPRESS} ${werror} -I${PROJECT_SOURCE_DIR}
          -o ${DRK_KERNELS_FATBIN} ${kdir}/kernels.cu
  DEPENDS ${DRK_KERNELS_SOURCES}
  COMMENT "nvcc: drk's own kernels (${archs_text})"
  VERBATIM)
add_custom_command(OUTPUT ${DRK_KERNELS_FATBIN_C}
  COMMAND ${CMAKE_COMMAND} -DIN=${DRK_KERNELS_FATBIN} -DOUT=${DRK_KERNELS_FATBIN_C} "-DARCHS=${archs_text}"
          -P ${kdir}/embed.cmake
  DEPENDS ${DRK_KERNELS_FATBIN} ${kdir}/embed.cmake
  COMMENT "embedding drk_kernels.fatbin"
  VERBATIM)

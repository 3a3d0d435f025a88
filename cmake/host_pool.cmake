# The pinned host pool (alloc/host_*.c) and the jemalloc it is built on.
#
# Debian's libjemalloc_pic.a defines malloc, free, mallocx ... unprefixed. The
# library links a copy made here in which every global symbol the archive
# defines is renamed drk_je_<name>, so jemalloc never replaces the program's
# malloc and drk's own code keeps glibc's. The same pass sends a few of the
# archive's outside references to stand-ins in alloc/host_je.c (the
# environment and /etc/malloc.conf, which belong to the program's allocator;
# dlsym; libm and libgcc_s, which the library does not need otherwise) and
# drops the archive's constructor: drk starts jemalloc itself, lazily.
#
# Included by the top-level CMakeLists.txt after the drk_alloc target; also
# run as a script (cmake -P) to make the renamed copy.

# The outside references sent to alloc/host_je.c (as drk_je_<name>).
set(DRK_JE_REDIRECTS secure_getenv readlink dlsym log exp round _Unwind_Backtrace _Unwind_GetIP pthread_atfork)

if(CMAKE_SCRIPT_MODE_FILE)
  # cmake -DIN=archive -DOUT=renamed -DNM=nm -DOBJCOPY=objcopy -P host_pool.cmake
  execute_process(COMMAND ${NM} --defined-only -g ${IN} OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${IN}")
  endif()
  string(REGEX MATCHALL "[0-9a-fA-F]+ [A-Za-z] [^\n]+" defined "${listing}")
  set(names ${DRK_JE_REDIRECTS})
  foreach(line IN LISTS defined)
    string(REGEX REPLACE "^[0-9a-fA-F]+ [A-Za-z] " "" name "${line}")
    list(APPEND names "${name}")
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(LENGTH names count)
  if(count LESS 100)
    message(FATAL_ERROR "${IN}: only ${count} global symbols: not jemalloc's archive?")
  endif()
  set(map "")
  foreach(name IN LISTS names)
    string(APPEND map "${name} drk_je_${name}\n")
  endforeach()
  file(WRITE ${OUT}.map "${map}")
  execute_process(COMMAND ${OBJCOPY} --redefine-syms=${OUT}.map
                          --remove-section=.init_array --remove-section=.rela.init_array ${IN} ${OUT}.tmp
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${OBJCOPY} failed on ${IN}")
  endif()
  file(RENAME ${OUT}.tmp ${OUT})
  return()
endif()

find_library(DRK_JEMALLOC_PIC NAMES libjemalloc_pic.a)
find_path(DRK_JEMALLOC_INCLUDE jemalloc/jemalloc.h)
find_program(DRK_NM NAMES nm HINTS ${CMAKE_NM})
find_program(DRK_OBJCOPY NAMES objcopy HINTS ${CMAKE_OBJCOPY})
if(DRK_JEMALLOC_INCLUDE AND EXISTS ${DRK_JEMALLOC_INCLUDE}/jemalloc/jemalloc.h)
  file(STRINGS ${DRK_JEMALLOC_INCLUDE}/jemalloc/jemalloc.h drk_je_version REGEX "^#define JEMALLOC_VERSION_MAJOR ")
endif()

# Statistics and pointer lookups are part of the library in every build (the
# report and the pointer-attribute hooks read them); with no pool they
# report nothing and know no pointer.
target_sources(drk_alloc PRIVATE ${CMAKE_SOURCE_DIR}/alloc/host_chunks.c
                                ${CMAKE_SOURCE_DIR}/alloc/host_stats.c)

if(DRK_JEMALLOC_PIC AND EXISTS "${DRK_JEMALLOC_PIC}" AND DRK_JEMALLOC_INCLUDE AND DRK_NM AND DRK_OBJCOPY AND drk_je_version MATCHES " 5$")
  set(DRK_HOST_POOL ON)
  set(drk_je ${CMAKE_BINARY_DIR}/jemalloc/libdrk_je.a)
  add_custom_command(OUTPUT ${drk_je}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/jemalloc
    COMMAND ${CMAKE_COMMAND} -DIN=${DRK_JEMALLOC_PIC} -DOUT=${drk_je} -DNM=${DRK_NM} -DOBJCOPY=${DRK_OBJCOPY}
            -P ${CMAKE_CURRENT_LIST_FILE}
    DEPENDS ${DRK_JEMALLOC_PIC} ${CMAKE_CURRENT_LIST_FILE}
    COMMENT "jemalloc: renaming libjemalloc_pic.a's symbols to drk_je_*" VERBATIM)
  add_custom_target(drk_je_renamed DEPENDS ${drk_je})
  add_library(drk_je STATIC IMPORTED GLOBAL)
  set_target_properties(drk_je PROPERTIES IMPORTED_LOCATION ${drk_je})
  add_dependencies(drk_je drk_je_renamed)

  # The jemalloc-side of the pool, for the library and the pool's tests.
  add_library(drk_host_pool OBJECT ${CMAKE_SOURCE_DIR}/alloc/host_pool.c ${CMAKE_SOURCE_DIR}/alloc/host_je.c)
  target_include_directories(drk_host_pool PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${DRK_JEMALLOC_INCLUDE})
  set_target_properties(drk_host_pool PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  add_dependencies(drk_host_pool drk_je_renamed)
  message(STATUS "pinned host pool: jemalloc ${DRK_JEMALLOC_PIC}")
else()
  set(DRK_HOST_POOL OFF)
  add_library(drk_host_pool OBJECT ${CMAKE_SOURCE_DIR}/alloc/host_pool_none.c)
  target_include_directories(drk_host_pool PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  set_target_properties(drk_host_pool PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  message(STATUS "pinned host pool left out: no jemalloc 5 libjemalloc_pic.a (Debian: apt-get install libjemalloc-dev)")
endif()
if(DRK_HOST_POOL)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/alloc/host_stats.c PROPERTIES COMPILE_DEFINITIONS DRK_HOST_POOL_BUILT=1)
endif()

# What links the pool: the renamed jemalloc, hidden (nothing of the
# archive is exported, whatever a version script says).
set(DRK_HOST_POOL_LIBS)
if(DRK_HOST_POOL)
  set(DRK_HOST_POOL_LIBS drk_je -Wl,--exclude-libs,libdrk_je.a)
endif()

# Included by rdma-core's top-level CMakeLists.txt (patches/0001): tells the
# rxe and mlx5 provider targets where sverbs' sources are.  Our code stays in
# this repository; rdma-core compiles it as part of each provider.
#
#   sverbs_provider(<target> <provider name>)
#     adds the provider-neutral core (common/, sched/, batch/) and
#     providers/<name>/*.c to <target>, with our include directories.

if (NOT IS_DIRECTORY "${SVERBS_SOURCE_DIR}/sched")
  message(FATAL_ERROR "SVERBS_SOURCE_DIR (${SVERBS_SOURCE_DIR}) is not the sverbs repository")
endif()

file(GLOB SVERBS_CORE_SOURCES CONFIGURE_DEPENDS
  "${SVERBS_SOURCE_DIR}/common/*.c"
  "${SVERBS_SOURCE_DIR}/sched/*.c"
  "${SVERBS_SOURCE_DIR}/batch/*.c")

# libsverbs: the application-facing calls of sverbs.h (sverbs_query_qp_stats);
# the providers register with it.
add_library(sverbs SHARED "${SVERBS_SOURCE_DIR}/libsverbs/sverbs.c")
target_include_directories(sverbs PRIVATE "${SVERBS_SOURCE_DIR}/include")
target_link_libraries(sverbs LINK_PRIVATE ${CMAKE_THREAD_LIBS_INIT})
set_target_properties(sverbs PROPERTIES
  VERSION 1.0.0 SOVERSION 1
  LIBRARY_OUTPUT_DIRECTORY "${BUILD_LIB}"
  LINK_FLAGS "-Wl,--version-script,${SVERBS_SOURCE_DIR}/libsverbs/libsverbs.map")
install(TARGETS sverbs DESTINATION "${CMAKE_INSTALL_LIBDIR}")

function(sverbs_provider TARGET NAME)
  file(GLOB glue CONFIGURE_DEPENDS "${SVERBS_SOURCE_DIR}/providers/${NAME}/*.c")
  target_sources(${TARGET} PRIVATE ${SVERBS_CORE_SOURCES} ${glue})
  # CMAKE_CURRENT_SOURCE_DIR: the provider's own folder in rdma-core, for
  # the glue's #include "rxe.h" / "mlx5.h"
  target_include_directories(${TARGET} PRIVATE
    "${CMAKE_CURRENT_SOURCE_DIR}"
    "${SVERBS_SOURCE_DIR}/include"
    "${SVERBS_SOURCE_DIR}/common"
    "${SVERBS_SOURCE_DIR}/sched"
    "${SVERBS_SOURCE_DIR}/batch"
    "${SVERBS_SOURCE_DIR}/libsverbs"
    "${SVERBS_SOURCE_DIR}/providers/${NAME}")
  target_link_libraries(${TARGET} LINK_PRIVATE sverbs)
  # find libsverbs in the prefix without LD_LIBRARY_PATH
  set_target_properties(${TARGET} PROPERTIES INSTALL_RPATH "${CMAKE_INSTALL_FULL_LIBDIR}")
  target_compile_definitions(${TARGET} PRIVATE
    "SVERBS_CONF_PATH=\"${CMAKE_INSTALL_FULL_SYSCONFDIR}/sverbs.conf\"")
  # providers/mlx5/tests: the mlx5 adapter's CUnit test (bin/, not installed)
  if (NAME STREQUAL "mlx5")
    include("${SVERBS_SOURCE_DIR}/providers/mlx5/tests/tests.cmake")
  endif()
endfunction()

# The application-facing header: #include <infiniband/sverbs.h>
install(FILES "${SVERBS_SOURCE_DIR}/include/infiniband/sverbs.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/infiniband")

# Included by sverbs_provider(mlx5 mlx5) in providers/sverbs.cmake, from
# rdma-core's providers/mlx5/ directory once the mlx5 target exists.
#
# test_mlx5_adapter: CUnit tests of the mlx5 adapter without hardware.  It
# links every object of libmlx5 (stock mlx5 + sverbs core + glue) into an
# executable in rdma-core's bin/; it is never installed.  Skipped when CUnit
# is missing.

find_path(SVERBS_CUNIT_INCLUDE_DIR CUnit/Basic.h)
find_library(SVERBS_CUNIT_LIB cunit)
if (SVERBS_CUNIT_INCLUDE_DIR AND SVERBS_CUNIT_LIB)

rdma_test_executable(test_mlx5_adapter
  "${SVERBS_SOURCE_DIR}/providers/mlx5/tests/test_mlx5_adapter.c"
  $<TARGET_OBJECTS:mlx5>)
target_include_directories(test_mlx5_adapter PRIVATE
  "${CMAKE_CURRENT_SOURCE_DIR}"
  "${SVERBS_SOURCE_DIR}/include"
  "${SVERBS_SOURCE_DIR}/common"
  "${SVERBS_SOURCE_DIR}/sched"
  "${SVERBS_SOURCE_DIR}/batch"
  "${SVERBS_SOURCE_DIR}/libsverbs"
  "${SVERBS_SOURCE_DIR}/providers/mlx5"
  "${SVERBS_CUNIT_INCLUDE_DIR}")
# libmlx5's objects define versioned symbols (MLX5_1.x): they need its map.
# --wrap: the test counts the adapter's calls of the stock mlx5_post_send.
set_target_properties(test_mlx5_adapter PROPERTIES LINK_FLAGS
  "-Wl,--version-script,${CMAKE_CURRENT_SOURCE_DIR}/libmlx5.map -Wl,--wrap=mlx5_post_send")
target_link_libraries(test_mlx5_adapter LINK_PRIVATE
  ${COMMON_LIBS_PIC} ibverbs sverbs "${SVERBS_CUNIT_LIB}"
  ${CMAKE_THREAD_LIBS_INIT})
if (ENABLE_LTTNG AND LTTNGUST_FOUND)
  target_link_libraries(test_mlx5_adapter LINK_PRIVATE LTTng::UST)
endif()
else()
  message(STATUS "sverbs: CUnit not found, test_mlx5_adapter is not built")
endif()

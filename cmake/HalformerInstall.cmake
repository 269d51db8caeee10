# `cmake --install build --prefix P` gives an application everything it needs:
#   P/include/halformer/           the runtime's public headers
#   P/include/halformer/kernels/   the generated kernels' headers (hf_*.h)
#   P/lib/libhalformer.a           runtime + every hand-scheduled kernel (all
#                                  x86 variants, and the CUDA and OpenCL builds)
#                                  + the shared Halide runtime
#   P/include/halformer/generator/ the generator and schedule helpers a
#                                  user's own op includes
#   P/lib/cmake/Halformer/         find_package(Halformer) → Halformer::halformer,
#                                  halformer_add_kernel() (HalformerAddKernel.cmake)
#   P/bin/halformer                the command-line tool
# The single archive is merged from the build's static libraries with ar.

set(merge_libs halformer_runtime ${HALFORMER_KERNELS} ${HALFORMER_GPU_KERNELS})
get_property(halide_rt GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME)
list(APPEND merge_libs ${halide_rt})
if (TARGET halformer_absent_kernels)  # HALFORMER_KERNEL_SET: the kernels left out are its interfaces
  list(APPEND merge_libs halformer_absent_kernels)
endif ()
set(mri "CREATE ${PROJECT_BINARY_DIR}/libhalformer.a\n")
foreach (lib IN LISTS merge_libs)
  get_target_property(type ${lib} TYPE)
  if (NOT type STREQUAL "INTERFACE_LIBRARY")
    string(APPEND mri "ADDLIB $<TARGET_FILE:${lib}>\n")
  endif ()
endforeach ()
string(APPEND mri "SAVE\nEND\n")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/libhalformer.mri CONTENT "${mri}")
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/libhalformer.a
                   COMMAND ${CMAKE_COMMAND} -E rm -f ${PROJECT_BINARY_DIR}/libhalformer.a
                   COMMAND ${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/libhalformer.mri
                   DEPENDS ${merge_libs} ${PROJECT_BINARY_DIR}/libhalformer.mri
                   COMMENT "Merging the runtime and kernels into libhalformer.a"
                   VERBATIM)
add_custom_target(halformer_archive ALL DEPENDS ${PROJECT_BINARY_DIR}/libhalformer.a)

include(GNUInstallDirs)
install(FILES ${PROJECT_BINARY_DIR}/libhalformer.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
# server.h is left out: the server (cpp-httplib) is the halformer command's, not in libhalformer.a.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/halformer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "server.h" EXCLUDE)
foreach (k IN LISTS HALFORMER_KERNELS HALFORMER_GPU_KERNELS)
  install(FILES ${PROJECT_BINARY_DIR}/generators/${k}.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/halformer/kernels)
endforeach ()
install(TARGETS halformer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/HalformerConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/HalformerConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Halformer)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/HalformerConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/HalformerConfig.cmake ${PROJECT_BINARY_DIR}/HalformerConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/HalformerAddKernel.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Halformer)
# The generator helpers a user's op includes (halformer_add_kernel): the
# algorithm pieces, the schedule helpers and the tuned-record lookup they use,
# with empty record tables (the package's records name its own kernels and
# may include schedules from its source tree; a user's kernel keeps its hand
# values).
set(user_inc ${PROJECT_BINARY_DIR}/generator_include)
foreach (inc IN ITEMS halformer_tuned_schedules halformer_tuned_schedule_rows halformer_tuned_records
                    halformer_tuned_record_list)
  file(WRITE ${user_inc}/${inc}.inc "// Installed with Halformer: no tuned records for a user's kernels.\n")
endforeach ()
install(FILES ${PROJECT_SOURCE_DIR}/generators/common.h ${PROJECT_SOURCE_DIR}/schedules/schedule_common.h
              ${PROJECT_SOURCE_DIR}/schedules/tuned.h
              ${user_inc}/halformer_tuned_schedules.inc ${user_inc}/halformer_tuned_schedule_rows.inc
              ${user_inc}/halformer_tuned_records.inc ${user_inc}/halformer_tuned_record_list.inc
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/halformer/generator)

# `cmake --install build --prefix P` gives an application everything it needs:
#   P/include/halformer/           the runtime's public headers
#   P/include/halformer/kernels/   the generated kernels' headers (hf_*.h)
#   P/lib/libhalformer.a           runtime + every hand-scheduled kernel (all
#                                  x86 variants, and the CUDA and OpenCL builds)
#                                  + the shared Halide runtime
#   P/lib/cmake/Halformer/         find_package(Halformer) → Halformer::halformer
#   P/bin/halformer                the command-line tool
# The single archive is merged from the build's static libraries with ar.

set(merge_libs halformer_runtime ${HALFORMER_KERNELS} ${HALFORMER_GPU_KERNELS})
get_property(halide_rt GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME)
list(APPEND merge_libs ${halide_rt})
set(mri "CREATE ${PROJECT_BINARY_DIR}/libhalformer.a\n")
foreach (lib IN LISTS merge_libs)
  string(APPEND mri "ADDLIB $<TARGET_FILE:${lib}>\n")
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
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Halformer)

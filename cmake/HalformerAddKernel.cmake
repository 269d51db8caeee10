# halformer_add_kernel(NAME GENERATOR gen [SOURCES file...] [PARAMS k=v...]
#                      [GPU] [TARGETS target...])
#
# Installed with the package (find_package(Halformer) includes it): builds a
# user's Halide generator into a kernel that links beside Halformer's own, the
# way Halformer builds its kernels:
#   NAME          a static library and NAME.h: one object per x86 variant the
#                 package was built for (HALFORMER_X86_TARGETS, most specific
#                 first) and Halide's wrapper that picks the best one this CPU
#                 runs, once, on the first call. The package's Halide runtime
#                 is shared (no second runtime), so the kernel obeys
#                 halformer::set_isa_limit() / HALFORMER_ISA, reports errors
#                 through halformer::check_kernel, and runs on Halformer's
#                 thread pool.
#   NAME_opencl, NAME_cuda
#                 with GPU, when the package has GPU builds: the generator's
#                 GPU schedule for OpenCL and for CUDA (one PTX per compute
#                 capability the package targets, with a wrapper that picks
#                 by the device's).
# GENERATOR is the name the source registers (HALIDE_REGISTER_GENERATOR);
# SOURCES builds it the first time a GENERATOR is named (later kernels of the
# same generator may leave SOURCES out). The generator may include the
# package's generator helpers: <halformer/generator/common.h> (activations,
# erf, the matmul), <halformer/generator/schedule_common.h> (vector widths,
# GPU row blocks and reductions, leave_to_autoscheduler). PARAMS are passed
# to the generator (GeneratorParams). TARGETS replaces the x86 variants.
#
# Needs Debian's libhalide14-0-dev (Halide's CMake package, which loads
# LLVM's: the project must enable C as well as CXX).
function(halformer_add_kernel NAME)
  cmake_parse_arguments(ARG "GPU" "GENERATOR" "SOURCES;PARAMS;TARGETS" ${ARGN})
  if (ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "halformer_add_kernel(${NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif ()
  if (NOT ARG_GENERATOR)
    message(FATAL_ERROR "halformer_add_kernel(${NAME}): GENERATOR is required "
                        "(the name in HALIDE_REGISTER_GENERATOR)")
  endif ()
  _halformer_need_halide(${NAME})

  set(gen halformer_generator_${ARG_GENERATOR})
  if (NOT TARGET ${gen})
    if (NOT ARG_SOURCES)
      message(FATAL_ERROR "halformer_add_kernel(${NAME}): SOURCES is required the first time "
                          "generator '${ARG_GENERATOR}' is named")
    endif ()
    add_halide_generator(${gen} SOURCES ${ARG_SOURCES})
    target_include_directories(${gen} PRIVATE ${HALFORMER_GENERATOR_INCLUDE_DIR})
  elseif (ARG_SOURCES)
    get_target_property(have ${gen} SOURCES)
    if (NOT "${have}" STREQUAL "${ARG_SOURCES}")
      message(FATAL_ERROR "halformer_add_kernel(${NAME}): generator '${ARG_GENERATOR}' was already "
                          "built from ${have}, not ${ARG_SOURCES}")
    endif ()
  endif ()

  set(targets ${ARG_TARGETS})
  if (NOT targets)
    set(targets ${HALFORMER_X86_TARGETS})
  endif ()
  add_halide_library(${NAME} FROM ${gen} GENERATOR ${ARG_GENERATOR}
                     TARGETS ${targets} USE_RUNTIME Halformer::halide_runtime
                     PARAMS ${ARG_PARAMS})
  if (ARG_GPU)
    if (NOT HALFORMER_PACKAGE_GPU)
      message(FATAL_ERROR "halformer_add_kernel(${NAME}): GPU asked, but this Halformer package "
                          "was built without GPU kernels (HALFORMER_GPU=OFF)")
    endif ()
    add_halide_library(${NAME}_opencl FROM ${gen} GENERATOR ${ARG_GENERATOR}
                       TARGETS ${HALFORMER_OPENCL_TARGET} USE_RUNTIME Halformer::halide_runtime
                       PARAMS ${ARG_PARAMS})
    add_halide_library(${NAME}_cuda FROM ${gen} GENERATOR ${ARG_GENERATOR}
                       TARGETS ${HALFORMER_CUDA_TARGETS} USE_RUNTIME Halformer::halide_runtime
                       PARAMS ${ARG_PARAMS})
  endif ()
endfunction()

# Halide's CMake package, found when the package was loaded (see
# HalformerConfig.cmake); a clear error when it was not.
function(_halformer_need_halide name)
  if (NOT COMMAND add_halide_library OR NOT TARGET Halide::Generator)
    message(FATAL_ERROR "halformer_add_kernel(${name}) needs Halide's CMake package (Debian "
                        "libhalide14-0-dev) and a project that enables C as well as CXX "
                        "(project(app C CXX): Halide's package loads LLVM's, which runs a C check)")
  endif ()
endfunction()

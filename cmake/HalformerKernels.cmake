# halformer_kernel(NAME GENERATOR gen [PARAMS k=v ...] [HAND_ONLY] [NO_ARM] [CPU_ONLY])
#
# Compiles one kernel variant ahead of time:
#   NAME                  hand schedule, one object per x86 variant below plus a
#                         wrapper that picks the best one this CPU can run
#   NAME_opencl           the GPU schedule for OpenCL (HALFORMER_GPU)
#   NAME_cuda             the GPU schedule for CUDA, sm_86 and sm_80 PTX with a
#                         wrapper that picks by the device's compute capability
#   NAME_li2018_opencl, NAME_li2018_cuda
#                         the same algorithm scheduled for the GPU by Halide's
#                         Li2018 autoscheduler, for comparison (not for
#                         embedding and topk: Li2018 inlines their id checks
#                         into GPU code, which v14 cannot emit)
#   NAME_adams2019        the same algorithm scheduled by Adams2019 (host target)
#   NAME_mullapudi2016    ... and by Mullapudi2016
# HAND_ONLY skips the autoscheduled builds; NO_ARM the ARM one (training
# kernels: x86 and GPUs only); CPU_ONLY builds the x86 variants alone (the
# bfloat16 and int8 kernels, made for AVX512-BF16 and VNNI).
# All kernels link one shared Halide runtime (the first kernel's NAME.runtime).
#
# The variants are listed most specific first: the wrapper takes the first one
# whose features the CPU has (halide_can_use_target_features), so the plain
# sse41 object is the fallback.
set(HALFORMER_X86_TARGETS
    x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-f16c-fma-sse41
    x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41
    x86-64-linux-avx-avx2-f16c-fma-sse41
    x86-64-linux-sse41
    CACHE STRING "Targets every hand-scheduled kernel is compiled for")

# Machine parameters for the autoschedulers: parallelism, last-level cache
# bytes, balance. Set from this project's machine (2 cores, 32 MiB L3).
# GPU variants: the host part is plain x86-64 (it only launches kernels), so
# the same binary runs on any x86-64 GPU server. No GPU, CUDA toolkit or
# OpenCL driver is needed to build them: Halide emits PTX and OpenCL C, and the
# runtime loads libcuda / libOpenCL when a kernel first runs.
option(HALFORMER_GPU "Compile the CUDA and OpenCL variants of every kernel" ON)
set(HALFORMER_OPENCL_TARGET x86-64-linux-sse41-opencl-cl_doubles CACHE STRING "OpenCL target")
set(HALFORMER_CUDA_TARGETS
    x86-64-linux-sse41-cuda-cuda_capability_86
    x86-64-linux-sse41-cuda-cuda_capability_80
    CACHE STRING "CUDA targets (most specific first)")
set(HALFORMER_GPU_KERNELS "" CACHE INTERNAL "")

# ARM: every hand-scheduled kernel also for 64-bit ARM Linux (NEON), as static
# libraries with their own ARM runtime; tests/arm builds the op tests against
# them with Debian's aarch64 cross compiler and runs them under qemu-aarch64.
find_program(HALFORMER_AARCH64_CXX aarch64-linux-gnu-g++)
if (HALFORMER_AARCH64_CXX)
  set(arm_default ON)
else ()
  set(arm_default OFF)
endif ()
option(HALFORMER_ARM "Cross-compile the kernels and op tests for arm-64-linux" ${arm_default})
set(HALFORMER_ARM_TARGET arm-64-linux CACHE STRING "ARM target")
set(HALFORMER_ARM_KERNELS "" CACHE INTERNAL "")

set(HALFORMER_MACHINE_PARAMS "2,33554432,40" CACHE STRING "autoscheduler machine_params")

set(HALFORMER_KERNELS "" CACHE INTERNAL "")                 # hand-scheduled (the runtime's)
set(HALFORMER_AUTOSCHEDULED_KERNELS "" CACHE INTERNAL "")   # for tests and benchmarks

# The runtime every kernel of a family shares (the global property PROP, set
# by the family's first kernel): its name in NAME_VAR, and in ARGS_VAR the
# add_halide_library arguments that use it (empty for the first kernel).
function(_halformer_shared_runtime prop name_var args_var)
  get_property(rt GLOBAL PROPERTY ${prop})
  set(${name_var} "${rt}" PARENT_SCOPE)
  if (rt)
    set(${args_var} USE_RUNTIME ${rt} PARENT_SCOPE)
  else ()
    set(${args_var} "" PARENT_SCOPE)
  endif ()
endfunction()

function(halformer_kernel NAME)
  cmake_parse_arguments(ARG "HAND_ONLY;NO_ARM;CPU_ONLY" "GENERATOR" "PARAMS" ${ARGN})
  if (ARG_CPU_ONLY)
    set(ARG_HAND_ONLY ON)
    set(ARG_NO_ARM ON)
  endif ()
  set(extra "")
  if (HALFORMER_EMIT_STMT)
    list(APPEND extra STMT ${NAME}_stmt ASSEMBLY ${NAME}_asm)
  endif ()
  _halformer_shared_runtime(HALFORMER_HALIDE_RUNTIME runtime rt)
  # tuned_as: the name the tuned records (schedules/tuned/) know this kernel by.
  add_halide_library(${NAME} FROM halformer_generators
                     GENERATOR ${ARG_GENERATOR}
                     TARGETS ${HALFORMER_X86_TARGETS}
                     ${rt}
                     PARAMS ${ARG_PARAMS} tuned_as=${NAME}
                     ${extra})
  list(JOIN ARG_PARAMS " " plist)
  set_property(GLOBAL APPEND_STRING PROPERTY HALFORMER_KERNEL_LIST
               "{\"${NAME}\", \"${ARG_GENERATOR}\", \"${plist}\"},\n")
  if (NOT runtime)
    # The first kernel's runtime becomes the one every kernel shares.
    set(runtime ${NAME}.runtime)
    set_property(GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME ${runtime})
  endif ()
  set(HALFORMER_KERNELS ${HALFORMER_KERNELS} ${NAME} CACHE INTERNAL "")
  set(all "")
  if (HALFORMER_GPU AND NOT ARG_CPU_ONLY)
    foreach (api IN ITEMS opencl cuda)
      if (api STREQUAL "opencl")
        set(targets ${HALFORMER_OPENCL_TARGET})
      else ()
        set(targets ${HALFORMER_CUDA_TARGETS})
      endif ()
      add_halide_library(${NAME}_${api} FROM halformer_generators
                         GENERATOR ${ARG_GENERATOR}
                         TARGETS ${targets}
                         USE_RUNTIME ${runtime}
                         PARAMS ${ARG_PARAMS} tuned_as=${NAME})
    endforeach ()
    set(HALFORMER_GPU_KERNELS ${HALFORMER_GPU_KERNELS} ${NAME}_opencl ${NAME}_cuda CACHE INTERNAL "")
    if (HALFORMER_AUTOSCHEDULED AND NOT ARG_HAND_ONLY AND NOT ARG_GENERATOR MATCHES "^(embedding|topk)$")
      foreach (api IN ITEMS opencl cuda)
        if (api STREQUAL "opencl")
          set(t ${HALFORMER_OPENCL_TARGET})
        else ()
          list(GET HALFORMER_CUDA_TARGETS -1 t)  # sm_80: runs on every GPU since
        endif ()
        add_halide_library(${NAME}_li2018_${api} FROM halformer_generators
                           GENERATOR ${ARG_GENERATOR}
                           TARGETS ${t}
                           USE_RUNTIME ${runtime}
                           AUTOSCHEDULER Halide::Li2018
                           PARAMS ${ARG_PARAMS})
        list(APPEND all ${NAME}_li2018_${api})
      endforeach ()
    endif ()
  endif ()
  if (HALFORMER_ARM AND NOT ARG_NO_ARM)
    # Same C function name (hf_x) in hf_x_arm.a; arm_include/hf_x.h forwards.
    _halformer_shared_runtime(HALFORMER_ARM_RUNTIME arm_runtime arm_rt)
    add_halide_library(${NAME}_arm FROM halformer_generators
                       GENERATOR ${ARG_GENERATOR}
                       FUNCTION_NAME ${NAME}
                       TARGETS ${HALFORMER_ARM_TARGET}
                       ${arm_rt}
                       PARAMS ${ARG_PARAMS} tuned_as=${NAME})
    if (NOT arm_runtime)
      set_property(GLOBAL PROPERTY HALFORMER_ARM_RUNTIME ${NAME}_arm.runtime)
    endif ()
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/arm_include/${NAME}.h "#include \"${NAME}_arm.h\"\n")
    set(HALFORMER_ARM_KERNELS ${HALFORMER_ARM_KERNELS} ${NAME}_arm CACHE INTERNAL "")
  endif ()
  if (HALFORMER_AUTOSCHEDULED AND NOT ARG_HAND_ONLY)
    foreach (as IN ITEMS Adams2019 Mullapudi2016)
      string(TOLOWER ${as} suffix)
      add_halide_library(${NAME}_${suffix} FROM halformer_generators
                         GENERATOR ${ARG_GENERATOR}
                         TARGETS host
                         USE_RUNTIME ${runtime}
                         AUTOSCHEDULER Halide::${as}
                         PARAMS ${ARG_PARAMS} machine_params=${HALFORMER_MACHINE_PARAMS})
      list(APPEND all ${NAME}_${suffix})
    endforeach ()
  endif ()
  set(HALFORMER_AUTOSCHEDULED_KERNELS ${HALFORMER_AUTOSCHEDULED_KERNELS} ${all} CACHE INTERNAL "")
endfunction()

# Writes halformer_kernel_list.inc: {name, generator, "param=value ..."} for
# every hand-scheduled kernel, so that the tuner knows each kernel's
# algorithm and hand parameters without repeating them.
function(halformer_write_kernel_list)
  get_property(list GLOBAL PROPERTY HALFORMER_KERNEL_LIST)
  _halformer_write_if_changed(${HALFORMER_GENERATED_DIR}/halformer_kernel_list.inc
    "// Generated by cmake/HalformerKernels.cmake from generators/CMakeLists.txt.\n${list}")
endfunction()

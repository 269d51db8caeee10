# halformer_kernel(NAME GENERATOR gen [PARAMS k=v ...] [HAND_ONLY] [NO_ARM] [CPU_ONLY])
#
# Compiles one kernel variant ahead of time:
#   NAME                  hand schedule, one object per x86 variant below plus a
#                         wrapper that picks the best one this CPU can run
#   NAME_opencl           the GPU schedule for OpenCL (HALFORMER_GPU)
#   NAME_cuda             the GPU schedule for CUDA: sm_80 PTX (with more than
#                         one HALFORMER_CUDA_TARGETS, a wrapper that picks by the
#                         device's compute capability)
#   NAME_li2018_opencl, NAME_li2018_cuda
#                         the same algorithm scheduled for the GPU by Halide's
#                         Li2018 autoscheduler, for comparison (not for
#                         embedding and topk: Li2018 inlines their id checks
#                         into GPU code, which v14 cannot emit; not for
#                         sample: its schedule sums doubles with atomics,
#                         which the OpenCL target lacks)
#   NAME_adams2019        the same algorithm scheduled by Adams2019, for each of
#                         HALFORMER_AUTOSCHEDULE_TARGETS (below)
#   NAME_mullapudi2016    ... and by Mullapudi2016
#                         (all three with every split's tail guarded, so that
#                         they serve any shape: schedules/guarded_autoschedulers.cpp)
# NO_GPU skips the GPU builds (Li2018's too) but keeps ARM and the CPU
# autoscheduled builds;
# HAND_ONLY skips the autoscheduled builds; NO_ARM the ARM one (training
# kernels: x86 and GPUs only); CPU_ONLY builds the x86 variants alone (the
# bfloat16 and int8 kernels, made for AVX512-BF16 and VNNI).
# All kernels link one shared Halide runtime (the first kernel's NAME.runtime).
#
# The variants are listed most specific first: the wrapper takes the first one
# whose features the CPU has (halide_can_use_target_features), so the plain
# sse41 object is the fallback. `host` in HALFORMER_X86_TARGETS stands for the
# build machine's variant (scripts/main.sh builds that one alone).
set(HALFORMER_X86_VARIANTS
    x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-f16c-fma-sse41
    x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41
    x86-64-linux-avx-avx2-f16c-fma-sse41
    x86-64-linux-sse41)
set(HALFORMER_X86_TARGETS ${HALFORMER_X86_VARIANTS}
    CACHE STRING "Targets every hand-scheduled kernel is compiled for (host: the build machine's variant)")

# GPU variants: the host part is plain x86-64 (it only launches kernels), so
# the same binary runs on any x86-64 GPU server. No GPU, CUDA toolkit or
# OpenCL driver is needed to build them: Halide emits PTX and OpenCL C, and the
# runtime loads libcuda / libOpenCL when a kernel first runs.
option(HALFORMER_GPU "Compile the CUDA and OpenCL variants of every kernel" ON)
set(HALFORMER_OPENCL_TARGET x86-64-linux-sse41-opencl-cl_doubles CACHE STRING "OpenCL target")
# One CUDA target: Halide 14's PTX for capability 8.6 differs from 8.0's only
# in its .target line and PTX version (no 8.6-only instruction is used), and
# the driver compiles sm_80 PTX for any newer GPU (8.6, 8.9, 9.0). A second
# capability, most specific first, doubled the CUDA kernels' build time and
# gave no different code.
set(HALFORMER_CUDA_TARGETS
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

# ---- the autoscheduled builds: target and machine, settable for any host ----
# Adams2019 and Mullapudi2016 choose their schedule (tiles, unrolling, tail
# strategies) for one target and one machine, so their kernels differ from
# one build machine to another. Both are settings, defaulting to the build
# machine, so that anyone can build exactly what another host builds:
#
#   -DHALFORMER_AUTOSCHEDULE_TARGET=x86-64-linux-avx-avx2-f16c-fma-sse41
#   -DHALFORMER_MACHINE_PARAMS=4,8388608,40
#
# HALFORMER_AUTOSCHEDULE_TARGET is a Halide target, or a list of them (most
# specific first is not needed: they are sorted), each scheduled on its own;
# with several, a wrapper picks per CPU like the hand-scheduled kernels', and
# HALFORMER_ISA caps it. `host` stands for the build machine's variant: the
# first of HALFORMER_X86_VARIANTS whose features Halide's own CPU detection
# (get_host_target, the same rules as the kernels' wrappers) finds here.
# scripts/test.sh builds `host` plus the avx2 and sse41 targets, and ctest's
# ops.<isa> runs each (tests/CMakeLists.txt).

# The Isa (runtime/include/halformer/isa.h) whose kernels a target's code is:
# sapphirerapids, avx512, avx2 or sse41.
function(_halformer_isa_of target out_var)
  string(REPLACE "-" ";" f "${target}")
  if ("avx512_sapphirerapids" IN_LIST f)
    set(isa sapphirerapids)
  elseif ("avx512" IN_LIST f)
    set(isa avx512)
  elseif ("avx2" IN_LIST f)
    set(isa avx2)
  else ()
    set(isa sse41)
  endif ()
  set(${out_var} ${isa} PARENT_SCOPE)
endfunction()

# The build machine's variant among HALFORMER_X86_VARIANTS (see above).
function(_halformer_host_variant out_var)
  find_program(HALFORMER_GET_HOST_TARGET get_host_target
               HINTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/halide14 /usr/lib/halide14)
  set(host "")
  if (HALFORMER_GET_HOST_TARGET)
    execute_process(COMMAND ${HALFORMER_GET_HOST_TARGET} OUTPUT_VARIABLE host
                    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
    if (NOT rc EQUAL 0)
      set(host "")
    endif ()
  endif ()
  if (NOT host)
    message(FATAL_ERROR "Halide's get_host_target (libhalide14-0-dev) did not run: set "
                        "HALFORMER_AUTOSCHEDULE_TARGET to a target, not host")
  endif ()
  string(REPLACE "-" ";" have "${host}")
  foreach (t IN LISTS HALFORMER_X86_VARIANTS)
    string(REPLACE "-" ";" need "${t}")
    set(ok ON)
    foreach (f IN LISTS need)
      if (NOT f IN_LIST have)
        set(ok OFF)
      endif ()
    endforeach ()
    if (ok)
      set(${out_var} ${t} PARENT_SCOPE)
      return()
    endif ()
  endforeach ()
  message(FATAL_ERROR "the build machine (${host}) runs none of HALFORMER_X86_VARIANTS: name "
                      "the targets (HALFORMER_X86_TARGETS, HALFORMER_AUTOSCHEDULE_TARGET) instead of host")
endfunction()

# HALFORMER_X86_TARGETS as the kernels use it: `host` resolved.
if ("host" IN_LIST HALFORMER_X86_TARGETS)
  _halformer_host_variant(host_variant)
  list(TRANSFORM HALFORMER_X86_TARGETS REPLACE "^host$" "${host_variant}" OUTPUT_VARIABLE resolved)
  list(REMOVE_DUPLICATES resolved)
  set(HALFORMER_X86_TARGETS ${resolved})  # shadows the cache entry
  message(STATUS "Halformer: hand-scheduled kernels for ${HALFORMER_X86_TARGETS}")
endif ()

set(HALFORMER_AUTOSCHEDULE_TARGET host CACHE STRING
    "Halide target(s) the Adams2019 and Mullapudi2016 builds are scheduled for (host: the build machine's variant)")
# The kernels this build compiles: `all`, or a file naming them (one a line,
# `#` comments). scripts/main.sh's build compiles the float32
# encoder-decoder translator's (cmake/translator_kernels.txt): a kernel left
# out still has its header and its entry, which fails with an error naming
# it and this build, so the runtime and the CLI link as they are.
set(HALFORMER_KERNEL_SET all CACHE STRING
    "Kernels to compile: all, or a file listing them (cmake/translator_kernels.txt: scripts/main.sh)")
set(HALFORMER_KERNEL_SET_LIST "")
if (NOT HALFORMER_KERNEL_SET STREQUAL "all")
  get_filename_component(set_file "${HALFORMER_KERNEL_SET}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
  if (NOT EXISTS "${set_file}")
    message(FATAL_ERROR "HALFORMER_KERNEL_SET: '${HALFORMER_KERNEL_SET}' is neither `all` nor a file")
  endif ()
  if (HALFORMER_TESTS OR HALFORMER_BENCH OR HALFORMER_TRAINING OR HALFORMER_GPU OR HALFORMER_ARM
      OR HALFORMER_AUTOSCHEDULED)
    message(FATAL_ERROR "HALFORMER_KERNEL_SET=${HALFORMER_KERNEL_SET} builds the CPU inference kernels it "
                        "names only: configure with HALFORMER_TESTS, HALFORMER_BENCH, HALFORMER_TRAINING, "
                        "HALFORMER_GPU, HALFORMER_ARM and HALFORMER_AUTOSCHEDULED OFF (as scripts/main.sh does)")
  endif ()
  file(STRINGS "${set_file}" HALFORMER_KERNEL_SET_LIST REGEX "^[a-z]")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${set_file}")
  list(LENGTH HALFORMER_KERNEL_SET_LIST n)
  message(STATUS "Halformer: ${n} kernels compiled (HALFORMER_KERNEL_SET=${HALFORMER_KERNEL_SET}); "
                 "the others fail naming themselves")
endif ()

# A kernel HALFORMER_KERNEL_SET leaves out: its generator writes only its
# header (no code: a fraction of a second), and _absent.cpp defines its
# entry points from the header's prototype; they fail with an error that
# names the kernel (cmake/HalformerAbsentKernel.cmake). The entry points of
# all of them are one library (compiled in a few unity batches), and the
# kernel's own target an interface to it.
function(_halformer_absent_kernel NAME GENERATOR PARAMS)
  set(dir ${CMAKE_CURRENT_BINARY_DIR})
  list(GET HALFORMER_X86_TARGETS 0 target)
  add_custom_command(OUTPUT ${dir}/${NAME}.h ${dir}/${NAME}_absent.cpp
    COMMAND halformer_generators -n ${NAME} -d 0 -g ${GENERATOR} -f ${NAME} -e c_header -o ${dir}
            target=${target}-no_runtime ${PARAMS}
    COMMAND ${CMAKE_COMMAND} -DNAME=${NAME} -DHEADER=${dir}/${NAME}.h -DOUT=${dir}/${NAME}_absent.cpp
            -DKERNEL_SET=${HALFORMER_KERNEL_SET} -P ${PROJECT_SOURCE_DIR}/cmake/HalformerAbsentKernel.cmake
    DEPENDS halformer_generators ${PROJECT_SOURCE_DIR}/cmake/HalformerAbsentKernel.cmake
    VERBATIM)
  if (NOT TARGET halformer_absent_kernels)
    add_library(halformer_absent_kernels STATIC)
    target_include_directories(halformer_absent_kernels PUBLIC ${dir})
    target_link_libraries(halformer_absent_kernels PUBLIC Halide::Runtime)
  endif ()
  target_sources(halformer_absent_kernels PRIVATE ${dir}/${NAME}_absent.cpp)
  add_library(${NAME} INTERFACE)
  target_link_libraries(${NAME} INTERFACE halformer_absent_kernels)
endfunction()

set(HALFORMER_AUTOSCHEDULE_TARGETS "")   # resolved, most specific first
set(HALFORMER_AUTOSCHEDULED_ISAS "")     # their variants, same order
if (HALFORMER_AUTOSCHEDULED)
  set(ranked "")
  foreach (t IN LISTS HALFORMER_AUTOSCHEDULE_TARGET)
    if (t STREQUAL "host")
      _halformer_host_variant(t)
    endif ()
    if (NOT t MATCHES "^x86-64-linux(-[a-z0-9_]+)*$" OR t MATCHES "-(host|no_runtime|cuda|opencl)")
      message(FATAL_ERROR "HALFORMER_AUTOSCHEDULE_TARGET: '${t}' is not an x86-64-linux CPU target "
                          "(e.g. x86-64-linux-avx-avx2-f16c-fma-sse41, or host)")
    endif ()
    _halformer_isa_of(${t} isa)
    list(FIND ranked "${isa}" seen)
    if (seen GREATER -1)
      continue()  # one target per variant (host may equal a listed one)
    endif ()
    list(APPEND ranked ${isa})
    set(target_of_${isa} ${t})
  endforeach ()
  foreach (isa IN ITEMS sapphirerapids avx512 avx2 sse41)
    if (isa IN_LIST ranked)
      list(APPEND HALFORMER_AUTOSCHEDULE_TARGETS ${target_of_${isa}})
      list(APPEND HALFORMER_AUTOSCHEDULED_ISAS ${isa})
    endif ()
  endforeach ()
endif ()

# How Adams2019 searches: `beam` (Halide's default: five passes of a 32-wide
# beam search, minutes a kernel: the schedules the benchmarks and the tuner
# compare against) or `greedy` (one pass at width 1, seconds a kernel:
# GuardedAdams2019Greedy in schedules/guarded_autoschedulers.cpp).
# scripts/test.sh builds `greedy`: the tests check that every autoscheduled
# kernel is right at every shape on every variant, not how fast it is.
set(HALFORMER_ADAMS2019_SEARCH beam CACHE STRING
    "Adams2019's search: beam (Halide's default, for benchmarks) or greedy (width 1, for tests)")
set_property(CACHE HALFORMER_ADAMS2019_SEARCH PROPERTY STRINGS beam greedy)
if (NOT HALFORMER_ADAMS2019_SEARCH MATCHES "^(beam|greedy)$")
  message(FATAL_ERROR "HALFORMER_ADAMS2019_SEARCH: '${HALFORMER_ADAMS2019_SEARCH}' is not beam or greedy")
endif ()

# Machine parameters for the autoschedulers: parallelism, last-level cache
# bytes, balance (Halide's cost model constant). Default: this build
# machine's logical cores and last-level cache.
if (NOT DEFINED CACHE{HALFORMER_MACHINE_PARAMS})
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  set(llc 0)
  foreach (level IN ITEMS 3 2)
    if (llc EQUAL 0 AND EXISTS /sys/devices/system/cpu/cpu0/cache/index${level}/size)
      file(READ /sys/devices/system/cpu/cpu0/cache/index${level}/size size)
      string(STRIP "${size}" size)
      if (size MATCHES "^([0-9]+)K$")
        math(EXPR llc "${CMAKE_MATCH_1} * 1024")
      elseif (size MATCHES "^([0-9]+)M$")
        math(EXPR llc "${CMAKE_MATCH_1} * 1048576")
      endif ()
    endif ()
  endforeach ()
  if (llc EQUAL 0)
    set(llc 16777216)  # Halide's own default
  endif ()
  if (NOT cores GREATER 0)
    set(cores 2)
  endif ()
  set(HALFORMER_MACHINE_PARAMS "${cores},${llc},40" CACHE STRING
      "autoscheduler machine_params: cores,last-level cache bytes,balance (default: the build machine's)")
endif ()
if (HALFORMER_AUTOSCHEDULED)
  # For the op tests (tests/kernels.h), here and in scripts/sanitize.sh's build.
  list(JOIN HALFORMER_AUTOSCHEDULED_ISAS "," isas)
  string(CONCAT header
    "// Generated by cmake/HalformerKernels.cmake: the variants the autoscheduled builds were made for,\n"
    "// and Adams2019's search (beam or greedy: HALFORMER_ADAMS2019_SEARCH).\n"
    "#define HALFORMER_AUTOSCHEDULED_ISAS \"${isas}\"\n"
    "#define HALFORMER_ADAMS2019_SEARCH \"${HALFORMER_ADAMS2019_SEARCH}\"\n")
  _halformer_write_if_changed(${HALFORMER_GENERATED_DIR}/halformer_autoscheduled.h "${header}")
  string(REPLACE ";" ", " shown "${HALFORMER_AUTOSCHEDULED_ISAS}")
  message(STATUS "Halformer: autoscheduled builds for ${shown} (HALFORMER_AUTOSCHEDULE_TARGET), "
                 "machine_params ${HALFORMER_MACHINE_PARAMS}, Adams2019 search ${HALFORMER_ADAMS2019_SEARCH}")
endif ()

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
  cmake_parse_arguments(ARG "HAND_ONLY;NO_ARM;CPU_ONLY;NO_GPU;STRICT_FLOAT" "GENERATOR" "PARAMS" ${ARGN})
  # STRICT_FLOAT: the x86 builds keep every float operation in the order the
  # algorithm writes it (Halide's strict_float: no reassociation, no FMA
  # contraction LLVM chooses per loop). Row-wise reductions then give a row
  # the same bits in a call of any row count (tests/test_row_invariance.cpp).
  # Each x86 variant, preceded by one variant per tuned record of its target
  # that tunes this kernel (cmake/HalformerTuned.cmake: the record's marker
  # feature; the wrapper tries them first, the runtime takes one only on
  # the record's CPU).
  set(x86_targets "")
  foreach (t IN LISTS HALFORMER_X86_TARGETS)
    _halformer_isa_of(${t} isa)
    get_property(markers GLOBAL PROPERTY HALFORMER_TUNED_MARKERS_${NAME}_${isa})
    foreach (m IN LISTS markers)
      list(APPEND x86_targets ${t}-${m})
    endforeach ()
    list(APPEND x86_targets ${t})
  endforeach ()
  if (ARG_STRICT_FLOAT)
    list(TRANSFORM x86_targets APPEND -strict_float)
  endif ()
  if (ARG_CPU_ONLY)
    set(ARG_HAND_ONLY ON)
    set(ARG_NO_ARM ON)
  endif ()
  set(extra "")
  if (HALFORMER_EMIT_STMT)
    list(APPEND extra STMT ${NAME}_stmt ASSEMBLY ${NAME}_asm)
  endif ()
  list(JOIN ARG_PARAMS " " plist)
  if (ARG_STRICT_FLOAT)
    set(strict true)
  else ()
    set(strict false)
  endif ()
  set_property(GLOBAL APPEND_STRING PROPERTY HALFORMER_KERNEL_LIST
               "{\"${NAME}\", \"${ARG_GENERATOR}\", \"${plist}\", ${strict}},\n")
  # Where this kernel is built, whatever this build's options (docs/kernels.md
  # lists it; tests/check_kernel_doc.cpp checks the two agree).
  set(builds x86)
  if (NOT ARG_CPU_ONLY AND NOT ARG_NO_GPU)
    string(APPEND builds " gpu")
  endif ()
  if (NOT ARG_NO_ARM)
    string(APPEND builds " arm")
  endif ()
  set_property(GLOBAL APPEND_STRING PROPERTY HALFORMER_KERNEL_DOC_LIST
               "HF_KERNEL(${NAME}, \"${ARG_GENERATOR}\", \"${plist}\", \"${builds}\")\n")
  set(HALFORMER_KERNELS ${HALFORMER_KERNELS} ${NAME} CACHE INTERNAL "")
  # A kernel this build's HALFORMER_KERNEL_SET leaves out: its header, and
  # an entry that fails naming it (scripts/main.sh's translator build).
  if (HALFORMER_KERNEL_SET_LIST AND NOT NAME IN_LIST HALFORMER_KERNEL_SET_LIST)
    _halformer_absent_kernel(${NAME} ${ARG_GENERATOR} "${ARG_PARAMS}")
    return()
  endif ()
  _halformer_shared_runtime(HALFORMER_HALIDE_RUNTIME runtime rt)
  # tuned_as: the name the tuned records (schedules/tuned/) know this kernel by.
  add_halide_library(${NAME} FROM halformer_generators
                     GENERATOR ${ARG_GENERATOR}
                     TARGETS ${x86_targets}
                     ${rt}
                     PARAMS ${ARG_PARAMS} tuned_as=${NAME}
                     ${extra})
  if (NOT runtime)
    # The first kernel's runtime becomes the one every kernel shares.
    set(runtime ${NAME}.runtime)
    set_property(GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME ${runtime})
  endif ()
  set(all "")
  if (HALFORMER_GPU AND NOT ARG_CPU_ONLY AND NOT ARG_NO_GPU)
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
    if (HALFORMER_AUTOSCHEDULED AND NOT ARG_HAND_ONLY AND NOT ARG_NO_GPU AND NOT ARG_GENERATOR MATCHES "^(embedding|topk|sample)$")
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
                           AUTOSCHEDULER GuardedLi2018 PLUGINS Halide::Li2018
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
      set(scheduler Guarded${as})
      if (as STREQUAL "Adams2019" AND HALFORMER_ADAMS2019_SEARCH STREQUAL "greedy")
        set(scheduler GuardedAdams2019Greedy)
      endif ()
      add_halide_library(${NAME}_${suffix} FROM halformer_generators
                         GENERATOR ${ARG_GENERATOR}
                         TARGETS ${HALFORMER_AUTOSCHEDULE_TARGETS}
                         USE_RUNTIME ${runtime}
                         AUTOSCHEDULER ${scheduler} PLUGINS Halide::${as}
                         PARAMS ${ARG_PARAMS} machine_params=${HALFORMER_MACHINE_PARAMS})
      list(APPEND all ${NAME}_${suffix})
    endforeach ()
  endif ()
  set(HALFORMER_AUTOSCHEDULED_KERNELS ${HALFORMER_AUTOSCHEDULED_KERNELS} ${all} CACHE INTERNAL "")
endfunction()

# Writes halformer_kernel_list.inc: {name, generator, "param=value ...",
# strict_float} for
# every hand-scheduled kernel, so that the tuner knows each kernel's
# algorithm and hand parameters without repeating them; and
# halformer_kernel_doc_list.inc, the same with where each is built, for the
# test that keeps docs/kernels.md true.
function(halformer_write_kernel_list)
  get_property(list GLOBAL PROPERTY HALFORMER_KERNEL_LIST)
  _halformer_write_if_changed(${HALFORMER_GENERATED_DIR}/halformer_kernel_list.inc
    "// Generated by cmake/HalformerKernels.cmake from generators/CMakeLists.txt.\n${list}")
  get_property(doc GLOBAL PROPERTY HALFORMER_KERNEL_DOC_LIST)
  _halformer_write_if_changed(${HALFORMER_GENERATED_DIR}/halformer_kernel_doc_list.inc
    "// Generated by cmake/HalformerKernels.cmake: HF_KERNEL(name, generator, params, builds).\n${doc}")
endfunction()

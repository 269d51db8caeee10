# halformer_kernel(NAME GENERATOR gen [PARAMS k=v ...] [HAND_ONLY])
#
# Compiles one kernel variant ahead of time:
#   NAME                  hand schedule, one object per x86 variant below plus a
#                         wrapper that picks the best one this CPU can run
#   NAME_adams2019        the same algorithm scheduled by Adams2019 (host target)
#   NAME_mullapudi2016    ... and by Mullapudi2016
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
set(HALFORMER_MACHINE_PARAMS "2,33554432,40" CACHE STRING "autoscheduler machine_params")

set(HALFORMER_KERNELS "" CACHE INTERNAL "")                 # hand-scheduled (the runtime's)
set(HALFORMER_AUTOSCHEDULED_KERNELS "" CACHE INTERNAL "")   # for tests and benchmarks

function(halformer_kernel NAME)
  cmake_parse_arguments(ARG "HAND_ONLY" "GENERATOR" "PARAMS" ${ARGN})
  set(extra "")
  if (HALFORMER_EMIT_STMT)
    list(APPEND extra STMT ${NAME}_stmt ASSEMBLY ${NAME}_asm)
  endif ()
  get_property(runtime GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME)
  if (runtime)
    set(rt USE_RUNTIME ${runtime})
  else ()
    set(rt "")
  endif ()
  add_halide_library(${NAME} FROM halformer_generators
                     GENERATOR ${ARG_GENERATOR}
                     TARGETS ${HALFORMER_X86_TARGETS}
                     ${rt}
                     PARAMS ${ARG_PARAMS}
                     ${extra})
  if (NOT runtime)
    # The first kernel's runtime becomes the one every kernel shares.
    set(runtime ${NAME}.runtime)
    set_property(GLOBAL PROPERTY HALFORMER_HALIDE_RUNTIME ${runtime})
  endif ()
  set(HALFORMER_KERNELS ${HALFORMER_KERNELS} ${NAME} CACHE INTERNAL "")
  set(all "")
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

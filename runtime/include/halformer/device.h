// Where the kernels run: the CPU (the x86 variants, see isa.h) or a GPU
// through CUDA or OpenCL. Every hand-scheduled kernel is compiled for all
// three; the runtime picks one set per Model (halformer::LoadOptions::device,
// `--device` on the command line).
//
// A GPU needs only its driver at run time (libcuda.so.1, or libOpenCL.so.1
// and an OpenCL driver such as PoCL): the kernels were compiled ahead of time
// to PTX / OpenCL C, and the driver finishes the compilation on first use.
#pragma once

#include <string>

struct halide_device_interface_t;

namespace halformer {

enum class Device { CPU, CUDA, OpenCL };

const char *device_name(Device d);  // "cpu", "cuda", "opencl"
// Parses "cpu", "cuda" or "opencl"; throws halformer::Error naming the choices.
Device parse_device(const std::string &name);

// Why the device cannot be used here ("" if it can): no driver library, no
// platform, no device. Loads the driver on first call.
std::string device_problem(Device d);
// Throws halformer::Error with device_problem(d) if it is not empty.
void require_device(Device d);
// A short description of the device that would run the kernels (for logs):
// e.g. "CUDA: NVIDIA H100 80GB HBM3 (sm_90)", "OpenCL: Portable Computing
// Language / pthread-…".
std::string device_description(Device d);

// Halide's device interface for a GPU device (nullptr for the CPU).
const halide_device_interface_t *device_interface(Device d);

}  // namespace halformer

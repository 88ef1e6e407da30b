// The C entry points of the CUDA backend module (libstreamspark_cuda.so). The module holds
// every CUDA kernel and links cudart and cuBLASLt; the streamspark binary loads it at run time
// only when a command asks for the cuda backend, so analysis commands start (and run) on a
// machine without CUDA libraries.
#pragma once

#include <cstddef>

#include "runtime/backend.hpp"

extern "C" {
// The usable CUDA devices; 0 with the reason written into `reason` (NUL-terminated) when there
// is none (no driver, no GPU).
int streamspark_cuda_device_count(char* reason, size_t reason_size);
// A new backend on the current device storing `dtype` ("bf16" or "fp16"), owned by the caller;
// nullptr with the error written into `error` when it cannot be created.
streamspark::runtime::Backend* streamspark_cuda_create_backend(const char* dtype, char* error,
                                                               size_t error_size);
}

// The reference every backend's kernels are checked against: each Backend kernel as the plain
// loop of its definition in runtime/backend.hpp, in double precision, on host memory. Slow
// and obviously right; never used outside tests.
#pragma once

#include <memory>

#include "runtime/backend.hpp"

namespace streamspark::test {

std::unique_ptr<runtime::Backend> make_reference_backend();

}  // namespace streamspark::test

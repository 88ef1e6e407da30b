// The errors a service throws besides the spec's (SpecError, CatalogError: a file) and the
// engine's (OverflowError, NonFiniteError: a number): a request that cannot be served as asked,
// and a device or runtime failure. The CLI maps them to exit codes 2 and 3.
#pragma once

#include <stdexcept>

namespace streamspark::app {

// The request is wrong: an option out of range, options that contradict each other, a model
// and device the engine cannot pair. Its message names the option (as the CLI spells it).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The machine failed the request: no such backend or device, a workload that does not fit
// it, a runtime run whose tokens differ from the reference.
class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace streamspark::app

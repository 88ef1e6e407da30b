// The probe service: the CPU probe on a host backend, the device probe on another.
#include "app/probe.hpp"

#include "runtime/backend_registry.hpp"
#include "runtime/probe.hpp"

namespace streamspark::app {

engine::Hardware probe(const ProbeRequest& r, const Context& context) {
  const auto backend = make_backend(r.backend);
  runtime::ProbeOptions options;
  options.quick = r.quick;
  options.name = r.name;
  options.command = context.command_line;
  options.progress = r.progress;
  const bool host = runtime::backend_entry(*backend).capabilities.host;
  if (!host && r.name == "local-cpu") options.name = "local-gpu";
  const auto result =
      host ? runtime::probe_cpu(*backend, resolve_threads(r.backend.threads), options)
           : runtime::probe_device(*backend, options);
  return result.hardware;
}

}  // namespace streamspark::app

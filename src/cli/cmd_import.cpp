// `streamspark import config.json`: a Hugging Face config.json as a model YAML file.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/value_list.hpp"
#include "spec/hf_import.hpp"

namespace streamspark::cli {

namespace {
struct HfImportOptions {
  std::string config;
  std::string name;
  std::string max_context;
  std::string output = "-";
};
}  // namespace

Command add_import_command(CLI::App& root, const AppContext&) {
  auto o = std::make_shared<HfImportOptions>();
  CLI::App* app = root.add_subcommand(
      "import",
      "Turn a Hugging Face config.json into a model YAML (llama, mistral, mixtral, "
      "qwen2, qwen3, phi3, gemma2, deepseek_v2, jamba, mamba)");
  app->add_option("config", o->config, "config.json")->required();
  app->add_option("--name", o->name,
                  "model name (default: the config's _name_or_path, else the file name unless "
                  "it is config.json, else model_type)");
  app->add_option("--max-context", o->max_context,
                  "context length when config.json has no max_position_embeddings");
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  return Command{app, [o] {
                   spec::ImportOptions options;
                   options.name = o->name;
                   if (!o->max_context.empty()) {
                     options.max_context = parse_int(o->max_context, "--max-context", 1);
                   }
                   const spec::ImportedModel m = spec::import_hf_model(o->config, options);
                   OutputFile out(o->output);
                   out.write(m.yaml);
                   out.commit();
                   if (o->name.empty()) {
                     fmt::print(stderr,
                                "import: named the model '{}' after the config's {}; --name sets "
                                "another\n",
                                m.name, m.named_after);
                   }
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli

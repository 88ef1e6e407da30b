// `streamspark import config.json`: a Hugging Face config.json as a model YAML file.
#include <fmt/format.h>

#include <memory>

#include "app/import_model.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"

namespace streamspark::cli {

Command add_import_command(CLI::App& root, const app::Context&) {
  struct ImportCli {
    explicit ImportCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::ImportModelRequest r;
    std::string output = "-";
  };
  CLI::App* app = root.add_subcommand(
      "import",
      "Turn a Hugging Face config.json into a model YAML (llama, mistral, mixtral, "
      "qwen2, qwen3, qwen3_moe, phi3, gemma2, deepseek_v2, deepseek_v3, kimi_k2, gpt_oss, "
      "jamba, mamba)");
  auto s = std::make_shared<ImportCli>(app);
  s->b.text("config", s->r.config, "config.json")->required();
  s->b.text("--name", s->r.name,
            "model name (default: the config's _name_or_path, else the file name unless it is "
            "config.json, else model_type)");
  s->b.integer("--max-context", s->r.max_context, 1,
               "context length when config.json has no max_position_embeddings");
  s->b.text("--output,-o", s->output, "output file (written atomically); - for stdout");
  return Command{app, [s] {
                   s->b.resolve();
                   const spec::ImportedModel m = app::import_model(s->r);
                   write_output(s->output, m.yaml);
                   if (s->r.name.empty()) {
                     fmt::print(stderr,
                                "import: named the model '{}' after the config's {}; --name sets "
                                "another\n",
                                m.name, m.named_after);
                   }
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli

// Placeholder: `lumen bench` is not implemented yet.
#include "commands.h"
#include "core/error.h"

namespace lumen::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'bench' is not implemented yet"); });
}

}  // namespace lumen::cli

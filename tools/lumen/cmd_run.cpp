// Placeholder: `lumen run` is not implemented yet.
#include "commands.h"
#include "core/error.h"

namespace lumen::cli {

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'run' is not implemented yet"); });
}

}  // namespace lumen::cli

// Placeholder: `lumen quantize` is not implemented yet.
#include "commands.h"
#include "core/error.h"

namespace lumen::cli {

void register_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'quantize' is not implemented yet"); });
}

}  // namespace lumen::cli

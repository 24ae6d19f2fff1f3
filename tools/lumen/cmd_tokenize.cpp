// Placeholder: `lumen tokenize` is not implemented yet.
#include "commands.h"
#include "core/error.h"

namespace lumen::cli {

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'tokenize' is not implemented yet"); });
}

}  // namespace lumen::cli

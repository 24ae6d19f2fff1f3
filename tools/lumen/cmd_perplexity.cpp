// Placeholder: `lumen perplexity` is not implemented yet.
#include "commands.h"
#include "core/error.h"

namespace lumen::cli {

void register_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'perplexity' is not implemented yet"); });
}

}  // namespace lumen::cli

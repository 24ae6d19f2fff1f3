// Reading a whole (small) file into a string: prompts, chat templates, JSON variables.
#pragma once

#include <string>

namespace lumen {

// The file's bytes, unchanged. Error "PATH: cannot open: REASON", "PATH: is a directory, not a
// file" or "PATH: read error".
std::string read_whole_file(const std::string& path);

}  // namespace lumen

#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "core/error.h"

namespace lumen {

std::string read_whole_file(const std::string& path) {
  // A directory opens as a stream that reads nothing: refuse it, or it would pass as empty text.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("{}: is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read error", path);
  return ss.str();
}

}  // namespace lumen

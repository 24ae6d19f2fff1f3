// Errors: lumen reports bad input (files, requests, options) by throwing lumen::Error with a
// message that names the thing at fault. Boundaries (the CLI, the HTTP server) catch it and
// turn it into a one-line message or an HTTP error; nothing in the library calls exit().
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace lumen {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Memory the input asked for (a batch size, a context) that this machine cannot give: the
// boundary names the option to lower and both figures.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& what, size_t bytes_needed) : Error(what), bytes_needed(bytes_needed) {}
  size_t bytes_needed;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Internal invariant (a bug in lumen, not bad input): still an exception, never an abort,
// so a server keeps running and the message reaches the log.
#define LUMEN_ASSERT(cond)                                                                   \
  do {                                                                                       \
    if (!(cond)) ::lumen::fail("internal error: {} ({}:{})", #cond, __FILE__, __LINE__);     \
  } while (0)

}  // namespace lumen

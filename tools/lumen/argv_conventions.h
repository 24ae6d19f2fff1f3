// llama.cpp's spellings on lumen's command line, before CLI11 sees it. CLI11 only knows
// one-letter single-dash flags, and would read `-ngl 99` as `-n gl 99`; llama.cpp users type
// `-ngl 99`, `-fa`, `-ctk q8_0`, `-np 4`. This pass turns the multi-letter single-dash spellings
// into lumen's long options, drops the GPU-only ones with one notice each (lumen runs on the
// CPU; the flag changes nothing, so refusing it would only break scripts), and refuses any
// other multi-letter single-dash word rather than letting it be split into letters.
#pragma once

#include <string>
#include <vector>

namespace lumen::cli {

struct ArgvRewrite {
  std::vector<std::string> args;     // argv[1..], rewritten
  std::vector<std::string> notices;  // one line per ignored GPU-only flag
};

// Throws UsageError for an unknown multi-letter single-dash word. Nothing after "--" changes.
ArgvRewrite rewrite_llama_cpp_flags(const std::vector<std::string>& args);

}  // namespace lumen::cli

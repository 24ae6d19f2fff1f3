#include "argv_conventions.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "commands.h"

namespace lumen::cli {

namespace {

struct Alias {
  const char* from;
  const char* to;
};

// Same meaning, llama.cpp's name: renamed to lumen's option.
constexpr Alias kRenames[] = {
    {"-np", "--parallel"},          {"-ctk", "--kv-type-k"},        {"-ctv", "--kv-type-v"},
    {"--cache-type-k", "--kv-type-k"}, {"--cache-type-v", "--kv-type-v"},
};

// GPU-only options of llama.cpp that take a value, and their short spellings.
constexpr Alias kGpuWithValue[] = {
    {"-ngl", "--n-gpu-layers"}, {"--gpu-layers", "--n-gpu-layers"}, {"--n-gpu-layers", "--n-gpu-layers"},
    {"-mg", "--main-gpu"},      {"--main-gpu", "--main-gpu"},        {"-sm", "--split-mode"},
    {"--split-mode", "--split-mode"}, {"-ts", "--tensor-split"},    {"--tensor-split", "--tensor-split"},
    {"-dev", "--device"},       {"--device", "--device"},
};
// GPU-only switches.
constexpr Alias kGpuFlags[] = {{"-nkvo", "--no-kv-offload"}, {"--no-kv-offload", "--no-kv-offload"}};

// -fa / --flash-attn: a switch in older llama.cpp, on|off|auto in newer; lumen's attention is
// already fused on the CPU, so either way it changes nothing.
bool is_flash_attn_value(const std::string& s) {
  static const std::set<std::string> values = {"on", "off", "auto", "1", "0", "true", "false"};
  return values.count(s) > 0;
}

// A word such as "-ngl" or "-xyz": one dash, then at least two characters, the first a letter.
// Negative numbers ("-1", "-0.5") and "-inf" are values, not flags.
bool is_multi_letter_single_dash(const std::string& s) {
  if (s.size() < 3 || s[0] != '-' || s[1] == '-' || !std::isalpha(static_cast<unsigned char>(s[1]))) return false;
  if (s == "-inf" || s == "-infinity" || s == "-nan") return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

}  // namespace

ArgvRewrite rewrite_llama_cpp_flags(const std::vector<std::string>& args) {
  ArgvRewrite r;
  std::set<std::string> noted;
  auto note = [&](const std::string& flag) {
    if (noted.insert(flag).second) r.notices.push_back(flag + " has no effect: lumen runs on the CPU");
  };
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--") {
      r.args.insert(r.args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const bool has_inline_value = eq != std::string::npos;
    bool handled = false;
    for (const Alias& x : kRenames)
      if (name == x.from) {
        r.args.push_back(has_inline_value ? std::string(x.to) + a.substr(eq) : x.to);
        handled = true;
      }
    for (const Alias& x : kGpuWithValue)
      if (!handled && name == x.from) {
        note(x.to);
        if (!has_inline_value && i + 1 < args.size()) i++;  // its value
        handled = true;
      }
    for (const Alias& x : kGpuFlags)
      if (!handled && name == x.from) {
        note(x.to);
        handled = true;
      }
    if (!handled && (name == "-fa" || name == "--flash-attn")) {
      note("--flash-attn");
      if (!has_inline_value && i + 1 < args.size() && is_flash_attn_value(args[i + 1])) i++;
      handled = true;
    }
    if (handled) continue;
    if (is_multi_letter_single_dash(name))
      usage_fail("unknown option '{}' (one-dash options are one letter, e.g. -n 16; a value that starts with '-' "
                 "can be given as --option=VALUE)", name);
    r.args.push_back(a);
  }
  return r;
}

}  // namespace lumen::cli

// libFuzzer target: the grammar compiler and matcher must answer any grammar text with a Grammar
// or a GrammarError, and any grammar must match any text and give token masks without a crash,
// a hang or unbounded memory. Input: grammar text, optionally followed by a NUL byte and a text
// to match byte by byte (masks are computed along it over a small fixed vocabulary).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace {

std::shared_ptr<const lumen::GrammarVocab> vocab() {
  static const auto v = [] {
    std::vector<std::string> bytes = {"{", "}", "\"", "a", "ab", " ", "\n", "0", "12", "[", "]", ",", ":",
                                      "\xC3", "\xA9", "\xC3\xA9", "true", "null", "\\", "x", "\"a\"", ""};
    return std::make_shared<lumen::GrammarVocab>(bytes, std::vector<int32_t>{21});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find('\0');
  const std::string source(input.substr(0, sep));  // an exact-size copy for ASan
  const std::string text(sep == std::string_view::npos ? std::string_view{} : input.substr(sep + 1));
  lumen::GrammarLimits limits;
  limits.max_states = 1u << 16;  // fuzzing speed; the limit's own path is what matters
  std::shared_ptr<const lumen::Grammar> g;
  try {
    g = lumen::compile_grammar(source, "root", limits);
  } catch (const lumen::GrammarError&) {
    return 0;
  }
  try {
    lumen::grammar_accepts(g, text);
    lumen::GrammarMatcher m(std::make_shared<lumen::GrammarMaskCache>(g, vocab()));
    std::vector<uint64_t> bits;
    m.fill_next_token_mask(bits);
    for (size_t i = 0; i < text.size() && i < 64; i++) {
      if (!m.accept_bytes(std::string_view(text).substr(i, 1))) break;
      m.fill_next_token_mask(bits);
      m.can_continue();
    }
    if (m.n_accepted() > 0) m.rollback(1);
  } catch (const lumen::GrammarError&) {
    // too ambiguous: refused, as it should be
  }
  return 0;
}

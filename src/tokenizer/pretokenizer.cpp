#include "tokenizer/pretokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "tokenizer/pretokenizer_regexes.h"
#include "tokenizer/regex_splitter.h"

namespace lumen {

namespace {

class RegexPreTokenizer final : public PreTokenizer {
 public:
  RegexPreTokenizer(std::string_view pre_type, const PreTokenizerRegexSet& set)
      : splitter_(pre_type, set.regexes) {}

  std::vector<std::string> split(std::string_view text) const override {
    return splitter_.split(text);
  }

 private:
  RegexSplitter splitter_;
};

}  // namespace

std::unique_ptr<PreTokenizer> PreTokenizer::create(std::string_view pre_type) {
  const PreTokenizerRegexSet* set = find_pre_tokenizer_regex_set(pre_type);
  if (set == nullptr) {
    fail("unknown pre-tokenizer type '{}' (tokenizer.ggml.pre); known types: {}", pre_type,
         fmt::join(known_types(), ", "));
  }
  return std::make_unique<RegexPreTokenizer>(pre_type, *set);
}

std::vector<std::string> PreTokenizer::known_types() {
  std::vector<std::string> types;
  for (const PreTokenizerRegexSet& set : pre_tokenizer_regex_sets()) {
    for (std::string_view name : set.pre_types) types.emplace_back(name);
  }
  return types;
}

}  // namespace lumen

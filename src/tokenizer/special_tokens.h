// Splitting text on the special tokens written in it (e.g. "<|im_start|>", "<s>"), the first
// step of every encode. Follows llama.cpp's tokenizer_st_partition: special tokens are searched
// longest first, each splitting the remaining plain-text pieces; control and unknown tokens are
// only recognised when parse_special is set, user-defined tokens always; tokens marked
// lstrip/rstrip swallow the whitespace before/after them.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace lumen {

struct TextFragment {
  TokenId token = kTokenNull;  // a special token, or kTokenNull for plain text
  size_t offset = 0;           // plain text: byte range in the input
  size_t length = 0;
  bool is_token() const { return token != kTokenNull; }
};

// Fragments in text order; plain-text fragments are never empty. Empty text gives no fragments.
std::vector<TextFragment> split_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace lumen

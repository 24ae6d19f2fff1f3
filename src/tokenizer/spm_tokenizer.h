// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), matching llama.cpp's
// llm_tokenizer_spm: the text is split into UTF-8 characters, then the adjacent pair whose
// concatenation is the highest-scoring token is merged, repeatedly (a priority queue of candidate
// pairs, so O(n log n)); ties go to the leftmost pair. What remains unmerged and is not a token
// falls back to byte tokens (<0xXX>), or fails when the vocabulary has none.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace lumen {

class SpmTokenizer {
 public:
  explicit SpmTokenizer(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of `text`, whose spaces the caller has already replaced by U+2581 (and
  // prefixed as the vocabulary asks). Throws Error if a character has no token and no byte token.
  void encode(std::string_view text, std::vector<TokenId>& out) const;

 private:
  const Vocab& vocab_;
};

}  // namespace lumen

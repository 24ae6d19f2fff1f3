// Byte-level BPE (tokenizer.ggml.model = "gpt2"), matching llama.cpp's llm_tokenizer_bpe: the
// pre-tokenizer of `tokenizer.ggml.pre` cuts the text into words; each word's bytes are mapped
// to GPT-2's printable byte alphabet, then the adjacent pair with the lowest merge rank
// (tokenizer.ggml.merges, "left right") is merged, repeatedly, leftmost first among equal ranks
// (a priority queue of candidate pairs, so O(n log n) per word). Pieces that are not tokens
// fall back to their single-byte tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace lumen {

// GPT-2's byte <-> code point mapping: printable bytes stand for themselves, the others are
// shifted to U+0100 and up, so every byte is a visible character.
uint32_t gpt2_byte_to_codepoint(uint8_t byte);
// The byte a code point stands for, or -1 when it is outside the mapping.
int gpt2_codepoint_to_byte(uint32_t cp);

class BpeTokenizer {
 public:
  // Builds the merge table. Throws Error when the pre-tokenizer type is unknown.
  explicit BpeTokenizer(const Vocab& vocab);

  // Appends the tokens of `text` (a fragment without special tokens).
  void encode(std::string_view text, std::vector<TokenId>& out) const;

 private:
  friend class BpeSession;
  struct Merge {
    int32_t rank;
    int32_t result;  // piece id of the merged string
  };
  int32_t intern(std::string_view piece);
  int32_t piece_id(std::string_view piece) const;  // -1 when unknown
  const Merge* find_merge(int32_t left, int32_t right) const;

  const Vocab& vocab_;
  std::unique_ptr<PreTokenizer> pre_;
  // Piece ids: a vocabulary token's id, or n_tokens + k for merge pieces that are not tokens.
  TokenIndex extra_pieces_;
  int32_t n_pieces_ = 0;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_piece_[256];       // piece id of each byte's GPT-2 character (byte_encode mode)
  std::string byte_text_[256];    // that character as UTF-8
};

}  // namespace lumen

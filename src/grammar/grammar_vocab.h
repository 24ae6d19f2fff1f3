// The vocabulary as a grammar matcher sees it: each token's output bytes, and a trie of them
// laid out in pre-order, so a walk that finds a prefix impossible skips its whole subtree in
// one jump (and a subtree's tokens are one contiguous run of `sorted`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lumen {

class Tokenizer;

class GrammarVocab {
 public:
  // token_bytes[id]: the bytes the token adds to the output; empty for tokens a grammar never
  // allows (control and other special tokens). eog: end-of-generation ids, allowed exactly
  // where the grammar's sentence may end.
  GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> eog);
  static std::shared_ptr<const GrammarVocab> from_tokenizer(const Tokenizer& tok);

  struct TrieNode {
    uint8_t byte;        // the byte that leads here from the parent (unused at the root)
    int32_t depth;       // prefix length
    int32_t end;         // one past the last node of this subtree
    int32_t tok_begin;   // sorted[tok_begin, tok_end): tokens whose bytes are exactly this prefix
    int32_t tok_end;
    int32_t sub_end;     // sorted[tok_begin, sub_end): every token in the subtree
  };

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<TrieNode>& trie() const { return trie_; }  // trie()[0] is the root
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<int32_t>& eog() const { return eog_; }

  // A token's bytes summarised for the per-step scans over the whole vocabulary (a 152k
  // vocabulary's strings are ~5 MB to walk, these 1.2 MB): its first byte, its length,
  // and whether a byte after the first is one of `,:{[` (a token that may close one JSON value
  // and open another, which the token budget follows byte by byte).
  struct Shape {
    uint8_t first;
    bool reopens;
    int32_t size;  // 0: never text (control, end of generation)
  };
  const Shape& shape(int32_t id) const { return shapes_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> sorted_;
  std::vector<Shape> shapes_;
};

}  // namespace lumen

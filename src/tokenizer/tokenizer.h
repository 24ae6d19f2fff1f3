// Tokenizer: text <-> token ids for a GGUF model, as llama.cpp does it.
//
// encode() splits the text on special tokens (when asked), runs the vocabulary's algorithm on
// the plain-text pieces (SentencePiece-style BPE for tokenizer.ggml.model "llama", byte-level
// BPE for "gpt2") and adds BOS/EOS as the metadata says. token_to_piece() gives a token's raw
// bytes; decode() joins pieces the way llama_detokenize does. For streaming, see
// IncrementalDetokenizer (tokenizer/detokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace lumen {

class GgufFile;
class SpmTokenizer;
class BpeTokenizer;

class Tokenizer {
 public:
  // Throws Error (naming the file and key) for a missing or unsupported vocabulary, an unknown
  // tokenizer model or pre-tokenizer type.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  ~Tokenizer();

  // add_special: add BOS/EOS as the vocabulary says (add_bos/add_eos); parse_special: turn
  // special-token text such as "<s>" or "<|im_start|>" into those tokens. Throws Error when a
  // character can be represented by no token (a vocabulary without byte-fallback tokens).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The token's bytes (not necessarily valid UTF-8 on its own: byte tokens, partial
  // characters). Control and unknown tokens render as "" unless `special`. Out-of-range ids
  // throw Error.
  std::string token_to_piece(int32_t id, bool special = false) const;

  // The text of a token sequence, as llama_detokenize(remove_special=false): pieces joined,
  // the space prefix of the first piece removed (SPM), special tokens rendered only when
  // `special`, and for BPE vocabularies that ask for it the tokenizer's clean-up of spaces
  // before punctuation. The bytes are exactly the pieces' bytes otherwise (valid UTF-8
  // whenever the tokens spell valid UTF-8).
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  bool is_eog(int32_t id) const { return vocab_->is_eog(id); }
  bool is_control(int32_t id) const;
  int32_t bos_id() const { return vocab_->bos(); }
  int32_t eos_id() const { return vocab_->eos(); }
  int32_t n_vocab() const { return vocab_->n_tokens(); }
  bool add_bos() const { return vocab_->add_bos(); }
  bool add_eos() const { return vocab_->add_eos(); }
  const Vocab& vocab() const { return *vocab_; }

 private:
  Tokenizer() = default;
  const std::string& cached_piece(int32_t id) const;

  std::unique_ptr<Vocab> vocab_;
  std::unique_ptr<SpmTokenizer> spm_;
  std::unique_ptr<BpeTokenizer> bpe_;
  std::vector<std::string> pieces_;  // every token's piece with special = true
};

}  // namespace lumen

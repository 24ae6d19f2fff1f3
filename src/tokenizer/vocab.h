// Vocab: everything a tokenizer needs from a GGUF file's `tokenizer.ggml.*` metadata: the token
// strings, scores, per-token attributes, BPE merges, the special ids (BOS/EOS/UNK/PAD/EOT/EOM/FIM
// and the end-of-generation set) and the add_bos/add_eos/add_space_prefix flags, with llama.cpp's
// defaults where a key is absent. It also applies llama.cpp's text-based fix-ups (control-looking
// tokens such as "<|im_end|>" become control tokens, Phi-3's special tokens strip whitespace to
// their right) so that tokenization matches the reference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lumen {

class GgufFile;

using TokenId = int32_t;
constexpr TokenId kTokenNull = -1;

// Per-token attribute bits (the same meaning as llama.cpp's llama_token_attr).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  kAttrSingleWord = 1u << 9,
};

enum class VocabType { Spm, Bpe };

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

// Hash that lets unordered_map<std::string, ...> be searched with a string_view (no allocation).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

class Vocab {
 public:
  // Reads and validates the tokenizer metadata. Throws Error naming the file and key on an
  // unknown `tokenizer.ggml.model`, a missing or malformed array, duplicate tokens, or add_bos
  // requested without a BOS id. (The pre-tokenizer type is checked by the BPE tokenizer.)
  static std::unique_ptr<Vocab> from_gguf(const GgufFile& file);

  VocabType type() const { return type_; }
  const std::string& model_name() const { return model_; }  // "llama" or "gpt2"
  const std::string& pre() const { return pre_; }            // tokenizer.ggml.pre ("default" if absent)
  const std::string& source() const { return source_; }      // file path, for messages

  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool valid_id(TokenId id) const { return id >= 0 && id < n_tokens(); }
  const TokenData& token(TokenId id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::vector<TokenData>& tokens() const { return tokens_; }
  TokenId find(std::string_view text) const {
    auto it = index_.find(text);
    return it == index_.end() ? kTokenNull : it->second;
  }
  // Merges as "left right" strings, in rank order (BPE only).
  size_t n_merges() const { return merge_ends_.size(); }
  std::string_view merge(size_t rank) const {
    const size_t begin = rank == 0 ? 0 : merge_ends_[rank - 1];
    return std::string_view(merge_text_).substr(begin, merge_ends_[rank] - begin);
  }

  // Special ids; kTokenNull when the vocabulary has none.
  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }
  TokenId eom() const { return eom_; }
  TokenId unk() const { return unk_; }
  TokenId sep() const { return sep_; }
  TokenId pad() const { return pad_; }
  TokenId mask() const { return mask_; }
  const std::vector<TokenId>& eog_ids() const { return eog_; }  // sorted
  bool is_eog(TokenId id) const;

  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // Pre-type dependent flags (llama.cpp's vocab load): see vocab.cpp.
  bool ignore_merges() const { return ignore_merges_; }
  bool clean_spaces() const { return clean_spaces_; }
  bool escape_whitespaces() const { return escape_whitespaces_; }
  bool byte_encode() const { return byte_encode_; }

  // Special (control, user-defined, unknown) tokens, longest text first: the order in which
  // they are searched for in text.
  const std::vector<TokenId>& special_tokens() const { return special_tokens_; }

  // SPM byte fallback: the token for a raw byte ("<0xXX>", else the one-byte token), or
  // kTokenNull when the vocabulary has neither.
  TokenId byte_to_token(uint8_t byte) const;

 private:
  Vocab() = default;
  void read_tokens(const GgufFile& f);
  void read_special_ids(const GgufFile& f);
  void detect_special_by_text();
  void apply_name_fixups(const GgufFile& f);

  VocabType type_ = VocabType::Spm;
  std::string model_, pre_, source_;
  std::vector<TokenData> tokens_;
  TokenIndex index_;
  std::string merge_text_;          // all merges back to back
  std::vector<size_t> merge_ends_;  // end offset of each
  TokenId bos_ = kTokenNull, eos_ = kTokenNull, eot_ = kTokenNull, eom_ = kTokenNull;
  TokenId unk_ = kTokenNull, sep_ = kTokenNull, pad_ = kTokenNull, mask_ = kTokenNull;
  TokenId fim_pre_ = kTokenNull, fim_suf_ = kTokenNull, fim_mid_ = kTokenNull;
  TokenId fim_pad_ = kTokenNull, fim_rep_ = kTokenNull, fim_sep_ = kTokenNull;
  std::vector<TokenId> eog_;
  std::vector<TokenId> special_tokens_;
  TokenId byte_tokens_[256] = {};
  bool add_bos_ = false, add_eos_ = false, add_sep_ = false, add_space_prefix_ = false;
  bool ignore_merges_ = false, clean_spaces_ = false, escape_whitespaces_ = false, byte_encode_ = true;
};

}  // namespace lumen

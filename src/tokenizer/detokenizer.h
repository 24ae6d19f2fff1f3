// IncrementalDetokenizer: token ids in, text out, one token at a time, for streaming. A token's
// piece may end in the middle of a UTF-8 character (byte tokens, byte-level BPE pieces), so
// push() returns only text made of complete characters and holds the incomplete tail back
// until the bytes that complete it arrive. Bytes that can never start or continue a valid
// character come out as U+FFFD, one per byte. Every string returned is valid UTF-8, and their
// concatenation (with flush()) equals utf8_sanitize of the pieces' bytes joined.
#pragma once

#include <cstdint>
#include <string>

namespace lumen {

class Tokenizer;

class IncrementalDetokenizer {
 public:
  // special: render control tokens (e.g. "</s>") instead of skipping them.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool special = false)
      : tokenizer_(tokenizer), special_(special) {}

  // The text completed by this token (possibly empty). Throws Error for an out-of-range id.
  std::string push(int32_t id);
  // Bytes, rather than a token: the same rule (for callers that have pieces already).
  std::string push_bytes(std::string_view bytes);
  // Whatever is still held back (an incomplete character at the end), as U+FFFD; then empty.
  std::string flush();
  // Bytes held back now (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  std::string pending_;
};

}  // namespace lumen

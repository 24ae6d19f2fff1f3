#include "tokenizer/spm_tokenizer.h"

#include <queue>

#include "core/error.h"

namespace lumen {

namespace {

// Length of the UTF-8 sequence a lead byte announces (continuation bytes count as 1).
size_t utf8_len(unsigned char c) {
  static const size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the text
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  uint32_t size;
};

// Highest score first; among equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(std::vector<TokenId>& out) {
    symbols_.reserve(text_.size());
    std::vector<Bigram> storage;
    storage.reserve(text_.size() * 2);
    queue_ = decltype(queue_)(BigramOrder(), std::move(storage));
    for (size_t off = 0; off < text_.size();) {
      const size_t n = std::min(utf8_len(static_cast<unsigned char>(text_[off])), text_.size() - off);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({index - 1, off + n == text_.size() ? -1 : index + 1, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[b.left];
      Symbol& r = symbols_[b.right];
      // Stale: one side was merged away, or grew, since the pair was queued.
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  std::string_view view(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  void try_add(int left, int right) {
    if (left == -1 || right == -1) return;
    const size_t size = symbols_[left].n + symbols_[right].n;
    const TokenId id = vocab_.find(text_.substr(symbols_[left].offset, size));
    if (id == kTokenNull) return;
    queue_.push({left, right, vocab_.token(id).score, static_cast<uint32_t>(size)});
  }

  // A final symbol that is not a token is an unmerged character (merged symbols are tokens by
  // construction): emit its bytes as byte tokens. (llama.cpp first looks the text up among the
  // pairs it merged, but those are all tokens, so that lookup cannot succeed here.)
  void resegment(const Symbol& s, std::vector<TokenId>& out) {
    const std::string_view piece = view(s);
    if (const TokenId id = vocab_.find(piece); id != kTokenNull) {
      out.push_back(id);
      return;
    }
    for (char c : piece) {
      const TokenId id = vocab_.byte_to_token(static_cast<uint8_t>(c));
      if (id == kTokenNull)
        fail("{}: cannot tokenize the text: '{}' is not in the vocabulary, which has no byte-fallback tokens",
             vocab_.source(), printable(piece));
      out.push_back(id);
    }
  }

  // The character for an error message; control and lone non-ASCII bytes as \xNN.
  static std::string printable(std::string_view s) {
    std::string r;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f || (u >= 0x80 && s.size() == 1)) r += fmt::format("\\x{:02x}", u);
      else r += c;
    }
    return r;
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void SpmTokenizer::encode(std::string_view text, std::vector<TokenId>& out) const {
  SpmSession session(vocab_, text);
  session.run(out);
}

}  // namespace lumen

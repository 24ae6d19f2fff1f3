#include "tokenizer/bpe_tokenizer.h"

#include <array>
#include <queue>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lumen {

uint32_t gpt2_byte_to_codepoint(uint8_t byte) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
    return t;
  }();
  return table[byte];
}

int gpt2_codepoint_to_byte(uint32_t cp) {
  static const auto table = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_to_codepoint(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const Vocab& vocab) : vocab_(vocab), pre_(PreTokenizer::create(vocab.pre())) {
  n_pieces_ = vocab.n_tokens();
  merges_.reserve(vocab.n_merges());
  std::string joined;
  for (size_t rank = 0; rank < vocab.n_merges(); ++rank) {
    const std::string_view m = vocab.merge(rank);
    // As llama.cpp: split at the first space after the first byte; a merge without one is inert.
    const size_t pos = m.find(' ', 1);
    if (pos == std::string_view::npos) continue;
    const std::string_view left = m.substr(0, pos), right = m.substr(pos + 1);
    joined.assign(left).append(right);
    const int32_t l = intern(left), r = intern(right);
    // The first occurrence of a pair keeps its rank.
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), intern(joined)});
  }
  for (int b = 0; b < 256; ++b) {
    byte_text_[b] = utf8_encode(gpt2_byte_to_codepoint(static_cast<uint8_t>(b)));
    byte_piece_[b] = piece_id(byte_text_[b]);
  }
}

int32_t BpeTokenizer::intern(std::string_view piece) {
  if (const TokenId id = vocab_.find(piece); id != kTokenNull) return id;
  if (auto it = extra_pieces_.find(piece); it != extra_pieces_.end()) return it->second;
  extra_pieces_.emplace(std::string(piece), n_pieces_);
  return n_pieces_++;
}

int32_t BpeTokenizer::piece_id(std::string_view piece) const {
  if (const TokenId id = vocab_.find(piece); id != kTokenNull) return id;
  auto it = extra_pieces_.find(piece);
  return it == extra_pieces_.end() ? -1 : it->second;
}

const BpeTokenizer::Merge* BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// The merge loop over one word, with buffers reused from word to word.
class BpeSession {
 public:
  explicit BpeSession(const BpeTokenizer& t) : t_(t), vocab_(t.vocab_), byte_mode_(t.vocab_.byte_encode()) {}

  void word(std::string_view w, std::vector<TokenId>& out) {
    if (vocab_.ignore_merges()) {  // a word that is a token as a whole is taken as is (Llama 3)
      if (const TokenId id = vocab_.find(encoded(w)); id != kTokenNull) {
        out.push_back(id);
        return;
      }
    }
    symbols_.clear();
    for (size_t off = 0; off < w.size();) {
      const size_t n = byte_mode_ ? 1 : std::min(utf8_sequence_length(static_cast<uint8_t>(w[off])), w.size() - off);
      const int32_t pid = byte_mode_ ? t_.byte_piece_[static_cast<uint8_t>(w[off])] : t_.piece_id(w.substr(off, n));
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({index - 1, off + n == w.size() ? -1 : index + 1, pid, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[c.left];
      Symbol& r = symbols_[c.right];
      // Stale: one side was merged away, or grew, since the pair was queued.
      if (l.n == 0 || r.n == 0 || l.n + r.n != c.size) continue;
      l.n += r.n;
      l.piece = c.result;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = c.left;
      try_add(l.prev, c.left);
      try_add(c.left, l.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) emit(w, symbols_[i], out);
  }

 private:
  struct Symbol {
    int prev;
    int next;
    int32_t piece;  // piece id, -1 when the text is neither a token nor a merge piece
    size_t offset;  // into the word (raw bytes)
    size_t n;       // 0 once merged into its left neighbour
  };
  struct Candidate {
    int32_t rank;
    int32_t result;
    int left;
    int right;
    size_t size;
  };
  // Lowest rank first; among equal ranks the leftmost pair.
  struct Order {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  void try_add(int left, int right) {
    if (left == -1 || right == -1) return;
    const BpeTokenizer::Merge* m = t_.find_merge(symbols_[left].piece, symbols_[right].piece);
    if (!m) return;
    queue_.push({m->rank, m->result, left, right, symbols_[left].n + symbols_[right].n});
  }

  // The word in the vocabulary's alphabet (GPT-2 byte characters, or raw UTF-8).
  const std::string& encoded(std::string_view raw) {
    buf_.clear();
    if (!byte_mode_) return buf_.assign(raw);
    for (char c : raw) buf_ += t_.byte_text_[static_cast<uint8_t>(c)];
    return buf_;
  }

  void emit(std::string_view w, const Symbol& s, std::vector<TokenId>& out) {
    if (s.piece >= 0 && s.piece < vocab_.n_tokens()) {
      out.push_back(s.piece);
      return;
    }
    // Not a token: llama.cpp emits the single-byte tokens of its text, skipping bytes that
    // have none.
    const std::string& text = encoded(w.substr(s.offset, s.n));
    for (char c : text) {
      TokenId id = kTokenNull;
      if (byte_mode_) {
        id = vocab_.find(std::string_view(&c, 1));
      } else {
        static const char* hex = "0123456789ABCDEF";
        const auto u = static_cast<uint8_t>(c);
        const char name[6] = {'<', '0', 'x', hex[u >> 4], hex[u & 15], '>'};
        id = vocab_.find(std::string_view(name, 6));
      }
      if (id != kTokenNull) out.push_back(id);
    }
  }

  const BpeTokenizer& t_;
  const Vocab& vocab_;
  const bool byte_mode_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, Order> queue_;
  std::string buf_;
};

void BpeTokenizer::encode(std::string_view text, std::vector<TokenId>& out) const {
  BpeSession session(*this);
  for (const std::string& w : pre_->split(text)) session.word(w, out);
}

}  // namespace lumen

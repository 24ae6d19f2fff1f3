#include "grammar/grammar_vocab.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace lumen {

GrammarVocab::GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> eog)
    : bytes_(std::move(token_bytes)), eog_(std::move(eog)) {
  shapes_.reserve(bytes_.size());
  for (const std::string& b : bytes_)
    shapes_.push_back(Shape{b.empty() ? uint8_t{0} : static_cast<uint8_t>(b[0]),
                            b.size() > 1 && b.find_first_of(",:{[", 1) != std::string::npos,
                            static_cast<int32_t>(b.size())});
  // Tokens in byte order: a trie's pre-order visits them in exactly this order.
  for (int32_t id = 0; id < n_vocab(); id++)
    if (!bytes_[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const std::string& x = bytes_[static_cast<size_t>(a)];
    const std::string& y = bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  trie_.push_back({0, 0, 0, 0, 0, 0});
  std::vector<int32_t> path{0};  // path[d]: the node of the current token's prefix of length d
  const std::string* prev = nullptr;
  auto close = [&](size_t keep, int32_t n_done) {
    while (path.size() > keep) {
      TrieNode& n = trie_[static_cast<size_t>(path.back())];
      n.end = static_cast<int32_t>(trie_.size());
      n.sub_end = n_done;
      path.pop_back();
    }
  };
  for (size_t k = 0; k < sorted_.size(); k++) {
    const std::string& b = bytes_[static_cast<size_t>(sorted_[k])];
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < b.size() && (*prev)[common] == b[common]) common++;
    close(common + 1, static_cast<int32_t>(k));
    for (size_t d = common; d < b.size(); d++) {
      const auto tk = static_cast<int32_t>(k);
      trie_.push_back({static_cast<uint8_t>(b[d]), static_cast<int32_t>(d + 1), 0, tk, tk, tk});
      path.push_back(static_cast<int32_t>(trie_.size() - 1));
    }
    TrieNode& last = trie_[static_cast<size_t>(path.back())];
    if (last.tok_end == last.tok_begin) last.tok_begin = static_cast<int32_t>(k);
    last.tok_end = static_cast<int32_t>(k + 1);
    prev = &b;
  }
  close(0, static_cast<int32_t>(sorted_.size()));
}

std::shared_ptr<const GrammarVocab> GrammarVocab::from_tokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < n; id++) {
    if (tok.is_eog(id)) {
      eog.push_back(id);
      continue;  // never text, whatever it renders as
    }
    if (tok.is_control(id)) continue;
    bytes[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
  }
  return std::make_shared<GrammarVocab>(std::move(bytes), std::move(eog));
}

}  // namespace lumen

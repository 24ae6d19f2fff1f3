#include "tokenizer/special_tokens.h"

namespace lumen {

namespace {

bool is_c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Splits one plain-text fragment on every occurrence of `needle`; appends the pieces to `out`.
// Returns false (appending nothing) when there is no occurrence.
bool split_fragment(std::string_view text, const TextFragment& frag, std::string_view needle, TokenId id,
                    uint32_t attr, std::vector<TextFragment>& out) {
  size_t begin = frag.offset, end = frag.offset + frag.length;
  size_t match = text.substr(0, end).find(needle, begin);
  if (match == std::string_view::npos) return false;
  while (match != std::string_view::npos) {
    size_t left_len = match - begin;
    if (attr & kAttrLstrip)
      while (left_len > 0 && is_c_space(text[begin + left_len - 1])) --left_len;
    if (left_len > 0) out.push_back({kTokenNull, begin, left_len});
    out.push_back({id, 0, 0});
    begin = match + needle.size();
    if (attr & kAttrRstrip)
      while (begin < end && is_c_space(text[begin])) ++begin;
    if (begin >= end) return true;
    match = text.substr(0, end).find(needle, begin);
  }
  out.push_back({kTokenNull, begin, end - begin});
  return true;
}

}  // namespace

std::vector<TextFragment> split_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<TextFragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kTokenNull, 0, text.size()});
  std::vector<TextFragment> next;
  for (TokenId id : vocab.special_tokens()) {
    const TokenData& t = vocab.token(id);
    if (!parse_special && (t.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view needle = t.text;
    // Most special tokens occur nowhere: only rebuild the list when one does.
    size_t first = 0;
    for (; first < frags.size(); ++first) {
      const TextFragment& f = frags[first];
      if (!f.is_token() && f.length >= needle.size() &&
          text.substr(f.offset, f.length).find(needle) != std::string_view::npos)
        break;
    }
    if (first == frags.size()) continue;
    next.assign(frags.begin(), frags.begin() + static_cast<std::ptrdiff_t>(first));
    for (size_t i = first; i < frags.size(); ++i) {
      const TextFragment& f = frags[i];
      if (f.is_token() || !split_fragment(text, f, needle, id, t.attr, next)) next.push_back(f);
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace lumen

#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/unicode.h"

namespace lumen {

namespace {

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string r;
  r.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    r.append(s, pos, hit - pos);
    r.append(to);
  }
  r.append(s, pos);
  s.swap(r);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 0;
}

// "<0xAB>" -> 0xAB.
char byte_of(const std::string& text) {
  if (text.size() < 5) return 0;
  return static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4]));
}

// A byte-level BPE token's text back to bytes via the GPT-2 alphabet; code points outside it
// are kept visible, as llama.cpp does.
std::string decode_gpt2_text(const std::string& text) {
  std::string out;
  for (uint32_t cp : utf8_decode(text)) {
    const int b = gpt2_codepoint_to_byte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (unsigned char c : utf8_encode(cp)) out += fmt::format("{:02x}", c);
    out += text + "]";
  }
  return out;
}

std::string make_piece(const Vocab& v, const TokenData& t) {
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    if (v.type() == VocabType::Bpe && !v.escape_whitespaces()) return decode_gpt2_text(t.text);
    std::string s = t.text;
    replace_all(s, kSpaceMark, " ");
    return s;
  }
  if (t.attr & kAttrByte) return std::string(1, byte_of(t.text));
  return "";  // undefined and unused tokens render as nothing
}

// llama_detokenize's clean_up_tokenization_spaces: " ?" " !" " ." " ," lose the space, a lone
// " ' " loses both spaces, and " 's" " 'm" " 're" " 've" lose theirs.
std::string clean_spaces(std::string src) {
  if (src.size() < 2) return src;
  std::string dst;
  dst.reserve(src.size());
  dst += src[0];
  for (size_t i = 1; i < src.size(); ++i) {
    const char x = src[i];
    if (src[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) dst.pop_back();
    dst += x;
  }
  src.swap(dst);
  dst.assign(1, src[0]);
  for (size_t i = 1; i < src.size(); ++i) {
    const char x = src[i];
    if (x == '\'' && i + 1 < src.size() && src[i - 1] == ' ' && src[i + 1] == ' ') {
      dst.pop_back();
      src[++i] = '\0';  // the space after is dropped too (and no longer counts as a space)
    }
    dst += x;
  }
  src.swap(dst);
  if (src.size() < 2) return src;
  dst.assign(1, src[0]);
  for (size_t i = 1; i < src.size(); ++i) {
    const char x = src[i];
    if (src[i - 1] == ' ' && x == '\'' && i + 1 < src.size()) {
      const char x1 = src[i + 1];
      if (x1 == 's' || x1 == 'm') {
        dst.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < src.size()) {
        const char x2 = src[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) dst.pop_back();
      }
    }
    dst += x;
  }
  return dst;
}

}  // namespace

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->vocab_ = Vocab::from_gguf(file);
  const Vocab& v = *t->vocab_;
  if (v.type() == VocabType::Spm) {
    t->spm_ = std::make_unique<SpmTokenizer>(v);
  } else {
    try {
      t->bpe_ = std::make_unique<BpeTokenizer>(v);
    } catch (const Error& e) {
      fail("{}: tokenizer.ggml.pre = '{}': {}", file.path(), v.pre(), e.what());
    }
  }
  t->pieces_.reserve(static_cast<size_t>(v.n_tokens()));
  for (const TokenData& td : v.tokens()) t->pieces_.push_back(make_piece(v, td));
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<int32_t> out;
  const std::vector<TextFragment> frags = split_special_tokens(v, text, parse_special);
  if (add_special && v.add_bos()) out.push_back(v.bos());
  // SPM puts a space before the text, and again after every special token in it.
  bool prefix_space = true;
  std::string piece;
  for (const TextFragment& f : frags) {
    if (f.is_token()) {
      out.push_back(f.token);
      prefix_space = true;
      continue;
    }
    piece.clear();
    if (spm_ && v.add_space_prefix() && prefix_space) piece = " ";
    piece.append(text.substr(f.offset, f.length));
    if (v.escape_whitespaces()) replace_all(piece, " ", kSpaceMark);
    if (spm_) spm_->encode(piece, out);
    else bpe_->encode(piece, out);
    prefix_space = false;
  }
  if (add_special && v.add_eos()) out.push_back(v.eos());
  return out;
}

const std::string& Tokenizer::cached_piece(int32_t id) const {
  if (!vocab_->valid_id(id)) fail("token id {} is out of range (vocabulary of {} tokens)", id, vocab_->n_tokens());
  return pieces_[static_cast<size_t>(id)];
}

bool Tokenizer::is_control(int32_t id) const { return vocab_->valid_id(id) && (vocab_->token(id).attr & kAttrControl); }

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const std::string& p = cached_piece(id);
  if (!special && (vocab_->token(id).attr & (kAttrUnknown | kAttrControl))) return "";
  return p;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string text;
  bool strip_space = vocab_->add_space_prefix();
  for (int32_t id : ids) {
    const std::string& p = cached_piece(id);
    if (!special && (vocab_->token(id).attr & (kAttrUnknown | kAttrControl))) {
      strip_space = false;
      continue;
    }
    text.append(p, strip_space && !p.empty() && p[0] == ' ' ? 1 : 0);
    strip_space = false;
  }
  return vocab_->clean_spaces() ? clean_spaces(std::move(text)) : text;
}

}  // namespace lumen

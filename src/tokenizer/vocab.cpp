#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <span>

#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen {

namespace {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

// Byte-level BPE flags that depend on tokenizer.ggml.pre (llama.cpp's vocab load). Only the
// types that differ from the BPE defaults (clean_spaces on, everything else off) are listed;
// whether a type exists at all is the pre-tokenizer's decision.
struct PreFlags {
  std::vector<std::string_view> names;
  bool ignore_merges = false;
  bool add_bos = false;
  bool keep_spaces = false;  // clean_spaces = false
  bool escape_whitespaces = false;
  bool raw_bytes = false;  // byte_encode = false
  bool no_bos = false;
};

const std::vector<PreFlags> kPreFlags = {
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
     true, true},
    {{"minicpm5"}, true},
    {{"tekken"}, true, true, true},
    {{"youtu", "granite-embed-multi-97m"}, true, false, true},
    {{"chameleon"}, false, true, true},
    {{"deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "command-r", "qwen2", "deepseek-r1-qwen",
      "kormo", "f2llmv2", "qwen35", "poro-chat", "viking", "smollm", "gpt-4o", "llama4", "kanana2", "talkie",
      "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2",
      "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka",
      "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open"},
     false, false, true},
    {{"gemma4", "granite-embed-multi-311m"}, false, false, false, true, true},
    {{"sarvam-moe"}, false, false, true, true, true},
    {{"whitespace"}, false, false, false, false, true},
    {{"glm4", "chatglm-bpe"}, false, false, false, false, false, true},
};

const PreFlags* find_pre_flags(std::string_view pre) {
  for (const PreFlags& f : kPreFlags)
    for (std::string_view n : f.names)
      if (n == pre) return &f;
  return nullptr;
}

// Texts llama.cpp recognises as end-of-turn, end-of-message and fill-in-the-middle tokens when the
// metadata does not name them, and the texts that end generation.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                                                  "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                                  "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~["};

}  // namespace

std::unique_ptr<Vocab> Vocab::from_gguf(const GgufFile& f) {
  std::unique_ptr<Vocab> v(new Vocab());
  v->source_ = f.path();
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) fail("{}: no tokenizer in this file (metadata key 'tokenizer.ggml.model' is missing)", f.path());
  v->model_ = std::string(*model);
  v->pre_ = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));

  if (v->model_ == "llama") {
    v->type_ = VocabType::Spm;
    v->bos_ = 1, v->eos_ = 2, v->unk_ = 0;
    v->add_space_prefix_ = true;
    v->add_bos_ = true;
    v->escape_whitespaces_ = true;
  } else if (v->model_ == "gpt2") {
    v->type_ = VocabType::Bpe;
    v->bos_ = 11, v->eos_ = 11;  // llama.cpp's defaults for BPE vocabularies
    v->clean_spaces_ = true;
    if (v->pre_.empty()) v->pre_ = "default";  // llama.cpp warns and uses its default regexes
    if (const PreFlags* p = find_pre_flags(v->pre_)) {
      v->ignore_merges_ = p->ignore_merges;
      v->add_bos_ = p->add_bos;
      v->clean_spaces_ = !p->keep_spaces;
      v->escape_whitespaces_ = p->escape_whitespaces;
      v->byte_encode_ = !p->raw_bytes;
      if (p->no_bos) v->bos_ = kTokenNull;
    }
    const auto* merges = f.get_array("tokenizer.ggml.merges");
    if (!merges) fail("{}: BPE vocabulary without 'tokenizer.ggml.merges'", f.path());
    const std::string where = f.path() + ": tokenizer.ggml.merges";
    size_t n_bytes = 0;
    for (const GgufValue& m : *merges) n_bytes += m.as_string(where).size();
    v->merge_text_.reserve(n_bytes);
    v->merge_ends_.reserve(merges->size());
    for (const GgufValue& m : *merges) {
      v->merge_text_.append(m.str);
      v->merge_ends_.push_back(v->merge_text_.size());
    }
  } else {
    fail("{}: unsupported tokenizer model '{}' (tokenizer.ggml.model); lumen supports 'llama' (SentencePiece-style "
         "BPE) and 'gpt2' (byte-level BPE)",
         f.path(), v->model_);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) v->add_space_prefix_ = *b;

  v->read_tokens(f);
  v->read_special_ids(f);
  v->detect_special_by_text();

  // Special tokens are searched for in text longest first (ties: lower id first, for determinism).
  for (TokenId id = 0; id < v->n_tokens(); ++id)
    if (v->tokens_[id].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v->special_tokens_.push_back(id);
  std::stable_sort(v->special_tokens_.begin(), v->special_tokens_.end(), [&](TokenId a, TokenId b) {
    return v->tokens_[a].text.size() > v->tokens_[b].text.size();
  });
  v->apply_name_fixups(f);

  for (int b = 0; b < 256; ++b) {
    static const char* hex = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    TokenId id = v->find(std::string_view(name, 6));
    const char raw = static_cast<char>(b);
    if (id == kTokenNull) id = v->find(std::string_view(&raw, 1));
    v->byte_tokens_[b] = id;
  }
  return v;
}

void Vocab::read_tokens(const GgufFile& f) {
  const std::string where = f.path() + ": tokenizer.ggml.tokens";
  const auto* toks = f.get_array("tokenizer.ggml.tokens");
  if (!toks) fail("{}: vocabulary without 'tokenizer.ggml.tokens'", f.path());
  if (toks->empty()) fail("{}: 'tokenizer.ggml.tokens' is empty", f.path());
  if (toks->size() > static_cast<size_t>(INT32_MAX)) fail("{}: too many tokens ({})", where, toks->size());
  const size_t n = toks->size();
  const auto* scores = f.get_array("tokenizer.ggml.scores");
  if (scores && scores->size() < n)
    fail("{}: 'tokenizer.ggml.scores' has {} entries for {} tokens", f.path(), scores->size(), n);
  const auto* types = f.get_array("tokenizer.ggml.token_type");
  if (types && types->size() < n)
    fail("{}: 'tokenizer.ggml.token_type' has {} entries for {} tokens", f.path(), types->size(), n);

  tokens_.resize(n);
  index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = tokens_[i];
    t.text = std::string((*toks)[i].as_string(where));
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp does
    auto [it, fresh] = index_.emplace(t.text, static_cast<TokenId>(i));
    if (!fresh) fail("{}: duplicate token '{}' (ids {} and {})", where, t.text, it->second, i);
    if (scores) t.score = static_cast<float>((*scores)[i].as_float(f.path() + ": tokenizer.ggml.scores"));
    if (types) t.attr = attr_from_type((*types)[i].as_int(f.path() + ": tokenizer.ggml.token_type"));
  }
}

void Vocab::read_special_ids(const GgufFile& f) {
  const std::pair<const char*, TokenId*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},           {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},           {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},       {"tokenizer.ggml.seperator_token_id", &sep_},
      {"tokenizer.ggml.padding_token_id", &pad_},       {"tokenizer.ggml.mask_token_id", &mask_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_},   {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_},   {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_},   {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},    {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (auto [key, id] : keys) {
    if (!valid_id(*id)) *id = kTokenNull;  // a default outside this vocabulary
    const GgufValue* v = f.find(key);
    if (!v) continue;
    if (!v->is_integer()) fail("{}: '{}' must be an integer", f.path(), key);
    // Ids are stored as uint32; 0xFFFFFFFF (or any id outside the vocabulary) means "none" and
    // keeps the default, as in llama.cpp.
    const uint64_t raw = v->bits & 0xFFFFFFFFull;
    if (raw < tokens_.size()) *id = static_cast<TokenId>(raw);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) add_bos_ = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) add_eos_ = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_sep_token")) add_sep_ = *b;
  if (add_bos_ && bos_ == kTokenNull)
    fail("{}: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set", f.path());
  if (add_eos_ && eos_ == kTokenNull)
    fail("{}: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set", f.path());
  if (add_sep_ && sep_ == kTokenNull)
    fail("{}: tokenizer.ggml.add_sep_token is true, but tokenizer.ggml.seperator_token_id is not set", f.path());
}

// llama.cpp finds EOT/EOM/FIM tokens and the end-of-generation set by their text, and turns
// such tokens into control tokens when the file did not mark them so.
void Vocab::detect_special_by_text() {
  auto make_control = [&](TokenId id) { tokens_[id].attr |= kAttrControl; };
  static constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
  const std::pair<std::span<const std::string_view>, TokenId*> detect[] = {
      {kEotTexts, &eot_},        {kEomTexts, &eom_},    {kFimPreTexts, &fim_pre_}, {kFimSufTexts, &fim_suf_},
      {kFimMidTexts, &fim_mid_}, {kFimPadTexts, &fim_pad_}, {kFimRepTexts, &fim_rep_}, {kFimSepTexts, &fim_sep_},
  };
  // Lowest id wins where several texts of a list are tokens.
  auto first_of = [&](std::span<const std::string_view> texts) {
    TokenId best = kTokenNull;
    for (std::string_view t : texts)
      if (TokenId id = find(t); id != kTokenNull && (best == kTokenNull || id < best)) best = id;
    return best;
  };
  for (auto& [texts, slot] : detect) {
    if (*slot != kTokenNull) continue;
    *slot = first_of(texts);
    if (*slot != kTokenNull) make_control(*slot);
  }
  // Control tokens whose text says "unused" are unused.
  for (TokenData& t : tokens_)
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;

  std::vector<TokenId> eog;
  for (TokenId id : {fim_pad_, fim_rep_, fim_sep_})
    if (id != kTokenNull) eog.push_back(id);
  for (std::string_view t : kEogTexts) {
    if (TokenId id = find(t); id != kTokenNull) {
      eog.push_back(id);
      make_control(id);
    }
  }
  // gpt-oss: these structural tokens are always rendered.
  for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (TokenId id = find(s); id != kTokenNull) tokens_[id].attr = kAttrUserDefined;
  for (TokenId id : {eos_, eot_, eom_})
    if (id != kTokenNull) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto in_eog = [&](std::string_view text) {
    TokenId id = find(text);
    return id != kTokenNull && std::binary_search(eog.begin(), eog.end(), id) ? id : kTokenNull;
  };
  auto erase = [&](TokenId id, uint32_t new_attr) {
    eog.erase(std::find(eog.begin(), eog.end(), id));
    tokens_[id].attr = new_attr;
  };
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  const TokenId end_id = in_eog("<|end|>");
  const bool has_call = in_eog("<|call|>") != kTokenNull || in_eog("<|calls|>") != kTokenNull;
  if (end_id != kTokenNull && has_call && (in_eog("<|return|>") != kTokenNull || in_eog("<|flush|>") != kTokenNull))
    erase(end_id, kAttrUserDefined);
  // gemma4: "</s>" is an ordinary token there.
  if (const TokenId s = in_eog("</s>"); s != kTokenNull && in_eog("<|tool_response>") != kTokenNull)
    erase(s, kAttrNormal);
  eog_ = std::move(eog);
}

// Per-model attribute fix-ups that llama.cpp keys on general.name / tokenizer.ggml.pre.
void Vocab::apply_name_fixups(const GgufFile& f) {
  std::string name(f.get_string("general.name").value_or(""));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string arch(f.get_string("general.architecture").value_or(""));
  auto set = [&](std::string_view text, uint32_t attr, bool on) {
    TokenId id = find(text);
    if (id == kTokenNull) return;
    tokens_[id].attr = on ? (tokens_[id].attr | attr) : (tokens_[id].attr & ~attr);
  };
  const bool mask_lstrip = pre_.find("jina-v2-de") != std::string::npos || pre_.find("jina-v2-es") != std::string::npos ||
                           pre_.find("jina-v2-code") != std::string::npos ||
                           arch.find("nomic-bert-moe") != std::string::npos || arch.find("jina-bert-v3") != std::string::npos;
  if (mask_lstrip) {
    set("<mask>", kAttrLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    // Phi-3's special tokens swallow the whitespace that follows them.
    for (TokenId id : special_tokens_) tokens_[id].attr |= kAttrRstrip;
    set("</s>", kAttrRstrip, true);
    for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"}) set(s, kAttrRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", kAttrLstrip, true);
  }
}

bool Vocab::is_eog(TokenId id) const { return id != kTokenNull && std::binary_search(eog_.begin(), eog_.end(), id); }

TokenId Vocab::byte_to_token(uint8_t byte) const { return byte_tokens_[byte]; }

}  // namespace lumen

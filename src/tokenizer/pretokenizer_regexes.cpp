// Regex sets of the byte-level BPE pre-tokenizers, one per distinct behaviour, with the
// `tokenizer.ggml.pre` names (as llama.cpp's vocab loader and convert_hf_to_gguf.py spell them)
// that select each. Where llama.cpp rewrote a Hugging Face pattern for std::regex, the original
// pattern is used: PCRE2 supports (?i:...), \p{Lu}/\p{Lt}/\p{Lm}/\p{Lo}/\p{M}, \p{Han} and
// possessive quantifiers. Literal non-ASCII characters of the originals are written as \x{...}.
//
// Not here on purpose:
// - "granite-embed-multi-97m": only llama.cpp's approximation of its pattern is documented;
// - "whitespace" (jina-embeddings-v2-base-zh): llama.cpp drops whitespace and lower-cases the
//   text before its `\S+` split, which is not a split of the text into words that concatenate
//   back to it.
#include "tokenizer/pretokenizer_regexes.h"

namespace lumen {

namespace {

// GPT-2. llama.cpp drops the final `|\s+`; that changes nothing, since the only whitespace left
// unmatched would be a single non-space whitespace before a non-space, which then forms a
// non-matching gap piece of exactly that character.
constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama 3 (tiktoken cl100k-style): digits in groups of up to three.
constexpr std::string_view kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2: as Llama 3 but single digits.
constexpr std::string_view kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Jais 2: Llama 3 with whitespace runs cut into power-of-two lengths.
constexpr std::string_view kJais2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";

// Mistral Tekken: words split before upper-case letters (CamelCase), single digits.
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// GPT-4o (o200k): Tekken's word rule plus contractions glued to the word, digits by three.
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Kimi K2: GPT-4o-like with Han runs kept apart. The original writes the letter classes as
// intersections `[...&&[^\p{Han}]]`, which PCRE2 lacks; a negative lookahead per character
// says the same.
constexpr std::string_view kKimiK2 =
    R"re(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Ling / Bailing MoE: the original's possessive quantifiers (PCRE2 has them).
constexpr std::string_view kBailingMoe =
    R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";

constexpr std::string_view kSeedCoder =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2 without the contractions, so Turkish apostrophe suffixes stay on their word.
constexpr std::string_view kUfakzeka =
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// EXAONE MoE: a word may span single spaces between letters.
constexpr std::string_view kExaoneMoe =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";

constexpr std::string_view kMiniCpm5Words =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// CJK ranges of the DeepSeek LLM/Coder tokenizers: 一-龥, U+0800-一, 가-U+D7FF.
constexpr std::string_view kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// DeepSeek LLM's letters: the cased letters (Lu/Ll/Lt) of Latin, Greek, Cyrillic, Armenian,
// Georgian, Cherokee, Glagolitic, Coptic, fullwidth Latin, Deseret, Osage, Old Hungarian,
// Warang Citi and Adlam, listed range by range as in its tokenizer.json.
constexpr std::string_view kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";

// ASCII punctuation and symbols, their fullwidth forms, curly quotes, 　、。
constexpr std::string_view kDeepseekLlmPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";

// DeepSeek V3 family: 一-龥, hiragana, katakana.
constexpr std::string_view kDeepseekV3Cjk = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr std::string_view kDeepseekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kSpark25Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";

// Youtu: Hangul, CJK punctuation, bopomofo and CJK runs first, then GPT-4o-like words.
constexpr std::string_view kYoutuCjk =
    R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr std::string_view kYoutuWords =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// BLOOM / Poro: everything but whitespace and . , ! ? … 。 ， 、 । ۔ ، (and the literal ( | )
// the original's class also lists).
constexpr std::string_view kBloom =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re";

// AFMoE (Arcee): CJK, kana, Thai, Lao, Khmer, Myanmar and Hangul runs are words of their own.
constexpr std::string_view kAfmoeScripts =
    R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{0E40}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re";

std::vector<PreTokenizerRegexSet> make_sets() {
  return {
      {"default", {"default"},
       {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {"gpt2",
       {"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "a.x-4.0",
        "roberta-bpe", "jina-v1-en", "jina-v2-code", "jina-es", "jina-de", "jina-v2-es",
        "jina-v2-de", "gigachat", "mellum", "modern-bert", "exaone4"},
       {kGpt2}},
      {"llama3",
       {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"},
       {kLlama3}},
      {"jais-2", {"jais-2"}, {kJais2}},
      {"falcon", {"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {"starcoder",
       {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {R"re(\p{N})re", kGpt2}},
      {"qwen2",
       {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "grok-2", "solar-open",
        "kormo", "f2llmv2"},
       {kQwen2}},
      {"qwen35", {"qwen35"}, {kQwen35}},
      {"deepseek-llm", {"deepseek-llm"},
       {R"re([\r\n])re", kDeepseekLlmLetters, kDeepseekLlmPunct, R"re(\s+$)re", kDeepseekCjk,
        R"re(\p{N}+)re"}},
      {"deepseek-coder", {"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"}},
      {"deepseek-v3", {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"re(\p{N}{1,3})re", kDeepseekV3Cjk, kDeepseekV3Words}},
      {"spark2_5", {"spark2_5"},
       {R"re(\p{N}{1,3})re", kDeepseekV3Cjk, kSpark25Words, R"re(\p{N})re"}},
      {"youtu", {"youtu"}, {kYoutuCjk, kYoutuWords}},
      {"bloom", {"bloom", "poro-chat", "gpt3-finnish"}, {kBloom}},
      {"viking", {"viking"}, {kBloom, R"re(\p{N})re"}},
      {"tekken", {"tekken"}, {kTekken}},
      {"chameleon", {"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re",
        R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2}},
      {"gpt-4o", {"gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"}, {kGpt4o}},
      {"tiny_aya", {"tiny_aya", "cohere2moe"}, {kTinyAyaDigitGroups, kGpt4o}},
      {"kimi-k2", {"kimi-k2"}, {kKimiK2}},
      // Digit runs cut into groups of three counted from the right: "1234567" -> 1|234|567.
      {"superbpe", {"superbpe"}, {R"re(\p{N}+)re", kSuperBpeDigitGroups}},
      {"bailingmoe", {"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingMoe}},
      {"seed-coder", {"seed-coder"}, {kSeedCoder}},
      {"ufakzeka", {"ufakzeka"}, {kUfakzeka}},
      {"laguna", {"laguna"}, {R"re([^\n]+|[\n]+)re", kQwen2}},
      {"exaone-moe", {"exaone-moe"}, {kExaoneMoe}},
      {"minicpm5", {"minicpm5"}, {R"re(\p{N}{1,3})re", kMiniCpm5Words}},
      {"afmoe", {"afmoe"}, {kAfmoeDigitGroups, kAfmoeScripts, kDeepseekV3Words}},
      // Not byte-level: SentencePiece-style text (spaces escaped as U+2581, raw UTF-8 merges)
      // that llama.cpp only cuts at newlines; the escaping is the tokenizer's job.
      {"newlines", {"gemma4", "granite-embed-multi-311m", "sarvam-moe"}, {R"re([^\n]+|[\n]+)re"}},
  };
}

}  // namespace

const std::vector<PreTokenizerRegexSet>& pre_tokenizer_regex_sets() {
  static const std::vector<PreTokenizerRegexSet> sets = make_sets();
  return sets;
}

const PreTokenizerRegexSet* find_pre_tokenizer_regex_set(std::string_view pre_type) {
  for (const PreTokenizerRegexSet& set : pre_tokenizer_regex_sets()) {
    for (std::string_view name : set.pre_types) {
      if (name == pre_type) return &set;
    }
  }
  return nullptr;
}

}  // namespace lumen

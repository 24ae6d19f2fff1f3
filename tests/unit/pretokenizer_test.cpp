#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_regexes.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/unicode.h"

namespace lumen {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre_type, std::string_view text) {
  return PreTokenizer::create(pre_type)->split(text);
}

std::string join(const Words& words) {
  std::string out;
  for (const std::string& w : words) out += w;
  return out;
}

// Strings that exercise every rule of the regexes; each type must split them without losing,
// adding or reordering a byte, and without empty words.
const std::vector<std::string>& tricky_texts() {
  static const std::vector<std::string> texts = {
      "",
      " ",
      "   ",
      "\n",
      "\r\n\r\n",
      " \n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
      "Hello world",
      "  leading and trailing  ",
      "I'm sure you'RE fine, WE'LL see; it's 'quoted' y'all",
      "3 33 333 3333 33333 1234567890 3.14 1,234,567 x12345y 1234_ \xC2\xB2\xC2\xB3 \xD9\xA3\xD9\xA4",
      "HTTPServer camelCase snake_case kebab-case /usr/local/bin",
      "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6 \xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA "
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",                          // 中文字符 ひらがな 한국어
      "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99.cpp \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F",  // emoji
      "Caf\xC3\xA9 cafe\xCC\x81 \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE",      // é, e + combining, Cyrillic
      "tabs\tand\xC2\xA0nbsp\xE3\x80\x80ideographic space",
      "<sentinel:12>IMGIMGABZ (IMGIMGAAAZ)",
      "!!!!!! ... ,,, ;-) <=> $+^~|`",
      "a\xFF" "b \xE4\xB8 \xC0\x80 end\x80",                            // invalid UTF-8
  };
  return texts;
}

TEST(PreTokenizer, KnownTypesAllCreateAndSplitLosslessly) {
  const Words types = PreTokenizer::known_types();
  ASSERT_GE(types.size(), 80u);
  for (const std::string& type : types) {
    SCOPED_TRACE(type);
    const auto pre = PreTokenizer::create(type);
    for (const std::string& text : tricky_texts()) {
      const Words words = pre->split(text);
      EXPECT_EQ(join(words), utf8_sanitize(text)) << text;
      for (const std::string& w : words) {
        EXPECT_FALSE(w.empty()) << text;
        EXPECT_TRUE(utf8_is_valid(w)) << text;
      }
    }
  }
}

TEST(PreTokenizer, KnownTypesAreUniqueAndIncludeTheMainOnes) {
  Words types = PreTokenizer::known_types();
  for (const char* must : {"default", "gpt-2", "gpt2", "llama-bpe", "llama3", "qwen2", "deepseek-llm",
                           "deepseek-coder", "deepseek-v3", "falcon", "mpt", "starcoder", "refact",
                           "smollm", "command-r", "gpt-4o", "olmo", "dbrx", "jais", "stablelm2",
                           "poro-chat", "viking", "tekken", "bloom", "chatglm-bpe", "codeshell",
                           "exaone", "minerva-7b", "chameleon", "smaug-bpe", "phi-2", "jina-v2-es",
                           "roberta-bpe", "superbpe", "trillion", "bailingmoe", "seed-coder",
                           "hunyuan", "kimi-k2", "grok-2", "llama4", "pixtral", "a.x-4.0"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), must), types.end()) << must;
  }
  std::sort(types.begin(), types.end());
  EXPECT_EQ(std::adjacent_find(types.begin(), types.end()), types.end());
}

TEST(PreTokenizer, UnknownTypeThrowsNamingIt) {
  try {
    PreTokenizer::create("no-such-pre");
    FAIL() << "expected lumen::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PreTokenizer::create(""), Error);
  EXPECT_THROW(PreTokenizer::create("GPT-2"), Error);  // names are exact
  // llama.cpp drops whitespace before splitting with this type: not a split, so not offered.
  EXPECT_THROW(PreTokenizer::create("whitespace"), Error);
}

TEST(PreTokenizer, EmptyAndWhitespaceOnly) {
  for (const char* type : {"gpt-2", "llama-bpe", "qwen2", "deepseek-coder", "falcon", "gpt-4o"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(split(type, ""), Words{});
    EXPECT_EQ(split(type, "   "), Words{"   "});
  }
  EXPECT_EQ(split("gpt-2", "\n"), Words{"\n"});
  EXPECT_EQ(split("llama-bpe", "\n\n\n"), Words{"\n\n\n"});
  EXPECT_EQ(split("llama-bpe", "\t\n"), Words{"\t\n"});
}

// GPT-2: ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+', and whitespace runs give their last
// space to the next word (\s+(?!\S)).
TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", " this is \xF0\x9F\xA6\x99.cpp"),
            (Words{" this", " is", " \xF0\x9F\xA6\x99.", "cpp"}));
  EXPECT_EQ(split("gpt-2", "I'm"), (Words{"I", "'m"}));
  EXPECT_EQ(split("gpt-2", "I'M"), (Words{"I", "'", "M"}));  // contractions are lower-case only
  EXPECT_EQ(split("gpt-2", "a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(split("gpt-2", "a  "), (Words{"a", "  "}));
  EXPECT_EQ(split("gpt-2", "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("gpt-2", "\t\tb"), (Words{"\t", "\t", "b"}));
  EXPECT_EQ(split("gpt-2", "12345 678"), (Words{"12345", " 678"}));
  EXPECT_EQ(split("gpt-2", "Hello, world!"), (Words{"Hello", ",", " world", "!"}));
  // Every alias of the GPT-2 set splits alike.
  EXPECT_EQ(split("mpt", "I'm  here 42!"), split("gpt-2", "I'm  here 42!"));
  EXPECT_EQ(split("gpt2", "I'm  here 42!"), split("gpt-2", "I'm  here 42!"));
}

// Llama 3: case-insensitive contractions, one non-letter may lead a word, digits by three,
// punctuation takes trailing newlines, newline runs keep their leading whitespace.
TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "I'M WE'LL you'Re"),
            (Words{"I", "'M", " WE", "'LL", " you", "'Re"}));
  EXPECT_EQ(split("llama-bpe", "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n  b"), (Words{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split("llama-bpe", " \n \n\n x"), (Words{" \n \n\n", " x"}));
  EXPECT_EQ(split("llama-bpe", "hello!!\n\nworld"), (Words{"hello", "!!\n\n", "world"}));
  EXPECT_EQ(split("llama-bpe", "$%^ &"), (Words{"$%^", " &"}));
  EXPECT_EQ(split("llama-bpe", "(x)"), (Words{"(x", ")"}));
  EXPECT_EQ(split("llama-bpe", "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6 \xE4\xB8\xAD\xE6\x96\x87"),
            (Words{"\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6", " \xE4\xB8\xAD\xE6\x96\x87"}));
  EXPECT_EQ(split("llama-bpe", "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 ok"),
            (Words{"\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99", " ok"}));
  EXPECT_EQ(split("llama3", "ied 4 \xC2\xBD months"),  // ½ is a number (No)
            (Words{"ied", " ", "4", " ", "\xC2\xBD", " months"}));
  EXPECT_EQ(split("dbrx", "I'M 1234567"), split("llama-bpe", "I'M 1234567"));
}

// Splits of strings from ../shared/vocab/*.inp whose token ids (BPE over these words) match
// the reference .out files.
TEST(PreTokenizer, Llama3ReferenceStrings) {
  EXPECT_EQ(split("llama-bpe", "   Hello"), (Words{"  ", " Hello"}));
  EXPECT_EQ(split("llama-bpe", "    Hello\n    Hello"),
            (Words{"   ", " Hello", "\n", "   ", " Hello"}));
  EXPECT_EQ(split("llama-bpe", "\n ="), (Words{"\n", " ="}));
  EXPECT_EQ(split("llama-bpe", "' era"), (Words{"'", " era"}));
  EXPECT_EQ(split("llama-bpe", "w048 7tuijk dsdfhu"),
            (Words{"w", "048", " ", "7", "tuijk", " dsdfhu"}));
  EXPECT_EQ(split("llama-bpe", "Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3"
                               "\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C" "1314151\xE5\xA4\xA9"),
            (Words{"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?",
                   "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "131",
                   "415", "1", "\xE5\xA4\xA9"}));
  EXPECT_EQ(split("gpt-2", "    Hello\n    Hello"),
            (Words{"   ", " Hello", "\n   ", " Hello"}));
  EXPECT_EQ(split("gpt-2", "3333333 3..3"), (Words{"3333333", " 3", "..", "3"}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
  EXPECT_EQ(split("qwen2", "1234 x"), (Words{"1", "2", "3", "4", " x"}));
  EXPECT_EQ(split("qwen2", "It's IT'S"), (Words{"It", "'s", " IT", "'S"}));
  EXPECT_EQ(split("grok-2", "It's 12"), split("qwen2", "It's 12"));
}

TEST(PreTokenizer, DeepseekCoder) {
  // [\r\n] | \s?\p{L}+ | \s?\p{P}+ | CJK | single digits, applied one after the other.
  EXPECT_EQ(split("deepseek-coder", "Hello \xE4\xB8\x96\xE7\x95\x8C" "123\n\ttab"),
            (Words{"Hello", " ", "\xE4\xB8\x96\xE7\x95\x8C", "1", "2", "3", "\n", "\ttab"}));
  EXPECT_EQ(split("deepseek-coder", "a.b,c"), (Words{"a", ".", "b", ",", "c"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  // Its punctuation class [!-/:-~...] also covers ASCII letters, so a word mixing ASCII and
  // other letters splits there, as with the original tokenizer.
  EXPECT_EQ(split("deepseek-llm", "Caf\xC3\xA9 123  \n  "),
            (Words{"Caf", "\xC3\xA9", " ", "123", "  ", "\n", "  "}));
}

TEST(PreTokenizer, DeepseekV3) {
  EXPECT_EQ(split("deepseek-v3", "abc,def 12345 \xE6\x97\xA5\xE6\x9C\xAC"),
            (Words{"abc", ",def", " ", "123", "45", " ", "\xE6\x97\xA5\xE6\x9C\xAC"}));
}

TEST(PreTokenizer, FalconAndStarcoderDigits) {
  EXPECT_EQ(split("falcon", "12345678 x+y"), (Words{"123", "456", "78", " x", "+", "y"}));
  EXPECT_EQ(split("starcoder", "x1234 y"), (Words{"x", "1", "2", "3", "4", " y"}));
  EXPECT_EQ(split("refact", "x1234 y"), split("starcoder", "x1234 y"));
  EXPECT_EQ(split("default", "a.b 12345"), (Words{"a", ".", "b", " ", "123", "45"}));
}

TEST(PreTokenizer, Gpt4oAndTekkenCamelCase) {
  EXPECT_EQ(split("gpt-4o", "HTTPServer's camelCase I'M"),
            (Words{"HTTPServer's", " camel", "Case", " I'M"}));
  EXPECT_EQ(split("gpt-4o", "12345"), (Words{"123", "45"}));
  EXPECT_EQ(split("tekken", "HTTPServer's camelCase /path/to"),
            (Words{"HTTPServer", "'s", " camel", "Case", " /", "path", "/to"}));
  EXPECT_EQ(split("kimi-k2", "\xE4\xB8\xAD\xE6\x96\x87" "abc English\xE6\x97\xA5\xE6\x9C\xAC"),
            (Words{"\xE4\xB8\xAD\xE6\x96\x87", "abc", " English", "\xE6\x97\xA5\xE6\x9C\xAC"}));
}

TEST(PreTokenizer, DigitGroupingFromTheRight) {
  EXPECT_EQ(split("superbpe", "1234567 12 123456"),
            (Words{"1", "234", "567", " ", "12", " ", "123", "456"}));
  EXPECT_EQ(split("superbpe", "no digits, one word"), (Words{"no digits, one word"}));
  EXPECT_EQ(split("tiny_aya", "1234567 x12345"),
            (Words{"1", "234", "567", " x", "12", "345"}));
  // No \b after the run: tiny_aya's first rule leaves it to the \p{N}{1,3} of the second.
  EXPECT_EQ(split("tiny_aya", "12345x"), (Words{"123", "45", "x"}));
}

TEST(PreTokenizer, OtherFamilies) {
  EXPECT_EQ(split("afmoe", "x1234 \xE4\xB8\xAD\xE6\x96\x87!"),
            (Words{"x", "1", "234", " ", "\xE4\xB8\xAD\xE6\x96\x87", "!"}));
  EXPECT_EQ(split("gemma4", "a b\n\nc"), (Words{"a b", "\n\n", "c"}));
  EXPECT_EQ(split("bloom", "Hello, world! 123"),
            (Words{"Hello", ",", " world", "!", " 123"}));
  EXPECT_EQ(split("viking", "Hello 123"), (Words{"Hello", " ", "1", "2", "3"}));
  EXPECT_EQ(split("exaone-moe", "hello big world! it's"),
            (Words{"hello big world", "!", " it", "'s"}));
  EXPECT_EQ(split("chameleon", "a  b\tc"), (Words{"a", "  ", "b", "\t", "c"}));
  EXPECT_EQ(split("jais-2", "a     b"), (Words{"a", "    ", " b"}));
  EXPECT_EQ(split("laguna", "x\n\ny 12"), (Words{"x", "\n\n", "y", " ", "1", "2"}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(split("gpt-2", "a\xFF" "b c"), (Words{"a", r, "b", " c"}));
  EXPECT_EQ(split("llama-bpe", "x\xE4\xB8"), (Words{"x", r + r}));
  EXPECT_EQ(split("qwen2", "\x80"), (Words{r}));
}

TEST(RegexSplitter, MatchesAndGapsBothBecomePieces) {
  const RegexSplitter s("test", {"a+"});
  EXPECT_EQ(s.split("xxaaxyax"), (Words{"xx", "aa", "xy", "a", "x"}));
  EXPECT_EQ(s.split("bbb"), (Words{"bbb"}));
  EXPECT_EQ(s.split(""), Words{});
}

TEST(RegexSplitter, LaterRegexesSplitEachPieceSeparately) {
  // The second regex sees "ab" and "cd" as separate subjects: ^ and $ hold at each one's ends.
  const RegexSplitter s("test", {"[ab]+", "^.|.$"});
  EXPECT_EQ(s.split("abcd"), (Words{"a", "b", "c", "d"}));
}

TEST(RegexSplitter, EmptyMatchesCut) {
  EXPECT_EQ(RegexSplitter("test", {"(?=b)"}).split("abab"), (Words{"a", "ba", "b"}));
  EXPECT_EQ(RegexSplitter("test", {"x*"}).split("axxb"), (Words{"a", "xx", "b"}));
  EXPECT_EQ(RegexSplitter("test", {""}).split("\xC3\xA9z"), (Words{"\xC3\xA9", "z"}));
}

TEST(RegexSplitter, BadRegexThrows) {
  EXPECT_THROW(RegexSplitter("test", {"(unclosed"}), Error);
}

// The linear-time digit grouping patterns split exactly like the originals.
TEST(RegexSplitter, DigitGroupRewritesMatchTheOriginals) {
  const std::vector<std::string> alphabet = {"1", "2", "3", "a", "_", " ", ",", "\xC2\xB2" /* ² */,
                                             "\xD9\xA3" /* Arabic-Indic 3 */};
  std::mt19937 rng(1234);
  const RegexSplitter aya_original("t", {kTinyAyaDigitGroupsOriginal});
  const RegexSplitter aya("t", {kTinyAyaDigitGroups});
  const RegexSplitter superbpe_original("t", {kSuperBpeDigitGroupsOriginal});
  const RegexSplitter superbpe("t", {kSuperBpeDigitGroups});
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int j = 0; j < n; ++j) {
      // Mostly digits, so that long runs are common.
      const size_t k = rng() % 3 == 0 ? rng() % alphabet.size() : rng() % 3;
      text += alphabet[k];
    }
    ASSERT_EQ(aya.split(text), aya_original.split(text)) << text;
    ASSERT_EQ(superbpe.split(text), superbpe_original.split(text)) << text;
  }
}

// llama.cpp's custom digit split of afmoe (unicode_regex_split_custom_afmoe), over an alphabet
// whose numbers are known: \p{N} runs in groups of three from the right, the text since the
// previous cut glued to a run's first group.
Words afmoe_reference(const std::string& text) {
  const std::vector<uint32_t> cps = utf8_decode(text);
  const auto is_number = [](uint32_t c) { return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xE51; };
  Words out;
  size_t emitted_end = 0;
  const auto emit = [&](size_t end) {
    if (end == emitted_end) return;
    std::string w;
    for (size_t i = emitted_end; i < end; ++i) utf8_append(w, cps[i]);
    out.push_back(w);
    emitted_end = end;
  };
  for (size_t pos = 0; pos < cps.size();) {
    if (!is_number(cps[pos])) {
      ++pos;
      continue;
    }
    const size_t start = pos;
    while (pos < cps.size() && is_number(cps[pos])) ++pos;
    size_t cut = start + (pos - start) % 3;
    if (cut > start) emit(cut);  // as llama.cpp: a run of 3k digits glues the text to its first 3
    for (; cut < pos; cut += 3) emit(cut + 3);
  }
  emit(cps.size());
  return out;
}

TEST(RegexSplitter, AfmoeDigitGroupsMatchLlamaCpp) {
  const std::vector<std::string> alphabet = {"1", "2", "a", " ", "\xC2\xB2" /* ² */,
                                             "\xE0\xB9\x91" /* Thai 1 */, "\xE0\xB9\x80"};
  std::mt19937 rng(99);
  const RegexSplitter afmoe("t", {kAfmoeDigitGroups});
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 20);
    for (int j = 0; j < n; ++j) text += alphabet[rng() % 3 == 0 ? rng() % alphabet.size() : rng() % 2];
    ASSERT_EQ(afmoe.split(text), afmoe_reference(text)) << text;
  }
}

// A long digit run must not take quadratic time (the original patterns would take minutes).
TEST(PreTokenizer, LongDigitRunsSplitInLinearTime) {
  const std::string digits(100000, '7');
  for (const char* type : {"superbpe", "tiny_aya", "afmoe", "llama-bpe", "deepseek-llm"}) {
    SCOPED_TRACE(type);
    const Words words = split(type, digits + "x");
    EXPECT_EQ(join(words), digits + "x");
  }
  EXPECT_EQ(split("superbpe", digits).size(), 33334u);
}

// 100 KB of mixed text through the main types: it works (no assertion on time).
TEST(PreTokenizer, HundredKilobytes) {
  const std::string paragraph =
      "The quick brown fox jumps over the lazy dog. It's 2024-05-01, and I'LL pay $1,234.56!\n"
      "    def f(x):\n        return x ** 2  # comment\n\n"
      "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB5\x8B\xE8\xAF\x95 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 "
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 "
      "caf\xC3\xA9  \t tabs\r\n";
  std::string text;
  while (text.size() < 100 * 1024) text += paragraph;
  for (const char* type : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "gpt-4o", "exaone-moe"}) {
    SCOPED_TRACE(type);
    const Words words = split(type, text);
    EXPECT_GT(words.size(), text.size() / 10);
    EXPECT_EQ(join(words), text);
  }
}

TEST(PreTokenizer, LongWordsNeedNoDeepStack) {
  // exaone-moe's nested groups over one 100 KB "word" (letters and single spaces).
  std::string text;
  while (text.size() < 100 * 1024) text += "ab ";
  text += "cd";
  EXPECT_EQ(split("exaone-moe", text), Words{text});
}

TEST(PreTokenizer, SplitIsThreadSafe) {
  const auto pre = PreTokenizer::create("llama-bpe");
  std::string text;
  for (const std::string& t : tricky_texts()) text += t + " ";
  for (int i = 0; i < 5; ++i) text += text;
  const Words expected = pre->split(text);
  std::vector<Words> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) results[t] = pre->split(text);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Words& r : results) EXPECT_EQ(r, expected);
}

// The shared tokenizer test strings split losslessly under each byte-level vocab's type.
TEST(PreTokenizer, SharedVocabTestStrings) {
  const std::vector<std::pair<std::string, std::string>> vocabs = {
      {"gpt-2", "gpt-2"},   {"deepseek-coder", "deepseek-coder"}, {"falcon", "falcon"},
      {"starcoder", "starcoder"}, {"refact", "refact"}, {"llama-bpe", "llama-bpe"},
      {"qwen2", "qwen2"}};
  for (const auto& [vocab, pre_type] : vocabs) {
    const std::string rel = "vocab/ggml-vocab-" + vocab + ".gguf.inp";
    if (!test::shared_exists(rel)) GTEST_SKIP() << "no " << rel;
    const std::string all = test::read_file(test::shared_path(rel));
    const auto pre = PreTokenizer::create(pre_type);
    const std::string separator = "\n__ggml_vocab_test__\n";
    size_t n_strings = 0;
    for (size_t pos = 0, next; (next = all.find(separator, pos)) != std::string::npos;
         pos = next + separator.size()) {
      const std::string text = all.substr(pos, next - pos);
      const Words words = pre->split(text);
      EXPECT_EQ(join(words), text) << vocab;
      ++n_strings;
    }
    EXPECT_GT(n_strings, 10u) << vocab;
  }
}

}  // namespace
}  // namespace lumen

// The grammar engine: the text form's parser and its errors, the byte automata (UTF-8, partial
// characters), and the matcher's token masks against a brute-force check of every token.
#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

bool accepts(std::string_view g, std::string_view text) { return grammar_accepts(compile_grammar(g), text); }

std::string error_of(std::string_view g) {
  try {
    compile_grammar(g);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(Grammar, LiteralsClassesAndRepetition) {
  EXPECT_TRUE(accepts(R"(root ::= "ab" [0-9]+ "c"?)", "ab123"));
  EXPECT_TRUE(accepts(R"(root ::= "ab" [0-9]+ "c"?)", "ab1c"));
  EXPECT_FALSE(accepts(R"(root ::= "ab" [0-9]+ "c"?)", "abc"));
  EXPECT_FALSE(accepts(R"(root ::= "ab" [0-9]+ "c"?)", "ab"));
  EXPECT_TRUE(accepts(R"(root ::= [a-c]{2,3})", "abc"));
  EXPECT_FALSE(accepts(R"(root ::= [a-c]{2,3})", "abca"));
  EXPECT_FALSE(accepts(R"(root ::= [a-c]{2,3})", "a"));
  EXPECT_TRUE(accepts(R"(root ::= "x"{3})", "xxx"));
  EXPECT_TRUE(accepts(R"(root ::= "x"{2,})", "xxxxx"));
  EXPECT_FALSE(accepts(R"(root ::= "x"{2,})", "x"));
  EXPECT_TRUE(accepts(R"(root ::= [^"\\]*)", "hello world"));
  EXPECT_FALSE(accepts(R"(root ::= [^"\\]*)", "a\"b"));
  EXPECT_TRUE(accepts("root ::= \"\\n\\t\\x41\\u00e9\"", "\n\tA\xC3\xA9"));
  EXPECT_TRUE(accepts("root ::= .", "\xF0\x9F\x98\x80"));  // one character, four bytes
  EXPECT_FALSE(accepts("root ::= .", "\xED\xA0\x80"));     // a surrogate is not UTF-8
  EXPECT_FALSE(accepts("root ::= .", "\xC0\x80"));         // nor an overlong form
  EXPECT_TRUE(accepts("root ::= ", ""));
}

TEST(Grammar, RulesAlternativesAndRecursion) {
  const char* g = R"(
    # a list of nested lists
    root ::= list
    list ::= "[" ( item ( "," item )* )? "]"
    item ::= list | [0-9]+
  )";
  EXPECT_TRUE(accepts(g, "[]"));
  EXPECT_TRUE(accepts(g, "[1,[2,[]],3]"));
  EXPECT_FALSE(accepts(g, "[1,]"));
  EXPECT_FALSE(accepts(g, "[[1]"));
  // A rule over several lines; the next definition starts at `name ::=`.
  EXPECT_TRUE(accepts("root ::= a\n  | b\na ::= \"x\"\nb ::=\n  \"y\"", "y"));
  // Empty rules and nullable calls in loops end (no infinite expansion).
  EXPECT_TRUE(accepts("root ::= e* \"z\"\ne ::= \"\" | \"q\"", "qqz"));
  EXPECT_TRUE(accepts("root ::= (e e)* \"z\"\ne ::= \"q\"?", "z"));
}

TEST(Grammar, ErrorsNameTheirPlace) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("never closed"), std::string::npos);
  EXPECT_NE(error_of("root ::= ( \"a\"").find("never closed"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" )").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("root ::= x").find("'x' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("a ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\uD800\"").find("surrogate"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("maximum below"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{99999}").find("limit"), std::string::npos);
  EXPECT_NE(error_of("root ::= ::=").find("line 1, column 10"), std::string::npos);
  // Deep nesting and huge expansions are refused, not a stack overflow or an exhausted memory.
  EXPECT_NE(error_of("root ::= " + std::string(10000, '(') + "\"a\"" + std::string(10000, ')')).find("deeper"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= (((\"ab\"{10000}){10000}){10000})").find("states"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"" + std::string(100, '*')).find("repetition operators"), std::string::npos);
}

TEST(Grammar, LongChainsOfRulesCompile) {
  // 3,000 rules, each calling the next: inlining stops at a bounded depth, nothing recurses deeply.
  std::string g = "root ::= r0\n";
  for (int i = 0; i < 3000; i++) g += fmt::format("r{} ::= \"a\" r{}\n", i, i + 1);
  g += "r3000 ::= \"b\"\n";
  const auto cg = compile_grammar(g);
  EXPECT_TRUE(grammar_accepts(cg, std::string(3000, 'a') + "b"));
  EXPECT_FALSE(grammar_accepts(cg, std::string(2999, 'a') + "b"));
}

// The mask equals, token by token, whether accept_token() takes the token: checked over every
// token of a real vocabulary along a text the grammar allows.
void check_masks_brute_force(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const GrammarVocab>& v,
                             const std::vector<int32_t>& path) {
  auto cache = std::make_shared<GrammarMaskCache>(g, v);
  GrammarMatcher m(cache);
  std::vector<uint64_t> bits;
  for (size_t step = 0; step <= path.size(); step++) {
    m.fill_next_token_mask(bits);
    for (int32_t id = 0; id < v->n_vocab(); id++) {
      GrammarMatcher probe = m;
      const bool ok = probe.accept_token(id);
      const bool allowed = bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1;
      ASSERT_EQ(ok, allowed) << "step " << step << " token " << id << " '" << v->bytes(id) << "'";
    }
    if (step < path.size()) {
      ASSERT_TRUE(m.accept_token(path[step])) << "step " << step;
    }
  }
}

TEST(GrammarMatcher, MasksMatchBruteForceOnStories260K) {
  auto file = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(*file);
  auto v = GrammarVocab::from_tokenizer(*tok);
  // SPM's first piece carries a space: the grammar allows one before the object.
  const char* json = R"(
    root   ::= " "? object
    value  ::= object | array | string | number | "true" | "false" | "null"
    object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
    array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
    string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
    number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?
    ws     ::= [ \n]?
  )";
  const auto g = compile_grammar(json);
  const std::string text = R"({"name": "Lily", "age": 3, "toys": [{"a": true}, null, "ball"]})";
  const std::vector<int32_t> path = tok->encode(text, false, false);
  ASSERT_TRUE(grammar_accepts(g, " " + text));
  check_masks_brute_force(g, v, std::vector<int32_t>(path.begin(), path.begin() + std::min<size_t>(path.size(), 12)));
}

TEST(GrammarMatcher, TooAmbiguousGrammarsAreRefusedNotSlow) {
  // 5,000 identical alternatives: every byte would keep 5,000 stacks alive.
  std::string g = "root ::= x*\nx ::= \"a\"";
  for (int i = 0; i < 5000; i++) g += fmt::format(" | \"a\" \"\"{{{}}}", i % 3);
  g += "\n";
  const auto cg = compile_grammar(g);
  try {
    grammar_accepts(cg, "aaaa");
    FAIL() << "accepted a grammar 5,000 ways ambiguous";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos);
  }
}

// fuzz_grammar's find: a rule reached again through a {52,} repetition before any byte made the
// matcher intern ever deeper stacks until it ran out of memory. A step is now bounded.
TEST(GrammarMatcher, SelfCallingRulesAreRefusedNotUnbounded) {
  const std::string g = "root ::= e\ne ::= t (root(\"E\" | \"-\") t)*{52,}\nt ::= [ot ::= e\ne ::=root ::= e\ne ::*= t ((\"E\" | \"-\") t= e\na ((\"E\" | \"-\") t)*\nt ::= [0-9]+ | \"(\" e \")\"\n";
  GrammarLimits limits;
  limits.max_states = 1u << 16;  // as the fuzzer compiled it
  std::shared_ptr<const Grammar> cg;
  try {
    cg = compile_grammar(g, "root", limits);
  } catch (const GrammarError&) {
    return;  // refused when compiled: also an answer
  }
  try {
    grammar_accepts(cg, std::string("(t)\x00r:3", 7));
    ADD_FAILURE() << "matched without a GrammarError";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("rule calls"), std::string::npos) << e.what();
  }
}

TEST(GrammarMatcher, PartialUtf8TokensAndEndOfGeneration) {
  // A byte-level vocabulary: tokens that split a character between them.
  std::vector<std::string> bytes = {"\xC3", "\xA9", "\xC3\xA9", "a", "\xE2\x82", "\xAC", "", "ab"};
  auto v = std::make_shared<GrammarVocab>(bytes, std::vector<int32_t>{6});
  const auto g = compile_grammar("root ::= ( \"\\u00e9\" | \"\\u20ac\" | \"a\" )+");
  auto cache = std::make_shared<GrammarMaskCache>(g, v);
  GrammarMatcher m(cache);
  std::vector<uint64_t> bits;
  m.fill_next_token_mask(bits);
  EXPECT_EQ(bits[0], 0b00011101u);  // C3, C3A9, a, E282 - not a lone continuation byte, not EOG, not "ab"
  ASSERT_TRUE(m.accept_token(0));   // half of é
  m.fill_next_token_mask(bits);
  EXPECT_EQ(bits[0], 0b00000010u);  // only its second byte
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.can_end());
  m.fill_next_token_mask(bits);
  EXPECT_EQ(bits[0], 0b01011101u);  // EOG allowed now
  ASSERT_TRUE(m.accept_token(4));
  EXPECT_FALSE(m.accept_token(1));  // A9 does not finish the euro sign
  ASSERT_TRUE(m.accept_token(5));
  m.rollback(2);
  EXPECT_TRUE(m.can_end());
  EXPECT_EQ(m.n_accepted(), 2u);
}

TEST(GrammarMatcher, MasksMatchBruteForceWithRandomTexts) {
  // Random token sequences along random walks of a recursive grammar, random small vocabularies.
  std::mt19937 rng(5);
  const auto g = compile_grammar(R"g(
    root ::= e
    e ::= t ( ("+" | "-") t )*
    t ::= [0-9]+ | "(" e ")" | "x" ws
    ws ::= " "?
  )g");
  const std::string alphabet = "0123456789+-()x ";
  for (int trial = 0; trial < 20; trial++) {
    std::vector<std::string> bytes;
    for (int i = 0; i < 60; i++) {
      std::string s;
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < len; k++) s += alphabet[rng() % alphabet.size()];
      bytes.push_back(s);
    }
    auto v = std::make_shared<GrammarVocab>(bytes, std::vector<int32_t>{});
    auto cache = std::make_shared<GrammarMaskCache>(g, v);
    GrammarMatcher m(cache);
    std::vector<uint64_t> bits;
    for (int step = 0; step < 15; step++) {
      m.fill_next_token_mask(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v->n_vocab(); id++) {
        GrammarMatcher probe = m;
        const bool ok = probe.accept_token(id);
        ASSERT_EQ(ok, static_cast<bool>(bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1))
            << "trial " << trial << " step " << step << " token '" << bytes[static_cast<size_t>(id)] << "'";
        if (ok) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

}  // namespace
}  // namespace lumen

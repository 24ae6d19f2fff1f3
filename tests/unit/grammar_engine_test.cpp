// Structured output through the engine: a grammar that allows everything changes no greedy
// output; sampled outputs under a grammar are whole sentences of it, closed before the token
// budget runs out (stories260K and a synthetic
// Qwen-shape model with Qwen's 152k byte-level vocabulary); a finished sentence ends the request
// with stop; speculation under a grammar changes nothing; forks each keep their own state.
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

const char* kJson = R"(
  root   ::= object
  value  ::= object | array | string | number | "true" | "false" | "null"
  object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
  array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
  string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,40} "\""
  number ::= "-"? ( "0" | [1-9] [0-9]{0,8} ) ( "." [0-9]{1,4} )?
  ws     ::= [ \n]?
)";

const char* kPrompts[] = {"Once upon a time", "The little dog", "Lily wanted to", "One day, a big bird"};

GenerationParams gen(int max_tokens, float temperature, uint64_t seed, std::shared_ptr<const Grammar> g) {
  GenerationParams p;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.sampling.max_tokens = max_tokens;
  p.sampling.grammar = std::move(g);
  return p;
}

EngineConfig config() {
  EngineConfig c;
  c.n_ctx = 512;
  c.max_running = 8;
  c.max_batch_tokens = 64;
  return c;
}

std::string qwen_vocab_model(std::string* why) {
  return test::synth_model("synth-qwen2.5-1l-q8_0-qwen2vocab.gguf",
                           "--preset qwen2.5-0.5b --layers 1 --type q8_0 --vocab-from " +
                               test::shared_path("vocab/ggml-vocab-qwen2.gguf") + " --seed 0",
                           "333962f95791a7b262e196991f38113345c1223b28213b11f5ad199a0a3a9c95", why);
}

class GrammarEngine : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string path;
    if (GetParam() == "qwen") {
      std::string why;
      path = qwen_vocab_model(&why);
      if (path.empty()) GTEST_SKIP() << why;
    } else {
      if (!test::shared_exists(GetParam())) GTEST_SKIP();
      path = test::shared_path(GetParam());
    }
    m_ = test::load_engine_model(path);
  }
  std::vector<int32_t> prompt(int i) { return m_.tok->encode(kPrompts[i], true, false); }
  test::EngineModel m_;
};

TEST_P(GrammarEngine, AllowEverythingChangesNoGreedyOutput) {
  const auto any = compile_grammar("root ::= .*");
  EngineCore e(*m_.model, *m_.tok, config());
  for (int i = 0; i < 4; i++) {
    const auto plain = test::drain_completions(*e.submit(prompt(i), gen(40, 0, 1, nullptr)))[0];
    const auto constrained = test::drain_completions(*e.submit(prompt(i), gen(40, 0, 1, any)))[0];
    EXPECT_EQ(constrained.tokens, plain.tokens) << kPrompts[i];
    EXPECT_EQ(constrained.reason, plain.reason);
  }
  EXPECT_EQ(e.leak_report(), "");
}

TEST_P(GrammarEngine, SampledOutputsStayInTheLanguage) {
  const auto g = compile_grammar(kJson);
  EngineCore e(*m_.model, *m_.tok, config());
  std::vector<std::shared_ptr<RequestHandle>> hs;
  const int n = test::sanitized_build() ? 6 : 20;
  for (int s = 0; s < n; s++) hs.push_back(e.submit(prompt(s % 4), gen(160, 1.0f, 500 + static_cast<uint64_t>(s), g)));
  for (int s = 0; s < n; s++) {
    const auto c = test::drain_completions(*hs[static_cast<size_t>(s)])[0];
    ASSERT_TRUE(c.error.empty()) << c.error;
    // Whole sentences, also where the token budget ran out: the last tokens closed it.
    EXPECT_TRUE(grammar_accepts(g, c.text)) << "seed " << s << " (" << finish_reason_name(c.reason) << "): " << c.text;
  }
  EXPECT_EQ(e.leak_report(), "");
}

TEST_P(GrammarEngine, ACompletedSentenceEndsWithStop) {
  const auto g = compile_grammar(R"(root ::= " "? ( "yes" | "no" | "maybe" ) "!")");
  EngineCore e(*m_.model, *m_.tok, config());
  for (int s = 0; s < 6; s++) {
    const auto c = test::drain_completions(*e.submit(prompt(s % 4), gen(50, 1.0f, 7 + static_cast<uint64_t>(s), g)))[0];
    EXPECT_EQ(c.reason, FinishReason::Stop) << c.text;
    EXPECT_TRUE(grammar_accepts(g, c.text)) << c.text;
  }
}

TEST_P(GrammarEngine, AWholeSentenceStartsNoRepeatItCouldNotFinish) {
  // Whole after each group, but a new group needs bytes: near the budget none may start.
  const auto g = compile_grammar(R"g(root ::= ( "(" [a-z ]{3,40} ")" )+)g");
  EngineCore e(*m_.model, *m_.tok, config());
  for (int s = 0; s < 8; s++) {
    const auto c = test::drain_completions(*e.submit(prompt(s % 4), gen(24 + s, 1.0f, 70 + static_cast<uint64_t>(s), g)))[0];
    EXPECT_TRUE(grammar_accepts(g, c.text)) << finish_reason_name(c.reason) << ": " << c.text;
  }
}

TEST_P(GrammarEngine, SpeculationUnderAGrammarChangesNothing) {
  const auto g = compile_grammar(kJson);
  std::vector<test::Completion> want;
  {
    EngineCore e(*m_.model, *m_.tok, config());
    for (int i = 0; i < 4; i++) want.push_back(test::drain_completions(*e.submit(prompt(i), gen(60, 0, 1, g)))[0]);
  }
  EngineConfig c = config();
  c.spec_ngram = 2;
  c.spec_tokens = 4;
  c.spec_cost_model = false;
  EngineCore e(*m_.model, *m_.tok, c);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 4; i++) hs.push_back(e.submit(prompt(i), gen(60, 0, 1, g)));
  for (int i = 0; i < 4; i++) {
    const auto got = test::drain_completions(*hs[static_cast<size_t>(i)])[0];
    EXPECT_EQ(got.tokens, want[static_cast<size_t>(i)].tokens) << kPrompts[i];
  }
  EXPECT_EQ(e.leak_report(), "");
}

TEST_P(GrammarEngine, ForksKeepTheirOwnGrammarState) {
  const auto g = compile_grammar(kJson);
  EngineCore e(*m_.model, *m_.tok, config());
  GenerationParams p = gen(120, 1.0f, 42, g);
  p.n = 3;
  const auto cs = test::drain_completions(*e.submit(prompt(0), p));
  ASSERT_EQ(cs.size(), 3u);
  for (const auto& c : cs) {
    GrammarMatcher probe(std::make_shared<GrammarMaskCache>(g, GrammarVocab::from_tokenizer(*m_.tok)));
    EXPECT_TRUE(probe.accept_bytes(c.text)) << c.text;
  }
  EXPECT_EQ(e.leak_report(), "");
}

INSTANTIATE_TEST_SUITE_P(Models, GrammarEngine, testing::Values("models/stories260K.gguf", "qwen"),
                         [](const auto& info) { return info.param == "qwen" ? std::string("SynthQwenVocab") : std::string("Stories260K"); });

}  // namespace
}  // namespace lumen

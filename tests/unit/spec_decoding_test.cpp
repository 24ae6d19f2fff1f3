// Speculative decoding: n-gram prompt lookup; the acceptance rule (greedy keeps exactly the
// target's tokens; sampling keeps the target's distribution exactly, checked by chi-square with
// real logits); and the engine: greedy output with speculation is token for token the output
// without it (k = 1..8, alone and with 8 concurrent requests), a proposer rejected at every
// position changes nothing, a seed reproduces a sampled output, and no block leaks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine_core.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/rejection_sampler.h"
#include "gguf/gguf_file.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

TEST(NgramProposer, ProposesWhatFollowedTheLatestOccurrence) {
  NgramProposer p(3);
  //                          0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> t = {5, 6, 7, 8, 9, 1, 6, 7, 8, 2, 6, 7, 8};
  // Suffix {6, 7, 8}: latest earlier occurrence at 6..8, followed by 2, 6, 7.
  EXPECT_EQ(p.propose(t, 3), (std::vector<int32_t>{2, 6, 7}));
  EXPECT_EQ(p.propose(t, 1), (std::vector<int32_t>{2}));
  // The proposal stops at the end of the sequence.
  EXPECT_EQ(p.propose(t, 10), (std::vector<int32_t>{2, 6, 7, 8}));
  // No occurrence of any suffix: nothing; shorter suffixes are tried.
  EXPECT_TRUE(p.propose(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  EXPECT_EQ(p.propose(std::vector<int32_t>{4, 9, 1, 2, 3, 9}, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(p.propose(t, 0).empty());
  EXPECT_TRUE(p.propose(std::vector<int32_t>{7}, 3).empty());
  EXPECT_THROW(NgramProposer(0), Error);
}

struct Loaded {
  std::shared_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load(const std::string& rel) {
  Loaded l;
  l.file = GgufFile::open(test::shared_path(rel));
  ModelOptions opt;
  opt.n_threads = 2;
  l.model = Model::load(l.file, opt);
  l.tok = Tokenizer::from_gguf(*l.file);
  return l;
}

// Logits of the next token after each of the last n + 1 prefixes of `tokens`: rows i = the
// logits after tokens[0, size - n - 1 + i].
std::vector<float> last_logits(Model& model, const std::vector<int32_t>& tokens, int64_t n) {
  SequenceKv kv(model.kv_layout(), 1, static_cast<int64_t>(tokens.size()));
  Batch b;
  const int64_t size = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < size; i++) kv.add(b, tokens[i], static_cast<int32_t>(i), 0, i >= size - n - 1);
  std::vector<float> logits(static_cast<size_t>((n + 1) * model.config().n_vocab));
  model.forward(b, kv.storage(), logits.data());
  return logits;
}

// The first token verification emits is distributed as the target's p (top-k 20, temperature
// 1): whichever the draft and whether the proposer has a distribution q or proposes a point
// mass. Chi-square over the survivors (those expected fewer than 5 times pooled into one bin)
// against its 99.9% quantile (Wilson-Hilferty); every seed is a fresh sampler.
TEST(RejectionSampler, TheFirstTokenFollowsTheTargetsDistribution) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  Loaded m = load("models/stories260K.gguf");
  const int64_t n_vocab = m.model->config().n_vocab;
  const std::vector<int32_t> prompt = m.tok->encode("Once upon a time, there was a little", true, false);
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 20;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  // p: the target's distribution after the prompt.
  Sampler ref(sp, static_cast<int>(n_vocab));
  std::vector<float> logits0 = last_logits(*m.model, prompt, 0);
  TokenDist p;
  ref.distribution(logits0.data(), prompt, p);
  ASSERT_EQ(p.ids.size(), 20u);
  // Drafts: the most likely token (accepted often), an unlikely survivor, a token top-k removed.
  const int32_t likely = p.ids[0], unlikely = p.ids[15];
  int32_t outside = 0;
  while (p.prob(outside) > 0) outside++;
  const int n = test::sanitized_build() ? 4000 : 20000;
  // Point masses at each of three drafts; then a proposer with a distribution q (uniform over
  // the three), whose draft is drawn from q, as the rule requires.
  const std::vector<int32_t> candidates = {likely, unlikely, outside};
  std::vector<std::vector<float>> logits_after(candidates.size());
  for (size_t c = 0; c < candidates.size(); c++) {
    std::vector<int32_t> seq = prompt;
    seq.push_back(candidates[c]);
    logits_after[c] = last_logits(*m.model, seq, 1);  // rows: after the prompt, after prompt + draft
  }
  const TokenDist q{candidates, {1.0 / 3, 1.0 / 3, 1.0 / 3}};
  for (int mode = 0; mode <= static_cast<int>(candidates.size()); mode++) {
      const bool with_q = mode == static_cast<int>(candidates.size());
      SCOPED_TRACE(with_q ? std::string("drafts drawn from q, uniform over 3") : "point mass at " + std::to_string(candidates[mode]));
      std::mt19937 pick(5);
      std::map<int32_t, int> counts;
      for (int s = 0; s < n; s++) {
        SamplingParams sps = sp;
        sps.seed = 1000 + static_cast<uint64_t>(s);
        Sampler sampler(sps, static_cast<int>(n_vocab));
        const size_t c = with_q ? pick() % 3 : static_cast<size_t>(mode);
        const std::vector<int32_t> drafts = {candidates[c]};
        const std::vector<TokenDist> qs = with_q ? std::vector<TokenDist>{q} : std::vector<TokenDist>{};
        const Verification v = verify_drafts(sampler, prompt, drafts, logits_after[c].data(), n_vocab, qs);
        ASSERT_GE(v.tokens.size(), 1u);
        counts[v.tokens[0]]++;
      }
      double chi2 = 0, pooled_expected = 0, pooled_got = 0;
      int bins = 0;
      for (size_t i = 0; i < p.ids.size(); i++) {
        const double expected = p.p[i] * n, got = counts[p.ids[i]];
        counts.erase(p.ids[i]);
        if (expected < 5) {
          pooled_expected += expected, pooled_got += got;
          continue;
        }
        chi2 += (got - expected) * (got - expected) / expected;
        bins++;
      }
      if (pooled_expected >= 5) {
        chi2 += (pooled_got - pooled_expected) * (pooled_got - pooled_expected) / pooled_expected;
        bins++;
      }
      EXPECT_TRUE(counts.empty()) << "drew a token outside the target's top-k";
      ASSERT_GE(bins, 3);
      const double df = bins - 1, z = 3.09;  // 99.9%
      const double limit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
      EXPECT_LT(chi2, limit) << bins << " bins";
  }
}

TEST(RejectionSampler, GreedyKeepsExactlyTheTargetsTokens) {
  // Three rows over a vocabulary of 4: argmaxes 2, 1, 3.
  const std::vector<float> logits = {0, 1, 5, 0, 0, 4, 1, 0, 1, 0, 0, 9};
  SamplingParams sp;
  sp.temperature = 0;
  Sampler s(sp, 4);
  const std::vector<int32_t> prev = {0};
  Verification v = verify_drafts(s, prev, std::vector<int32_t>{2, 1}, logits.data(), 4);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{2, 1, 3}));  // both accepted, then the bonus
  EXPECT_EQ(v.n_accepted, 2);
  v = verify_drafts(s, prev, std::vector<int32_t>{2, 0}, logits.data(), 4);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{2, 1}));  // the second rejected: the target's 1
  EXPECT_EQ(v.n_accepted, 1);
  v = verify_drafts(s, prev, std::vector<int32_t>{3, 1}, logits.data(), 4);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{2}));
  EXPECT_EQ(v.n_accepted, 0);
}

// A proposer that is always wrong (a token the target never picks here), or right by luck.
class WrongProposer : public Proposer {
 public:
  std::vector<int32_t> propose(std::span<const int32_t>, int32_t k) override { return std::vector<int32_t>(k, 3); }
};

std::vector<int32_t> drain(RequestHandle& h, RequestTimings* timings = nullptr) {
  std::vector<int32_t> out;
  while (auto e = h.next()) {
    if (e->token >= 0) out.push_back(e->token);
    if (e->finished) {
      EXPECT_TRUE(e->error.empty()) << e->error;
      if (timings) *timings = e->timings;
    }
  }
  return out;
}

GenerationParams gen(int n, float temperature = 0.0f, uint64_t seed = 7) {
  GenerationParams p;
  p.sampling.temperature = temperature;
  p.sampling.top_k = 20;
  p.sampling.seed = seed;
  p.sampling.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// A prompt that the model continues by repeating it: n-gram lookup has something to find.
std::vector<int32_t> repeating_prompt(const Tokenizer& tok) {
  const std::string s = "Lily and Tom went to the park. They played with a big red ball. ";
  return tok.encode(s + s + s, true, false);
}

std::vector<std::vector<int32_t>> prompts_of(const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> v = {repeating_prompt(tok)};
  for (const char* p : {"Once upon a time", "The little dog ran and ran and ran", "Lily wanted to play. Lily wanted to",
                        "One day, a big bird", "Tom and his mom went to the park and the park was", "The sun was",
                        "She was very happy because she was happy"})
    v.push_back(tok.encode(p, true, false));
  return v;
}

class SpecEngine : public testing::TestWithParam<const char*> {};

TEST_P(SpecEngine, GreedyOutputIsTheSameWithAndWithoutSpeculation) {
  if (!test::shared_exists(GetParam())) GTEST_SKIP();
  Loaded m = load(GetParam());
  const auto prompts = prompts_of(*m.tok);
  const int n_gen = 40;
  std::vector<std::vector<int32_t>> want;
  {
    EngineConfig c;
    c.n_ctx = 256;
    EngineCore e(*m.model, *m.tok, c);
    for (const auto& p : prompts) want.push_back(drain(*e.submit(p, gen(n_gen))));
  }
  for (int k = 1; k <= 8; k++) {
    SCOPED_TRACE(testing::Message() << "k " << k);
    EngineConfig c;
    c.n_ctx = 256;
    c.spec_ngram = 3;
    c.spec_tokens = k;
    c.spec_cost_model = k != 4;  // on a model this small drafts rarely pay: k = 4 runs them regardless
    c.max_batch_tokens = 64;  // drafts compete with the prompts for the budget
    EngineCore e(*m.model, *m.tok, c);
    // Alone, then all together.
    RequestTimings t;
    EXPECT_EQ(drain(*e.submit(prompts[0], gen(n_gen)), &t), want[0]);
    if (!c.spec_cost_model) {
      EXPECT_GT(t.spec_accepted, 0) << "the repeating prompt was meant to be predictable";
      EXPECT_GT(static_cast<double>(t.spec_emitted) / static_cast<double>(t.spec_passes), 1.0);
    }
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (const auto& p : prompts) hs.push_back(e.submit(p, gen(n_gen)));
    for (size_t i = 0; i < hs.size(); i++) EXPECT_EQ(drain(*hs[i]), want[i]) << "prompt " << i;
    e.wait_idle();
    const EngineStats s = e.stats();
    EXPECT_GT(s.spec.proposed, 0);  // the cost model probes at least
    EXPECT_LE(s.spec.accepted, s.spec.proposed);
    EXPECT_EQ(e.leak_report(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpecEngine,
                         testing::Values("models/stories260K.gguf", "models/stories260K-q8_0.gguf"));

TEST(SpecEngineStories, ADraftRejectedEverywhereChangesNothing) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  Loaded m = load("models/stories260K.gguf");
  const auto prompts = prompts_of(*m.tok);
  for (const float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE(temperature);
    std::vector<std::vector<int32_t>> want;
    {
      EngineConfig c;
      c.n_ctx = 256;
      EngineCore e(*m.model, *m.tok, c);
      for (size_t i = 0; i < prompts.size(); i++) want.push_back(drain(*e.submit(prompts[i], gen(30, temperature, 50 + i))));
    }
    EngineConfig c;
    c.n_ctx = 256;
    c.spec_tokens = 6;
    c.spec_cost_model = false;  // keep drafting though every draft fails
    c.spec_proposer = std::make_shared<WrongProposer>();
    c.block_size = 4;  // rejected drafts span blocks: the trim frees them
    EngineCore e(*m.model, *m.tok, c);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (size_t i = 0; i < prompts.size(); i++) hs.push_back(e.submit(prompts[i], gen(30, temperature, 50 + i)));
    for (size_t i = 0; i < hs.size(); i++) {
      const auto got = drain(*hs[i]);
      // Greedy: identical. Sampled: a draft (token 3) the target rejects everywhere consumes one
      // uniform per step, so the draws differ from the plain run's; its length and validity hold.
      if (temperature == 0) {
        EXPECT_EQ(got, want[i]) << "prompt " << i;
      } else {
        EXPECT_EQ(got.size(), want[i].size());
      }
    }
    e.wait_idle();
    EXPECT_GT(e.stats().spec.proposed, 0);
    EXPECT_EQ(e.leak_report(), "");
  }
}

TEST(SpecEngineStories, ASeedReproducesASampledSpeculativeOutput) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  Loaded m = load("models/stories260K.gguf");
  const std::vector<int32_t> prompt = repeating_prompt(*m.tok);
  EngineConfig c;
  c.n_ctx = 256;
  c.spec_ngram = 2;
  c.spec_tokens = 4;
  c.spec_cost_model = false;  // the seed's outputs must not depend on measured step times
  EngineCore e(*m.model, *m.tok, c);
  const auto a = drain(*e.submit(prompt, gen(50, 1.0f, 99)));
  const auto b = drain(*e.submit(prompt, gen(50, 1.0f, 99)));
  const auto other = drain(*e.submit(prompt, gen(50, 1.0f, 100)));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  // Beside other requests too (the proposals and the RNG are the sequence's own).
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 4; i++) hs.push_back(e.submit(prompt, gen(50, 1.0f, 99 + i % 2)));
  for (int i = 0; i < 4; i++) EXPECT_EQ(drain(*hs[i]), i % 2 == 0 ? a : other) << i;
  EXPECT_EQ(e.leak_report(), "");
}

// Draft models: the saltyduckegg model (trained apart, same vocabulary), the target itself,
// and stories260K as the draft of its own Q8_0 file. Greedy output with speculation is the
// output without it, k = 1..8, alone and with 8 concurrent requests; the target as its own draft
// is accepted everywhere.
struct DraftCase {
  const char* target;
  const char* draft;
};

class DraftSpec : public testing::TestWithParam<DraftCase> {};

TEST_P(DraftSpec, GreedyOutputIsTheSameWithAndWithoutADraftModel) {
  const DraftCase dc = GetParam();
  if (!test::shared_exists(dc.target) || !test::shared_exists(dc.draft)) GTEST_SKIP();
  Loaded target = load(dc.target);
  Loaded draft = load(dc.draft);
  DraftModelProposer::check_vocabularies(*target.tok, *draft.tok);
  const auto prompts = prompts_of(*target.tok);
  const int n_gen = 40;
  std::vector<std::vector<int32_t>> want;
  {
    EngineConfig c;
    c.n_ctx = 256;
    EngineCore e(*target.model, *target.tok, c);
    for (const auto& p : prompts) want.push_back(drain(*e.submit(p, gen(n_gen))));
  }
  const bool same = std::string(dc.target) == dc.draft;
  for (int k = 1; k <= 8; k++) {
    SCOPED_TRACE(testing::Message() << "k " << k);
    EngineConfig c;
    c.n_ctx = 256;
    c.draft_model = draft.model.get();
    c.spec_tokens = k;
    c.spec_cost_model = false;
    c.max_batch_tokens = 64;
    EngineCore e(*target.model, *target.tok, c);
    RequestTimings t;
    EXPECT_EQ(drain(*e.submit(prompts[1], gen(n_gen)), &t), want[1]);
    EXPECT_GT(t.spec_accepted, 0);
    if (same) {
      EXPECT_EQ(t.spec_accepted, t.spec_proposed);  // the target agrees with itself
      EXPECT_GT(t.spec_tokens_per_pass(), std::min(k + 1, 3) - 0.5);
    }
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (const auto& p : prompts) hs.push_back(e.submit(p, gen(n_gen)));
    for (size_t i = 0; i < hs.size(); i++) EXPECT_EQ(drain(*hs[i]), want[i]) << "prompt " << i;
    e.wait_idle();
    EXPECT_EQ(e.leak_report(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, DraftSpec,
    testing::Values(DraftCase{"models/stories260K.gguf", "models/tinystories260K-h192-saltyduckegg.gguf"},
                    DraftCase{"models/stories260K.gguf", "models/stories260K.gguf"},
                    DraftCase{"models/stories260K-q8_0.gguf", "models/stories260K.gguf"}));

TEST(DraftSpecStories, SampledOutputWithADraftIsReproducibleAndLeaksNothing) {
  if (!test::shared_exists("models/tinystories260K-h192-saltyduckegg.gguf")) GTEST_SKIP();
  Loaded target = load("models/stories260K.gguf");
  Loaded draft = load("models/tinystories260K-h192-saltyduckegg.gguf");
  EngineConfig c;
  c.n_ctx = 256;
  c.draft_model = draft.model.get();
  c.spec_tokens = 4;
  c.spec_cost_model = false;
  c.block_size = 4;
  EngineCore e(*target.model, *target.tok, c);
  const auto prompt = target.tok->encode("Once upon a time", true, false);
  RequestTimings t;
  const auto a = drain(*e.submit(prompt, gen(60, 0.9f, 5)), &t);
  EXPECT_GT(t.spec_proposed, 0);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 6; i++) hs.push_back(e.submit(prompt, gen(60, 0.9f, i % 2 == 0 ? 5 : 6)));
  std::vector<std::vector<int32_t>> outs;
  for (auto& h : hs) outs.push_back(drain(*h));
  EXPECT_EQ(outs[0], a);
  EXPECT_EQ(outs[2], a);
  EXPECT_EQ(outs[1], outs[3]);
  EXPECT_NE(outs[1], a);
  EXPECT_EQ(e.leak_report(), "");
}

TEST(DraftSpecStories, AVocabularyMismatchNamesTheFirstDifferingId) {
  if (!test::shared_exists("models/zh-tang-poem-750K.gguf")) GTEST_SKIP();
  Loaded target = load("models/stories260K.gguf");
  Loaded other = load("models/zh-tang-poem-750K.gguf");
  try {
    DraftModelProposer::check_vocabularies(*target.tok, *other.tok);
    FAIL() << "accepted another vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lumen

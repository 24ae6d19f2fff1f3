// The engine end to end over real models: concurrent requests give exactly the tokens each
// gives alone (greedy and seeded sampling; with preemption under a tiny pool; with chunked
// prefill), prefix-cache hits change nothing but the work done, forks (n > 1) equal lone runs
// with the matching seeds, cancellation and refusals are clean, and no KV block leaks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine_core.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

struct Loaded {
  std::shared_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load(const std::string& path) {
  Loaded l;
  l.file = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_batch = 512;
  l.model = Model::load(l.file, opt);
  l.tok = Tokenizer::from_gguf(*l.file);
  return l;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::None;
  RequestTimings timings;
};

// Drains one handle; one Outcome per completion.
std::vector<Outcome> drain(RequestHandle& h) {
  std::vector<Outcome> out(h.n());
  while (auto e = h.next()) {
    Outcome& o = out[e->index];
    if (e->token >= 0) o.tokens.push_back(e->token);
    o.text += e->text;
    if (e->finished) {
      o.reason = e->finish_reason;
      o.timings = e->timings;
      EXPECT_TRUE(e->error.empty()) << e->error;
    }
  }
  return out;
}

const char* kPrompts[] = {"Once upon a time", "The little dog", "Lily wanted to", "One day, a big bird",
                          "Tom and his mom went to the park and", "The sun was", "She was very happy because",
                          "In a small house there lived an old cat who"};

GenerationParams params_for(int i, bool sampled, int max_tokens = 24) {
  GenerationParams p;
  p.sampling.temperature = sampled ? 0.9f : 0.0f;
  p.sampling.seed = 1000 + i;
  p.sampling.max_tokens = max_tokens;
  p.ignore_eos = true;  // every run is max_tokens long: more steps side by side
  return p;
}

class EngineTest : public testing::Test {
 protected:
  // Each prompt alone (one engine, one request at a time), then all together in `config`.
  void expect_concurrent_equals_alone(Loaded& m, const EngineConfig& together, bool sampled,
                                      int64_t* preemptions = nullptr) {
    std::vector<std::vector<int32_t>> prompts;
    for (const char* p : kPrompts) prompts.push_back(m.tok->encode(p, true, false));
    std::vector<Outcome> alone;
    {
      EngineConfig c;
      c.n_ctx = 256;
      c.max_running = 1;
      c.prefix_caching = false;
      EngineCore e(*m.model, *m.tok, c);
      for (size_t i = 0; i < prompts.size(); i++) {
        auto h = e.submit(prompts[i], params_for(static_cast<int>(i), sampled));
        alone.push_back(drain(*h)[0]);
      }
      EXPECT_EQ(e.leak_report(), "");
    }
    EngineCore e(*m.model, *m.tok, together);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (size_t i = 0; i < prompts.size(); i++) hs.push_back(e.submit(prompts[i], params_for(static_cast<int>(i), sampled)));
    for (size_t i = 0; i < prompts.size(); i++) {
      const Outcome o = drain(*hs[i])[0];
      EXPECT_EQ(o.tokens, alone[i].tokens) << "prompt " << i << " (" << kPrompts[i] << ")";
      EXPECT_EQ(o.text, alone[i].text) << "prompt " << i;
      EXPECT_EQ(o.reason, FinishReason::Length);
      EXPECT_EQ(o.tokens.size(), 24u);
    }
    EXPECT_EQ(e.leak_report(), "");
    if (preemptions) *preemptions = e.stats().preemptions;
  }
};

EngineConfig together_config() {
  EngineConfig c;
  c.n_ctx = 256;
  c.max_running = 8;
  c.max_batch_tokens = 64;  // prompts and decodes share steps; long prompts are chunked
  return c;
}

TEST_F(EngineTest, ConcurrentEqualsAloneStories) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  Loaded m = load(test::shared_path("models/stories260K.gguf"));
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    expect_concurrent_equals_alone(m, together_config(), sampled);
  }
}

TEST_F(EngineTest, ConcurrentEqualsAloneWithPreemption) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  Loaded m = load(test::shared_path("models/stories260K.gguf"));
  EngineConfig c = together_config();
  c.block_size = 4;
  // 12 blocks of 4 tokens: one request needs up to 10 (<= 16 prompt + 24 generated tokens).
  c.kv_memory = static_cast<int64_t>(m.model->kv_layout(c.kv_type, c.block_size).block_bytes()) * 12;
  for (bool prefix : {true, false}) {
    c.prefix_caching = prefix;
    int64_t preemptions = 0;
    expect_concurrent_equals_alone(m, c, /*sampled=*/true, &preemptions);
    EXPECT_GT(preemptions, 0) << "the pool was meant to be too small";
  }
}

TEST_F(EngineTest, ConcurrentEqualsAloneQuantized) {
  if (!test::shared_exists("models/quant/small256-Q4_K_M.gguf")) GTEST_SKIP();
  Loaded m = load(test::shared_path("models/quant/small256-Q4_K_M.gguf"));
  EngineConfig c = together_config();
  c.max_batch_tokens = 37;  // odd chunks
  expect_concurrent_equals_alone(m, c, false);
  expect_concurrent_equals_alone(m, c, true);
}

TEST_F(EngineTest, ConcurrentEqualsAloneSyntheticQwen) {
  const std::string rel = "reference/synth-qwen3-0.6b-2l-f32.json";
  if (!test::shared_exists(rel)) GTEST_SKIP();
  const auto ref = nlohmann::json::parse(test::read_file(test::shared_path(rel)));
  std::string why;
  const std::string path = test::synth_model(ref["model"]["file"].get<std::string>(),
                                             "--preset qwen3-0.6b --layers 2 --type f32 --vocab-from " +
                                                 test::shared_path("vocab/ggml-vocab-llama-spm.gguf") + " --seed 0",
                                             ref["model"]["sha256"], &why);
  if (path.empty()) GTEST_SKIP() << why;
  Loaded m = load(path);
  expect_concurrent_equals_alone(m, together_config(), false);
  expect_concurrent_equals_alone(m, together_config(), true);
}

}  // namespace
}  // namespace lumen

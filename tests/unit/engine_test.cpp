// The engine end to end over real models: concurrent requests give exactly the tokens each
// gives alone (greedy and seeded sampling; with preemption under a tiny pool; with chunked
// prefill), prefix-cache hits change nothing but the work done, forks (n > 1) equal lone runs
// with the matching seeds, cancellation and refusals are clean, and no KV block leaks.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "core/error.h"
#include "engine/engine_core.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

// The shared loader (tests/test_support.h): 2 threads, batches of 512.
using Loaded = test::EngineModel;
Loaded load(const std::string& path) { return test::load_engine_model(path); }

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
      c.kv_type_k = together.kv_type_k;  // the same cache types alone as together
      c.kv_type_v = together.kv_type_v;
      EngineCore e(*m.model, *m.tok, c);
      for (size_t i = 0; i < prompts.size(); i++) {
        auto h = e.submit(prompts[i], params_for(static_cast<int>(i), sampled));
        alone.push_back(drain(*h)[0]);
      }
      EXPECT_EQ(e.leak_report(), "");
    }
    EngineCore e(*m.model, *m.tok, together);
    // Queued at once: every run shares its steps with the others (and the preemption tests'
    // pool is short) however this thread is scheduled.
    std::vector<std::pair<std::vector<int32_t>, GenerationParams>> requests;
    for (size_t i = 0; i < prompts.size(); i++) requests.emplace_back(prompts[i], params_for(static_cast<int>(i), sampled));
    const std::vector<std::shared_ptr<RequestHandle>> hs = e.submit_all(std::move(requests));
    for (size_t i = 0; i < prompts.size(); i++) {
      const Outcome o = drain(*hs[i])[0];
      EXPECT_EQ(o.tokens, alone[i].tokens) << "prompt " << i << " (" << kPrompts[i] << ")";
      EXPECT_EQ(o.text, alone[i].text) << "prompt " << i;
      EXPECT_EQ(o.reason, FinishReason::Length);
      EXPECT_EQ(o.tokens.size(), 24u);
    }
    EXPECT_EQ(e.leak_report(), "");
    e.wait_idle();
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
  c.kv_memory = static_cast<int64_t>(m.model->kv_layout(c.kv_type_k, c.kv_type_v, c.block_size).block_bytes()) * 12;
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

// Quantized K/V caches keep the property, K and V of one type or of two: stories260K (head dim
// 8, so a head's slice sits inside a 32-element block) and small256 (head dim 64: whole blocks).
TEST_F(EngineTest, ConcurrentEqualsAloneQuantizedKv) {
  const std::pair<GgmlType, GgmlType> types[] = {
      {GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q4_0, GgmlType::Q4_0}, {GgmlType::Q8_0, GgmlType::Q4_0}};
  for (const char* rel : {"models/stories260K.gguf", "models/quant/small256-Q8_0.gguf"}) {
    if (!test::shared_exists(rel)) continue;
    Loaded m = load(test::shared_path(rel));
    for (const auto& [k, v] : types) {
      SCOPED_TRACE(testing::Message() << rel << " K " << type_name(k) << " V " << type_name(v));
      EngineConfig c = together_config();
      c.kv_type_k = k;
      c.kv_type_v = v;
      expect_concurrent_equals_alone(m, c, false);
      expect_concurrent_equals_alone(m, c, true);
    }
  }
}

// Every synthetic architecture of ../shared/reference, through its synth_gguf.py preset.
TEST_F(EngineTest, ConcurrentEqualsAloneSyntheticFamilies) {
  const std::pair<const char*, const char*> families[] = {
      {"synth-qwen3-0.6b-2l-f32.json", "--preset qwen3-0.6b --layers 2 --type f32"},
      {"synth-phi3-mini-2l-f32.json", "--preset phi3-mini --layers 2 --type f32"},
      {"synth-llama-yarn-2l-f32.json", "--preset llama-yarn --layers 2 --type f32"},
      {"synth-gemma2-2b-2l-f32.json", "--preset gemma2-2b --layers 2 --type f32"},
      {"synth-gemma3-1b-2l-f32.json", "--preset gemma3-1b --layers 2 --type f32"},
      {"synth-qwen3moe-30b-a3b-2l-f32.json", "--preset qwen3moe-30b-a3b --layers 2 --type f32"},
  };
  int ran = 0;
  for (const auto& [json_rel, args] : families) {
    if (!test::shared_exists(std::string("reference/") + json_rel)) continue;
    SCOPED_TRACE(json_rel);
    std::string why;
    const std::string path = test::synth_reference(json_rel, args, &why);
    if (path.empty()) GTEST_SKIP() << why;
    Loaded m = load(path);
    expect_concurrent_equals_alone(m, together_config(), false);
    expect_concurrent_equals_alone(m, together_config(), true);
    ran++;
  }
  if (ran == 0) GTEST_SKIP() << "no synthetic references";
}

class EngineStories : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
    m_ = load(test::shared_path("models/stories260K.gguf"));
  }
  std::vector<int32_t> tokens(const std::string& text) { return m_.tok->encode(text, true, false); }
  Loaded m_;
};

// A request sharing a long prefix with an earlier one reports the cached tokens, skips them and
// produces the same output as without the cache.
TEST_F(EngineStories, PrefixHitSkipsWorkAndChangesNothing) {
  std::string story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. ";
  const std::vector<int32_t> a = tokens(story + "One day she saw a big red ball.");
  const std::vector<int32_t> b = tokens(story + "Her friend Tom came to play with her.");
  EngineConfig c;
  c.n_ctx = 256;
  c.max_batch_tokens = 16;  // several prefill chunks
  Outcome cold;
  {
    EngineConfig off = c;
    off.prefix_caching = false;
    EngineCore e(*m_.model, *m_.tok, off);
    cold = drain(*e.submit(b, params_for(0, true)))[0];
    EXPECT_EQ(cold.timings.cached_prompt_tokens, 0);
  }
  EngineCore e(*m_.model, *m_.tok, c);
  drain(*e.submit(a, params_for(1, true)));
  const Outcome warm = drain(*e.submit(b, params_for(0, true)))[0];
  EXPECT_EQ(warm.tokens, cold.tokens);
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) common++;
  EXPECT_EQ(warm.timings.cached_prompt_tokens, static_cast<int64_t>(common / 16 * 16));
  EXPECT_GE(warm.timings.cached_prompt_tokens, 16);
  e.wait_idle();
  const EngineStats st = e.stats();
  EXPECT_EQ(st.cache.prefix_hit_tokens, warm.timings.cached_prompt_tokens);
  EXPECT_EQ(e.leak_report(), "");
}

// n > 1: the prompt is computed once and shared; completion i equals a lone request seeded
// with seed + i.
TEST_F(EngineStories, ForksEqualLoneRunsWithTheirSeeds) {
  const std::vector<int32_t> prompt = tokens("The little dog ran to the");  // not block-aligned
  EngineConfig c;
  c.n_ctx = 256;
  EngineCore e(*m_.model, *m_.tok, c);
  GenerationParams p = params_for(5, true, 30);
  p.n = 3;
  const std::vector<Outcome> forked = drain(*e.submit(prompt, p));
  e.wait_idle();  // stats are published after each step
  const int64_t computed_forked = e.stats().computed_tokens;
  ASSERT_EQ(forked.size(), 3u);
  for (int i = 0; i < 3; i++) {
    GenerationParams one = params_for(5, true, 30);
    one.sampling.seed += i;
    EngineConfig cold = c;
    cold.prefix_caching = false;
    EngineCore lone(*m_.model, *m_.tok, cold);
    const Outcome o = drain(*lone.submit(prompt, one))[0];
    EXPECT_EQ(forked[i].tokens, o.tokens) << "completion " << i;
    EXPECT_EQ(forked[i].reason, FinishReason::Length);
  }
  // Prompt once, then 29 decode steps for each of the 3 completions.
  EXPECT_EQ(computed_forked, static_cast<int64_t>(prompt.size()) + 3 * 29);
  EXPECT_NE(forked[0].tokens, forked[1].tokens);  // different seeds, different stories
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(EngineStories, CancelInEveryStateFreesEverything) {
  EngineConfig c;
  c.n_ctx = 2048;     // long enough that the first request is still running when cancelled
  c.max_running = 1;  // the second request waits behind the first
  EngineCore e(*m_.model, *m_.tok, c);
  GenerationParams p = params_for(0, false, -1);
  auto running = e.submit(tokens("Once upon a time"), p);
  auto waiting = e.submit(tokens("The sun was"), p);
  auto first = running->next();  // the first token has come: it is running
  ASSERT_TRUE(first.has_value());
  waiting->cancel();
  running->cancel();
  auto last_of = [](RequestHandle& h) {
    StreamEvent last;
    while (auto ev = h.next()) last = *ev;
    return last;
  };
  EXPECT_EQ(last_of(*running).finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(last_of(*waiting).finish_reason, FinishReason::Cancelled);
  running->cancel();  // again, after the end: nothing happens
  EXPECT_EQ(e.leak_report(), "");
  // The engine goes on.
  EXPECT_EQ(drain(*e.submit(tokens("Lily"), params_for(0, false, 5)))[0].tokens.size(), 5u);
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(EngineStories, RefusalsNameTheNumbers) {
  EngineConfig c;
  c.n_ctx = 64;
  c.max_waiting = 2;
  EngineCore e(*m_.model, *m_.tok, c);
  const std::vector<int32_t> long_prompt(64, 300);
  auto message = [&](const std::vector<int32_t>& prompt, const GenerationParams& p) -> std::string {
    try {
      e.submit(prompt, p);
    } catch (const Error& err) {
      return err.what();
    }
    return "";
  };
  EXPECT_NE(message(long_prompt, params_for(0, false)).find("64 tokens"), std::string::npos);
  EXPECT_NE(message(std::vector<int32_t>(50, 300), params_for(0, false, 20)).find("70"), std::string::npos);
  EXPECT_NE(message({}, params_for(0, false)).find("empty"), std::string::npos);
  EXPECT_NE(message({1, 999999}, params_for(0, false)).find("vocabulary"), std::string::npos);
  GenerationParams bad = params_for(0, false);
  bad.sampling.top_p = 2.0f;
  EXPECT_NE(message({1, 2}, bad).find("top_p"), std::string::npos);
  bad = params_for(0, false);
  bad.n = 0;
  EXPECT_NE(message({1, 2}, bad).find("n must be"), std::string::npos);
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(EngineStories, PromptLargerThanThePoolIsRefused) {
  EngineConfig c;
  c.n_ctx = 256;
  c.block_size = 16;
  c.kv_memory = static_cast<int64_t>(m_.model->kv_layout(c.kv_type_k, c.kv_type_v, 16).block_bytes()) * 4;  // 64 tokens
  EngineCore e(*m_.model, *m_.tok, c);
  try {
    e.submit(std::vector<int32_t>(80, 300), params_for(0, false, 4));
    FAIL() << "expected a refusal";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("KV cache holds 64"), std::string::npos) << err.what();
  }
}

TEST_F(EngineStories, RunningOutOfContextEndsWithLength) {
  EngineConfig c;
  c.n_ctx = 40;
  EngineCore e(*m_.model, *m_.tok, c);
  const std::vector<int32_t> prompt = tokens("Once upon a time");
  GenerationParams p = params_for(0, false, -1);
  const Outcome o = drain(*e.submit(prompt, p))[0];
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(static_cast<int64_t>(prompt.size() + o.tokens.size()), 40);
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(EngineStories, QueueFullIsItsOwnError) {
  EngineConfig c;
  c.n_ctx = 256;
  c.max_running = 1;
  c.max_waiting = 2;
  EngineCore e(*m_.model, *m_.tok, c);
  GenerationParams p = params_for(0, false, -1);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  bool refused = false;
  for (int i = 0; i < 20 && !refused; i++) {
    try {
      hs.push_back(e.submit(tokens("Once upon a time"), p));
    } catch (const QueueFullError&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  for (auto& h : hs) h->cancel();
  for (auto& h : hs) drain(*h);
  EXPECT_EQ(e.leak_report(), "");
}

// A submission is counted (running or waiting) from the moment submit() returns, not from the
// engine's next step: a client that saw the queue empty in the counts and then got "queue full"
// (lumen serve's /metrics against --max-queue 1) read counts published before its request.
TEST_F(EngineStories, SubmissionsCountAsWaitingAtOnce) {
  EngineConfig c;
  c.n_ctx = 256;
  c.max_running = 1;
  EngineCore e(*m_.model, *m_.tok, c);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 3; i++) {
    hs.push_back(e.submit(tokens("Once upon a time"), params_for(i, false, 200)));
    const EngineStats st = e.stats();
    EXPECT_EQ(st.running + st.waiting, i + 1) << "after submission " << i;
  }
  for (auto& h : hs) h->cancel();
  for (auto& h : hs) drain(*h);
  e.wait_idle();
  EXPECT_EQ(e.stats().running, 0);
  EXPECT_EQ(e.stats().waiting, 0);
  EXPECT_EQ(e.leak_report(), "");
}

// submit_all queues a batch at once: all of it runs together (the peak KV holding is every
// sequence's), and a batch the queue cannot take is refused whole.
TEST_F(EngineStories, SubmitAllStartsTogetherOrNotAtAll) {
  EngineConfig c;
  c.n_ctx = 64;
  c.block_size = 16;
  c.max_running = 3;
  c.max_waiting = 3;
  c.prefix_caching = false;
  EngineCore e(*m_.model, *m_.tok, c);
  auto batch = [&](int n) {
    std::vector<std::pair<std::vector<int32_t>, GenerationParams>> r;
    for (int i = 0; i < n; i++) r.emplace_back(std::vector<int32_t>(16, 300 + i), params_for(0, false, 8));
    return r;
  };
  EXPECT_THROW(e.submit_all(batch(4)), QueueFullError);
  for (auto& h : e.submit_all(batch(3))) EXPECT_EQ(drain(*h)[0].tokens.size(), 8u);
  e.wait_idle();
  EXPECT_EQ(e.stats().blocks_used_peak, 3 * 2);  // 16 + 7 positions written: two blocks each
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(EngineStories, StopStringsAndEogEndTheText) {
  EngineConfig c;
  c.n_ctx = 256;
  EngineCore e(*m_.model, *m_.tok, c);
  GenerationParams p = params_for(0, false, 200);
  p.ignore_eos = false;
  const Outcome full = drain(*e.submit(tokens("Once upon a time"), p))[0];
  ASSERT_GT(full.text.size(), 20u);
  const std::string stop = full.text.substr(10, 4);
  p.sampling.stop = {stop};
  const Outcome stopped = drain(*e.submit(tokens("Once upon a time"), p))[0];
  EXPECT_EQ(stopped.reason, FinishReason::Stop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(e.leak_report(), "");
}

// An exception while processing one request (here: its sampler finds every token banned) ends
// that request with `error`; the others in the same steps and the engine go on.
TEST_F(EngineStories, AFailingRequestEndsAloneWithError) {
  EngineConfig c;
  c.n_ctx = 256;
  EngineCore e(*m_.model, *m_.tok, c);
  GenerationParams bad = params_for(0, true, 10);
  for (int32_t id = 0; id < m_.model->config().n_vocab; id++) bad.sampling.logit_bias.push_back({id, -INFINITY});
  auto good = e.submit(tokens("Once upon a time"), params_for(1, true, 10));
  auto failing = e.submit(tokens("The dog"), bad);
  StreamEvent last;
  while (auto ev = failing->next()) last = *ev;
  EXPECT_EQ(last.finish_reason, FinishReason::Error);
  EXPECT_NE(last.error.find("banned"), std::string::npos) << last.error;
  const Outcome o = drain(*good)[0];
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(o.tokens.size(), 10u);
  EXPECT_EQ(e.leak_report(), "");
}

}  // namespace
}  // namespace lumen

// Sliding-window attention through the model and the engine, on copies of stories260K that the
// test writes with `llama.attention.sliding_window` (and a per-layer pattern) added: the keys are
// read as llama.cpp reads them; a window at least as long as the sequence changes nothing; a
// window shorter than the prompt changes the logits, and the engine (chunked prefill across the
// window edge, blocks released as they leave the window, prefix hits, concurrent requests)
// gives exactly the tokens of a plain loop over a cache that keeps every position, whose
// attention is the masked reference (tests/unit/attention_test.cpp checks the kernels' window
// against an independent masked softmax); a 4,096-token generation with W = 256 keeps the
// windowed layers at <= W / block size + 2 blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/error.h"
#include "diagnostics/memory_plan.h"
#include "engine/engine_core.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

// stories260K with a window (and a pattern: an integer, or one bool per layer) in memory.
struct Windowed {
  std::vector<uint8_t> bytes;
  std::shared_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

std::unique_ptr<Windowed> windowed(int64_t window, std::optional<int64_t> pattern = std::nullopt,
                                   const std::vector<bool>* layers = nullptr) {
  auto src = GgufFile::open(test::shared_path(kModel));
  GgufWriter w;
  w.copy_metadata_from(*src);
  if (window >= 0) w.set_uint32("llama.attention.sliding_window", static_cast<uint32_t>(window));
  if (pattern) w.set_uint32("llama.attention.sliding_window_pattern", static_cast<uint32_t>(*pattern));
  if (layers) {
    std::vector<GgufValue> items;
    for (bool b : *layers) items.push_back(gguf_bool(b));
    w.add("llama.attention.sliding_window_pattern", gguf_array(GgufType::BOOL, items));
  }
  for (const GgufTensorInfo& t : src->tensors()) w.add_tensor_view(t);
  auto m = std::make_unique<Windowed>();
  m->bytes = w.to_bytes();
  m->file = GgufFile::parse(m->bytes.data(), m->bytes.size(), "windowed-stories260K.gguf");
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_batch = 512;
  m->model = Model::load(m->file, opt);
  m->tok = Tokenizer::from_gguf(*m->file);
  return m;
}

std::vector<int32_t> long_prompt(const Tokenizer& tok, size_t n) {
  std::vector<int32_t> t = tok.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends. One day, she saw a big red ball under a tree and wanted to play with it. Her mom said she could "
      "play, but she had to share with her brother Tom, who was sad because his toy was broken.",
      true, false);
  while (t.size() < n) t.insert(t.end(), t.begin() + 1, t.end());
  t.resize(n);
  return t;
}

// Logits of every position of `tokens` in one batch over a cache that keeps every position.
std::vector<float> prompt_logits(Model& model, const std::vector<int32_t>& tokens) {
  SequenceKv kv(model.kv_layout(), 1, static_cast<int64_t>(tokens.size()));
  Batch b;
  for (size_t i = 0; i < tokens.size(); i++) kv.add(b, tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(model.config().n_vocab));
  model.forward(b, kv.storage(), logits.data());
  return logits;
}

// Greedy tokens by a plain loop: the whole prompt in one batch, then one token per step, over a
// cache that never releases anything.
std::vector<int32_t> greedy_plain(Model& model, const std::vector<int32_t>& prompt, int n_gen) {
  const int64_t n_vocab = model.config().n_vocab;
  SequenceKv kv(model.kv_layout(), 1, static_cast<int64_t>(prompt.size()) + n_gen);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  Batch b;
  for (size_t i = 0; i < prompt.size(); i++) kv.add(b, prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  std::vector<int32_t> out;
  for (int step = 0; step < n_gen; step++) {
    model.forward(b, kv.storage(), logits.data());
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    b.clear();
    kv.add(b, next, static_cast<int32_t>(prompt.size()) + step, 0, true);
  }
  return out;
}

std::vector<int32_t> drain_tokens(RequestHandle& h) {
  std::vector<int32_t> out;
  while (auto e = h.next()) {
    if (e->token >= 0) out.push_back(e->token);
    if (e->finished) {
      EXPECT_TRUE(e->error.empty()) << e->error;
    }
  }
  return out;
}

GenerationParams greedy(int n) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.sampling.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

class SlidingWindow : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists(kModel)) GTEST_SKIP() << "no " << kModel;
  }
};

TEST_F(SlidingWindow, ReadsTheWindowAndThePatternAsLlamaCppDoes) {
  const int64_t n_layer = windowed(-1)->model->config().n_layer;
  ASSERT_GE(n_layer, 3);
  EXPECT_TRUE(windowed(-1)->model->config().layer_window.empty());
  EXPECT_TRUE(windowed(0)->model->config().layer_window.empty());  // 0: no window
  EXPECT_EQ(windowed(32)->model->config().layer_window, std::vector<int32_t>(n_layer, 32));
  // An integer n: layer il is windowed unless il % n == n - 1.
  const auto every_other = windowed(32, 2)->model->config().layer_window;
  for (int64_t il = 0; il < n_layer; il++) EXPECT_EQ(every_other[il], il % 2 == 0 ? 32 : 0) << il;
  std::vector<bool> layers(static_cast<size_t>(n_layer), false);
  layers[1] = true;
  const auto one = windowed(32, std::nullopt, &layers)->model->config().layer_window;
  for (int64_t il = 0; il < n_layer; il++) EXPECT_EQ(one[il], il == 1 ? 32 : 0) << il;
  std::vector<bool> short_list(2, true);
  EXPECT_THROW(windowed(32, std::nullopt, &short_list), Error);
}

TEST_F(SlidingWindow, AWindowAsLongAsTheSequenceChangesNothingAShortOneDoes) {
  const auto plain = windowed(-1);
  const std::vector<int32_t> prompt = long_prompt(*plain->tok, 120);
  const std::vector<float> want = prompt_logits(*plain->model, prompt);
  EXPECT_EQ(prompt_logits(*windowed(120)->model, prompt), want);  // bit for bit
  EXPECT_EQ(prompt_logits(*windowed(500, 2)->model, prompt), want);
  const std::vector<float> short_window = prompt_logits(*windowed(24)->model, prompt);
  const size_t n_vocab = static_cast<size_t>(plain->model->config().n_vocab);
  // Positions inside the first window agree; later ones differ.
  for (size_t i = 0; i < 24 * n_vocab; i++) ASSERT_EQ(short_window[i], want[i]) << "position " << i / n_vocab;
  double diff = 0;
  for (size_t i = 100 * n_vocab; i < 101 * n_vocab; i++) diff = std::max<double>(diff, std::fabs(short_window[i] - want[i]));
  EXPECT_GT(diff, 1e-3);
}

// The engine's tokens equal the plain loop's, for windows shorter than the prompt, with chunked
// prefill crossing the window edge, every layer or every other layer windowed.
TEST_F(SlidingWindow, EngineEqualsAPlainLoopOverAFullCache) {
  for (const std::optional<int64_t> pattern : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    SCOPED_TRACE(pattern ? "every other layer" : "every layer");
    const auto m = windowed(40, pattern);
    const std::vector<int32_t> prompt = long_prompt(*m->tok, 150);
    const std::vector<int32_t> want = greedy_plain(*m->model, prompt, 60);
    for (const int64_t chunk : {int64_t{512}, int64_t{32}, int64_t{7}}) {
      SCOPED_TRACE(chunk);
      EngineConfig c;
      c.n_ctx = 256;
      c.max_running = 4;
      c.block_size = 8;
      c.max_batch_tokens = chunk;
      EngineCore e(*m->model, *m->tok, c);
      EXPECT_EQ(drain_tokens(*e.submit(prompt, greedy(60))), want);
      EXPECT_EQ(e.leak_report(), "");
    }
  }
}

TEST_F(SlidingWindow, ConcurrentRequestsAndPrefixHitsEqualLoneRuns) {
  const auto m = windowed(40, 2);
  const std::vector<int32_t> base = long_prompt(*m->tok, 140);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; i++) {
    std::vector<int32_t> p(base.begin(), base.begin() + 100 + 10 * i);  // shared 100-token prefix
    p.push_back(static_cast<int32_t>(50 + i));
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(greedy_plain(*m->model, p, 30));
  EngineConfig c;
  c.n_ctx = 256;
  c.max_running = 4;
  c.block_size = 8;
  c.max_batch_tokens = 48;
  EngineCore e(*m->model, *m->tok, c);
  // The first request alone fills the prefix cache; then all four together.
  EXPECT_EQ(drain_tokens(*e.submit(prompts[0], greedy(30))), alone[0]);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& p : prompts) hs.push_back(e.submit(p, greedy(30)));
  for (size_t i = 0; i < hs.size(); i++) EXPECT_EQ(drain_tokens(*hs[i]), alone[i]) << "prompt " << i;
  e.wait_idle();
  EXPECT_GT(e.stats().cache.prefix_hit_tokens, 0) << "the shared prefix was meant to hit";
  EXPECT_EQ(e.leak_report(), "");
}

TEST_F(SlidingWindow, ALongGenerationKeepsTheWindowedLayersBounded) {
  const int n_gen = test::sanitized_build() ? 1024 : 4096;
  for (const std::optional<int64_t> pattern : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    SCOPED_TRACE(pattern ? "every other layer" : "every layer");
    const auto m = windowed(256, pattern);
    const std::vector<int32_t> prompt = long_prompt(*m->tok, 40);
    EngineConfig c;
    c.n_ctx = 40 + n_gen + 8;
    c.max_running = 1;
    c.block_size = 16;
    c.max_batch_tokens = 64;
    EngineCore e(*m->model, *m->tok, c);
    EXPECT_EQ(drain_tokens(*e.submit(prompt, greedy(n_gen))).size(), static_cast<size_t>(n_gen));
    e.wait_idle();
    const KvGroups groups = m->model->kv_layout(GgmlType::F16, GgmlType::F16, 16).groups();
    int64_t global = 0, win = 0;
    for (const KvGroup& g : groups.groups) (g.window == 0 ? global : win)++;
    // Global groups hold every position; each windowed group at most W / B + 2 blocks.
    const int64_t bound = global * ((40 + n_gen + 15) / 16) + win * (256 / 16 + 2);
    EXPECT_LE(e.stats().blocks_used_peak, bound);
    if (global == 0) {
      EXPECT_LE(e.stats().blocks_used_peak, 256 / 16 + 2);
    }
    EXPECT_EQ(e.leak_report(), "");
  }
}

// lumen plan counts a windowed layer at its window: its KV bytes per sequence are what the
// engine's pool really holds for a sequence of that length (every layer windowed, and every
// other layer, with the padding of the uneven group).
TEST_F(SlidingWindow, PlanEqualsThePoolsRealUsage) {
  for (const std::optional<int64_t> pattern : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    SCOPED_TRACE(pattern ? "every other layer" : "every layer");
    const auto m = windowed(64, pattern);
    PlanRequest q;
    q.n_ctx = 600;
    q.parallel = 1;
    q.memory_bytes = int64_t{1} << 30;
    const MemoryPlan p = make_memory_plan(*m->file, q);
    EXPECT_EQ(p.chosen.window, 64);
    EXPECT_EQ(p.chosen.windowed_layers, pattern ? (m->model->config().n_layer + 1) / 2 : m->model->config().n_layer);
    EngineConfig c;
    c.n_ctx = 600;
    c.max_running = 1;
    EngineCore e(*m->model, *m->tok, c);
    EXPECT_EQ(drain_tokens(*e.submit({1, 2, 3, 4, 5}, greedy(595))).size(), 595u);
    e.wait_idle();
    const KvLayout layout = m->model->kv_layout(GgmlType::F16, GgmlType::F16, 16);
    EXPECT_EQ(p.chosen.kv_blocks_per_sequence, e.stats().blocks_used_peak);
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence,
                     static_cast<double>(e.stats().blocks_used_peak) * static_cast<double>(layout.block_bytes()));
    // Against the plain formula: a windowed layer holds W / B + 1 blocks of its rows.
    const ModelConfig& cfg = m->model->config();
    const double row = static_cast<double>(layout.row_bytes_k() + layout.row_bytes_v());
    double want = 0;
    for (int64_t il = 0; il < cfg.n_layer; il++) want += row * 16 * (cfg.window(il) > 0 ? 64 / 16 + 1 : (600 + 15) / 16);
    const KvGroups groups = layout.groups();
    const int64_t padded_layers = groups.n_groups() * groups.layers_per_group - cfg.n_layer;
    if (padded_layers == 0) {
      EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence, want);
    } else {
      EXPECT_GT(p.chosen.kv_bytes_per_sequence, want);  // the short group's empty layer slots
    }
    EXPECT_EQ(e.leak_report(), "");
  }
}

}  // namespace
}  // namespace lumen

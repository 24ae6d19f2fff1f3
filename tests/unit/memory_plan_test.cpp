// lumen plan's arithmetic against the formula and against what the engine's KV pool really
// uses for the same model, context and types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>

#include "diagnostics/memory_plan.h"
#include "engine/engine_core.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

const char* kModels[] = {"models/stories260K.gguf", "models/stories260K-q8_0.gguf", "models/quant/small256-Q8_0.gguf"};

TEST(MemoryPlan, MatchesTheFormulaAndThePool) {
  for (const char* rel : kModels) {
    if (!test::shared_exists(rel)) continue;
    SCOPED_TRACE(rel);
    std::shared_ptr<GgufFile> f = GgufFile::open(test::shared_path(rel));
    ModelOptions opt;
    opt.n_threads = 1;
    const auto model = Model::load(f, opt);
    const ModelConfig& c = model->config();
    PlanRequest q;
    q.n_ctx = 200;  // not a multiple of the block size: the pool rounds up
    q.parallel = 3;
    q.memory_bytes = int64_t{1} << 30;
    const MemoryPlan p = make_memory_plan(*f, q);
    // The formula: 2 x n_layer x n_head_kv x head_dim x 2 bytes (F16).
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_token, 2.0 * c.n_layer * c.n_head_kv * c.head_dim_k * 2.0);
    // The pool: one block's K and V bytes over all layers, per token.
    const KvLayout layout = model->kv_layout(GgmlType::F16, GgmlType::F16, 16);
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_token, static_cast<double>(layout.block_bytes()) / 16.0);
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence, 13.0 * static_cast<double>(layout.block_bytes()));  // ceil(200 / 16) blocks
    const double room = static_cast<double>(q.memory_bytes) - p.weights_bytes;
    EXPECT_EQ(p.chosen.sequences_fit, static_cast<int64_t>(std::floor(room / p.chosen.kv_bytes_per_sequence)));
    // Weights: every tensor in the file; a decode step reads what the model says it reads.
    double total = 0;
    for (const auto& t : f->tensors()) total += static_cast<double>(t.n_bytes);
    EXPECT_DOUBLE_EQ(p.weights_bytes, total);
    EXPECT_NEAR(p.weights_read_per_step, static_cast<double>(model->weight_bytes()), total * 0.01);
    // 8-bit and 4-bit blocks: 34 and 18 bytes per 32 elements of each head (a head dim that is
    // not a multiple of 32 pads its last block: stories260K's heads of 8 take a block each).
    const double blocks_per_token = 2.0 * c.n_layer * c.n_head_kv * static_cast<double>((c.head_dim_k + 31) / 32);
    bool saw_q8 = false, saw_q4 = false;
    for (const PlanRow& r : p.alternatives) {
      if (r.k_type == GgmlType::Q8_0 && r.v_type == GgmlType::Q8_0 && r.n_ctx == 200 && r.window == 0) {
        EXPECT_DOUBLE_EQ(r.kv_bytes_per_token, blocks_per_token * 34.0);
        saw_q8 = true;
      }
      if (r.k_type == GgmlType::Q4_0 && r.v_type == GgmlType::Q4_0 && r.n_ctx == 200 && r.window == 0) {
        EXPECT_DOUBLE_EQ(r.kv_bytes_per_token, blocks_per_token * 18.0);
        saw_q4 = true;
      }
    }
    EXPECT_TRUE(saw_q8 && saw_q4);
  }
}

// Rows of a block type whose length is not a multiple of 32 end in a zero-padded block, in the
// plan as in the pool (kv_row_bytes).
TEST(MemoryPlan, PadsBlockRowsAsThePoolDoes) {
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(2, 1, 40, 40, GgmlType::Q8_0, GgmlType::Q4_0), 2.0 * (2 * 34 + 2 * 18));
  KvLayout l;
  l.n_layer = 2;
  l.kv_dim_k = l.kv_dim_v = 40;
  l.k_type = GgmlType::Q8_0;
  l.v_type = GgmlType::Q4_0;
  l.block_size = 16;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(2, 1, 40, 40, GgmlType::Q8_0, GgmlType::Q4_0), static_cast<double>(l.block_bytes()) / 16.0);
}

// The engine's pool, sized for the plan's sequences, holds exactly the plan's blocks for a
// sequence of the plan's context.
TEST(MemoryPlan, EqualsTheEnginesRealUsage) {
  const std::string path = test::shared_path("models/stories260K.gguf");
  std::shared_ptr<GgufFile> f = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = 1;
  const auto model = Model::load(f, opt);
  const auto tok = Tokenizer::from_gguf(*f);
  PlanRequest q;
  q.n_ctx = 100;
  q.parallel = 1;
  q.memory_bytes = int64_t{1} << 30;
  const MemoryPlan p = make_memory_plan(*f, q);
  EngineConfig ec;
  ec.n_ctx = 100;
  ec.max_running = 1;
  EngineCore engine(*model, *tok, ec);
  GenerationParams gp;
  gp.sampling.temperature = 0;
  gp.sampling.max_tokens = 100 - 5;
  gp.ignore_eos = true;
  auto h = engine.submit({1, 2, 3, 4, 5}, gp);
  while (h->next()) {
  }
  engine.wait_idle();
  const EngineStats s = engine.stats();
  // The sequence reached 100 tokens, so it held ceil(100 / 16) = 7 blocks at its peak.
  EXPECT_EQ(s.blocks_used_peak, 7);
  const KvLayout layout = model->kv_layout(GgmlType::F16, GgmlType::F16, 16);
  EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence, static_cast<double>(s.blocks_used_peak) * static_cast<double>(layout.block_bytes()));
}

// A TinyLlama-shape file (2048 wide, 32 query and 4 KV heads of 64; two of its 22 layers, so
// the test stays small): the plan's figures against the formula, for every KV type, and
// against the pool's real usage.
TEST(MemoryPlan, TinyLlamaShapeMatchesTheFormulaAndThePool) {
  std::string why;
  const std::string path = test::synth_model(
      "tinyllama-2l-q8_0.gguf",
      "--preset tinyllama-1.1b --layers 2 --type q8_0 --vocab-from " + test::shared_path("vocab/ggml-vocab-llama-spm.gguf") +
          " --seed 0",
      "c545366c1be71fc91c3c76b3ebc510c95b46634e4b28657ef5aaa61f4dae95fc", &why);
  if (path.empty()) GTEST_SKIP() << why;
  std::shared_ptr<GgufFile> f = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = 2;
  const auto model = Model::load(f, opt);
  const auto tok = Tokenizer::from_gguf(*f);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.n_head_kv * c.head_dim_k, 256);
  for (const auto& [k, v, per_elem] : {std::tuple{GgmlType::F16, GgmlType::F16, 2.0},
                                       std::tuple{GgmlType::Q8_0, GgmlType::Q8_0, 34.0 / 32},
                                       std::tuple{GgmlType::Q8_0, GgmlType::Q4_0, (34.0 + 18.0) / 64},
                                       std::tuple{GgmlType::Q4_0, GgmlType::Q4_0, 18.0 / 32}}) {
    SCOPED_TRACE(testing::Message() << type_name(k) << "/" << type_name(v));
    PlanRequest q;
    q.n_ctx = 40;
    q.parallel = 2;
    q.k_type = k;
    q.v_type = v;
    q.memory_bytes = int64_t{4} << 30;
    const MemoryPlan p = make_memory_plan(*f, q);
    // 2 x n_layer x n_head_kv x head_dim x bytes per element.
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_token, 2.0 * 2 * 4 * 64 * per_elem);
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence, 3 * 16 * p.chosen.kv_bytes_per_token);  // ceil(40 / 16) blocks
    EngineConfig ec;
    ec.n_ctx = 40;
    ec.max_running = 2;
    ec.kv_type_k = k;
    ec.kv_type_v = v;
    EngineCore engine(*model, *tok, ec);
    GenerationParams gp;
    gp.sampling.temperature = 0;
    gp.sampling.max_tokens = 40 - 5;
    gp.ignore_eos = true;
    // Queued together, so both hold their blocks at once however the threads are scheduled.
    std::vector<std::pair<std::vector<int32_t>, GenerationParams>> both;
    both.emplace_back(std::vector<int32_t>{1, 2, 3, 4, 5}, gp);
    both.emplace_back(std::vector<int32_t>{1, 7, 8, 9, 10}, gp);
    const auto hs = engine.submit_all(std::move(both));
    auto a = hs[0], b = hs[1];
    while (a->next()) {
    }
    while (b->next()) {
    }
    engine.wait_idle();
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.blocks_used_peak, 2 * 3);  // two sequences of 40 tokens
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_sequence * 2, static_cast<double>(s.blocks_used_peak * s.kv_bytes_per_block));
    EXPECT_DOUBLE_EQ(p.chosen.kv_bytes_per_token, static_cast<double>(s.kv_bytes_per_token));
    EXPECT_EQ(engine.leak_report(), "");
  }
}

}  // namespace
}  // namespace lumen

namespace lumen {
namespace {

// A mixture of experts: a decode step of one sequence reads the dense weights and k of the E
// experts (what the model says it reads), a step of B sequences the experts B tokens are
// expected to touch, E (1 - (1 - k/E)^B) of them.
TEST(MemoryPlan, MixtureOfExpertsReadsTheChosenExperts) {
  std::string why;
  const std::string path = test::synth_reference("synth-qwen3moe-30b-a3b-2l-f32.json",
                                                 "--preset qwen3moe-30b-a3b --layers 2 --type f32", &why);
  if (path.empty()) GTEST_SKIP() << why;
  std::shared_ptr<GgufFile> f = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = 1;
  const auto model = Model::load(f, opt);
  PlanRequest q;
  q.n_ctx = 256;
  q.memory_bytes = int64_t{1} << 30;
  const MemoryPlan p = make_memory_plan(*f, q);
  EXPECT_EQ(p.n_expert, 16);
  EXPECT_EQ(p.n_expert_used, 4);
  EXPECT_GT(p.expert_bytes, 0.5 * p.weights_bytes - p.dense_read_per_step);
  EXPECT_NEAR(p.weights_read_per_step, static_cast<double>(model->weight_bytes()), p.weights_bytes * 0.01);
  EXPECT_DOUBLE_EQ(p.weights_read_for_batch(1), p.dense_read_per_step + p.expert_bytes * 4 / 16);
  const double touched16 = 16 * (1 - std::pow(1 - 4.0 / 16, 16));
  EXPECT_DOUBLE_EQ(p.weights_read_for_batch(16), p.dense_read_per_step + p.expert_bytes * touched16 / 16);
  EXPECT_LT(p.weights_read_for_batch(16), p.dense_read_per_step + p.expert_bytes);
}

// The plan counts the windows the architecture's model uses, not the file's keys as they stand:
// phi3 ignores its window, gemma2 without a window key has 4096 on every second layer.
TEST(MemoryPlan, CountsTheWindowsTheModelUses) {
  struct Case {
    const char* json;
    const char* args;
    const char* drop_key;  // removed from the file first (nullptr: none)
  };
  const Case cases[] = {
      {"synth-phi3-mini-2l-f32.json", "--preset phi3-mini --layers 2 --type f32", nullptr},
      {"synth-gemma2-2b-2l-f32.json", "--preset gemma2-2b --layers 2 --type f32", nullptr},
      {"synth-gemma2-2b-2l-f32.json", "--preset gemma2-2b --layers 2 --type f32", "gemma2.attention.sliding_window"},
      {"synth-gemma3-1b-2l-f32.json", "--preset gemma3-1b --layers 2 --type f32", nullptr},
  };
  int ran = 0;
  for (const Case& c : cases) {
    std::string why;
    std::string path = test::synth_reference(c.json, c.args, &why);
    if (path.empty()) continue;
    SCOPED_TRACE(std::string(c.json) + (c.drop_key ? std::string(" without ") + c.drop_key : ""));
    const test::TempFile edited("");
    if (c.drop_key) {
      bool removed = false;
      path = test::rewrite_gguf(*GgufFile::open(path), edited.path(),
                                [&](GgufWriter& w) { removed = w.remove(c.drop_key); });
      ASSERT_TRUE(removed);
    }
    std::shared_ptr<GgufFile> f = GgufFile::open(path);
    ModelOptions opt;
    opt.n_threads = 1;
    const auto model = Model::load(f, opt);
    const std::vector<int32_t>& windows = model->config().layer_window;
    PlanRequest q;
    q.n_ctx = 256;
    q.memory_bytes = int64_t{1} << 30;
    const MemoryPlan p = make_memory_plan(*f, q);
    int64_t windowed = 0, widest = 0;
    for (int32_t w : windows) windowed += w > 0, widest = std::max<int64_t>(widest, w);
    EXPECT_EQ(p.chosen.windowed_layers, windowed);
    EXPECT_EQ(p.chosen.window, widest);
    const KvLayout layout = model->kv_layout(GgmlType::F16, GgmlType::F16, 16);
    EXPECT_EQ(layout.layer_window, windows);
    ran++;
  }
  if (ran == 0) GTEST_SKIP() << "no synthetic references";
}

}  // namespace
}  // namespace lumen

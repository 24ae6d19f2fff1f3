// Properties of the forward pass that hold for any model: batching and caching change nothing
// (bit for bit: batch invariance), and bad batches are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/step_profile.h"
#include "diagnostics/step_report.h"
#include "gguf/gguf_file.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "test_support.h"

namespace lumen {
namespace {

class Forward : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "no shared models";
    file_ = GgufFile::open(test::shared_path("models/stories260K.gguf"));
    ModelOptions opt;
    opt.n_threads = 2;
    opt.n_batch = 64;
    model_ = Model::load(file_, opt);
    n_vocab_ = model_->config().n_vocab;
  }
  // Logits of the last token of `tokens`, evaluated alone from an empty cache in one batch.
  std::vector<float> alone(const std::vector<int32_t>& tokens) {
    SequenceKv kv(layout(), 1, 64);
    Batch b;
    for (size_t i = 0; i < tokens.size(); i++) kv.add(b, tokens[i], static_cast<int32_t>(i), 0, i + 1 == tokens.size());
    std::vector<float> logits(n_vocab_);
    model_->forward(b, kv.storage(), logits.data());
    return logits;
  }
  KvLayout layout(GgmlType t = GgmlType::F32) const { return model_->kv_layout(t, t, 16); }
  static bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }
  static double max_diff(const float* a, const float* b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    return m;
  }
  std::shared_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
  int64_t n_vocab_ = 0;
};

TEST_F(Forward, BatchOfSequencesEqualsEachAlone) {
  const std::vector<std::vector<int32_t>> seqs = {{1, 403, 407, 261, 378}, {1, 21}, {1, 300, 301, 302, 303, 304, 305, 306, 307}};
  SequenceKv kv(layout(), 3, 64);
  Batch b;
  // Interleave the sequences' tokens to make sure order within a batch does not matter.
  size_t longest = 0;
  for (auto& s : seqs) longest = std::max(longest, s.size());
  for (size_t i = 0; i < longest; i++)
    for (size_t s = 0; s < seqs.size(); s++)
      if (i < seqs[s].size()) kv.add(b, seqs[s][i], static_cast<int32_t>(i), static_cast<int32_t>(s), i + 1 == seqs[s].size());
  std::vector<float> logits(3 * n_vocab_);
  model_->forward(b, kv.storage(), logits.data());
  // Output rows come in batch order: the shortest sequence finishes first.
  const int order[] = {1, 0, 2};
  for (int r = 0; r < 3; r++) {
    auto ref = alone(seqs[order[r]]);
    EXPECT_TRUE(same_bits(&logits[r * n_vocab_], ref.data(), n_vocab_))
        << "row " << r << " differs by " << max_diff(&logits[r * n_vocab_], ref.data(), n_vocab_);
  }
}

TEST_F(Forward, DecodeWithCacheEqualsRecompute) {
  std::vector<int32_t> toks = {1, 403, 407, 261, 378, 300, 42, 17, 99, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  SequenceKv kv(layout(), 1, 64);
  std::vector<float> logits(n_vocab_);
  Batch b;
  kv.add(b, toks[0], 0, 0, true);
  model_->forward(b, kv.storage(), logits.data());
  for (size_t i = 1; i < toks.size(); i++) {
    b.clear();
    kv.add(b, toks[i], static_cast<int32_t>(i), 0, true);
    model_->forward(b, kv.storage(), logits.data());
    std::vector<int32_t> prefix(toks.begin(), toks.begin() + i + 1);
    EXPECT_TRUE(same_bits(logits.data(), alone(prefix).data(), n_vocab_)) << "position " << i;
  }
}

TEST_F(Forward, RewindOverwritesTheTail) {
  SequenceKv kv(layout(), 1, 64);
  std::vector<float> logits(n_vocab_);
  Batch b;
  for (int i = 0; i < 6; i++) kv.add(b, 100 + i, i, 0, i == 5);
  model_->forward(b, kv.storage(), logits.data());
  b.clear();
  kv.add(b, 7, 3, 0, true);  // back to position 3 with another token
  model_->forward(b, kv.storage(), logits.data());
  EXPECT_EQ(kv.length(0), 4);
  EXPECT_TRUE(same_bits(logits.data(), alone({100, 101, 102, 7}).data(), n_vocab_));
}

// --profile's source: every step of a forward pass once per layer (norm twice), the work each
// must do, and the same logits with the profile on as off.
TEST_F(Forward, ProfileCountsEachStepAndItsWork) {
  const ModelConfig& c = model_->config();
  const std::vector<int32_t> toks = {1, 403, 407, 261, 378};
  const std::vector<float> plain = alone(toks);
  StepProfile prof;
  model_->set_profile(&prof);
  const std::vector<float> profiled = alone(toks);
  model_->set_profile(nullptr);
  EXPECT_TRUE(same_bits(plain.data(), profiled.data(), n_vocab_));
  const auto calls = [&](Step s) { return prof.at(s).calls; };
  EXPECT_EQ(calls(Step::Embed), 1);
  EXPECT_EQ(calls(Step::Norm), 2 * c.n_layer);
  for (Step s : {Step::Qkv, Step::Attention, Step::AttnOutput, Step::FfnGateUp, Step::FfnDown}) {
    EXPECT_EQ(calls(s), c.n_layer) << step_name(s);
    EXPECT_GT(prof.at(s).seconds, 0.0) << step_name(s);
    EXPECT_GT(prof.at(s).flops, 0.0) << step_name(s);
  }
  EXPECT_EQ(calls(Step::Moe), 0);
  EXPECT_EQ(calls(Step::Logits), 1);
  // The matrices' bytes as the file stores them: every layer's (F32 here) plus the output matrix.
  double matrix_bytes = 0;
  for (const GgufTensorInfo& t : file_->tensors())
    if (t.name.find("attn_norm") == std::string::npos && t.name.find("ffn_norm") == std::string::npos &&
        t.name != "output_norm.weight" && t.name != "token_embd.weight")
      matrix_bytes += static_cast<double>(t.n_bytes);
  const double logits_bytes = prof.at(Step::Logits).bytes;
  EXPECT_GT(logits_bytes, 0.0);
  double steps_bytes = logits_bytes;
  for (Step s : {Step::Qkv, Step::AttnOutput, Step::FfnGateUp, Step::FfnDown}) steps_bytes += prof.at(s).bytes;
  const bool tied = file_->find_tensor("output.weight") == nullptr;
  EXPECT_DOUBLE_EQ(steps_bytes, matrix_bytes + (tied ? logits_bytes : 0.0));
  // Q and the two 2 x multiply-adds of Q.K and P.V per head, key and element: 5 tokens attend
  // to 1 + 2 + 3 + 4 + 5 keys; K/V: the 5 positions once, every KV head, F32 rows.
  const double per_layer_flops = 2.0 * c.n_head * (c.head_dim_k + c.head_dim_v) * 15;
  EXPECT_DOUBLE_EQ(prof.at(Step::Attention).flops, per_layer_flops * c.n_layer);
  EXPECT_DOUBLE_EQ(prof.at(Step::Attention).bytes, 5.0 * (c.kv_dim_k() + c.kv_dim_v()) * 4 * c.n_layer);
  // Detached: nothing more is counted.
  const int64_t before = calls(Step::Qkv);
  alone(toks);
  EXPECT_EQ(calls(Step::Qkv), before);
}

TEST(StepReport, RowsPerUnitWithOtherAndTotal) {
  StepProfile p;
  p.add(Step::Qkv, 0.002, 4e6, 8e6);
  p.add(Step::Qkv, 0.002, 4e6, 8e6);
  p.add(Step::Attention, 0.004, 0, 1e9);
  const std::vector<StepRow> rows = step_rows(p, 2.0, 0.010);  // 2 tokens, 10 ms timed
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].step, "qkv");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].ms, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].share, 0.4);
  EXPECT_DOUBLE_EQ(rows[0].bytes, 4e6);
  EXPECT_DOUBLE_EQ(rows[0].gb_s, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].gflop_s, 4.0);
  EXPECT_EQ(rows[1].step, "attention");
  EXPECT_DOUBLE_EQ(rows[1].gb_s, 0.0);
  EXPECT_DOUBLE_EQ(rows[1].gflop_s, 250.0);
  EXPECT_EQ(rows[2].step, "other");
  EXPECT_NEAR(rows[2].ms, 1.0, 1e-12);
  EXPECT_NEAR(rows[2].share, 0.2, 1e-12);
  EXPECT_EQ(rows[3].step, "total");
  EXPECT_DOUBLE_EQ(rows[3].ms, 5.0);
  EXPECT_DOUBLE_EQ(rows[3].bytes, 4e6);
  // Steps timed past the test's own clock (nanoseconds apart): "other" is 0, never negative.
  const std::vector<StepRow> over = step_rows(p, 1.0, 0.0079);
  EXPECT_DOUBLE_EQ(over[2].ms, 0.0);
  EXPECT_NEAR(over[3].ms, 8.0, 1e-12);
  const std::string md = step_rows_md("profile   tg2", rows);
  EXPECT_NE(md.find("| qkv | 2.000 | 40.0% | 4.00 | 2.0 | 4.0 |"), std::string::npos) << md;
  EXPECT_EQ(step_rows_json(rows)[1]["step"], "attention");
}

TEST_F(Forward, F16CacheIsClose) {
  std::vector<int32_t> toks = {1, 403, 407, 261, 378, 300};
  SequenceKv kv(layout(GgmlType::F16), 1, 16);
  Batch b;
  for (size_t i = 0; i < toks.size(); i++) kv.add(b, toks[i], static_cast<int32_t>(i), 0, i + 1 == toks.size());
  std::vector<float> logits(n_vocab_);
  model_->forward(b, kv.storage(), logits.data());
  EXPECT_LT(max_diff(logits.data(), alone(toks).data(), n_vocab_), 0.05);
}

// Prefill split into chunks of any size gives every token the same bits as one batch.
TEST_F(Forward, ChunkedPrefillEqualsOneBatch) {
  std::vector<int32_t> toks;
  for (int i = 0; i < 50; i++) toks.push_back(1 + (i * 37) % 500);
  SequenceKv whole(layout(), 1, 64);
  Batch b;
  for (size_t i = 0; i < toks.size(); i++) whole.add(b, toks[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> all(toks.size() * n_vocab_), part(toks.size() * n_vocab_);
  model_->forward(b, whole.storage(), all.data());
  for (int chunk : {1, 7, 16, 33}) {
    SequenceKv kv(layout(), 1, 64);
    for (size_t first = 0; first < toks.size(); first += chunk) {
      b.clear();
      const size_t end = std::min(toks.size(), first + chunk);
      for (size_t i = first; i < end; i++) kv.add(b, toks[i], static_cast<int32_t>(i), 0, true);
      model_->forward(b, kv.storage(), &part[first * n_vocab_]);
    }
    EXPECT_TRUE(same_bits(all.data(), part.data(), static_cast<int64_t>(all.size()))) << "chunks of " << chunk;
  }
}

TEST_F(Forward, ContextOverflowIsAClearError) {
  SequenceKv kv(layout(), 1, 4);
  Batch b;
  for (int i = 0; i < 4; i++) kv.add(b, 1, i, 0, false);
  try {
    kv.add(b, 1, 4, 0, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context length"), std::string::npos) << e.what();
  }
}

TEST_F(Forward, BadBatchesAreErrors) {
  SequenceKv kv(layout(), 1, 16);
  std::vector<float> logits(n_vocab_);
  Batch b;
  kv.add(b, 1, 0, 0, true);
  b.tokens[0] = 99999;
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // token outside vocab
  b.tokens[0] = 1;
  b.seq[0] = 3;
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // no such sequence
  b.seq[0] = 0;
  b.n_groups = 2;
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // tables of other KV groups
  b.n_groups = 1;
  b.positions[0] = 1;
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // position past n_kv
  b.positions[0] = 0;
  const BlockId bad_table[] = {7};
  b.tables[0] = bad_table;
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // block outside the cache
  b.clear();
  EXPECT_THROW(model_->forward(b, kv.storage(), logits.data()), Error);  // empty
  EXPECT_THROW(kv.add(b, 1, 5, 0, true), Error);                          // gap
  b.clear();
  SequenceKv big(layout(), 1, 128);
  for (int i = 0; i < 65; i++) big.add(b, 1, i, 0, false);
  EXPECT_THROW(model_->forward(b, big.storage(), logits.data()), Error);  // over n_batch
}

TEST(ModelLoad, UnknownArchitectureAndMissingTensorAreClear) {
  if (!test::shared_exists("vocab/ggml-vocab-qwen2.gguf")) GTEST_SKIP();
  // A vocabulary-only file has an architecture but no tensors.
  std::shared_ptr<const GgufFile> f = GgufFile::open(test::shared_path("vocab/ggml-vocab-qwen2.gguf"));
  try {
    Model::load(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token_embd.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lumen

namespace lumen {
namespace {

// Batch invariance for every weight format: a sequence's logits are bitwise the same alone
// (prefill in one batch, then decode) and inside batches mixing other sequences' prefill and
// decode tokens, in any position of the batch (the matmul paths for 1, 2-4 and many tokens and
// the attention tiles must all accumulate each output in the same order).
class ForwardFormats : public testing::TestWithParam<const char*> {};

TEST_P(ForwardFormats, SequenceLogitsDoNotDependOnTheBatch) {
  const std::string rel = std::string("models/quant/small256-") + GetParam() + ".gguf";
  if (!test::shared_exists(rel)) GTEST_SKIP() << "no " << rel;
  std::shared_ptr<const GgufFile> file = GgufFile::open(test::shared_path(rel));
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_batch = 128;
  auto model = Model::load(file, opt);
  const int64_t n_vocab = model->config().n_vocab;
  const KvLayout layout = model->kv_layout(GgmlType::F16, GgmlType::F16, 16);
  auto toks = [](int s, int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; i++) v.push_back(1 + (s * 131 + i * 37) % 250);
    return v;
  };
  constexpr int kSeqs = 6, kPrompt = 21, kDecode = 6;
  // Alone: logits after the prompt and after each decoded (fixed) token.
  std::vector<std::vector<float>> alone(kSeqs);
  for (int s = 0; s < kSeqs; s++) {
    SequenceKv kv(layout, 1, 64);
    Batch b;
    const auto t = toks(s, kPrompt + kDecode);
    std::vector<float> logits(n_vocab);
    for (int i = 0; i < kPrompt; i++) kv.add(b, t[i], i, 0, i == kPrompt - 1);
    model->forward(b, kv.storage(), logits.data());
    alone[s].insert(alone[s].end(), logits.begin(), logits.end());
    for (int i = kPrompt; i < kPrompt + kDecode; i++) {
      b.clear();
      kv.add(b, t[i], i, 0, true);
      model->forward(b, kv.storage(), logits.data());
      alone[s].insert(alone[s].end(), logits.begin(), logits.end());
    }
  }
  // Together: sequence s starts s steps late, so prompts (in chunks of 7) run beside decodes;
  // the batch order rotates every step.
  SequenceKv kv(layout, kSeqs, 64);
  std::vector<int> next(kSeqs, 0);
  std::vector<std::vector<float>> together(kSeqs);
  std::vector<float> logits(kSeqs * n_vocab);
  for (int step = 0; step < 40; step++) {
    Batch b;
    std::vector<int> rows;  // which sequence each logits row belongs to
    for (int k = 0; k < kSeqs; k++) {
      const int s = (k + step) % kSeqs;
      if (step < s || next[s] >= kPrompt + kDecode) continue;
      const auto t = toks(s, kPrompt + kDecode);
      const int end = next[s] < kPrompt ? std::min(kPrompt, next[s] + 7) : next[s] + 1;
      for (int i = next[s]; i < end; i++) kv.add(b, t[i], i, s, i == end - 1 && end >= kPrompt);
      if (end >= kPrompt) rows.push_back(s);
      next[s] = end;
    }
    if (b.size() == 0) break;
    model->forward(b, kv.storage(), logits.data());
    for (size_t r = 0; r < rows.size(); r++)
      together[rows[r]].insert(together[rows[r]].end(), &logits[r * n_vocab], &logits[(r + 1) * n_vocab]);
  }
  for (int s = 0; s < kSeqs; s++) {
    ASSERT_EQ(together[s].size(), alone[s].size()) << "sequence " << s;
    EXPECT_EQ(std::memcmp(together[s].data(), alone[s].data(), alone[s].size() * sizeof(float)), 0)
        << GetParam() << ": sequence " << s << " differs in a batch";
  }
}

INSTANTIATE_TEST_SUITE_P(Quant, ForwardFormats,
                         testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K",
                                         "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_K_M-mix"));

}  // namespace
}  // namespace lumen

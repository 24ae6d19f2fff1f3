// Properties of the forward pass that hold for any model: batching and caching change nothing,
// and bad batches are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "kv/kv_cache.h"
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
    auto kv = model_->make_kv_cache(1, 64);
    Batch b;
    for (size_t i = 0; i < tokens.size(); i++) b.add(tokens[i], static_cast<int32_t>(i), 0, i + 1 == tokens.size());
    std::vector<float> logits(n_vocab_);
    model_->forward(b, *kv, logits.data());
    return logits;
  }
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
  auto kv = model_->make_kv_cache(3, 64);
  Batch b;
  // Interleave the sequences' tokens to make sure order within a batch does not matter.
  size_t longest = 0;
  for (auto& s : seqs) longest = std::max(longest, s.size());
  for (size_t i = 0; i < longest; i++)
    for (size_t s = 0; s < seqs.size(); s++)
      if (i < seqs[s].size()) b.add(seqs[s][i], static_cast<int32_t>(i), static_cast<int32_t>(s), i + 1 == seqs[s].size());
  std::vector<float> logits(3 * n_vocab_);
  model_->forward(b, *kv, logits.data());
  // Output rows come in batch order: the shortest sequence finishes first.
  const int order[] = {1, 0, 2};
  for (int r = 0; r < 3; r++) {
    auto ref = alone(seqs[order[r]]);
    EXPECT_LT(max_diff(&logits[r * n_vocab_], ref.data(), n_vocab_), 1e-5) << "row " << r;
  }
}

TEST_F(Forward, DecodeWithCacheEqualsRecompute) {
  std::vector<int32_t> toks = {1, 403, 407, 261, 378, 300, 42, 17};
  auto kv = model_->make_kv_cache(1, 64);
  std::vector<float> logits(n_vocab_);
  Batch b;
  b.add(toks[0], 0, 0, true);
  model_->forward(b, *kv, logits.data());
  for (size_t i = 1; i < toks.size(); i++) {
    b.clear();
    b.add(toks[i], static_cast<int32_t>(i), 0, true);
    model_->forward(b, *kv, logits.data());
    std::vector<int32_t> prefix(toks.begin(), toks.begin() + i + 1);
    EXPECT_LT(max_diff(logits.data(), alone(prefix).data(), n_vocab_), 1e-5) << "position " << i;
  }
}

TEST_F(Forward, RewindOverwritesTheTail) {
  auto kv = model_->make_kv_cache(1, 64);
  std::vector<float> logits(n_vocab_);
  Batch b;
  for (int i = 0; i < 6; i++) b.add(100 + i, i, 0, i == 5);
  model_->forward(b, *kv, logits.data());
  b.clear();
  b.add(7, 3, 0, true);  // back to position 3 with another token
  model_->forward(b, *kv, logits.data());
  EXPECT_EQ(kv->seq_length(0), 4);
  EXPECT_LT(max_diff(logits.data(), alone({100, 101, 102, 7}).data(), n_vocab_), 1e-5);
}

TEST_F(Forward, F16CacheIsClose) {
  std::vector<int32_t> toks = {1, 403, 407, 261, 378, 300};
  auto kv = model_->make_kv_cache(1, 16, GgmlType::F16);
  Batch b;
  for (size_t i = 0; i < toks.size(); i++) b.add(toks[i], static_cast<int32_t>(i), 0, i + 1 == toks.size());
  std::vector<float> logits(n_vocab_);
  model_->forward(b, *kv, logits.data());
  EXPECT_LT(max_diff(logits.data(), alone(toks).data(), n_vocab_), 0.05);
}

TEST_F(Forward, ContextOverflowIsAClearError) {
  auto kv = model_->make_kv_cache(1, 4);
  std::vector<float> logits(n_vocab_);
  Batch b;
  for (int i = 0; i < 4; i++) b.add(1, i, 0, false);
  model_->forward(b, *kv, logits.data());
  b.clear();
  b.add(1, 4, 0, true);
  try {
    model_->forward(b, *kv, logits.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context length"), std::string::npos) << e.what();
  }
}

TEST_F(Forward, BadBatchesAreErrors) {
  auto kv = model_->make_kv_cache(1, 16);
  std::vector<float> logits(n_vocab_);
  Batch b;
  b.add(99999, 0, 0, true);
  EXPECT_THROW(model_->forward(b, *kv, logits.data()), Error);  // token outside vocab
  b.clear();
  b.add(1, 5, 0, true);
  EXPECT_THROW(model_->forward(b, *kv, logits.data()), Error);  // gap
  b.clear();
  b.add(1, 0, 3, true);
  EXPECT_THROW(model_->forward(b, *kv, logits.data()), Error);  // no such sequence slot
  b.clear();
  EXPECT_THROW(model_->forward(b, *kv, logits.data()), Error);  // empty
  b.clear();
  for (int i = 0; i < 65; i++) b.add(1, i, 0, false);
  EXPECT_THROW(model_->forward(b, *kv, logits.data()), Error);  // over n_batch
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

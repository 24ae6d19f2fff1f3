// `lumen quantize` driven as a user would, on the tiny stories260K model (rows of 64 and 172:
// the block-size fallbacks all show up). The quality against llama-quantize is checked in
// tests/golden/quantize_quality_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "gguf/gguf_file.h"
#include "test_support.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

class QuantizeCli : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "no shared models";
    src_ = test::shared_path("models/stories260K.gguf");
    dir_ = fs::temp_directory_path() / ("lumen_quantize_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string out(const std::string& name) const { return (dir_ / name).string(); }
  bool dir_is_empty() const { return fs::is_empty(dir_); }
  std::string src_;
  fs::path dir_;
};

GgmlType type_of(const GgufFile& f, const char* name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? t->type : GgmlType::I8;
}

TEST_F(QuantizeCli, Q8_0MatchesTheSharedQ8_0FileByteForByte) {
  const std::string o = out("q8.gguf");
  auto r = test::run_cli("quantize '" + src_ + "' '" + o + "' q8_0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(o + ".tmp"));
  auto q = GgufFile::open(o);
  auto in = GgufFile::open(src_);
  ASSERT_EQ(q->tensors().size(), in->tensors().size());
  EXPECT_EQ(q->get_int("general.file_type"), 7);
  EXPECT_EQ(q->get_int("general.quantization_version"), 2);
  // Every other metadata entry is copied.
  for (const auto& [key, value] : in->metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version") continue;
    const GgufValue* v = q->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->to_string(1000), value.to_string(1000)) << key;
  }
  // Rows of 64: Q8_0; ffn_down's rows of 172 fit no 32-block: stay F32 (said on stderr).
  EXPECT_EQ(type_of(*q, "blk.0.attn_q.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of(*q, "output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of(*q, "blk.0.ffn_down.weight"), GgmlType::F32);
  EXPECT_EQ(type_of(*q, "blk.0.attn_norm.weight"), GgmlType::F32);
  EXPECT_NE(r.err.find("blk.0.ffn_down.weight: row length 172"), std::string::npos) << r.err;
  // Progress: one line per tensor, with its index, name and types.
  EXPECT_NE(r.err.find("[ 1/48] token_embd.weight"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("F32 -> Q8_0"), std::string::npos) << r.err;

  if (!test::shared_exists("models/stories260K-q8_0.gguf")) return;
  auto ref = GgufFile::open(test::shared_path("models/stories260K-q8_0.gguf"));
  for (const GgufTensorInfo& t : ref->tensors()) {
    const GgufTensorInfo* mine = q->find_tensor(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_EQ(mine->type, t.type) << t.name;
    ASSERT_EQ(mine->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(mine->data, t.data, t.n_bytes), 0) << t.name;
  }
}

TEST_F(QuantizeCli, Q4_K_MMixFallsBackWhereRowsAreShort) {
  const std::string o = out("mix.gguf");
  auto r = test::run_cli("quantize '" + src_ + "' '" + o + "' Q4_K_M -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto q = GgufFile::open(o);
  EXPECT_EQ(q->get_int("general.file_type"), 15);
  // Rows of 64 fit no 256-block: Q4_K -> Q5_0 and Q6_K -> Q8_0, as llama.cpp falls back.
  EXPECT_EQ(type_of(*q, "blk.0.attn_q.weight"), GgmlType::Q5_0);
  EXPECT_EQ(type_of(*q, "token_embd.weight"), GgmlType::Q5_0);
  EXPECT_EQ(type_of(*q, "output.weight"), GgmlType::Q8_0);
  // 5 layers: use_more_bits is true for layers 2 and 4.
  EXPECT_EQ(type_of(*q, "blk.0.attn_v.weight"), GgmlType::Q5_0);
  EXPECT_EQ(type_of(*q, "blk.2.attn_v.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of(*q, "blk.4.attn_v.weight"), GgmlType::Q8_0);
  EXPECT_EQ(type_of(*q, "blk.3.ffn_down.weight"), GgmlType::F32);
  EXPECT_NE(r.err.find("blk.0.attn_q.weight: row length 64 is not a multiple of Q4_K's block of 256: written as Q5_0"),
            std::string::npos)
      << r.err;
  auto run = test::run_cli("run -m '" + o + "' -t 1 -p 'Once upon a time' -n 4");
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST_F(QuantizeCli, RequantizesQuantizedInput) {
  if (!test::shared_exists("models/stories260K-q8_0.gguf")) GTEST_SKIP();
  const std::string o = out("q4.gguf");
  auto r = test::run_cli("quantize '" + test::shared_path("models/stories260K-q8_0.gguf") + "' '" + o + "' Q4_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("requantizing"), std::string::npos) << r.err;
  auto q = GgufFile::open(o);
  EXPECT_EQ(type_of(*q, "blk.0.attn_q.weight"), GgmlType::Q4_0);
  EXPECT_EQ(type_of(*q, "blk.0.ffn_down.weight"), GgmlType::F32);
  auto run = test::run_cli("run -m '" + o + "' -t 1 -p 'Once' -n 4");
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST_F(QuantizeCli, UnknownTypeListsTheValidOnes) {
  const std::string o = out("x.gguf");
  auto r = test::run_cli("quantize '" + src_ + "' '" + o + "' Q3_XL");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown quantization type 'Q3_XL'"), std::string::npos) << r.err;
  for (const char* t : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"})
    EXPECT_NE(r.err.find(t), std::string::npos) << t;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(dir_is_empty());
}

TEST_F(QuantizeCli, UnreadableInputIsAnErrorAndWritesNothing) {
  const std::string o = out("x.gguf");
  auto r = test::run_cli("quantize /nonexistent/in.gguf '" + o + "' Q8_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/in.gguf"), std::string::npos) << r.err;
  // Not a GGUF file at all.
  const std::string junk = out("junk.gguf");
  FILE* f = std::fopen(junk.c_str(), "wb");
  std::fputs("this is not a gguf file", f);
  std::fclose(f);
  r = test::run_cli("quantize '" + junk + "' '" + o + "' Q8_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("junk.gguf"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(o));
  EXPECT_FALSE(fs::exists(o + ".tmp"));
}

TEST_F(QuantizeCli, UnwritableOutputIsAnErrorAndLeavesNothing) {
  auto r = test::run_cli("quantize '" + src_ + "' /nonexistent/dir/out.gguf Q8_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/dir/out.gguf"), std::string::npos) << r.err;
  // A directory in the way.
  const std::string d = out("a_dir");
  fs::create_directories(d);
  r = test::run_cli("quantize '" + src_ + "' '" + d + "' Q8_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d + ".tmp"));
  if (geteuid() != 0) {  // root writes anywhere
    const std::string ro = out("ro");
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    r = test::run_cli("quantize '" + src_ + "' '" + ro + "/out.gguf' Q8_0");
    EXPECT_NE(r.exit_code, 0);
    fs::permissions(ro, fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(ro));
  }
}

TEST_F(QuantizeCli, MissingArgumentsAreAUsageError) {
  auto r = test::run_cli("quantize '" + src_ + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(dir_is_empty());
}

}  // namespace
}  // namespace lumen

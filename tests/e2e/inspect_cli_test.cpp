// `lumen inspect`: figures right on real models (checked by hand for stories260K and against the
// reference JSON for the rest), JSON that parses whatever bytes the metadata holds, and refused
// files reported as exactly one line on stderr naming the file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string tpl = (fs::temp_directory_path() / "lumen_inspect_XXXXXX").string();
    if (mkdtemp(tpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Non-const json throughout: a missing key reads as null and fails a comparison, where the
// const operator[] would assert.
json inspect_json(const std::string& path, const std::string& extra = "") {
  const test::CommandResult r = test::run_cli("inspect --json " + extra + quote(path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    // Thrown on: gtest reports it as this test's failure and moves on.
    throw std::runtime_error("not JSON (" + std::string(e.what()) + "): " + r.out.substr(0, 500));
  }
}

// Exit non-zero, nothing on stdout, exactly one line on stderr that names `path`.
void expect_refused(const std::string& args, const std::string& path, const std::string& reason) {
  const test::CommandResult r = test::run_cli(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n') << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
}

#define REQUIRE_SHARED(rel) \
  if (!test::shared_exists(rel)) GTEST_SKIP() << "shared file missing: " << (rel)

TEST(InspectCli, Stories260KFigures) {
  REQUIRE_SHARED("models/stories260K.gguf");
  const std::string path = test::shared_path("models/stories260K.gguf");
  json j = inspect_json(path);
  EXPECT_EQ(j["file"], path);
  EXPECT_EQ(j["gguf_version"], 3);
  EXPECT_EQ(j["file_bytes"], 1185376);
  EXPECT_EQ(j["alignment"], 32);
  EXPECT_EQ(j["architecture"], "llama");
  json& h = j["hparams"];
  EXPECT_EQ(h["block_count"], 5);
  EXPECT_EQ(h["head_count"], 8);
  EXPECT_EQ(h["head_count_kv"], 4);
  EXPECT_EQ(h["embedding_length"], 64);  // head_dim 64 / 8 = 8
  EXPECT_EQ(h["feed_forward_length"], 172);
  EXPECT_EQ(h["context_length"], 2048);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 512);
  EXPECT_EQ(j["n_tensors"], 48);
  EXPECT_EQ(j["n_params"], 292800);
  EXPECT_EQ(j["tensor_types"], json::parse(R"({"F32": {"count": 48, "bytes": 1171200}})"));
  EXPECT_EQ(j["tensor_bytes"], 1171200);
  json& kv = j["kv_cache"];
  EXPECT_EQ(kv["elements_per_token"], 2 * 5 * 4 * 8);
  EXPECT_EQ(kv["f16_bytes_per_token"], 640.0);  // K and V, 5 layers, 4 KV heads of 8, 2 bytes
  EXPECT_EQ(kv["q8_bytes_per_token"], 1360.0);  // 2 x 5 x 4 head slices of 8, each a (padded) 34-byte block
  EXPECT_EQ(kv["context_length"], 2048);
  EXPECT_EQ(kv["f16_bytes_full_context"], 640.0 * 2048);
  EXPECT_FALSE(j.contains("metadata"));
}

TEST(InspectCli, Stories260KText) {
  REQUIRE_SHARED("models/stories260K.gguf");
  const std::string path = test::shared_path("models/stories260K.gguf");
  const test::CommandResult r = test::run_cli("inspect " + quote(path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* want : {"GGUF v3", "architecture:  llama", "block_count            5", "head_count_kv          4",
                           "512 tokens", "48 tensors", "F16 640 B per token", "1.25 MiB for 2048 tokens"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.out;
}

TEST(InspectCli, AllListsEveryKeyAndTensor) {
  REQUIRE_SHARED("models/stories260K-q8_0.gguf");
  const std::string path = test::shared_path("models/stories260K-q8_0.gguf");
  json j = inspect_json(path, "--all ");
  ASSERT_TRUE(j.contains("metadata"));
  EXPECT_EQ(j["metadata"]["general.architecture"], "\"llama\"");
  EXPECT_EQ(j["metadata"]["llama.block_count"], "5");
  ASSERT_EQ(j["tensors"].size(), 48u);
  int q8 = 0;
  for (json& t : j["tensors"]) {
    if (t["type"] == "Q8_0") q8++;
    if (t["name"] == "token_embd.weight") {
      EXPECT_EQ(t["shape"], json::parse("[64, 512]"));
      EXPECT_EQ(t["type"], "Q8_0");
      EXPECT_EQ(t["bytes"], 512 * 2 * 34);
    }
  }
  EXPECT_EQ(q8, 32);
  const test::CommandResult r = test::run_cli("inspect --all " + quote(path));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find("tokenizer.ggml.tokens = [512 x string]"), std::string::npos);
}

// Against llama.cpp's reading of each model (reference/<stem>.json).
TEST(InspectCli, FiguresMatchReferences) {
  const std::pair<const char*, const char*> models[] = {
      {"models/stories260K-q8_0.gguf", "reference/stories260K-q8_0.json"},
      {"models/llama-2-tiny-random.gguf", "reference/llama-2-tiny-random.json"},
      {"models/zh-tang-poem-750K.gguf", "reference/zh-tang-poem-750K.json"},
      {"models/tinystories260K-h192-saltyduckegg.gguf", "reference/tinystories260K-h192-saltyduckegg.json"},
      {"models/quant/small256-Q4_K_M-mix.gguf", "reference/quant-models/small256-Q4_K_M-mix.json"},
      {"models/quant/small256-BF16.gguf", "reference/quant-models/small256-BF16.json"}};
  for (const auto& [rel, ref_rel] : models) {
    SCOPED_TRACE(rel);
    REQUIRE_SHARED(rel);
    json ref = json::parse(test::read_file(test::shared_path(ref_rel)))["model"];
    json j = inspect_json(test::shared_path(rel));
    EXPECT_EQ(j["file_bytes"], ref["size_bytes"]);
    EXPECT_EQ(j["architecture"], ref["architecture"]);
    json& rh = ref["hparams"];
    for (const char* k : {"context_length", "embedding_length", "block_count", "feed_forward_length", "head_count", "head_count_kv"})
      EXPECT_EQ(j["hparams"][k], rh[k]) << k;
    const int64_t elems = 2 * rh["block_count"].get<int64_t>() * rh["head_count_kv"].get<int64_t>() * rh["head_dim"].get<int64_t>();
    EXPECT_EQ(j["kv_cache"]["elements_per_token"], elems);
    EXPECT_EQ(j["kv_cache"]["f16_bytes_per_token"], 2.0 * elems);
    EXPECT_EQ(j["tokenizer"]["vocab_size"], ref["tokenizer"]["n_vocab"]);
    int64_t n_tensors = 0;
    for (const auto& [type, n] : ref["tensor_type_counts"].items()) {
      EXPECT_EQ(j["tensor_types"][type]["count"], n) << type;
      n_tensors += n.get<int64_t>();
    }
    EXPECT_EQ(j["tensor_types"].size(), ref["tensor_type_counts"].size());
    EXPECT_EQ(j["n_tensors"], n_tensors);
    EXPECT_LE(j["tensor_bytes"].get<uint64_t>(), j["file_bytes"].get<uint64_t>());
  }
}

TEST(InspectCli, LegacyVersion1AndVocabularyFiles) {
  REQUIRE_SHARED("models/legacy/tinyllamas-stories-260k-f32.gguf");
  json v1 = inspect_json(test::shared_path("models/legacy/tinyllamas-stories-260k-f32.gguf"));
  EXPECT_EQ(v1["gguf_version"], 1);
  EXPECT_EQ(v1["kv_cache"]["f16_bytes_per_token"], 640.0);
  EXPECT_EQ(v1["n_tensors"], 48);
  REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  json vocab = inspect_json(test::shared_path("vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(vocab["n_tensors"], 0);
  EXPECT_EQ(vocab["tokenizer"]["model"], "gpt2");
  EXPECT_EQ(vocab["tokenizer"]["pre"], "gpt-2");
  EXPECT_GT(vocab["tokenizer"]["vocab_size"].get<int64_t>(), 50000);
}

TEST(InspectCli, RefusedFileIsOneLineNamingIt) {
  REQUIRE_SHARED("models/legacy/tinyllamas-stories-260k-q8_0.gguf");
  const std::string path = test::shared_path("models/legacy/tinyllamas-stories-260k-q8_0.gguf");
  expect_refused("inspect " + quote(path), path, "row length 172");
  expect_refused("inspect --json " + quote(path), path, "block size 32");
}

TEST(InspectCli, MissingOrNonRegularFile) {
  TempDir dir;
  const std::string missing = dir.file("no-such-model.gguf");
  expect_refused("inspect " + quote(missing), missing, "cannot open");
  expect_refused("inspect --json " + quote(missing), missing, "cannot open");
  const std::string sub = dir.file("a-directory.gguf");
  fs::create_directory(sub);
  expect_refused("inspect " + quote(sub), sub, "not a regular file");
}

TEST(InspectCli, CraftedBadFiles) {
  TempDir dir;
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = dir.file(name);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  };
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("t", GgmlType::F32, {8}, std::vector<uint8_t>(32));
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes.pop_back();  // one byte short of the end of the tensor data
  const std::string cut = write("cut.gguf", bytes);
  expect_refused("inspect " + quote(cut), cut, "past the end");
  const std::string empty = write("empty.gguf", {});
  expect_refused("inspect " + quote(empty), empty, "not a GGUF file");
  // A key holding a newline still makes a one-line message.
  GgufWriter dup;
  dup.set_uint32("bad\nkey", 1);
  std::vector<uint8_t> d = dup.to_bytes();
  d[16] = 2;  // the metadata count: the one entry now appears twice
  const std::vector<uint8_t> entry(d.begin() + 24, d.end());
  d.insert(d.end(), entry.begin(), entry.end());
  const std::string dup_path = write("dup.gguf", d);
  expect_refused("inspect " + quote(dup_path), dup_path, "duplicate metadata key 'bad\\x0akey'");
}

// Metadata is bytes, not necessarily UTF-8; inspect --json must still print valid JSON.
TEST(InspectCli, NonUtf8MetadataStillGivesJson) {
  TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "bad \xff\xfe name");
  // 119 ASCII bytes and a 3-byte character: the 120-byte abbreviation cuts the character.
  w.set_string("general.description", std::string(119, 'a') + "\xe6\x98\xa5");
  w.set_strings("tokenizer.ggml.tokens", {"\xff", "ok"});
  const std::string path = dir.file("bytes.gguf");
  w.write(path);
  for (const char* flags : {"", "--all "}) {
    json j = inspect_json(path, flags);
    EXPECT_EQ(j["architecture"], "llama");
    EXPECT_EQ(j["tokenizer"]["vocab_size"], 2);
  }
  const test::CommandResult text = test::run_cli("inspect --all " + quote(path));
  EXPECT_EQ(text.exit_code, 0) << text.err;
}

// Hyper-parameters are untrusted numbers: absurd ones give no KV estimate, not overflow.
TEST(InspectCli, AbsurdHyperParameters) {
  TempDir dir;
  for (int64_t layers : {std::numeric_limits<int64_t>::max(), int64_t{-5}, int64_t{1} << 40}) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_int64("llama.block_count", layers);
    w.set_int64("llama.attention.head_count", int64_t{1} << 40);
    w.set_int64("llama.embedding_length", int64_t{1} << 50);
    w.set_int64("llama.context_length", 1 << 20);
    const std::string path = dir.file("absurd.gguf");
    w.write(path);
    json j = inspect_json(path);
    EXPECT_EQ(j["kv_cache"]["elements_per_token"], 0) << layers;
    const test::CommandResult text = test::run_cli("inspect " + quote(path));
    EXPECT_EQ(text.exit_code, 0) << text.err;
  }
}

}  // namespace
}  // namespace lumen

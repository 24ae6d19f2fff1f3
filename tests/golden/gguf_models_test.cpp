// Every GGUF file in the shared data (models/, models/quant/, vocab/) loads, and what the reader
// makes of it matches llama.cpp's view recorded in ../shared/reference: architecture,
// hyper-parameters, tensor types, scalar metadata and tokenizer ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ModelCase {
  std::string rel;        // relative to the shared folder
  std::string reference;  // reference JSON relative to the shared folder, "" when none
};

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> cases;
  const std::pair<const char*, const char*> folders[] = {
      {"models", "reference"}, {"models/quant", "reference/quant-models"}, {"vocab", nullptr}};
  for (const auto& [folder, ref_folder] : folders) {
    const fs::path dir = test::shared_path(folder);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".gguf") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      ModelCase c;
      c.rel = std::string(folder) + "/" + name;
      if (ref_folder) {
        const std::string ref = std::string(ref_folder) + "/" + fs::path(name).stem().string() + ".json";
        if (test::shared_exists(ref)) c.reference = ref;
      }
      cases.push_back(c);
    }
  }
  return cases;
}

std::string case_name(const testing::TestParamInfo<ModelCase>& info) {
  std::string s = info.param.rel.substr(0, info.param.rel.size() - 5);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::vector<ModelCase> referenced_cases() {
  std::vector<ModelCase> cases = model_cases();
  cases.erase(std::remove_if(cases.begin(), cases.end(), [](const ModelCase& c) { return c.reference.empty(); }),
              cases.end());
  return cases;
}

class GgufModels : public testing::TestWithParam<ModelCase> {};
class GgufModelsReference : public testing::TestWithParam<ModelCase> {};

TEST_P(GgufModels, LoadsAndFitsInTheFile) {
  const ModelCase& c = GetParam();
  const std::string path = test::shared_path(c.rel);
  std::unique_ptr<GgufFile> f;
  ASSERT_NO_THROW(f = GgufFile::open(path));
  EXPECT_GE(f->version(), 2u);
  EXPECT_EQ(f->file_size(), fs::file_size(path));
  EXPECT_TRUE(f->get_string("general.architecture").has_value());
  uint64_t tensor_bytes = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    tensor_bytes += t.n_bytes;
    EXPECT_EQ(t.offset % f->alignment(), 0u) << t.name;
    EXPECT_EQ(t.n_bytes, row_size(t.type, t.ne[0]) * static_cast<size_t>(t.n_rows())) << t.name;
  }
  if (!f->tensors().empty()) {
    EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
    EXPECT_LE(f->data_offset() + tensor_bytes, f->file_size());
  }
  // Every vocabulary file and every model carries its tokenizer.
  const auto* tokens = f->get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_GT(tokens->size(), 0u);
  EXPECT_TRUE(f->get_string("tokenizer.ggml.model").has_value());
}

// What llama.cpp derives (see the reference README, `model.hparams`), derived here from the file.
void check_hparam(const GgufFile& f, const std::string& arch, const std::string& name, const json& want) {
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  const int64_t n_head = f.require_int(key("attention.head_count"));
  const int64_t head_dim = f.get_int(key("attention.key_length"))
                               .value_or(f.require_int(key("embedding_length")) / n_head);
  static const std::map<std::string, std::string> kHparamKeys = {
      {"context_length", "context_length"},
      {"embedding_length", "embedding_length"},
      {"block_count", "block_count"},
      {"feed_forward_length", "feed_forward_length"},
      {"head_count", "attention.head_count"}};
  if (auto it = kHparamKeys.find(name); it != kHparamKeys.end()) {
    EXPECT_EQ(f.require_int(key(it->second.c_str())), want.get<int64_t>()) << name;
  } else if (name == "head_count_kv") {
    EXPECT_EQ(f.get_int(key("attention.head_count_kv")).value_or(n_head), want.get<int64_t>());
  } else if (name == "head_dim") {
    EXPECT_EQ(head_dim, want.get<int64_t>());
  } else if (name == "rope_dimension_count") {
    EXPECT_EQ(f.get_int(key("rope.dimension_count")).value_or(head_dim), want.get<int64_t>());
  } else if (name == "rope_freq_base") {
    EXPECT_EQ(f.get_float(key("rope.freq_base")).value_or(10000.0), want.get<double>());
  } else if (name == "rope_freq_base_source") {
    const bool in_file = f.find(key("rope.freq_base")) != nullptr;
    EXPECT_EQ(in_file, want.get<std::string>() == "metadata") << want;
  } else if (name == "layer_norm_rms_epsilon") {
    EXPECT_EQ(f.get_float(key("attention.layer_norm_rms_epsilon")).value_or(-1.0), want.get<double>());
  } else if (name == "tied_embeddings") {
    EXPECT_EQ(f.find_tensor("output.weight") == nullptr, want.get<bool>());
  } else if (name == "qkv_bias") {
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias") != nullptr, want.get<bool>());
  } else if (name == "qk_norm") {
    EXPECT_EQ(f.find_tensor("blk.0.attn_q_norm.weight") != nullptr, want.get<bool>());
  } else if (name == "rope_type") {
    static const std::map<std::string, std::string> kRope = {{"llama", "NORM"}, {"qwen2", "NEOX"}, {"qwen3", "NEOX"}};
    ASSERT_TRUE(kRope.count(arch)) << "no rope type known for " << arch;
    EXPECT_EQ(want.get<std::string>().rfind(kRope.at(arch), 0), 0u) << want;
  } else {
    ADD_FAILURE() << "reference hparam '" << name << "' is not checked by this test";
  }
}

// A scalar metadata value recorded by the reference equals the file's.
void check_metadata(const GgufFile& f, const std::string& key, const json& want) {
  const GgufValue* v = f.find(key);
  ASSERT_NE(v, nullptr) << key;
  if (want.is_string()) {
    EXPECT_EQ(v->as_string(key), want.get<std::string>()) << key;
  } else if (want.is_boolean()) {
    EXPECT_EQ(v->as_bool(key), want.get<bool>()) << key;
  } else if (want.is_number_float()) {
    ASSERT_TRUE(v->is_float()) << key;
    EXPECT_EQ(v->real, want.get<double>()) << key;
  } else if (want.is_number_unsigned()) {
    ASSERT_TRUE(v->is_integer()) << key;
    EXPECT_EQ(v->bits, want.get<uint64_t>()) << key;
  } else if (want.is_number_integer()) {
    EXPECT_EQ(v->as_int(key), want.get<int64_t>()) << key;
  } else {
    ADD_FAILURE() << key << ": unexpected reference value " << want;
  }
}

TEST_P(GgufModelsReference, Matches) {
  const ModelCase& c = GetParam();
  const json ref = json::parse(test::read_file(test::shared_path(c.reference)));
  const json& model = ref.at("model");
  auto f = GgufFile::open(test::shared_path(c.rel));
  EXPECT_EQ(model.at("path_in_shared").get<std::string>(), c.rel);
  EXPECT_EQ(f->file_size(), model.at("size_bytes").get<uint64_t>());
  const std::string arch(f->require_string("general.architecture"));
  EXPECT_EQ(arch, model.at("architecture").get<std::string>());

  for (const auto& [name, want] : model.at("hparams").items()) check_hparam(*f, arch, name, want);

  std::map<std::string, int64_t> counts;
  for (const GgufTensorInfo& t : f->tensors()) counts[std::string(type_name(t.type))]++;
  std::map<std::string, int64_t> want_counts;
  for (const auto& [type, n] : model.at("tensor_type_counts").items()) want_counts[type] = n.get<int64_t>();
  EXPECT_EQ(counts, want_counts);

  for (const auto& [key, want] : model.at("gguf_metadata").items()) check_metadata(*f, key, want);

  const json& tok = model.at("tokenizer");
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->size(), tok.at("n_vocab").get<size_t>());
  for (const char* id : {"bos_token_id", "eos_token_id", "unknown_token_id"}) {
    if (tok.contains(id) && !tok.at(id).is_null()) {
      EXPECT_EQ(f->get_int(std::string("tokenizer.ggml.") + id), tok.at(id).get<int64_t>()) << id;
    }
  }
  if (tok.contains("add_bos_token_source")) {
    const bool absent = tok.at("add_bos_token_source").get<std::string>().find("absent") != std::string::npos;
    EXPECT_EQ(f->find("tokenizer.ggml.add_bos_token") == nullptr, absent);
    if (!absent) {
      EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), tok.at("add_bos_token").get<bool>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, GgufModels, testing::ValuesIn(model_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Shared, GgufModelsReference, testing::ValuesIn(referenced_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GgufModels);  // shared data absent
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GgufModelsReference);

// The references cover every model file (a new model without one should get one).
TEST(GgufModelsCoverage, EveryModelHasAReference) {
  const auto cases = model_cases();
  if (cases.empty()) GTEST_SKIP() << "no shared data at " << test::shared_dir();
  int n_models = 0;
  for (const ModelCase& c : cases) {
    if (c.rel.rfind("vocab/", 0) == 0) continue;
    n_models++;
    EXPECT_FALSE(c.reference.empty()) << c.rel;
  }
  EXPECT_GE(n_models, 19);  // 5 in models/, 14 in models/quant/
}

}  // namespace
}  // namespace lumen

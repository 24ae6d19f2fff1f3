// The JSON-Schema suite end to end: every schema of tests/data/json_schemas, 20 seeds at
// temperature 1 (6 on the big vocabulary), through the engine on stories260K and on a synthetic model with Qwen's 152k
// byte-level vocabulary. Every output must parse and validate against its schema by the
// independent validator (tests/unit/json_schema_validator.h), whatever the finish reason: a run
// that reaches its token budget is closed by its grammar's shortest completion.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "json_schema_validator.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

std::vector<std::filesystem::path> schema_files() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/tests/")) + "/tests/data/json_schemas";
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name.ends_with(".json")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void run_suite(test::EngineModel& m, int n_seeds, int schema_stride, int max_tokens, size_t max_schemas = 1000) {
  auto files = schema_files();
  ASSERT_GE(files.size(), 40u);
  if (files.size() > max_schemas) files.resize(max_schemas);
  EngineConfig c;
  c.n_ctx = 512;
  c.max_running = n_seeds;
  c.max_batch_tokens = 256;
  EngineCore e(*m.model, *m.tok, c);
  const std::vector<int32_t> prompt = m.tok->encode("Once upon a time, the answer was", true, false);
  int checked = 0;
  for (size_t f = 0; f < files.size(); f += static_cast<size_t>(schema_stride)) {
    const auto schema = nlohmann::ordered_json::parse(test::read_file(files[f].string()));
    const auto grammar = compile_grammar(json_schema_to_grammar(schema));
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (int s = 0; s < n_seeds; s++) {
      GenerationParams p;
      p.sampling.temperature = 1.0f;
      p.sampling.seed = 1000 + static_cast<uint64_t>(s);
      p.sampling.max_tokens = max_tokens;
      p.sampling.grammar = grammar;
      hs.push_back(e.submit(prompt, p));
    }
    for (int s = 0; s < n_seeds; s++) {
      const auto out = test::drain_completions(*hs[static_cast<size_t>(s)])[0];
      const std::string where = files[f].filename().string() + " seed " + std::to_string(s);
      ASSERT_TRUE(out.error.empty()) << where << ": " << out.error;
      nlohmann::ordered_json doc;
      try {
        doc = nlohmann::ordered_json::parse(out.text);
      } catch (const std::exception& ex) {
        ADD_FAILURE() << where << " (" << finish_reason_name(out.reason) << "): not JSON: " << out.text;
        continue;
      }
      std::string why;
      EXPECT_TRUE(test::validate_json(doc, schema, &why)) << where << ": " << why << "\n" << out.text;
      checked++;
    }
  }
  EXPECT_EQ(e.leak_report(), "");
  std::printf("validated %d outputs\n", checked);
}

TEST(JsonSchemaGeneration, Stories260K) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  test::EngineModel m = test::load_engine_model(test::shared_path("models/stories260K.gguf"));
  const bool small = test::sanitized_build();
  run_suite(m, small ? 5 : 20, 1, 200);
}

TEST(JsonSchemaGeneration, SyntheticQwenVocabulary) {
  std::string why;
  const std::string path =
      test::synth_model("synth-qwen2.5-1l-q8_0-qwen2vocab.gguf",
                        "--preset qwen2.5-0.5b --layers 1 --type q8_0 --vocab-from " +
                            test::shared_path("vocab/ggml-vocab-qwen2.gguf") + " --seed 0",
                        "333962f95791a7b262e196991f38113345c1223b28213b11f5ad199a0a3a9c95", &why);
  if (path.empty()) GTEST_SKIP() << why;
  test::EngineModel m = test::load_engine_model(path);
  const bool small = test::sanitized_build();
  // 40 of the schemas, 6 seeds each: each step's 152k-wide output layer and masks make this
  // the slow half (20 seeds took 11 minutes of CI's 2 cores; the 152k vocabulary's byte-level
  // tokens are what this adds to the stories260K run, and 6 seeds already cover them).
  run_suite(m, small ? 3 : 6, small ? 8 : 1, 300, 40);
}

}  // namespace
}  // namespace lumen

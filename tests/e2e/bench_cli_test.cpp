// `lumen bench` driven as a user would, on the tiny stories260K model. Never asserts a speed:
// only that every figure is there, positive and consistent. The roofline ceilings come from a
// cache file the test writes first (in its own $XDG_CACHE_HOME), so no 1 GiB measurement runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/roofline.h"
#include "test_support.h"

namespace lumen {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class BenchCli : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "no shared models";
    dir_ = fs::temp_directory_path() / ("lumen_bench_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
    RooflineMeasurement m;
    m.cpu_brand = cpu_features().brand;
    m.isa = active_isa();
    m.n_threads = 1;
    m.dram_read_gbps = 50.0;
    m.fp32_gflops = 200.0;
    m.int8_gops = m.isa == Isa::Avx512 ? 800.0 : 0.0;
    write_roofline_cache(roofline_cache_path(), m);
    m.n_threads = 2;  // for -t 1,2: told apart by their bandwidth
    m.dram_read_gbps = 90.0;
    write_roofline_cache(roofline_cache_path(), m);
    model_path_ = "-m " + test::shared_path("models/stories260K.gguf");
    model_ = model_path_ + " -t 1";
  }
  void TearDown() override {
    unsetenv("XDG_CACHE_HOME");
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  std::string model_path_;
  std::string model_;
};

// `-o json` (or --json): an array, one object per test with llama-bench's fields.
TEST_F(BenchCli, JsonHasEveryFigure) {
  auto r = test::run_cli("bench " + model_ + " -p 32 -n 8 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out);
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 2u);
  const json& pp = rows[0];
  const json& tg = rows[1];
  EXPECT_EQ(pp["test"], "pp32");
  EXPECT_EQ(tg["test"], "tg8");
  for (const json& j : rows) {
    EXPECT_NE(j["model_filename"].get<std::string>().find("stories260K.gguf"), std::string::npos);
    EXPECT_EQ(j["model_type"].get<std::string>().rfind("llama ", 0), 0u) << j["model_type"];
    EXPECT_GT(j["model_size"].get<uint64_t>(), 0u);
    EXPECT_GT(j["model_n_params"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["backends"], "CPU");
    EXPECT_EQ(j["n_threads"], 1);
    EXPECT_EQ(j["n_depth"], 0);
    EXPECT_EQ(j["reps"], 1);
    EXPECT_EQ(j["isa"], isa_name(active_isa()));
    EXPECT_EQ(j["type_k"], "f16");  // the default, as llama-bench (and its spelling)
    EXPECT_EQ(j["type_v"], "f16");
    EXPECT_EQ(j["kv_type"], "F16");
    EXPECT_EQ(j["type_mix"]["F32"]["tensors"].get<int>(), 48);  // stories260K: all F32
    EXPECT_DOUBLE_EQ(j["ceilings"]["dram_read_gb_s"].get<double>(), 50.0);
    EXPECT_TRUE(j["ceilings"]["from_cache"].get<bool>());
    ASSERT_EQ(j["samples_ts"].size(), 1u);
    ASSERT_EQ(j["samples_ns"].size(), 1u);
    EXPECT_GT(j["avg_ts"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(j["avg_ts"].get<double>(), j["samples_ts"][0].get<double>());
    EXPECT_EQ(j["stddev_ts"].get<double>(), 0.0);  // one repetition
    EXPECT_EQ(j["avg_ns"], j["samples_ns"][0]);
    EXPECT_EQ(j["test_time"].get<std::string>().size(), 20u);  // 2026-12-03T10:00:00Z
  }
  EXPECT_EQ(pp["n_prompt"], 32);
  EXPECT_EQ(pp["n_gen"], 0);
  EXPECT_EQ(tg["n_prompt"], 0);
  EXPECT_EQ(tg["n_gen"], 8);
  EXPECT_EQ(pp["compute_kind"], "fp32");  // F32 weights
  EXPECT_GE(pp["ttft_ms"].get<double>(), pp["prefill_ms"].get<double>());
  EXPECT_NEAR(pp["samples_ns"][0].get<double>() / 1e6, pp["prefill_ms"].get<double>(), 1e-3);
  EXPECT_LE(tg["itl_ms_p50"].get<double>(), tg["itl_ms_p99"].get<double>());
  EXPECT_EQ(tg["bound"], "bandwidth");
  EXPECT_EQ(tg["ceiling"], "DRAM");
  EXPECT_NEAR(tg["roofline_frac"].get<double>(), tg["gb_s"].get<double>() / 50.0, 1e-9);
  EXPECT_DOUBLE_EQ(tg["mean_ctx"].get<double>(), 9 / 2.0);  // decode from an empty context
  EXPECT_EQ(tg["verdict"].get<std::string>().rfind("decode: ", 0), 0u);
  EXPECT_EQ(pp["verdict"].get<std::string>().rfind("prefill: ", 0), 0u);
}

// --remeasure: the roofline measured now (and cached); each decode test's DRAM bandwidth also
// measured right before and after it, its share of the roofline of the larger of the two.
TEST_F(BenchCli, RemeasureGivesEachDecodeTestItsOwnBandwidth) {
  auto r = test::run_cli("bench " + model_ + " -p 8 -n 4 -r 1 --remeasure --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  const json& pp = rows[0];
  const json& tg = rows[1];
  const auto cached = read_roofline_cache(roofline_cache_path(), cpu_features().brand, 1, active_isa());
  ASSERT_TRUE(cached.has_value());
  EXPECT_NE(cached->dram_read_gbps, 50.0);  // measured, not the cache the test wrote
  EXPECT_DOUBLE_EQ(pp["ceilings"]["dram_read_gb_s"].get<double>(), cached->dram_read_gbps);
  EXPECT_FALSE(pp["ceilings"]["from_cache"].get<bool>());
  EXPECT_FALSE(pp.contains("dram_read_gb_s_around"));
  ASSERT_TRUE(tg.contains("dram_read_gb_s_around"));
  const double before = tg["dram_read_gb_s_around"][0].get<double>(), after = tg["dram_read_gb_s_around"][1].get<double>();
  EXPECT_GT(before, 0.0);
  EXPECT_GT(after, 0.0);
  EXPECT_DOUBLE_EQ(tg["ceilings"]["dram_read_gb_s"].get<double>(), std::max(before, after));
  EXPECT_NEAR(tg["roofline_frac"].get<double>(), tg["gb_s"].get<double>() / std::max(before, after), 1e-9);
  EXPECT_NE(r.err.find("DRAM read"), std::string::npos) << r.err;
}

TEST_F(BenchCli, MeanStddevAndMedianOverRepetitions) {
  auto r = test::run_cli("bench " + model_ + " -p 16 -n 4 -r 3 -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    n++;
    ASSERT_EQ(j["per_rep"].size(), 3u);
    std::vector<double> v;
    for (const auto& x : j["samples_ts"]) v.push_back(x.get<double>());
    ASSERT_EQ(v.size(), 3u);
    const double mean = (v[0] + v[1] + v[2]) / 3;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    EXPECT_NEAR(j["avg_ts"].get<double>(), mean, 1e-9 * mean);
    EXPECT_NEAR(j["stddev_ts"].get<double>(), std::sqrt(ss / 2), 1e-9 * mean);
    std::sort(v.begin(), v.end());
    EXPECT_DOUBLE_EQ(j["median_ts"].get<double>(), v[1]);
  }
  EXPECT_EQ(n, 2);
}

TEST_F(BenchCli, MarkdownTableAndPlot) {
  const std::string svg = (dir_ / "roofline.svg").string();
  auto r = test::run_cli("bench " + model_ + " -p 32 -n 8 -r 2 --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"| model | size | params | backend | threads | test | t/s |", "| pp32 |", "| tg8 |", " ± ",
                        "TTFT", "ITL", "verdict   pp32 -t 1", "decode: ", "prefill: ", "GB/s", "GFLOP/s",
                        "machine   -t 1: DRAM read 50.0 GB/s", "| CPU | 1 |"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " missing from:\n" << r.out;
  ASSERT_TRUE(fs::exists(svg));
  EXPECT_FALSE(fs::exists(svg + ".tmp"));
  const std::string text = test::read_file(svg);
  EXPECT_EQ(text.rfind("<?xml", 0), 0u);
  EXPECT_NE(text.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  EXPECT_NE(text.find("DRAM read 50.0 GB/s"), std::string::npos);
  EXPECT_NE(text.find("stories260K.gguf"), std::string::npos);
  EXPECT_NE(text.find("1 threads"), std::string::npos);
  // A real XML parser, where python3 is around (it is wherever synth_gguf.py runs).
  const std::string cmd = "python3 -c 'import sys, xml.dom.minidom; "
                          "d = xml.dom.minidom.parse(sys.argv[1]); "
                          "sys.exit(0 if d.documentElement.tagName == \"svg\" else 1)' '" + svg + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (!(WIFEXITED(rc) && WEXITSTATUS(rc) == 127)) {
    EXPECT_EQ(rc, 0) << "not parseable XML: " << svg;
  }
}

// llama-bench's lists: a pp test per -p and a tg test per -n, for each -d and -t, in that order.
TEST_F(BenchCli, ListsOfPromptsGensDepthsAndThreads) {
  auto r = test::run_cli("bench " + model_path_ + " -t 1,2 -p 8,16 -n 4 -d 0,8 -r 1 -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<json> rows;
  while (std::getline(lines, line)) rows.push_back(json::parse(line));
  const std::vector<std::string> tests = {"pp8", "pp16", "tg4", "pp8 @ d8", "pp16 @ d8", "tg4 @ d8"};
  ASSERT_EQ(rows.size(), 2 * tests.size());
  for (size_t i = 0; i < rows.size(); i++) {
    const json& j = rows[i];
    EXPECT_EQ(j["test"], tests[i % tests.size()]);
    EXPECT_EQ(j["n_threads"], i < tests.size() ? 1 : 2);
    EXPECT_DOUBLE_EQ(j["ceilings"]["dram_read_gb_s"].get<double>(), i < tests.size() ? 50.0 : 90.0);
    EXPECT_GT(j["avg_ts"].get<double>(), 0.0);
    const int64_t d = j["n_depth"].get<int64_t>();
    EXPECT_EQ(d, i % tests.size() < 3 ? 0 : 8);
    if (j["n_gen"] == 4) {
      EXPECT_DOUBLE_EQ(j["mean_ctx"].get<double>(), d + 5 / 2.0);
    }
  }
  // The markdown table names the depth as llama-bench does; CSV has a header and a line per test.
  r = test::run_cli("bench " + model_ + " -p 8 -n 0 -d 8 -r 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| pp8 @ d8 |"), std::string::npos) << r.out;
  r = test::run_cli("bench " + model_ + " -p 8 -n 4 -r 1 -o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream csv(r.out);
  std::vector<std::string> csv_lines;
  while (std::getline(csv, line)) csv_lines.push_back(line);
  ASSERT_EQ(csv_lines.size(), 3u) << r.out;
  EXPECT_EQ(csv_lines[0].rfind("cpu_info,backends,model_filename,model_type,model_size,model_n_params,n_batch,n_threads,"
                               "type_k,type_v,n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts,",
                               0),
            0u)
      << csv_lines[0];
  EXPECT_NE(csv_lines[1].find(",pp8,"), std::string::npos) << csv_lines[1];
  EXPECT_NE(csv_lines[2].find(",tg4,"), std::string::npos) << csv_lines[2];
}

TEST_F(BenchCli, DecodeCanBeSkipped) {
  auto r = test::run_cli("bench " + model_ + " -p 8 -n 0 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["test"], "pp8");
  EXPECT_GT(j[0]["avg_ts"].get<double>(), 0.0);
}

TEST_F(BenchCli, KvTypeOption) {
  auto r = test::run_cli("bench " + model_ + " -p 8 -n 2 -r 1 --kv-type f32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["kv_type"], "F32");
  EXPECT_EQ(json::parse(r.out)[0]["type_k"], "f32");
  r = test::run_cli("bench " + model_ + " -p 8 -n 2 -r 1 --kv-type q8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q4_0"), std::string::npos) << r.err;  // the choices are listed
  EXPECT_EQ(r.out, "");
  // K and V apart (any case); a specific flag wins over --kv-type.
  r = test::run_cli("bench " + model_ + " -p 8 -n 2 -d 4 -r 1 --kv-type-k q8_0 --kv-type-v Q4_0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out)[1];
  EXPECT_EQ(j["kv_type"], "Q8_0/Q4_0");
  EXPECT_EQ(j["type_k"], "q8_0");
  EXPECT_EQ(j["type_v"], "q4_0");
  // stories260K: 5 layers x 4 KV heads of 8: each head's slice is one (padded) 34-byte K block
  // and one 18-byte V block; tg2 after 4 tokens reads 4 + 3/2 positions on average.
  EXPECT_DOUBLE_EQ(j["mean_ctx"].get<double>(), 4 + 3 / 2.0);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"].get<double>(), 5 * 4 * (34 + 18) * j["mean_ctx"].get<double>());
  r = test::run_cli("bench " + model_ + " -p 8 -n 2 -r 1 --kv-type bf16 --kv-type-v q8_0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out)[0];
  EXPECT_EQ(j["type_k"], "bf16");
  EXPECT_EQ(j["type_v"], "q8_0");
  r = test::run_cli("bench " + model_ + " -p 8 -n 2 -r 1 --kv-type-v q5_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type-v 'q5_0'"), std::string::npos) << r.err;
}

TEST_F(BenchCli, BatchJsonOneObjectPerSize) {
  auto r = test::run_cli("bench " + model_ + " --batch 1,3 -p 16 -n 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<json> objs;
  while (std::getline(lines, line))
    if (!line.empty()) objs.push_back(json::parse(line));
  ASSERT_EQ(objs.size(), 2u) << r.out;
  for (size_t i = 0; i < 2; i++) {
    EXPECT_EQ(objs[i]["batch"], i == 0 ? 1 : 3);
    for (const char* k : {"decode_tok_s", "itl_ms_p50", "itl_ms_p99", "kv_blocks_used", "kv_unused_slot_frac", "verdict"})
      EXPECT_TRUE(objs[i].contains(k)) << k;
    EXPECT_GT(objs[i]["decode_tok_s"].get<double>(), 0.0);
    EXPECT_EQ(objs[i]["kv_blocks_used"], (i == 0 ? 1 : 3) * 2);  // 24 tokens in blocks of 16
    // stories260K: 2 (K, V) x 5 layers x 4 KV heads x 8 x 2 bytes (F16).
    EXPECT_EQ(objs[i]["kv_bytes_per_token"], 640);
    EXPECT_EQ(objs[i]["kv_type"], "F16");
    EXPECT_EQ(objs[i]["kv_memory_peak_bytes"], objs[i]["kv_blocks_used"].get<int64_t>() * 16 * 640);
  }
}

TEST_F(BenchCli, CachedPrefixTtft) {
  auto r = test::run_cli("bench " + model_ + " --cached-prefix 64 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["cached_tokens"], 64);
  EXPECT_GT(j["ttft_cold_ms"].get<double>(), 0.0);
}

// Speculative decoding side by side (n-gram and a draft model: the target itself, accepted
// everywhere), and the verification-pass cost table.
TEST_F(BenchCli, SpeculativeDecodingSideBySide) {
  auto r = test::run_cli("bench " + model_ + " --spec-ngram=2 --spec-tokens 3 --spec-always -n 24 -r 1 --json --prompt " +
                         test::shell_quote("Lily and Tom went to the park. Lily and Tom went to the park. Lily and Tom"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_TRUE(j["identical"].get<bool>());
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["spec_decode_tok_s"].get<double>(), 0);
  EXPECT_GE(j["tokens_per_target_pass"].get<double>(), 1.0);
  EXPECT_NE(j["proposer"].get<std::string>().find("n-gram"), std::string::npos);
  r = test::run_cli("bench " + model_ + " --draft-model " + test::shared_path("models/stories260K.gguf") +
                    " --spec-tokens 4 --spec-always -n 24 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_TRUE(j["identical"].get<bool>());
  EXPECT_DOUBLE_EQ(j["acceptance_rate"].get<double>(), 1.0);  // the target agrees with itself
  EXPECT_GT(j["tokens_per_target_pass"].get<double>(), 2.0);
  r = test::run_cli("bench " + model_ + " --verify-cost -p 40 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  ASSERT_EQ(j["verify_cost"].size(), 9u);
  EXPECT_EQ(j["verify_cost"][0]["tokens"], 1);
  EXPECT_DOUBLE_EQ(j["verify_cost"][0]["ratio"].get<double>(), 1.0);
  EXPECT_EQ(j["verify_cost"][8]["k"], 8);
  // A draft with another vocabulary is a clear error.
  if (test::shared_exists("models/zh-tang-poem-750K.gguf")) {
    r = test::run_cli("bench " + model_ + " --draft-model " + test::shared_path("models/zh-tang-poem-750K.gguf") + " -n 4 -r 1");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("vocabulary"), std::string::npos) << r.err;
  }
}

// --profile: per test, the time of each forward step; JSON has it in the row, markdown after the
// verdicts.
TEST_F(BenchCli, ProfileSplitsEachTestByStep) {
  auto r = test::run_cli("bench " + model_ + " -p 16 -n 4 -r 2 --profile --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& row : rows) {
    ASSERT_TRUE(row.contains("profile")) << row.dump();
    const json& steps = row["profile"];
    std::vector<std::string> names;
    double share = 0;
    for (const json& s : steps) {
      names.push_back(s["step"]);
      if (s["step"] != "total") share += s["share"].get<double>();
      EXPECT_GE(s["ms"].get<double>(), 0.0);
    }
    const std::vector<std::string> want = {"embed",    "norm",     "qkv",    "attention", "attn_output",
                                           "ffn_gate_up", "ffn_down", "logits", "other",     "total"};
    EXPECT_EQ(names, want);
    EXPECT_NEAR(share, 1.0, 1e-9);
    // stories260K's 5 layers, 2 reps: one pass each for pp16, 4 for tg4.
    EXPECT_EQ(steps[2]["calls"], 2 * 5 * (row["n_gen"] == 4 ? 4 : 1)) << row["test"];
    EXPECT_GT(steps[2]["gb_s"].get<double>(), 0.0);
  }
  r = test::run_cli("bench " + model_ + " -p 16 -n 4 -r 1 --profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"profile   pp16 -t 1: ms per prompt", "profile   tg4 -t 1: ms per decoded token",
                        "| step | ms | share | MB read | GB/s | GFLOP/s |", "| attention |", "| total |"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " missing from:\n" << r.out;
  EXPECT_LT(r.out.find("verdict   tg4"), r.out.find("profile   pp16")) << r.out;
  r = test::run_cli("bench " + model_ + " -p 16 -n 4 -r 1");
  EXPECT_EQ(r.out.find("profile"), std::string::npos) << "only when asked for";
  r = test::run_cli("bench " + model_ + " -p 0 -n 4 -r 1 --profile -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["profile"].back()["step"], "total") << r.out;
}

TEST_F(BenchCli, BadOptionsAreOneLineErrors) {
  for (const char* args : {" -p 0 -n 0", " -n -1", " -p 8,-1", " -d -4", " -r 0", " -o xml", " --json -o csv",
                           " -p 8,16 --plot x.svg", " --batch 1,2 -p 8,16", " --batch 2 -d 8", " --batch 2 -o csv",
                           " --verify-cost -t 1,2", " --batch 2 --profile", " --profile -o csv"}) {
    auto r = test::run_cli("bench " + model_ + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("lumen: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("measuring"), std::string::npos) << args << ": checked before the work: " << r.err;
    EXPECT_EQ(r.out, "");
  }
  auto r = test::run_cli("bench -m /nonexistent/model.gguf -t 1 -p 8 -n 2 -r 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  r = test::run_cli("bench " + model_ + " -p 8 -n 2 -r 1 --plot /nonexistent/dir/plot.svg");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/dir/plot.svg"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lumen

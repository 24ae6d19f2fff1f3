// The command line as llama.cpp users type it (issue: CLI conventions): each case drives the CLI
// as a user would and checks the exit code, the one stderr line, and that nothing was lost.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace lumen {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class CliConventions : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "no shared models";
    model_path_ = test::shared_path("models/stories260K.gguf");
    model_ = "-m " + model_path_ + " -t 2";
    dir_ = fs::temp_directory_path() / ("lumen_cli_conv_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static bool one_line(const std::string& err) {
    return !err.empty() && err.rfind("lumen: ", 0) == 0 && err.find('\n') == err.size() - 1;
  }
  std::string model_path_, model_;
  fs::path dir_;
};

TEST_F(CliConventions, NPredictZeroGeneratesNothing) {
  auto r = test::run_cli("run " + model_ + " -n 0 -p Once --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["tokens"].empty());
  EXPECT_EQ(j["text"], "");
  EXPECT_EQ(j["stop_reason"], "length");
  auto t = test::run_cli("run " + model_ + " -n 0 -p Once");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out, "Once");
  EXPECT_NE(t.err.find("0 tokens"), std::string::npos) << t.err;
  // -n N generates exactly N when nothing stops it first.
  auto n = test::run_cli("run " + model_ + " -n 5 --ignore-eos -p Once --json");
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(json::parse(n.out)["tokens"].size(), 5u);
}

TEST_F(CliConventions, ADirectoryIsNotAText) {
  const std::string d = dir_.string();
  for (const std::string& cmd : {"run " + model_ + " -f " + d, "tokenize -m " + model_path_ + " --file " + d,
                                 "tokenize -m " + model_path_ + " -f " + d, "perplexity " + model_ + " -f " + d}) {
    SCOPED_TRACE(cmd);
    auto r = test::run_cli(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliConventions, QuantizeRefusesToOverwriteItsInput) {
  const fs::path in = dir_ / "in.gguf", link = dir_ / "link.gguf";
  fs::copy_file(model_path_, in);
  fs::create_symlink(in, link);
  const std::string before = test::read_file(in.string());
  for (const fs::path& out : {in, link}) {
    auto r = test::run_cli("quantize " + in.string() + " " + out.string() + " Q8_0");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
  }
  EXPECT_EQ(test::read_file(in.string()), before);
}

TEST_F(CliConventions, StopAndLogitBiasTakeOneValueEach) {
  // The prompt-looking word is not swallowed as a second stop string: it is an error, at once.
  auto r = test::run_cli("run " + model_ + " --stop Lily 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("Once upon a time"), std::string::npos) << r.err;
  auto b = test::run_cli("run " + model_ + " --logit-bias 5=-inf 'Once upon a time'");
  EXPECT_EQ(b.exit_code, 2) << b.err;
  // Repeating the flag gives more; -r is llama.cpp's spelling of a stop string.
  auto s = test::run_cli("run " + model_ + " --stop zzz -r ' named' -p 'Once upon a time' -n 40 --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const json j = json::parse(s.out);
  EXPECT_EQ(j["stop_reason"], "stop") << s.out;
  EXPECT_EQ(j["text"].get<std::string>().find(" named"), std::string::npos);
}

TEST_F(CliConventions, PromptAndFileExcludeEachOther) {
  const fs::path f = dir_ / "p.txt";
  write_file(f.string(), "Lily");
  auto r = test::run_cli("run " + model_ + " -p x -f " + f.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CliConventions, BenchChecksItsOptionsBeforeMeasuring) {
  auto plot = test::run_cli("bench " + model_ + " -p 8 -n 4 --plot " + dir_.string());
  EXPECT_EQ(plot.exit_code, 1) << plot.err;
  EXPECT_NE(plot.err.find("is a directory"), std::string::npos) << plot.err;
  EXPECT_EQ(plot.err.find("measuring"), std::string::npos) << "checked before the work: " << plot.err;
  auto ctx = test::run_cli("bench " + model_ + " -p 8 -n 4 -c 32");
  EXPECT_EQ(ctx.exit_code, 2) << ctx.err;
  EXPECT_NE(ctx.err.find("-c/--ctx-size"), std::string::npos) << ctx.err;
}

TEST_F(CliConventions, StdinLinesGoOnAfterAFailedOne) {
  // A line too long for the context fails alone; the lines after it still run.
  std::string lng;
  for (int i = 0; i < 300; i++) lng += "Once upon a time ";
  auto r = test::run_cli("run " + model_ + " -c 64 -n 4 --json", "Once\n" + lng + "\nLily\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::vector<json> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_FALSE(lines[0].contains("error"));
  EXPECT_TRUE(lines[1].contains("error"));
  EXPECT_FALSE(lines[2].contains("error"));
  EXPECT_EQ(lines[2]["tokens"].size(), 4u);
}

TEST_F(CliConventions, TooManyThreadsWarnAndStillFinish) {
  auto r = test::run_cli("run -m " + model_path_ + " -t 64 -n 8 -p Once --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: -t 64"), std::string::npos) << r.err;
  EXPECT_EQ(json::parse(r.out)["tokens"].size(), 8u);
}

TEST_F(CliConventions, LlamaCppSpellings) {
  auto base = test::run_cli("run " + model_ + " --seed 7 --temp 0.8 -n 12 -p Once --json");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  // -s, the last of a repeated flag, -ngl / -fa accepted with one notice each, -ctk/-ctv, -np.
  auto r = test::run_cli("run " + model_ + " -s 3 -s 7 --temp 0.8 -n 12 -p Once --json -ngl 99 -fa on -ctk f16 -ctv f16 -np 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["tokens"], json::parse(base.out)["tokens"]);
  EXPECT_NE(r.err.find("--n-gpu-layers has no effect"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--flash-attn has no effect"), std::string::npos) << r.err;
  // -e turns \n into a newline; --no-display-prompt prints the generation only.
  auto e = test::run_cli("run " + model_ + " -e -p 'Once\\nupon' -n 1 --json");
  auto plain = test::run_cli("tokenize -m " + model_path_ + " --ids -p " + test::shell_quote("Once\nupon"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(json::parse(e.out)["prompt_tokens"], json::parse(plain.out));
  auto nd = test::run_cli("run " + model_ + " --no-display-prompt -p 'Once upon a time' -n 4");
  ASSERT_EQ(nd.exit_code, 0) << nd.err;
  EXPECT_EQ(nd.out.find("Once upon a time"), std::string::npos) << nd.out;
  // --mlock locks or says why it could not; either way the run completes.
  auto ml = test::run_cli("run " + model_ + " --mlock -n 2 -p Once --json");
  EXPECT_EQ(ml.exit_code, 0) << ml.err;
}

TEST_F(CliConventions, UsageErrorsAreOneLineExitTwoInTheUsersWords) {
  auto foo = test::run_cli("foo");
  EXPECT_EQ(foo.exit_code, 2);
  EXPECT_NE(foo.err.find("unknown command 'foo'"), std::string::npos) << foo.err;
  EXPECT_NE(foo.err.find("run"), std::string::npos) << foo.err;
  EXPECT_TRUE(one_line(foo.err)) << foo.err;
  auto split = test::run_cli("run " + model_ + " -xyz -p Once");
  EXPECT_EQ(split.exit_code, 2) << split.err;
  EXPECT_NE(split.err.find("'-xyz'"), std::string::npos) << split.err;
  auto pen = test::run_cli("run " + model_ + " --repeat-penalty -1 -p Once");
  EXPECT_EQ(pen.exit_code, 2) << pen.err;
  EXPECT_NE(pen.err.find("--repeat-penalty"), std::string::npos) << pen.err;
  EXPECT_EQ(pen.err.find("repetition_penalty"), std::string::npos) << pen.err;
  EXPECT_TRUE(one_line(pen.err)) << pen.err;
  auto bad_model = test::run_cli("run -m /nonexistent.gguf -p Once");
  EXPECT_EQ(bad_model.exit_code, 1) << bad_model.err;
  // A prompt that does not fit fails before anything is echoed.
  std::string lng;
  for (int i = 0; i < 300; i++) lng += "Once upon a time ";
  auto too_long = test::run_cli("run " + model_ + " -c 64 -p " + test::shell_quote(lng));
  EXPECT_EQ(too_long.exit_code, 1) << too_long.err;
  EXPECT_EQ(too_long.out, "");
  EXPECT_TRUE(one_line(too_long.err)) << too_long.err;
}

// Memory asked for and not there: the flag to lower, the bytes needed and the bytes available.
TEST_F(CliConventions, ABatchTooLargeForMemorySaysHowMuch) {
  // ASan refuses allocations this size outright (allocation-size-too-big) instead of failing them.
  if (std::getenv("LUMEN_SANITIZED")) GTEST_SKIP() << "ASan aborts on allocations this large";
  auto r = test::run_cli("run " + model_ + " -b 100000000000 -n 1 -p Once");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("-b/--batch-size 100000000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bytes of buffers"), std::string::npos) << r.err;  // needed
  EXPECT_NE(r.err.find("bytes are available"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_EQ(r.out, "");
}

// A KV pool larger than the memory there is fails at once, never by the kernel's OOM killer later.
TEST_F(CliConventions, AKvPoolLargerThanMemoryIsRefused) {
  auto r = test::run_cli("run " + model_ + " --kv-memory 100TiB -n 1 -p Once");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--kv-memory of 109951162777600 bytes is more than the"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bytes of memory available"), std::string::npos) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CliConventions, TokenizeTakesPromptFileAndStdin) {
  auto pos = test::run_cli("tokenize -m " + model_path_ + " --ids 'Hello world'");
  ASSERT_EQ(pos.exit_code, 0) << pos.err;
  auto p = test::run_cli("tokenize -m " + model_path_ + " --ids -p 'Hello world'");
  EXPECT_EQ(p.out, pos.out);
  const fs::path f = dir_ / "t.txt";
  write_file(f.string(), "Hello world");
  EXPECT_EQ(test::run_cli("tokenize -m " + model_path_ + " --ids -f " + f.string()).out, pos.out);
  EXPECT_EQ(test::run_cli("tokenize -m " + model_path_ + " --ids --stdin", "Hello world").out, pos.out);
  EXPECT_EQ(test::run_cli("tokenize -m " + model_path_ + " --ids").exit_code, 2);
}

TEST_F(CliConventions, PerplexityHelpStatesItsContextDefault) {
  auto r = test::run_cli("perplexity --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("default 512"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lumen

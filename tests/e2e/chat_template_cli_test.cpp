// `lumen chat-template` driven as a user would: fixture cases of ../shared/chat-templates
// rendered byte for byte on stdout (Granite reads strftime_now: --now and $LUMEN_NOW), a
// raise_exception case failing with its message, and one-line errors for bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace lumen {
namespace {

using nlohmann::ordered_json;


const char* const kCases = "chat-templates/cases.json";

// The fixture case `id`, or null (the test skips) when the fixtures are absent.
const ordered_json* find_case(const std::string& id) {
  static const ordered_json cases = test::shared_exists(kCases)
                                        ? ordered_json::parse(test::read_file(test::shared_path(kCases)))
                                        : ordered_json::array();
  for (const auto& c : cases)
    if (c["id"] == id) return &c;
  return nullptr;
}

// Runs the CLI on a case: its template from shared/, its variables through a temporary file.
test::CommandResult run_case(const ordered_json& c, const std::string& extra = "") {
  const test::TempFile vars(c["variables"].dump());
  return test::run_cli("chat-template --template " +
                       test::shell_quote(test::shared_path("chat-templates/" + c["template"].get<std::string>())) + " --vars " +
                       test::shell_quote(vars.path()) + extra);
}

TEST(ChatTemplateCli, GraniteWithNow) {
  const ordered_json* c = find_case("granite-3.3/c1_single_user/agp");
  if (!c) GTEST_SKIP() << "chat-template fixtures not found";
  auto r = run_case(*c, " --now '2026-11-30 12:00:00'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, (*c)["expected"].get<std::string>());
  EXPECT_NE(r.out.find("November 30, 2026"), std::string::npos);
  // Another day gives another date: the clock really comes from --now.
  r = run_case(*c, " --now '2027-01-02 08:30:00'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("January 02, 2027"), std::string::npos) << r.out;
}

TEST(ChatTemplateCli, GraniteWithLumenNowEnvironment) {
  const ordered_json* c = find_case("granite-3.3/c2_system_user/noagp");
  const ordered_json* c1 = find_case("granite-3.3/c1_single_user/noagp");
  if (!c || !c1) GTEST_SKIP() << "chat-template fixtures not found";
  setenv("LUMEN_NOW", "2026-11-30 12:00:00", 1);
  auto r = run_case(*c1);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, (*c1)["expected"].get<std::string>());
  r = run_case(*c);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, (*c)["expected"].get<std::string>());
  setenv("LUMEN_NOW", "not a time", 1);
  r = run_case(*c1);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("YYYY-MM-DD HH:MM:SS"), std::string::npos) << r.err;
  unsetenv("LUMEN_NOW");
}

TEST(ChatTemplateCli, ExactOutputWithoutAddedNewline) {
  for (const char* id : {"qwen3/c4_unicode_quotes/agp", "llama-3.1/c3_multi_turn/noagp", "phi-3.5-mini/c2_system_user/agp"}) {
    const ordered_json* c = find_case(id);
    if (!c) GTEST_SKIP() << "chat-template fixtures not found";
    const auto r = run_case(*c);
    EXPECT_EQ(r.exit_code, 0) << id << ": " << r.err;
    EXPECT_EQ(r.out, (*c)["expected"].get<std::string>()) << id;
  }
}

TEST(ChatTemplateCli, RaiseExceptionFailsWithItsMessage) {
  const ordered_json* c = find_case("gemma-2/c2_system_user/agp");
  if (!c) GTEST_SKIP() << "chat-template fixtures not found";
  ASSERT_TRUE(c->contains("expected_error"));
  const auto r = run_case(*c);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "lumen: " + (*c)["expected_error"].get<std::string>() + "\n");
}

TEST(ChatTemplateCli, BadInputIsOneLineError) {
  const test::TempFile vars(R"({"messages": []})");
  const test::TempFile bad_template("{% if true %}never closed");
  auto r = test::run_cli("chat-template --template " + test::shell_quote(bad_template.path()) + " --vars " + test::shell_quote(vars.path()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("template line 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(bad_template.path()), std::string::npos) << r.err;

  const test::TempFile good_template("{{ messages|length }}");
  r = test::run_cli("chat-template --template /nonexistent/t.jinja --vars " + test::shell_quote(vars.path()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/t.jinja"), std::string::npos) << r.err;

  const test::TempFile not_json("{ nope");
  r = test::run_cli("chat-template --template " + test::shell_quote(good_template.path()) + " --vars " + test::shell_quote(not_json.path()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(not_json.path()), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = test::run_cli("chat-template --template " + test::shell_quote(good_template.path()) + " --vars " + test::shell_quote(vars.path()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0");
}

}  // namespace
}  // namespace lumen

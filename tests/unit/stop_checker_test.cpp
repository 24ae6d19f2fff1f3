#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/stop_checker.h"

namespace lumen {
namespace {

// Feeds the pieces in order and returns everything emitted (plus finish() if never stopped).
std::string run(StopChecker& c, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    const auto step = c.feed(p);
    out += step.emit;
    if (step.stopped) return out;
  }
  return out + c.finish();
}

TEST(StopChecker, NoStopStringsPassEverythingThrough) {
  StopChecker c({});
  const auto step = c.feed("hello");
  EXPECT_EQ(step.emit, "hello");
  EXPECT_FALSE(step.stopped);
  EXPECT_EQ(c.held(), 0u);
  EXPECT_EQ(c.finish(), "");
}

TEST(StopChecker, StopInsideOnePiece) {
  StopChecker c({"END"});
  const auto step = c.feed("Hello END world");
  EXPECT_EQ(step.emit, "Hello ");
  EXPECT_TRUE(step.stopped);
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(c.matched(), "END");
  EXPECT_EQ(c.finish(), "");
}

TEST(StopChecker, StopAcrossPieceBoundariesIsHeldBackThenDropped) {
  StopChecker c({"END"});
  auto s = c.feed("Hel");
  EXPECT_EQ(s.emit, "Hel");
  s = c.feed("lo E");
  EXPECT_EQ(s.emit, "lo ");  // "E" might start "END"
  EXPECT_EQ(c.held(), 1u);
  s = c.feed("N");
  EXPECT_EQ(s.emit, "");
  EXPECT_EQ(c.held(), 2u);
  EXPECT_FALSE(s.stopped);
  s = c.feed("D and more");
  EXPECT_EQ(s.emit, "");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(c.matched(), "END");
  // Later pieces are ignored.
  s = c.feed("ignored");
  EXPECT_EQ(s.emit, "");
  EXPECT_TRUE(c.stopped());
}

TEST(StopChecker, HeldBackTextIsReleasedWhenItTurnsOutNotToBeAStop) {
  StopChecker c({"END"});
  EXPECT_EQ(c.feed("abcE").emit, "abc");
  EXPECT_EQ(c.feed("N").emit, "");
  const auto s = c.feed("x");
  EXPECT_EQ(s.emit, "ENx");
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(c.held(), 0u);
}

TEST(StopChecker, FinishReleasesThePartialMatch) {
  StopChecker c({"</s>"});
  EXPECT_EQ(c.feed("text </").emit, "text ");
  EXPECT_EQ(c.finish(), "</");
  EXPECT_FALSE(c.stopped());
  EXPECT_EQ(c.matched(), "");
}

TEST(StopChecker, SelfOverlappingStopString) {
  StopChecker c({"aab"});
  EXPECT_EQ(c.feed("a").emit, "");
  EXPECT_EQ(c.feed("a").emit, "");
  EXPECT_EQ(c.feed("a").emit, "a");  // "aaa": only the last "aa" can still start "aab"
  const auto s = c.feed("b");
  EXPECT_EQ(s.emit, "");
  EXPECT_TRUE(s.stopped);
}

TEST(StopChecker, EarliestOccurrenceWinsThenFirstListed) {
  StopChecker c({"world", "lo"});
  const auto s = c.feed("hello world");
  EXPECT_EQ(s.emit, "hel");
  EXPECT_EQ(c.matched(), "lo");

  StopChecker tie({"ab", "abc"});
  EXPECT_EQ(tie.feed("xabcd").emit, "x");
  EXPECT_EQ(tie.matched(), "ab");
}

TEST(StopChecker, HoldsTheLongestPossibleStart) {
  StopChecker c({"xyz", "yzw!"});
  // "...xyz" is a stop; "...yz" could start "yzw!" and "...xy" could start "xyz".
  EXPECT_EQ(c.feed("abxy").emit, "ab");
  EXPECT_EQ(c.held(), 2u);
  EXPECT_EQ(c.feed("zw").emit, "");
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(c.matched(), "xyz");
}

TEST(StopChecker, Utf8StopStrings) {
  StopChecker c({"。"});
  std::string out;
  auto s = c.feed("你好");
  out += s.emit;
  s = c.feed("。再见");
  out += s.emit;
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(out, "你好");
}

TEST(StopChecker, EmptyStopStringIsRejected) {
  EXPECT_THROW(StopChecker({"a", ""}), Error);
}

TEST(StopChecker, RandomSplitsMatchAWholeTextSearch) {
  // For random texts over a tiny alphabet and random piece boundaries, what comes out equals
  // the text cut before the earliest stop occurrence, and nothing is emitted twice or lost.
  const std::vector<std::string> stops = {"abca", "cc", "bab"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; trial++) {
    std::string text;
    const int len = static_cast<int>(rng() % 30);
    for (int i = 0; i < len; i++) text += "abc"[rng() % 3];
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    const std::string want = text.substr(0, cut);

    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 4, text.size() - pos);
      pieces.push_back(text.substr(pos, n));
      pos += n;
    }
    StopChecker c(stops);
    EXPECT_EQ(run(c, pieces), want) << "text " << text;
    EXPECT_EQ(c.stopped(), cut != std::string::npos) << "text " << text;
  }
}

}  // namespace
}  // namespace lumen

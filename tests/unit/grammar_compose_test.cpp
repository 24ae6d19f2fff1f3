// Renaming a grammar's rules apart (grammar/grammar_compose.h) and the server's cache of
// compiled grammars (server/grammar_cache.h).
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/grammar_compose.h"
#include "grammar/grammar_matcher.h"
#include "server/grammar_cache.h"

namespace lumen {
namespace {

TEST(GrammarCompose, PrefixesRuleNamesOnly) {
  const std::string g =
      "root ::= item (\",\" ws item){0,3}  # a list\n"
      "item ::= \"root \\\" ws\" | [a-z_-]+ | x-1\n"
      "x-1 ::= [\\]ws] .\n"
      "ws ::= \" \"?\n";
  const std::string p = prefix_grammar_rules(g, "t0-");
  EXPECT_EQ(p,
            "t0-root ::= t0-item (\",\" t0-ws t0-item){0,3}  # a list\n"
            "t0-item ::= \"root \\\" ws\" | [a-z_-]+ | t0-x-1\n"
            "t0-x-1 ::= [\\]ws] .\n"
            "t0-ws ::= \" \"?\n");
  // The renamed text is the same language from its renamed root; two copies live side by side.
  const auto a = compile_grammar(p, "t0-root");
  EXPECT_TRUE(grammar_accepts(a, "root \" ws, ab"));
  EXPECT_TRUE(grammar_accepts(a, "]q"));
  const auto both = compile_grammar("root ::= t0-root \";\" t1-root\n" + p + prefix_grammar_rules(g, "t1-"));
  EXPECT_TRUE(grammar_accepts(both, "ab;cd, ]q"));
  EXPECT_THROW(prefix_grammar_rules("root ::= \"open", "t0-"), GrammarError);
  EXPECT_THROW(prefix_grammar_rules("root ::= [a-", "t0-"), GrammarError);
  EXPECT_THROW(prefix_grammar_rules(g, "t 0"), GrammarError);
}

TEST(GrammarCache, HitsEvictsAndKeepsNoErrors) {
  server::GrammarCache cache(2);
  const auto a = cache.get("root ::= \"a\"");
  EXPECT_EQ(cache.get("root ::= \"a\"").get(), a.get());
  EXPECT_EQ(cache.hits(), 1u);
  cache.get("root ::= \"b\"");
  cache.get("root ::= \"a\"");  // a is now the most recent
  cache.get("root ::= \"c\"");  // evicts b
  EXPECT_EQ(cache.size(), 2u);
  const size_t misses = cache.misses();
  EXPECT_EQ(cache.get("root ::= \"a\"").get(), a.get());
  cache.get("root ::= \"b\"");
  EXPECT_EQ(cache.misses(), misses + 1);
  EXPECT_THROW(cache.get("root ::= ("), GrammarError);
  EXPECT_EQ(cache.size(), 2u);
  // A text over the byte bound is compiled, not kept.
  server::GrammarCache small(4, 8);
  small.get("root ::= \"long enough\"");
  EXPECT_EQ(small.size(), 0u);
}

}  // namespace
}  // namespace lumen

// JSON Schema -> grammar: every schema of tests/data/json_schemas converts and compiles, its
// valid documents (as written, compact and 2-space pretty) are in the grammar's language and
// pass the independent validator, its invalid ones fail both; then the policies one at a
// time, every refused keyword with its path, hostile schemas refused quickly, and the digit
// and regex translations against brute force.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "json_schema_validator.h"

namespace lumen {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> grammar_for(const Json& schema) { return compile_grammar(json_schema_to_grammar(schema)); }

std::shared_ptr<const Grammar> grammar_for(const char* schema_text) { return grammar_for(Json::parse(schema_text)); }

// ---- the corpus -------------------------------------------------------------------------------

const std::string kCorpus = std::string(LUMEN_SOURCE_DIR) + "/tests/data/json_schemas";

std::vector<std::string> corpus_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kCorpus)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 5 && f.substr(f.size() - 5) == ".json") names.push_back(f.substr(0, f.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

int depth_of(const Json& j) {
  int d = 0;
  if (j.is_structured())
    for (const Json& c : j) d = std::max(d, depth_of(c));
  return j.is_structured() ? d + 1 : 0;
}

class JsonSchemaCorpus : public testing::TestWithParam<std::string> {};

TEST_P(JsonSchemaCorpus, ValidInBothInvalidInNeither) {
  const std::string base = kCorpus + "/" + GetParam();
  std::ifstream in(base + ".json");
  const Json schema = Json::parse(in);
  std::shared_ptr<const Grammar> g;
  ASSERT_NO_THROW(g = grammar_for(schema)) << json_schema_to_grammar(schema);
  const auto valid = lines_of(base + ".valid.jsonl"), invalid = lines_of(base + ".invalid.jsonl");
  EXPECT_FALSE(valid.empty());
  EXPECT_FALSE(invalid.empty());
  for (const std::string& text : valid) {
    std::string why;
    const Json doc = Json::parse(text);
    EXPECT_TRUE(test::validate_json(doc, schema, &why)) << text << ": " << why;
    EXPECT_TRUE(grammar_accepts(g, text)) << text;
    const std::string compact = doc.dump();
    EXPECT_TRUE(grammar_accepts(g, compact)) << compact;
    // 2-space indentation fits the whitespace policy (a newline and up to 16 spaces) to depth 8.
    if (depth_of(doc) <= 8) {
      const std::string pretty = doc.dump(2);
      EXPECT_TRUE(grammar_accepts(g, pretty)) << pretty;
    }
  }
  for (const std::string& text : invalid) {
    EXPECT_FALSE(grammar_accepts(g, text)) << text;
    Json doc;
    try {
      doc = Json::parse(text);
    } catch (const Json::exception&) {
      continue;  // not JSON at all: only the grammar has a say
    }
    EXPECT_FALSE(test::validate_json(doc, schema)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, JsonSchemaCorpus, testing::ValuesIn(corpus_names()),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(JsonSchemaCorpus, CoversEveryKeyword) {
  EXPECT_GE(corpus_names().size(), 40u);
  std::set<std::string> seen;
  std::function<void(const Json&)> walk = [&](const Json& j) {
    if (j.is_object())
      for (const auto& [k, v] : j.items()) seen.insert(k), walk(v);
    else if (j.is_array())
      for (const Json& v : j) walk(v);
  };
  for (const std::string& n : corpus_names()) {
    std::ifstream in(kCorpus + "/" + n + ".json");
    walk(Json::parse(in));
  }
  for (const char* k : {"type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
                        "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
                        "exclusiveMinimum", "exclusiveMaximum", "pattern", "format", "anyOf", "oneOf", "allOf", "$ref",
                        "$defs", "definitions", "title", "description", "$schema", "$id", "default", "examples", "$comment"})
    EXPECT_TRUE(seen.count(k)) << k;
}

// ---- policies ---------------------------------------------------------------------------------

TEST(JsonSchemaGrammar, WhitespaceIsBounded) {
  const auto g = grammar_for(R"j({"type":"array","items":{"type":"integer"}})j");
  EXPECT_TRUE(grammar_accepts(g, "[1,2]"));
  EXPECT_TRUE(grammar_accepts(g, " [ 1 , 2 ] "));
  EXPECT_TRUE(grammar_accepts(g, "[\n" + std::string(16, ' ') + "1\n]"));
  EXPECT_TRUE(grammar_accepts(g, "[\n\t\t1\n]\n"));
  EXPECT_FALSE(grammar_accepts(g, "[\n" + std::string(17, ' ') + "1\n]"));
  EXPECT_FALSE(grammar_accepts(g, "[  1]"));     // one space or one newline run, not two
  EXPECT_FALSE(grammar_accepts(g, "[\r\n1]"));   // no carriage returns
  EXPECT_FALSE(grammar_accepts(g, "[1\n\n,2]"));
}

TEST(JsonSchemaGrammar, PropertiesInDeclaredOrderExtrasAfter) {
  const auto g = grammar_for(R"j({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})j");
  EXPECT_TRUE(grammar_accepts(g, R"j({"a":1,"b":2,"z":3})j"));
  EXPECT_TRUE(grammar_accepts(g, R"j({"b":2,"z":3})j"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"b":2,"a":1})j"));   // valid JSON Schema, outside the order
  EXPECT_FALSE(grammar_accepts(g, R"j({"z":3,"a":1})j"));
  // A declared name is never repeated nor used as an additional property, however spelled.
  EXPECT_FALSE(grammar_accepts(g, R"j({"a":1,"a":1})j"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"b":2,"a":"x"})j"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"z":1,"\u0061":"x"})j"));
  EXPECT_TRUE(grammar_accepts(g, R"j({"aa":"x","":null,"bx":1})j"));
}

TEST(JsonSchemaGrammar, AdditionalPropertiesFalseAllowsNone) {
  const auto g = grammar_for(R"j({"properties":{"a":{}},"additionalProperties":false})j");
  EXPECT_TRUE(grammar_accepts(g, R"j({"a":[1]})j"));
  EXPECT_TRUE(grammar_accepts(g, "{}"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"b":1})j"));
}

TEST(JsonSchemaGrammar, ObjectGrammarIsAnyObject) {
  const auto g = compile_grammar(json_object_grammar());
  EXPECT_TRUE(grammar_accepts(g, "{}"));
  EXPECT_TRUE(grammar_accepts(g, R"j({"a": [1, {"b": null}], "c": "\u00e9"})j"));
  EXPECT_TRUE(grammar_accepts(g, "{\n  \"a\": 1\n}\n"));
  EXPECT_FALSE(grammar_accepts(g, "[]"));
  EXPECT_FALSE(grammar_accepts(g, R"j("x")j"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"a":1,})j"));
  EXPECT_FALSE(grammar_accepts(g, R"j({"a"})j"));
}

TEST(JsonSchemaGrammar, OneOfIsAnyOf) {
  // Documented: a document matching two branches is not refused.
  const char* s = R"({"oneOf":[{"type":"integer"},{"type":"number"}]})";
  EXPECT_TRUE(grammar_accepts(grammar_for(s), "1"));
  EXPECT_FALSE(test::validate_json(Json(1), Json::parse(s)));
}

TEST(JsonSchemaGrammar, NarrowingsAreDocumentedOnes) {
  // Integers are written as integers; bounded numbers without an exponent; constrained strings
  // without needless \u escapes; const objects in their order. Each is valid JSON Schema
  // outside the grammar.
  const std::pair<const char*, const char*> cases[] = {
      {R"j({"type":"integer"})j", "1.0"},
      {R"j({"type":"integer"})j", "1e3"},
      {R"j({"type":"number","minimum":0})j", "1e3"},
      {R"j({"type":"string","pattern":"^a$"})j", R"j("\u0061")j"},
      {R"j({"enum":["a"]})j", R"j("\u0061")j"},
      {R"j({"const":{"a":1,"b":2}})j", R"j({"b":2,"a":1})j"},
  };
  for (const auto& [schema, doc] : cases) {
    EXPECT_TRUE(test::validate_json(Json::parse(doc), Json::parse(schema))) << schema << " " << doc;
    EXPECT_FALSE(grammar_accepts(grammar_for(schema), doc)) << schema << " " << doc;
  }
  // Named groups match like plain ones (std::regex has none to compare with).
  const auto g = grammar_for(R"j({"type":"string","pattern":"^(?<year>[0-9]{4})-(?<n>a|b)$"})j");
  EXPECT_TRUE(grammar_accepts(g, R"("2024-b")"));
  EXPECT_FALSE(grammar_accepts(g, R"("2024-c")"));
}

TEST(JsonSchemaGrammar, NumbersAreFiniteDoubles) {
  const auto number = grammar_for(R"j({"type":"number"})j");
  for (const char* ok : {"1e99", "-1.5E-99", "99999999999999999999.5e99", "0.0000000000000001"})
    EXPECT_TRUE(grammar_accepts(number, ok)) << ok;
  for (const char* bad : {"6e699", "1e100", "100000000000000000000", "1E464444", "0.00000000000000001"}) EXPECT_FALSE(grammar_accepts(number, bad)) << bad;
  const auto integer = grammar_for(R"j({"type":"integer"})j");
  for (const char* ok : {"18446744073709551615", "-9223372036854775808", "0", "-0"}) EXPECT_TRUE(grammar_accepts(integer, ok)) << ok;
  for (const char* bad : {"18446744073709551616", "-9223372036854775809", "100000000000000000000"})
    EXPECT_FALSE(grammar_accepts(integer, bad)) << bad;
  const auto positive = grammar_for(R"j({"type":"number","exclusiveMinimum":0})j");
  EXPECT_TRUE(grammar_accepts(positive, "99999999999999999999.99"));
  EXPECT_FALSE(grammar_accepts(positive, "100000000000000000000"));
  const auto big = grammar_for(R"j({"type":"integer","minimum":10})j");
  EXPECT_TRUE(grammar_accepts(big, "18446744073709551615"));
  EXPECT_FALSE(grammar_accepts(big, "18446744073709551616"));
  EXPECT_THROW(grammar_for(R"j({"type":"integer","minimum":1e30})j"), JsonSchemaError);  // nothing in range
}

TEST(JsonSchemaGrammar, SpaceClassesWriteWhatEnginesAgreeOn) {
  // U+00A0 and U+3000 are \s to ECMAScript, not to std::regex or Python: neither \s nor \S nor
  // [^\s] writes them; the ASCII spaces are \s everywhere.
  for (const char* p : {"^\\s$", "^\\S$", "^[^\\s]$", "^[^\\S]$", "^[\\s\\S]$"}) {
    const auto g = grammar_for(Json{{"type", "string"}, {"pattern", p}});
    EXPECT_FALSE(grammar_accepts(g, "\"\u00a0\"")) << p;
    EXPECT_FALSE(grammar_accepts(g, "\"\u3000\"")) << p;
  }
  const auto s = grammar_for(R"j({"type":"string","pattern":"^\\s+$"})j");
  EXPECT_TRUE(grammar_accepts(s, R"(" \t\n\r\f\u000b")"));
  const auto not_s = grammar_for(R"j({"type":"string","pattern":"^[^\\s]+$"})j");
  EXPECT_TRUE(grammar_accepts(not_s, "\"a\u00e9\""));
  EXPECT_FALSE(grammar_accepts(not_s, R"("a b")"));
}

TEST(JsonSchemaGrammar, RecursionGoesDeep) {
  const auto g = grammar_for(R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}},
                                  "additionalProperties":false}},"$ref":"#/$defs/n"})");
  std::string doc = "{}";
  for (int i = 0; i < 200; i++) doc = R"({"c":[)" + doc + ",{}]}";
  EXPECT_TRUE(grammar_accepts(g, doc));
  EXPECT_FALSE(grammar_accepts(g, doc + "}"));
}

// ---- refusals ---------------------------------------------------------------------------------

std::string error_path(const std::string& schema_text) {
  try {
    (void)json_schema_to_grammar(Json::parse(schema_text));
  } catch (const JsonSchemaError& e) {
    EXPECT_NE(std::string(e.what()).find(e.path()), std::string::npos) << e.what();
    return e.path();
  }
  return "(converted)";
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsNameTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"j({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})j", "$.properties.age.multipleOf"},
      {R"j({"items":{"anyOf":[{"type":"string"},{"type":"string","pattern":"(?=x)"}]}})j", "$.items.anyOf[1].pattern"},
      {R"j({"not":{"type":"string"}})j", "$.not"},
      {R"j({"if":{},"then":{}})j", "$.if"},
      {R"j({"type":"object","patternProperties":{"^x":{}}})j", "$.patternProperties"},
      {R"j({"type":"object","propertyNames":{"maxLength":3}})j", "$.propertyNames"},
      {R"j({"type":"object","minProperties":1})j", "$.minProperties"},
      {R"j({"type":"array","uniqueItems":true})j", "$.uniqueItems"},
      {R"j({"type":"array","contains":{}})j", "$.contains"},
      {R"j({"type":"object","unevaluatedProperties":false})j", "$.unevaluatedProperties"},
      {R"j({"type":"object","dependentRequired":{"a":["b"]}})j", "$.dependentRequired"},
      {R"j({"$defs":{"x":{"frobnicate":1}},"type":"null"})j", "$.$defs.x.frobnicate"},
      {R"j({"properties":{"a b":{"nullable":true}}})j", R"j($.properties["a b"].nullable)j"},
      {R"j({"type":"string","format":"hostname"})j", "$.format"},
      {R"j({"type":"string","pattern":"(a)\\1"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"\\bword"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"\\p{L}"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"(?i)abc"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"a^b"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"a{"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"[z-a]"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"a**"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"x{20000}"})j", "$.pattern"},
      {R"j({"type":"string","pattern":"^[a-z]+$","maxLength":5})j", "$.maxLength"},
      {R"j({"type":"string","pattern":"a","format":"date"})j", "$.format"},
      {R"j({"enum":["a","bb"],"minLength":2})j", "$.minLength"},
  };
  for (const auto& [schema, path] : cases) EXPECT_EQ(error_path(schema), path) << schema;
}

TEST(JsonSchemaGrammar, InvalidValuesNameTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"j(5)j", "$"},
      {R"j("object")j", "$"},
      {R"j({"type":"array","minItems":3,"maxItems":2})j", "$.maxItems"},
      {R"j({"type":"string","minLength":-1})j", "$.minLength"},
      {R"j({"type":"string","maxLength":1.5})j", "$.maxLength"},
      {R"j({"type":"string","maxLength":20000})j", "$.maxLength"},
      {R"j({"type":"number","minimum":"0"})j", "$.minimum"},
      {R"j({"type":"number","minimum":5,"maximum":1})j", "$.maximum"},
      {R"j({"type":"strnig"})j", "$.type"},
      {R"j({"type":["string","bogus"]})j", "$.type[1]"},
      {R"j({"type":[]})j", "$.type"},
      {R"j({"properties":{"x":{"$ref":"#/$defs/missing"}}})j", "$.properties.x.$ref"},
      {R"j({"$ref":"other.json#/a"})j", "$.$ref"},
      {R"j({"$ref":"#anchor"})j", "$.$ref"},
      {R"j({"properties":{"x":3}})j", "$.properties.x"},
      {R"j({"properties":[]})j", "$.properties"},
      {R"j({"required":"a"})j", "$.required"},
      {R"j({"required":["a",1]})j", "$.required[1]"},
      {R"j({"anyOf":[]})j", "$.anyOf"},
      {R"j({"allOf":{}})j", "$.allOf"},
      {R"j({"enum":"a"})j", "$.enum"},
      {R"j({"anyOf":[{"type":"string"}],"oneOf":[{"type":"string"}]})j", "$.oneOf"},
      {R"j({"type":"string","enum":[1,2]})j", "$"},                       // no value left
      {R"j({"allOf":[{"type":"string"},{"type":"integer"}]})j", "$"},
      {R"j({"$ref":"#"})j", "$.$ref"},                                     // left recursion
      {R"j({"anyOf":[{"type":"null"},{"$ref":"#"}]})j", "$.anyOf[1].$ref"},
      {R"j({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})j", "$.$defs.b.anyOf[0].$ref"},
      {R"j({"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]})j", "$.properties.c.$ref"},  // no finite value
  };
  for (const auto& [schema, path] : cases) EXPECT_EQ(error_path(schema), path) << schema;
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// {key: inner} built by moving: a braced initializer list would copy `inner`, recursing once per
// level (and overflowing the stack of a sanitized build at 10,000 levels).
Json wrap(const char* key, Json inner, bool in_array = false) {
  Json out = Json::object();
  if (in_array) {
    Json list = Json::array();
    list.push_back(std::move(inner));
    inner = std::move(list);
  }
  out[key] = std::move(inner);
  return out;
}

std::string path_of_error(const Json& schema) {
  try {
    (void)json_schema_to_grammar(schema);
  } catch (const JsonSchemaError& e) {
    return e.path();
  }
  return "(converted)";
}

TEST(JsonSchemaGrammar, DeepNestingRefusedWithoutRecursing) {
  Json s = Json::object();
  s["type"] = "string";
  for (int i = 0; i < 10000; i++) s = wrap("items", std::move(s));
  std::string path;
  const double t = seconds([&] { path = path_of_error(s); });
  EXPECT_EQ(path.rfind("$.items.items", 0), 0u) << path;
  EXPECT_LT(t, 5.0);
  // The same through anyOf, and a deep value inside an enum.
  Json a = Json::object();
  a["type"] = "null";
  for (int i = 0; i < 10000; i++) a = wrap("anyOf", std::move(a), true);
  EXPECT_EQ(path_of_error(a).rfind("$.anyOf[0].anyOf[0]", 0), 0u);
  Json v = Json::array();
  for (int i = 0; i < 10000; i++) {
    Json outer = Json::array();
    outer.push_back(std::move(v));
    v = std::move(outer);
  }
  EXPECT_EQ(path_of_error(wrap("enum", std::move(v), true)), "$.enum");
  // 128 levels are fine.
  Json ok = {{"type", "integer"}};
  for (int i = 0; i < 120; i++) ok = Json{{"type", "array"}, {"items", std::move(ok)}};
  EXPECT_NO_THROW(grammar_for(ok));
}

TEST(JsonSchemaGrammar, HugeSchemasRefusedInBoundedTime) {
  // 10 MB of enum strings: past the 4 MiB grammar limit.
  Json values = Json::array();
  for (int i = 0; values.size() * 24 < (10u << 20); i++) values.push_back(fmt::format("value-number-{:010d}", i));
  const Json big_enum = {{"enum", values}};
  std::string path;
  double t = seconds([&] {
    try {
      (void)json_schema_to_grammar(big_enum);
    } catch (const JsonSchemaError& e) {
      path = e.path();
    }
  });
  EXPECT_EQ(path, "$");
  EXPECT_LT(t, 20.0);
  // 10 MB of objects: 256 groups of 1,000 properties (ordered_json finds keys by a linear
  // scan, so one object of 250,000 keys would cost the test itself minutes to build).
  Json groups = Json::object();
  for (int g = 0; g < 256; g++) {
    Json props = Json::object();
    for (int i = 0; i < 1000; i++) props.push_back({fmt::format("property_{:08d}", i), Json{{"type", "integer"}}});
    groups.push_back({fmt::format("group_{}", g), Json{{"type", "object"}, {"properties", std::move(props)}}});
  }
  const Json big_object = {{"type", "object"}, {"properties", groups}};
  EXPECT_GT(big_object.dump().size(), 5u << 20);
  t = seconds([&] { EXPECT_THROW(json_schema_to_grammar(big_object), JsonSchemaError); });
  EXPECT_LT(t, 20.0);
  // A small schema whose anyOf branches, merged with their siblings, inline each other's
  // targets: 2^40 merges, cut short by the work limit.
  Json defs = Json::object();
  defs["d0"] = {{"type", "object"}};
  for (int i = 1; i <= 40; i++) {
    const std::string prev = fmt::format("#/$defs/d{}", i - 1);
    defs[fmt::format("d{}", i)] = {{"type", "object"},
                                   {"properties", {{fmt::format("p{}", i), {{"type", "integer"}}}}},
                                   {"anyOf", Json::array({Json{{"$ref", prev}}, Json{{"$ref", prev}, {"required", {"x"}}}})}};
  }
  const Json tangled = {{"$defs", defs}, {"$ref", "#/$defs/d40"}, {"required", {"p40"}}};
  t = seconds([&] { EXPECT_THROW(json_schema_to_grammar(tangled), JsonSchemaError); });
  EXPECT_LT(t, 20.0);
}

// ---- translations against brute force ----------------------------------------------------------

TEST(JsonSchemaGrammar, IntegerAndNumberRangesMatchArithmetic) {
  const char* bounds[] = {
      R"j("minimum":-10,"maximum":250)j", R"j("minimum":7)j", R"j("maximum":-3)j", R"j("exclusiveMinimum":-1,"exclusiveMaximum":1)j",
      R"j("minimum":0.5,"maximum":2.25)j", R"j("exclusiveMinimum":1.05,"maximum":1.1)j", R"j("minimum":-1.5,"exclusiveMaximum":-0.25)j",
      R"j("minimum":-0.05)j", R"j("exclusiveMaximum":0)j", R"j("minimum":99,"maximum":101)j", R"j("minimum":3,"maximum":3)j",
      R"j("exclusiveMinimum":2,"maximum":2.5)j", R"j("minimum":19.99,"exclusiveMaximum":20)j", R"j("minimum":1e2,"maximum":1.5e2)j"};
  std::vector<std::string> numbers;
  for (int i = -300; i <= 300; i++) {
    numbers.push_back(std::to_string(i));
    for (const char* frac : {".0", ".05", ".1", ".25", ".5", ".95", ".99", ".999", ".00001", ".10"}) {
      if (i == 0) numbers.push_back(std::string("-0") + frac);
      numbers.push_back(std::to_string(i) + frac);
    }
  }
  for (const char* b : bounds) {
    for (const char* type : {"integer", "number"}) {
      const Json schema = Json::parse(fmt::format(R"j({{"type":"{}",{}}})j", type, b));
      std::shared_ptr<const Grammar> g;
      try {
        g = grammar_for(schema);
      } catch (const JsonSchemaError& e) {  // no value in range: then none of ours validates
        EXPECT_EQ(e.path(), "$") << e.what();
        for (const std::string& n : numbers) {
          if (n.find('.') == std::string::npos || std::string(type) == "number") {
            EXPECT_FALSE(test::validate_json(Json::parse(n), schema)) << schema.dump() << " " << n;
          }
        }
        continue;
      }
      for (const std::string& n : numbers) {
        const bool integral = n.find('.') == std::string::npos;
        const bool expect = test::validate_json(Json::parse(n), schema) && (integral || std::string(type) == "number");
        EXPECT_EQ(grammar_accepts(g, n), expect) << schema.dump() << " " << n;
      }
    }
  }
}

TEST(JsonSchemaGrammar, PatternsMatchStdRegex) {
  const char* patterns[] = {"^(a|bc)*d?$", "[^a-c]x", "^a{2,3}$", "b+c", "^(?:ab|a)(?:b|)c$", "^\\w\\d?$", "^[\\s\\S]?$",
                            "^.$", "a|^b|c$", "^(?:a|)b{0,2}$", "^[a\\-c]+$", "^[]$|^x$", "^[^]$", "\\.", "^$",
                            "^(a*)*$", "[xd]{2}", "^\\x61\\u0062$", "^[\\x00-\\x1f\"\\\\]$", "c{2,}"};
  const std::string alphabet[] = {"a", "b", "c", "d", "x", ".", "-", "\n", "\"", "\\", "\x01", "\xC3\xA9"};
  std::vector<std::string> strings = {""};
  for (size_t len = 0, from = 0; len < 4; len++) {
    const size_t to = strings.size();
    for (size_t i = from; i < to; i++)
      for (const std::string& c : alphabet) strings.push_back(strings[i] + c);
    from = to;
  }
  for (const char* p : patterns) {
    const Json schema = {{"type", "string"}, {"pattern", p}};
    const auto g = grammar_for(schema);
    for (const std::string& s : strings) {
      const bool expect = test::validate_json(Json(s), schema);
      const std::string doc = Json(s).dump();
      EXPECT_EQ(grammar_accepts(g, doc), expect) << p << " " << doc;
    }
  }
}

}  // namespace
}  // namespace lumen

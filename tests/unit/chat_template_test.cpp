// Chat templates: every case of ../shared/chat-templates/cases.json byte for byte, then the
// Jinja semantics one concept at a time, the hard limits that stop hostile templates, and
// concurrent renders. The expected strings of the tables were produced by jinja2 3.1 in the
// environment transformers uses (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loop controls, its tojson), so they are what Hugging Face renders, not what this renderer
// happens to do.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "template/chat_template.h"
#include "test_support.h"

namespace lumen {
namespace {

using nlohmann::ordered_json;

TemplateRenderOptions fixed_clock() {
  TemplateRenderOptions o;
  o.now = parse_template_clock("2026-11-30 12:00:00");
  return o;
}

std::string render(const std::string& tpl, const std::string& vars = "{}") {
  return JinjaTemplate(tpl).render(ordered_json::parse(vars), fixed_clock());
}

// The message of the lumen::Error that loading or rendering throws ("" if none).
std::string error_of(const std::string& tpl, const std::string& vars = "{}") {
  try {
    JinjaTemplate(tpl).render(ordered_json::parse(vars), fixed_clock());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- the shared fixtures --------------------------------------------------------------------

const ordered_json& fixture_cases() {
  static const ordered_json cases = [] {
    const std::string path = test::shared_path("chat-templates/cases.json");
    return test::shared_exists("chat-templates/cases.json") ? ordered_json::parse(test::read_file(path))
                                                            : ordered_json::array();
  }();
  return cases;
}

std::vector<std::string> fixture_ids() {
  std::vector<std::string> ids;
  for (const auto& c : fixture_cases()) ids.push_back(c["id"].get<std::string>());
  if (ids.empty()) ids.push_back("(none)");
  return ids;
}

class ChatTemplateFixture : public testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, RendersLikeTransformers) {
  if (GetParam() == "(none)") GTEST_SKIP() << "no chat-templates/cases.json under " << test::shared_dir();
  const ordered_json* found = nullptr;
  for (const auto& c : fixture_cases())
    if (c["id"] == GetParam()) found = &c;
  ASSERT_NE(found, nullptr);
  const ordered_json& c = *found;
  const std::string source = test::read_file(test::shared_path("chat-templates/" + c["template"].get<std::string>()));
  const JinjaTemplate tpl(source);
  if (c.contains("expected")) {
    EXPECT_EQ(tpl.render(c["variables"], fixed_clock()), c["expected"].get<std::string>());
    return;
  }
  try {
    const std::string out = tpl.render(c["variables"], fixed_clock());
    ADD_FAILURE() << "rendered instead of failing: " << out;
  } catch (const Error& e) {
    if (c["error_kind"] == "raise_exception") {
      EXPECT_EQ(std::string(e.what()), c["expected_error"].get<std::string>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ChatTemplateFixture, testing::ValuesIn(fixture_ids()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(ChatTemplateFixtures, AllPresentCasesPass) {
  if (fixture_cases().empty()) GTEST_SKIP() << "no fixtures";
  EXPECT_EQ(fixture_cases().size(), 97u);
}

// ---- semantics, concept by concept --------------------------------------------------------

struct RenderCase {
  const char* name;
  const char* tpl;
  const char* vars;
  const char* expected;
};

struct ErrorCase {
  const char* name;
  const char* tpl;
  const char* message;  // a part of the error message
};

const RenderCase kWhitespace[] = {
    {"trim_blocks",
     R"~({% if true %}
yes
{% endif %}
end)~",
     R"~({})~",
     R"~(yes
end)~"},
    {"lstrip_blocks",
     R"~(a
    {% if true %}
    b
    {% endif %}
c)~",
     R"~({})~",
     R"~(a
    b
c)~"},
    {"lstrip_not_for_expressions",
     R"~(a
    {{ 'x' }}
)~",
     R"~({})~",
     R"~(a
    x)~"},
    {"comment_trim_and_lstrip",
     R"~(a
  {# note #}
b)~",
     R"~({})~",
     R"~(a
b)~"},
    {"minus_strips_newlines",
     R"~(a  

  {%- if true -%}  

  b  {%- endif %})~",
     R"~({})~",
     R"~(ab)~"},
    {"minus_on_expressions",
     R"~(a 
 {{- 'x' -}} 
 b)~",
     R"~({})~",
     R"~(axb)~"},
    {"plus_disables_lstrip",
     R"~(a
    {%+ if true %}b{% endif %})~",
     R"~({})~",
     R"~(a
    b)~"},
    {"plus_disables_trim",
     R"~({% if true +%}
b{% endif %})~",
     R"~({})~",
     R"~(
b)~"},
    {"unicode_whitespace_stripped_by_minus",
     R"~(a　 {{- 'b' -}} 
c)~",
     R"~({})~",
     R"~(abc)~"},
    {"one_trailing_newline_dropped",
     R"~(x

)~",
     R"~({})~",
     R"~(x
)~"},
    {"crlf_normalised",
     "a\015\n{% if true %}\015\nb\015\n{% endif %}\015\n",
     R"~({})~",
     R"~(a
b
)~"},
    {"raw_block",
     R"~({% raw %}{{ not_jinja }} {% if %}{% endraw %})~",
     R"~({})~",
     R"~({{ not_jinja }} {% if %})~"},
    {"raw_keeps_its_newline",
     R"~({% raw %}
x
{% endraw %}
y)~",
     R"~({})~",
     R"~(
x
y)~"},
    {"expression_end_keeps_newline",
     R"~({{ 'a' }}
b)~",
     R"~({})~",
     R"~(a
b)~"},
    {"nested_blocks_indented",
     R"~({% for i in [1, 2] %}
  {% if i > 1 %}
    [{{ i }}]
  {% endif %}
{% endfor %}
)~",
     R"~({})~",
     R"~(    [2]
)~"},
};

const RenderCase kExpressions[] = {
    {"arithmetic",
     R"~({{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2**3**2 }} {{ -2**2 }})~",
     R"~({})~",
     R"~(3 -4 2 3.5 2.0 1024 0.5 64 4)~"},
    {"float_printing",
     R"~({{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 1/3 }})~",
     R"~({})~",
     R"~(1.0 0.30000000000000004 1e+16 1000000000000000.0 1e-05 0.0001 -0.0 0.3333333333333333)~"},
    {"strings",
     R"~({{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ 'x' + 'y' }} {{ "it's" }} {{ 'tab\there' }} {{ '\u00e9\x41' }})~",
     R"~({})~",
     R"~(a1NoneTrue abab xy it's tab	here éA)~"},
    {"comparisons",
     R"~({{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ none == none }})~",
     R"~({})~",
     R"~(True True True True True True)~"},
    {"containers_compare_by_value",
     R"~({{ {'a': [1, 2]} == {'a': [1, 2]} }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ [1, 2] == (1, 2) }} {{ messages[0] == {'role': 'user', 'content': 'hi'} }})~",
     R"~({"messages": [{"role": "user", "content": "hi"}]})~",
     R"~(True True False True)~"},
    {"membership",
     R"~({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in undefined_name }})~",
     R"~({})~",
     R"~(True True True True False)~"},
    {"and_or_return_operands",
     R"~({{ none or 'x' }} {{ 0 and 1 }} {{ 'a' and 'b' }} {{ not '' }} {{ [] or {} }})~",
     R"~({})~",
     R"~(x 0 b True {})~"},
    {"conditional_expression",
     R"~([{{ 'y' if true else 'n' }}][{{ 'y' if false }}][{{ 'a' if false else 'b' if false else 'c' }}])~",
     R"~({})~",
     R"~([y][][c])~"},
    {"tests_bind_tighter_than_not",
     R"~({{ not x is defined }} {{ x is not defined }} {{ 1 + 1 is odd }})~",
     R"~({})~",
     R"~(True True 2)~"},
    {"filter_binds_to_operand",
     R"~({{ -3|abs }} {{ 'ab' ~ 'cd'|upper }} {{ [1, 2]|length + 1 }})~",
     R"~({})~",
     R"~(3 abCD 3)~"},
    {"printing_python_reprs",
     R"~({{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 1: (2,)} }} {{ ('x',) }} {{ "it's" in ['x'] }} {{ ['it\'s'] }} {{ True }} {{ none }})~",
     R"~({})~",
     R"~([1, 'a', None, True, 1.5] {'k': 'v', 1: (2,)} ('x',) False ["it's"] True None)~"},
    {"tuples",
     R"~({{ (1, 2) }} {{ () }} {% set a, b = 'xy' %}{{ b }}{{ a }})~",
     R"~({})~",
     R"~((1, 2) () yx)~"},
    {"lookup_order_dot_prefers_attribute",
     R"~({% set d = {'items': 'key', 'a': 1} %}{{ d['items'] }} {{ d.a }} {{ d.items()|list }} {{ d.nope is defined }})~",
     R"~({})~",
     R"~(key 1 [('items', 'key'), ('a', 1)] False)~"},
    {"missing_items_are_undefined",
     R"~([{{ d.x }}][{{ d['x'] }}][{{ l[9] }}][{{ none.x }}])~",
     R"~({"d": {}, "l": [1]})~",
     R"~([][][][])~"},
    {"slices",
     R"~({% set l = [0, 1, 2, 3, 4] %}{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[3:1:-1] }} {{ l[9:] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }})~",
     R"~({})~",
     R"~([1, 2, 3, 4] [0, 1, 2, 3] [4, 3, 2, 1, 0] [0, 2, 4] [3, 4] [3, 2] [] él cba)~"},
    {"negative_index",
     R"~({{ [1, 2, 3][-1] }} {{ 'abc'[-2] }} {{ messages[-1].content }})~",
     R"~({"messages": [{"content": "a"}, {"content": "b"}]})~",
     R"~(3 b b)~"},
    {"range",
     R"~({{ range(3)|list }} {{ range(1, 10, 4)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }} {{ range(3)|length }})~",
     R"~({})~",
     R"~([0, 1, 2] [1, 5, 9] [5, 3, 1] range(0, 3) 3)~"},
};

const RenderCase kLoops[] = {
    {"loop_variables",
     R"~({% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})~",
     R"~({})~",
     R"~(1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;)~"},
    {"previtem_nextitem",
     R"~({% for x in [1, 2, 3] %}({{ loop.previtem }},{{ loop.nextitem }}){% endfor %})~",
     R"~({})~",
     R"~((,2)(1,3)(2,))~"},
    {"cycle",
     R"~({% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %})~",
     R"~({})~",
     R"~(abca)~"},
    {"loop_filter",
     R"~({% for x in range(10) if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %})~",
     R"~({})~",
     R"~(1:1/5 3:2/5 5:3/5 7:4/5 9:5/5 )~"},
    {"else_when_empty",
     R"~({% for x in [] %}{{ x }}{% else %}none{% endfor %}|{% for x in [0] if x %}{% else %}filtered{% endfor %})~",
     R"~({})~",
     R"~(none|filtered)~"},
    {"unpacking",
     R"~({% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}{% for k, v in {'c': 3}|items %}{{ k }}{{ v }}{% endfor %})~",
     R"~({})~",
     R"~(a=1 b=2 c3)~"},
    {"dict_iterates_keys",
     R"~({% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %})~",
     R"~({})~",
     R"~(ba)~"},
    {"break_continue",
     R"~({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %})~",
     R"~({})~",
     R"~(0134)~"},
    {"nested_loops",
     R"~({% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %})~",
     R"~({})~",
     R"~(121|122|)~"},
    {"recursive",
     R"~({% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }}){% endif %}{% endfor %})~",
     R"~({"tree": [{"name": "a", "kids": [{"name": "b", "kids": []}, {"name": "c"}]}, {"name": "d"}]})~",
     R"~(a(bc)d)~"},
    {"set_in_loop_does_not_leak",
     R"~({% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }})~",
     R"~({})~",
     R"~(231)~"},
    {"set_in_if_does_leak",
     R"~({% if true %}{% set x = 5 %}{% endif %}{{ x }})~",
     R"~({})~",
     R"~(5)~"},
    {"namespace_carries_state",
     R"~({% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }})~",
     R"~({})~",
     R"~(6 0123)~"},
    {"undefined_iterates_empty",
     R"~([{% for x in nothing %}{{ x }}{% endfor %}])~",
     R"~({})~",
     R"~([])~"},
    {"strings_iterate_code_points",
     R"~({% for c in 'hé😀' %}[{{ c }}]{% endfor %})~",
     R"~({})~",
     R"~([h][é][😀])~"},
};

const RenderCase kMacros[] = {
    {"defaults",
     R"~({% macro m(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c=9) }} {{ m(b=5, a=4) }} [{{ m() }}])~",
     R"~({})~",
     R"~(121 131 129 454 [2])~"},
    {"recursion",
     R"~({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(10) }})~",
     R"~({})~",
     R"~(3628800)~"},
    {"sees_defining_scope_live",
     R"~({% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }})~",
     R"~({})~",
     R"~(2)~"},
    {"caller",
     R"~({% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('x') %}inner{% endcall %})~",
     R"~({})~",
     R"~([x:inner])~"},
    {"caller_with_args",
     R"~({% macro each(l) %}{% for i in l %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %})~",
     R"~({})~",
     R"~(<1><2>)~"},
    {"caller_is_optional",
     R"~({% macro m() %}{{ caller is defined }}{% endmacro %}{{ m() }})~",
     R"~({})~",
     R"~(False)~"},
    {"varargs_kwargs",
     R"~({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }})~",
     R"~({})~",
     R"~(1(2, 3){'k': 'v'})~"},
    {"filter_block",
     R"~({% filter upper %}abc {{ 'd' }}{% endfilter %})~",
     R"~({})~",
     R"~(ABC D)~"},
    {"block_set",
     R"~({% set x %}a{{ 1 + 1 }}{% endset %}{% set y | trim %}  b  {% endset %}[{{ x }}][{{ y }}])~",
     R"~({})~",
     R"~([a2][b])~"},
    {"with_block",
     R"~({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])~",
     R"~({})~",
     R"~(3[])~"},
    {"generation_renders_body",
     R"~({% for m in ['x'] %}{% generation %}<{{ m }}>{% endgeneration %}{% endfor %})~",
     R"~({})~",
     R"~(<x>)~"},
};

const RenderCase kFilters[] = {
    {"trim_unicode",
     R"~([{{ '　  x  
'|trim }}][{{ 'xxaxx'|trim('x') }}])~",
     R"~({})~",
     R"~([x][a])~"},
    {"string_methods_strip",
     R"~([{{ '\n\na\n'.lstrip('\n') }}][{{ 'ab  '.rstrip() }}][{{ '　a　'.strip() }}][{{ 'xyx'.strip('x') }}])~",
     R"~({})~",
     R"~([a
][ab][a][y])~"},
    {"selectattr_rejectattr",
     R"~({{ m|selectattr('role', 'equalto', 'user')|map(attribute='c')|join(',') }} {{ m|rejectattr('role', 'eq', 'user')|list|length }})~",
     R"~({"m": [{"role": "user", "c": "1"}, {"role": "bot", "c": "2"}, {"role": "user", "c": "3"}]})~",
     R"~(1,3 1)~"},
    {"select_reject",
     R"~({{ [1, 2, 3, 4]|select('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 2, 3]|reject('gt', 1)|list }})~",
     R"~({})~",
     R"~([1, 3] [1, 'a'] [1])~"},
    {"map",
     R"~({{ ['a', 'b']|map('upper')|join }} {{ [{'x': 1}, {}]|map(attribute='x', default=0)|list }})~",
     R"~({})~",
     R"~(AB [1, 0])~"},
    {"join_length_list",
     R"~({{ [1, none, 'a']|join('-') }} {{ 'abc'|list }} {{ 'héllo'|length }} {{ {'a': 1}|count }})~",
     R"~({})~",
     R"~(1-None-a ['a', 'b', 'c'] 5 1)~"},
    {"first_last_default",
     R"~({{ [1, 2]|first }}{{ [1, 2]|last }}[{{ []|first }}] {{ x|default('d') }} {{ ''|default('e', true) }} {{ none|d('n') }})~",
     R"~({})~",
     R"~(12[] d e None)~"},
    {"case",
     R"~({{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'ß'|upper }} {{ 'ΣΑΣ'|lower }} {{ 'x'|upper }})~",
     R"~({})~",
     R"~(Hello World Hello SS σας X)~"},
    {"replace_string",
     R"~({{ 'aaa'|replace('a', 'b', 2) }} {{ 42|string }} {{ [1]|string }} {{ none|string }})~",
     R"~({})~",
     R"~(bba 42 [1] None)~"},
    {"numbers",
     R"~({{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ '2.5'|float }} {{ -3|abs }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2.1|round(0, 'ceil') }})~",
     R"~({})~",
     R"~(42 4 7 2.5 3 2.0 3.14 3.0)~"},
    {"sort_unique_reverse",
     R"~({{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['a', 'A', 'b']|unique|list }} {{ [1, 2]|reverse|list }} {{ 'abc'|reverse }})~",
     R"~({})~",
     R"~(['A', 'b', 'c'] [3, 2, 1] ['a', 'b'] [2, 1] cba)~"},
    {"sum_min_max",
     R"~({{ [1, 2.5]|sum }} {{ [3, 1]|min }} {{ ['b', 'A']|max }})~",
     R"~({})~",
     R"~(3.5 1 b)~"},
    {"indent_center_wordcount",
     R"~([{{ 'a\nb\n\nc'|indent(2) }}][{{ 'a'|center(5) }}] {{ 'one two  three'|wordcount }})~",
     R"~({})~",
     R"~([a
  b

  c][  a  ] 3)~"},
    {"escape_safe",
     R"~({{ '<a href="x">&</a>'|e }} {{ ('<b>'|safe) + '<i>' }})~",
     R"~({})~",
     R"~(&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt; <b>&lt;i&gt;)~"},
    {"format",
     R"~({{ '%s=%d'|format('a', 3) }} {{ '%.2f|%5s|%-5s|%x'|format(3.14159, 'r', 'l', 255) }} {{ '%s' % 'x' }} {{ '{} {:>4}'.format('a', 'b') }})~",
     R"~({})~",
     R"~(a=3 3.14|    r|l    |ff x a    b)~"},
    {"dictsort_items",
     R"~({{ {'b': 1, 'a': 2}|dictsort }} {{ {'a': 1}|items|list }})~",
     R"~({})~",
     R"~([('a', 2), ('b', 1)] [('a', 1)])~"},
    {"generators_are_single_use",
     R"~({% set g = [1, 2]|select %}{{ g|list }}{{ g|list }})~",
     R"~({})~",
     R"~([1, 2][])~"},
    {"generator_is_always_true",
     R"~({% if [1]|select('gt', 5) %}true{% endif %})~",
     R"~({})~",
     R"~(true)~"},
};

const RenderCase kToJson[] = {
    {"compact",
     R"~({{ {'a': [1, 2.5, none, true, 'x'], 'b': {}} |tojson }})~",
     R"~({})~",
     R"~({"a": [1, 2.5, null, true, "x"], "b": {}})~"},
    {"indent",
     R"~({{ {'a': [1, {'b': []}, {}], 'c': 'x'}|tojson(indent=2) }})~",
     R"~({})~",
     R"~({
  "a": [
    1,
    {
      "b": []
    },
    {}
  ],
  "c": "x"
})~"},
    {"key_order_kept",
     R"~({{ d|tojson }})~",
     R"~({"d": {"z": 1, "a": 2, "m": {"y": 1, "b": 2}}})~",
     R"~({"z": 1, "a": 2, "m": {"y": 1, "b": 2}})~"},
    {"sort_keys",
     R"~({{ d|tojson(sort_keys=true) }})~",
     R"~({"d": {"z": 1, "a": 2}})~",
     R"~({"a": 2, "z": 1})~"},
    {"separators",
     R"~({{ [1, {'a': 2}]|tojson(separators=(',', ':')) }})~",
     R"~({})~",
     R"~([1,{"a":2}])~"},
    {"unicode_and_escapes",
     R"~({{ 'é😀"\\/<>&\n\t\u0001'|tojson }})~",
     R"~({})~",
     R"~("é😀\"\\/<>&\n\t\u0001")~"},
    {"ensure_ascii",
     R"~({{ 'é😀'|tojson(ensure_ascii=true) }})~",
     R"~({})~",
     R"~("\u00e9\ud83d\ude00")~"},
    {"floats",
     R"~({{ [1.0, 0.1, 1e-05, 1e16, 123.456, -0.0, 3]|tojson }})~",
     R"~({})~",
     R"~([1.0, 0.1, 1e-05, 1e+16, 123.456, -0.0, 3])~"},
    {"non_string_keys",
     R"~({{ {1: 'a', none: 'b', true: 'c', 2.5: 'd'}|tojson }})~",
     R"~({})~",
     R"~({"1": "c", "null": "b", "2.5": "d"})~"},
    {"indent_string",
     R"~({{ [1]|tojson(indent='\t') }})~",
     R"~({})~",
     R"~([
	1
])~"},
};

const RenderCase kUndefined[] = {
    {"prints_empty",
     R"~([{{ x }}][{{ x|trim }}][{{ x|length }}][{{ x|list }}][{{ x|join }}][{{ x|string }}])~",
     R"~({})~",
     R"~([][][0][[]][][])~"},
    {"tests",
     R"~({{ x is defined }} {{ x is undefined }} {{ x is none }} {{ x is iterable }} {{ x is string }} {{ not x }} {{ x == x }})~",
     R"~({})~",
     R"~(False True False True False True True)~"},
    {"none_is_defined",
     R"~({{ tools is defined }} {{ tools is none }} {{ tools is not none }})~",
     R"~({"tools": null})~",
     R"~(True True False)~"},
    {"concat_is_fine",
     R"~([{{ 'a' ~ x }}])~",
     R"~({})~",
     R"~([a])~"},
};

const RenderCase kStrings[] = {
    {"split",
     R"~({{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'x</think>y'.split('</think>')[-1] }})~",
     R"~({})~",
     R"~(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] y)~"},
    {"starts_ends",
     R"~({{ 'abc'.startswith('a') }} {{ 'abc'.startswith(('x', 'ab')) }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith('b', 1) }})~",
     R"~({})~",
     R"~(True True True True)~"},
    {"find_count_replace",
     R"~({{ 'héllo'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.count('l') }} {{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }})~",
     R"~({})~",
     R"~(2 3 2 a+b+c ab-c)~"},
    {"case_methods",
     R"~({{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ "they're".title() }} {{ 'hELLO'.capitalize() }} {{ 'aB'.swapcase() }})~",
     R"~({})~",
     R"~(AB ab They'Re Hello Ab)~"},
    {"predicates",
     R"~({{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }})~",
     R"~({})~",
     R"~(True True True True True)~"},
    {"join_and_format",
     R"~({{ ', '.join(['a', 'b']) }} {{ '{0}-{1}-{0}'.format('x', 'y') }} {{ '{name}'.format(name='n') }})~",
     R"~({})~",
     R"~(a, b x-y-x n)~"},
    {"dict_methods",
     R"~({% set d = {'a': 1, 'b': 2} %}{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.items() }})~",
     R"~({})~",
     R"~(['a', 'b'] [1, 2] 1 None 0 dict_items([('a', 1), ('b', 2)]))~"},
    {"list_methods",
     R"~({% set l = [1, 2, 2] %}{{ l.index(2) }} {{ l.count(2) }})~",
     R"~({})~",
     R"~(1 2)~"},
};

const RenderCase kGlobals[] = {
    {"strftime_now",
     R"~({{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %a %j') }})~",
     R"~({})~",
     R"~(30 Nov 2026|November 30, 2026|2026-11-30 12:00:00 Mon 334)~"},
    {"dict_namespace_joiner_cycler",
     R"~({{ dict(a=1) }} {% set ns = namespace(x=1) %}{{ ns.x }} {% set j = joiner('/') %}{% for i in 'ab' %}{{ j() }}{{ i }}{% endfor %} {% set c = cycler(1, 2) %}{{ c.next() }}{{ c.next() }}{{ c.next() }})~",
     R"~({})~",
     R"~({'a': 1} 1 a/b 121)~"},
    {"variables_shadow_globals",
     R"~({{ range }})~",
     R"~({"range": "mine"})~",
     R"~(mine)~"},
};

const ErrorCase kLoadErrors[] = {
    {"unknown_tag", R"~({% frobnicate %})~", "unknown tag 'frobnicate'"},
    {"unknown_filter", R"~({{ x|frobnicate }})~", "No filter named 'frobnicate'"},
    {"unknown_filter_in_untaken_branch", R"~({% if false %}{{ x|frobnicate }}{% endif %})~", "No filter named 'frobnicate'"},
    {"unknown_test", R"~({{ x is frobnicate }})~", "No test named 'frobnicate'"},
    {"unknown_filter_name_argument", R"~({{ x|map('frobnicate')|list }})~", "No filter named 'frobnicate'"},
    {"unknown_test_name_argument", R"~({{ x|selectattr('a', 'frobnicate')|list }})~", "No test named 'frobnicate'"},
    {"include", R"~({% include 'other.jinja' %})~", "'include' tag is not supported"},
    {"extends", R"~({% extends 'base' %})~", "'extends' tag is not supported"},
    {"do_is_not_enabled", R"~({% do x.append(1) %})~", "'do' tag is not supported"},
    {"break_outside_loop", R"~({% break %})~", "'break' outside loop"},
    {"unclosed_block", R"~({% if true %}x)~", "Unexpected end of template"},
    {"unclosed_comment", R"~({# x)~", "Missing end of comment tag"},
    {"unclosed_raw", R"~({% raw %}x)~", "Missing end of raw directive"},
    {"unterminated_string", R"~({{ 'abc }})~", "unexpected char"},
    {"bad_syntax_has_line", R"~(a
b
{{ 1 + }})~", "template line 3:"},
    {"unbalanced_brackets", R"~({{ [1, 2 }})~", "unexpected '}'"},
    {"assign_to_literal", R"~({% set 1 = 2 %})~", "can't assign"},
};

const ErrorCase kRenderErrors[] = {
    {"raise_exception_message_exact", R"~({{ raise_exception('Roles must alternate') }})~", "Roles must alternate"},
    {"str_plus_none", R"~({{ 'a' + none }})~", "can only concatenate str"},
    {"str_plus_undefined", R"~({{ 'a' + x }})~", "'x' is undefined"},
    {"attribute_of_undefined", R"~({{ x.y }})~", "'x' is undefined"},
    {"call_of_undefined", R"~({{ none.split() }})~", "has no attribute 'split'"},
    {"iterate_none", R"~({% for t in none %}{% endfor %})~", "'NoneType' object is not iterable"},
    {"length_of_generator", R"~({{ [1]|select|length }})~", "has no len()"},
    {"mutating_list_method", R"~({% set l = [] %}{{ l.append(1) }})~", "unsafe"},
    {"mutating_dict_method", R"~({% set d = {} %}{{ d.update({'a': 1}) }})~", "unsafe"},
    {"division_by_zero", R"~({{ 1 / 0 }})~", "ZeroDivisionError"},
    {"compare_str_int", R"~({{ 'a' < 1 }})~", "not supported between instances of 'str' and 'int'"},
    {"unpack_count", R"~({% for a, b in [[1, 2, 3]] %}{% endfor %})~", "too many values to unpack"},
    {"tojson_undefined", R"~({{ x|tojson }})~", "not JSON serializable"},
    {"namespace_attr_on_non_namespace", R"~({% set n = 1 %}{% set n.a = 2 %})~", "non-namespace"},
    {"macro_too_many_args", R"~({% macro m(a) %}{% endmacro %}{{ m(1, 2) }})~", "takes not more than 1 argument"},
    {"range_too_big", R"~({{ range(100001)|length }})~", "MAX_RANGE (100000)"},
    {"error_names_line", R"~(line 1
{% if true %}
{{ 'a' + 1 }}
{% endif %})~", "template line 3:"},
};

template <size_t N>
void check(const RenderCase (&cases)[N]) {
  for (const RenderCase& c : cases) {
    try {
      EXPECT_EQ(render(c.tpl, c.vars), c.expected) << c.name;
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
    }
  }
}

TEST(ChatTemplate, Whitespace) { check(kWhitespace); }
TEST(ChatTemplate, Expressions) { check(kExpressions); }
TEST(ChatTemplate, Loops) { check(kLoops); }
TEST(ChatTemplate, Macros) { check(kMacros); }
TEST(ChatTemplate, Filters) { check(kFilters); }
TEST(ChatTemplate, ToJson) { check(kToJson); }
TEST(ChatTemplate, Undefined) { check(kUndefined); }
TEST(ChatTemplate, StringMethods) { check(kStrings); }
TEST(ChatTemplate, Globals) { check(kGlobals); }

TEST(ChatTemplate, UnsupportedOrInvalidFailsAtLoad) {
  for (const ErrorCase& c : kLoadErrors) {
    try {
      JinjaTemplate tpl(c.tpl);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.name << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("template line ", 0), 0u) << c.name << ": " << e.what();
    }
  }
}

TEST(ChatTemplate, RenderErrors) {
  for (const ErrorCase& c : kRenderErrors) {
    std::unique_ptr<JinjaTemplate> tpl;
    ASSERT_NO_THROW(tpl = std::make_unique<JinjaTemplate>(c.tpl)) << c.name;
    try {
      const std::string out = tpl->render(ordered_json::object(), fixed_clock());
      ADD_FAILURE() << c.name << ": rendered " << out;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.name << ": " << e.what();
    }
  }
  // raise_exception's message is the whole error, nothing added.
  EXPECT_EQ(error_of("{% if true %}\n{{ raise_exception('Conversation roles must alternate') }}{% endif %}"),
            "Conversation roles must alternate");
}

TEST(ChatTemplate, UndefinedOperationsRaise) {
  EXPECT_NE(error_of("{{ x + 1 }}"), "");
  EXPECT_NE(error_of("{{ x.y }}"), "");
  EXPECT_NE(error_of("{{ x['y'] }}"), "");
  EXPECT_NE(error_of("{{ x() }}"), "");
  EXPECT_NE(error_of("{{ x < 1 }}"), "");
  EXPECT_NE(error_of("{{ x|int }}"), "");
  EXPECT_EQ(error_of("{{ x }}{{ x|default(1) }}{% for a in x %}{% endfor %}{{ 'a' in x }}{{ x ~ 'a' }}"), "");
}

TEST(ChatTemplate, BosTokenAbsentIsUndefinedNotNone) {
  EXPECT_EQ(render("[{{ bos_token }}]{{ bos_token is defined }}"), "[]False");
  EXPECT_EQ(render("[{{ bos_token }}]{{ bos_token is defined }}", R"({"bos_token": null})"), "[None]True");
}

// ---- limits -------------------------------------------------------------------------------

TEST(ChatTemplateLimits, ParserNesting) {
  EXPECT_NE(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}").find("nested deeper"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 300; ++i) blocks += "{% endif %}";
  EXPECT_NE(error_of(blocks).find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(100000, '[')).find("template line 1"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '-') + "1 }}").find("nested deeper"), std::string::npos);
  // Long flat chains build deep trees: refused at load too, not by overflowing the stack later.
  std::string chain = "{{ x";
  for (int i = 0; i < 2000; ++i) chain += ".a";
  EXPECT_NE(error_of(chain + " }}").find("nested deeper"), std::string::npos);
  // Reasonable nesting is fine.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}"), "1");
}

TEST(ChatTemplateLimits, MacroRecursion) {
  const std::string msg = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("nested deeper"), std::string::npos) << msg;
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(100)|length }}"),
            "193");
}

TEST(ChatTemplateLimits, EvaluationSteps) {
  const std::string msg = error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_NE(msg.find("steps"), std::string::npos) << msg;
}

TEST(ChatTemplateLimits, OutputAndStringSize) {
  std::string msg = error_of("{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}");
  EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
  msg = error_of("{{ 'x' * 1000000000 }}");
  EXPECT_NE(msg.find("MemoryError"), std::string::npos) << msg;
  msg = error_of("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}");
  EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
}

TEST(ChatTemplateLimits, RangeAndValueNesting) {
  EXPECT_NE(error_of("{{ range(10**9)|length }}").find("MAX_RANGE"), std::string::npos);
  EXPECT_EQ(render("{{ range(100000)|length }}"), "100000");
  const std::string msg =
      error_of("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  EXPECT_NE(msg.find("nesting deeper"), std::string::npos) << msg;
  // A namespace holding itself prints without recursing forever, and is freed (ASan checks).
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("too deep"), std::string::npos);
}

TEST(ChatTemplateLimits, LongTemplatesLexWithoutRecursion) {
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "line {{ i }} {# c #}{% if true %}x{% endif %}\n";
  EXPECT_EQ(render(big, R"({"i": 1})").size(), 20000u * 8);  // trim_blocks eats each newline
}

// ---- concurrency and the clock ------------------------------------------------------------

TEST(ChatTemplate, ConcurrentRendersAgree) {
  const JinjaTemplate tpl(
      "{% set ns = namespace(n=0) %}{% macro m(x) %}<{{ x|upper }}>{% endmacro %}"
      "{% for msg in messages %}{% set ns.n = ns.n + 1 %}{{ m(msg.content) }}{{ loop.index }}{% endfor %}{{ ns.n }}"
      "{{ messages|selectattr('role', 'eq', 'user')|map(attribute='content')|join(',') }}{{ messages|tojson }}");
  ordered_json vars = ordered_json::parse(
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "é"}]})");
  const std::string want = tpl.render(vars, fixed_clock());
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) bad[t] += tpl.render(vars, fixed_clock()) != want;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST(ChatTemplate, ClockDefaultsToLocalTime) {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  const std::string year = std::to_string(local.tm_year + 1900);
  EXPECT_EQ(JinjaTemplate("{{ strftime_now('%Y') }}").render(ordered_json::object()), year);
  EXPECT_THROW(parse_template_clock("2026-13-01 00:00:00"), Error);
  EXPECT_THROW(parse_template_clock("yesterday"), Error);
  EXPECT_THROW(JinjaTemplate("x").render(ordered_json::array()), Error);
}

// str.format with an index of more digits than an integer holds is an IndexError like any
// index out of range (a fuzzer found it escaping as std::out_of_range).
TEST(ChatTemplate, FormatIndicesPastAnIntegerAreIndexErrors) {
  for (const char* src : {"{{ '{99999999999999999999999}'.format(1) }}", "{{ '{0[99999999999999999999999]}'.format([1]) }}"}) {
    SCOPED_TRACE(src);
    try {
      JinjaTemplate(src).render(ordered_json::object());
      ADD_FAILURE() << "rendered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("IndexError"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(JinjaTemplate("{{ '{1}{0[1]}'.format([5, 6], 'a') }}").render(ordered_json::object()), "a6");
}

}  // namespace
}  // namespace lumen

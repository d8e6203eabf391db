// Tests for the Jinja interpreter that renders chat templates: whitespace control with
// trim_blocks/lstrip_blocks, scoping (loops vs namespace), loop variables, filters and tests,
// Python-style printing and tojson, and errors (parse errors with lines, undefined access,
// raise_exception).
#include "engine/data/jinja.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace air::engine::jinja {
namespace {

using ::testing::HasSubstr;

std::string Render(std::string_view source,
                   const nlohmann::json& context = nlohmann::json::object()) {
  auto t = JinjaTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return "<parse error>";
  auto text = t->Render(context);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "<render error>";
}

std::string ErrorOf(std::string_view source,
                    const nlohmann::json& context = nlohmann::json::object()) {
  auto t = JinjaTemplate::Parse(source);
  if (!t.ok()) return t.status().message();
  auto text = t->Render(context);
  return text.ok() ? "" : text.status().message();
}

TEST(JinjaTest, TrimAndLstripBlocksLikeTransformers) {
  // A block tag alone on its line leaves no trace; an expression keeps its newline.
  EXPECT_EQ(Render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(Render("{{ 'x' }}\n{{ 'y' }}"), "x\ny");
  EXPECT_EQ(Render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");  // + keeps the indentation
  EXPECT_EQ(Render("x {# note #}\ny"), "x y");
}

TEST(JinjaTest, LoopsScopesAndNamespaces) {
  nlohmann::json ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(Render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}"
                   "{% endfor %}",
                   ctx),
            "1a,2b,3c");
  // `set` inside a loop stays in the loop; a namespace carries values out.
  EXPECT_EQ(
      Render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in xs %}{% set n = n + 1 %}"
             "{% set ns.n = ns.n + 1 %}{% endfor %}{{ n }} {{ ns.n }}",
             ctx),
      "0 3");
  EXPECT_EQ(Render("{% for x in xs if x != 'b' %}{{ x }}{{ loop.length }}{% endfor %}", ctx),
            "a2c2");
  EXPECT_EQ(
      Render("{% for x in xs %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}", ctx),
      "a");
  EXPECT_EQ(Render("{% for k, v in {'p': 1, 'q': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "p1q2");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
}

TEST(JinjaTest, PrintsAndSerializesLikePython) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 2.0] }}"), "[1, 'a', None, True, 2.0]");
  EXPECT_EQ(Render("{{ {'a': [1, 2]} | tojson }}"), R"({"a": [1, 2]})");
  EXPECT_EQ(Render("{{ {'a': 'é\"'} | tojson(indent=2) }}"), "{\n  \"a\": \"é\\\"\"\n}");
  EXPECT_EQ(Render("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 'ab' ~ 1 }}"), "3.5 3 2 ab1");
  EXPECT_EQ(Render("{{ '  x '.strip() }}|{{ 'héllo'[::-1] }}|{{ 'a b  c'.split() }}"),
            "x|olléh|['a', 'b', 'c']");
  EXPECT_EQ(
      Render("{{ x | default('d') }} {{ x is defined }} {{ none is none }} {{ 'ab' | length }}"),
      "d False True 2");
  EXPECT_EQ(Render("{{ ['a', 'b', 'c'] | reject('equalto', 'b') | join(',') }}"), "a,c");
  EXPECT_EQ(Render("{{ [1, 2, 3, 4] | select('odd') | list }}"), "[1, 3]");
  EXPECT_EQ(Render("{{ 'yes' if 1 > 2 else 'no' }} {{ 1 in [1, 2] }} {{ 'b' not in 'abc' }}"),
            "no True False");
}

TEST(JinjaTest, MacrosAndSetBlocks) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }}"),
            "Hi Ann! Hi Bo?");
  EXPECT_EQ(Render("{% set s %}a{{ 1 + 1 }}b{% endset %}[{{ s }}]"), "[a2b]");
}

TEST(JinjaTest, ErrorsSayWhereAndWhat) {
  EXPECT_THAT(ErrorOf("line one\n{% if x %}unterminated"), HasSubstr("missing {% endif %}"));
  EXPECT_THAT(ErrorOf("a\n\n{{ 1 + }}"), HasSubstr("line 3: expected an expression"));
  EXPECT_THAT(ErrorOf("{% include 'x' %}"), HasSubstr("{% include %} statement is not supported"));
  EXPECT_THAT(ErrorOf("{{ raise_exception('Roles must alternate') }}"),
              HasSubstr("Roles must alternate"));
  EXPECT_THAT(ErrorOf("\n{{ missing.attr }}"), HasSubstr("line 2: 'missing' is undefined"));
  EXPECT_THAT(ErrorOf("{{ 'a' + 1 }}"),
              HasSubstr("unsupported operand types for +: 'str' and 'int'"));
  EXPECT_THAT(ErrorOf("{{ x | nosuchfilter }}"),
              HasSubstr("filter 'nosuchfilter' is not supported"));
}

std::string Repeat(std::string_view piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

// A hostile or broken template is an error, never a stack overflow (each of these crashed with
// SIGSEGV before the depth limits) or an allocation that exhausts memory.
TEST(JinjaTest, PathologicalTemplatesAreErrorsNotCrashes) {
  const int n = 30000;
  const std::string too_deep = "nests more than 200 levels deep";
  EXPECT_THAT(ErrorOf("{{ " + Repeat("(", n) + "1" + Repeat(")", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ " + Repeat("[", n) + Repeat("]", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ " + Repeat("not ", n) + "1 }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ " + Repeat("- ", n) + "1 }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ 1" + Repeat(" + 1", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ 'x'" + Repeat("|upper", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ x" + Repeat(".a", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf("{{ 1" + Repeat(" if 1 else 2", n) + " }}"), HasSubstr(too_deep));
  EXPECT_THAT(ErrorOf(Repeat("{% if true %}", 20000) + Repeat("{% endif %}", 20000)),
              HasSubstr("line 1: blocks nest more than 100 levels deep"));
  EXPECT_THAT(ErrorOf("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}"),
              HasSubstr("macro 'f': calls nest more than 200 deep"));
  EXPECT_THAT(ErrorOf("{% for i in range(100000000) %}{% endfor %}"),
              HasSubstr("range() of 100000000 items is too big"));
  // Within the limits, the same constructs still work.
  EXPECT_EQ(Render("{{ " + Repeat("(", 50) + "1" + Repeat(")", 50) + Repeat(" + 1", 150) + " }}"),
            "151");
  EXPECT_EQ(Render(Repeat("{% if true %}", 90) + "x" + Repeat("{% endif %}", 90)), "x");
  EXPECT_EQ(Render("{{ range(100000) | length }} {{ range(10, 0, -3) | list }}"),
            "100000 [10, 7, 4, 1]");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ f(50) | length }}"),
            "91");
}

}  // namespace
}  // namespace air::engine::jinja

namespace air::engine::jinja {
namespace {

// {% generation %} blocks: where their output lands in the template's text (transformers'
// AssistantTracker), nothing from blocks rendered into a macro's or a set block's string.
TEST(JinjaTest, GenerationBlocksReportTheirSpans) {
  auto t = JinjaTemplate::Parse(
      "{%- for m in messages -%}<{{ m.role }}>"
      "{%- if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>{% endgeneration %}"
      "{%- else %}{{ m.content }}{% endif -%}{%- endfor -%}"
      "{%- macro inner() %}{% generation %}hidden{% endgeneration %}{% endmacro -%}"
      "{%- set captured %}{% generation %}also hidden{% endgeneration %}{% endset -%}"
      "{{ inner() }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->has_generation_blocks());
  nlohmann::json context = {{"messages",
                             {{{"role", "user"}, {"content", "hi"}},
                              {{"role", "assistant"}, {"content", "yo"}},
                              {{"role", "user"}, {"content", "more"}},
                              {{"role", "assistant"}, {"content", "ok"}}}}};
  auto rendered = t->RenderWithGenerationSpans(context);
  ASSERT_TRUE(rendered.ok()) << rendered.status().ToString();
  const std::string& text = rendered->text;
  EXPECT_EQ(text, "<user>hi<assistant>yo</s><user>more<assistant>ok</s>hidden");
  std::vector<std::string> spans;
  for (auto [begin, end] : rendered->generation_spans)
    spans.push_back(text.substr(begin, end - begin));
  EXPECT_EQ(spans, (std::vector<std::string>{"yo</s>", "ok</s>"}));
  auto plain = JinjaTemplate::Parse("{{ 'no blocks' }}");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_generation_blocks());
}

}  // namespace
}  // namespace air::engine::jinja

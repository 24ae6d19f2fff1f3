// The public face of the template renderer: parse once, render many times (concurrently).
#include "template/chat_template.h"

#include <cstdio>
#include <new>

#include "core/error.h"
#include "template/ast.h"
#include "template/globals.h"
#include "template/interp.h"
#include "template/parser.h"

namespace lumen {

JinjaTemplate::JinjaTemplate(std::string_view source)
    : program_(std::make_shared<const tpl::Program>(tpl::parse_template(source))) {}

namespace {

// wday and yday filled in (strftime's %a, %j, %U need them), whatever the caller set.
std::tm normalized(const std::tm& in) {
  std::tm t = in;
  t.tm_isdst = 0;
  const time_t secs = timegm(&t);
  std::tm out{};
  gmtime_r(&secs, &out);
  return out;
}

}  // namespace

std::string JinjaTemplate::render(const nlohmann::ordered_json& variables, const TemplateRenderOptions& opts) const {
  if (!variables.is_object()) fail("template variables must be a JSON object, not {}", variables.type_name());
  std::tm now{};
  if (opts.now) {
    now = normalized(*opts.now);
  } else {
    const time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  try {
    auto vars = std::make_shared<tpl::Frame>();
    vars->parent = tpl::make_globals();
    for (const auto& [k, v] : variables.items()) vars->set(k, tpl::from_json(v));
    auto root = std::make_shared<tpl::Frame>();
    root->parent = vars;
    tpl::Interp interp(now);
    return interp.render(*program_, root);
  } catch (const tpl::RaisedError& e) {
    throw Error(e.what());
  } catch (const std::bad_alloc&) {
    fail("template: out of memory");
  }
}

std::tm parse_template_clock(std::string_view text) {
  std::tm t{};
  int y, mo, d, h, mi, s;
  char tail;
  const std::string str(text);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &tail) != 6 || mo < 1 ||
      mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || h < 0 || mi < 0 || s < 0)
    fail("bad clock '{}': expected \"YYYY-MM-DD HH:MM:SS\"", text);
  t.tm_year = y - 1900;
  t.tm_mon = mo - 1;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = s;
  return normalized(t);
}

}  // namespace lumen

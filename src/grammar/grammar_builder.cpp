#include "grammar/grammar_builder.h"

#include <fmt/format.h>

#include "grammar/grammar.h"

namespace lumen {

namespace {

std::string sanitize(std::string_view hint) {
  std::string out;
  for (const char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  // Long hints keep their end: the innermost names say most about the rule.
  if (out.size() > 40) out = out.substr(out.size() - 40);
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.empty() ? "r" : out;
}

}  // namespace

void GrammarBuilder::claim(const std::string& name) {
  if (used_.size() >= max_rules_)
    throw GrammarError(fmt::format("the grammar would have more than {} rules", max_rules_));
  used_.emplace(name, 2);
}

void GrammarBuilder::charge(size_t bytes) {
  bytes_ += bytes;
  if (bytes_ > max_bytes_)
    throw GrammarError(fmt::format("the grammar would be larger than {} bytes", max_bytes_));
}

std::string GrammarBuilder::reserve(std::string_view hint) {
  const std::string base = sanitize(hint);
  std::string name = base;
  if (used_.count(name)) {
    int& next = used_[base];
    do name = fmt::format("{}-{}", base, next++);
    while (used_.count(name));
  }
  claim(name);
  return name;
}

void GrammarBuilder::define(const std::string& name, std::string body) {
  charge(name.size() + body.size() + 6);
  order_.push_back(name);
  bodies_[name] = std::move(body);
}

std::string GrammarBuilder::intern(std::string_view hint, std::string body) {
  const auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  const std::string name = reserve(hint);
  charge(body.size());  // the copy kept in by_body_
  by_body_.emplace(body, name);
  define(name, std::move(body));
  return name;
}

std::string GrammarBuilder::text(const std::string& first) const {
  std::string out;
  out.reserve(bytes_);
  const auto put = [&](const std::string& name) { out += name + " ::= " + bodies_.at(name) + "\n"; };
  if (bodies_.count(first)) put(first);
  for (const std::string& name : order_)
    if (name != first) put(name);
  return out;
}

}  // namespace lumen

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

void GrammarBuilder::check_room(size_t pending) const {
  if (bytes_ + pending > max_bytes_)
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

namespace {

// Whether a rule body can derive a finite text, given which rules can (`known`). The body is
// text this builder's users write: names, "literals", [classes], ( ), |, ? * + {m} {m,} {m,n}.
class Productivity {
 public:
  Productivity(std::string_view body, const std::map<std::string, bool>& known) : s_(body), known_(known) {}
  bool run() { return alternation(); }

  static void names(std::string_view body, std::vector<std::string>& out) {
    for (size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c == '"' || c == '[') {
        const char close = c == '"' ? '"' : ']';
        for (i++; i < body.size() && body[i] != close; i++)
          if (body[i] == '\\') i++;
        i++;
      } else if (c == '{') {
        i = body.find('}', i) + 1;
      } else if (is_name(c)) {
        const size_t start = i;
        while (i < body.size() && is_name(body[i])) i++;
        out.emplace_back(body.substr(start, i - start));
      } else {
        i++;
      }
    }
  }

 private:
  static bool is_name(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') i_++;
  }
  bool alternation() {
    bool any = sequence();
    skip();
    while (i_ < s_.size() && s_[i_] == '|') {
      i_++;
      any = sequence() || any;  // every alternative parsed
      skip();
    }
    return any;
  }
  bool sequence() {
    bool all = true;
    for (;;) {
      skip();
      if (i_ >= s_.size() || s_[i_] == '|' || s_[i_] == ')') return all;
      bool item = atom();
      // A quantifier that allows zero makes the item finite whatever it is.
      if (i_ < s_.size() && (s_[i_] == '?' || s_[i_] == '*')) item = true, i_++;
      else if (i_ < s_.size() && s_[i_] == '+') i_++;
      else if (i_ < s_.size() && s_[i_] == '{') {
        if (s_[i_ + 1] == '0' && (s_[i_ + 2] == ',' || s_[i_ + 2] == '}')) item = true;
        i_ = s_.find('}', i_) + 1;
      }
      all = all && item;
    }
  }
  bool atom() {
    const char c = s_[i_];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (i_++; i_ < s_.size() && s_[i_] != close; i_++)
        if (s_[i_] == '\\') i_++;
      i_++;
      return true;
    }
    if (c == '(') {
      i_++;
      const bool inner = alternation();
      i_++;  // )
      return inner;
    }
    if (c == '.') return i_++, true;
    const size_t start = i_;
    while (i_ < s_.size() && is_name(s_[i_])) i_++;
    if (i_ == start) {  // not our syntax: count it as finite rather than loop
      i_++;
      return true;
    }
    const auto it = known_.find(std::string(s_.substr(start, i_ - start)));
    return it != known_.end() && it->second;
  }

  std::string_view s_;
  size_t i_ = 0;
  const std::map<std::string, bool>& known_;
};

}  // namespace

std::vector<std::string> GrammarBuilder::unproductive_rules() const {
  // A worklist: a rule is looked at again only when a rule it names becomes productive.
  std::map<std::string, bool> productive;
  std::map<std::string, std::vector<std::string>> users;
  for (const std::string& name : order_) {
    productive[name] = false;
    std::vector<std::string> named;
    Productivity::names(bodies_.at(name), named);
    for (const std::string& n : named) users[n].push_back(name);
  }
  std::vector<std::string> work(order_.begin(), order_.end());
  while (!work.empty()) {
    const std::string name = work.back();
    work.pop_back();
    if (productive[name] || !Productivity(bodies_.at(name), productive).run()) continue;
    productive[name] = true;
    for (const std::string& u : users[name])
      if (!productive[u]) work.push_back(u);
  }
  std::vector<std::string> out;
  for (const std::string& name : order_)
    if (!productive[name]) out.push_back(name);
  return out;
}

}  // namespace lumen

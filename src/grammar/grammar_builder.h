// Builds grammar text rule by rule, for generators (the JSON-schema converter): unique rule
// names made from hints, identical bodies shared, and hard limits on size and rule count so a
// hostile input cannot make the text grow without bound. Throws GrammarError past a limit.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

class GrammarBuilder {
 public:
  GrammarBuilder(size_t max_bytes, size_t max_rules) : max_bytes_(max_bytes), max_rules_(max_rules) {}

  // A fresh rule name from `hint` (characters outside [A-Za-z0-9-] become '-'), defined later
  // with define(). Lets recursive rules be referenced before their body exists.
  std::string reserve(std::string_view hint);
  void define(const std::string& name, std::string body);

  // A rule with this body: an existing one with the same body, else a new one named from hint.
  std::string intern(std::string_view hint, std::string body);

  // Fixed names (the root, shared rules such as ws) that reserve() must never hand out.
  void reserve_exact(const std::string& name) {
    if (used_.count(name) == 0) claim(name);
  }

  // A fixed-name rule shared by everything that uses it (ws, json-value, ...), defined on
  // first use by `body()`. The name must have been given to reserve_exact() first.
  template <class F>
  std::string shared(const std::string& name, F&& body) {
    if (shared_.insert(name).second) define(name, body());
    return name;
  }

  // All rules, `first` first (the root), then in order of definition.
  std::string text(const std::string& first) const;
  size_t bytes() const { return bytes_; }
  // Throws when `pending` more bytes would pass the size limit: lets a caller stop building a
  // body that could never be defined.
  void check_room(size_t pending) const;
  size_t max_rules() const { return max_rules_; }

  // Rules that derive no finite text (every alternative needs the rule again, or another such
  // rule): a matcher could enter them and never finish. For the builder's own output syntax.
  std::vector<std::string> unproductive_rules() const;

 private:
  void claim(const std::string& name);
  void charge(size_t bytes);

  size_t max_bytes_, max_rules_;
  size_t bytes_ = 0;
  std::map<std::string, int> used_;              // names taken -> next suffix to try
  std::map<std::string, std::string> by_body_;   // interned body -> name
  std::vector<std::string> order_;               // defined names, in order
  std::map<std::string, std::string> bodies_;
  std::set<std::string> shared_;
};

}  // namespace lumen

// The filters, tests, str/dict/list methods and globals templates may use, with jinja2 3.1's
// (and Python's) semantics. Filters and tests are looked up by name when a template loads.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "template/ast.h"
#include "template/value.h"

namespace lumen::tpl {

FilterFn find_filter(std::string_view name);  // nullptr: unknown
TestFn find_test(std::string_view name);      // nullptr: unknown

// Python attribute lookup on a value (methods of str/dict/list, object attributes): false if
// there is no such attribute. Mutating methods give an Undefined whose use raises the
// sandbox's SecurityError, as jinja2's ImmutableSandboxedEnvironment does.
bool python_attr(const Value& obj, std::string_view name, Value& out);
// jinja2's environment.getattr (a.b: attribute, then item) and getitem (a[b]: item, then
// attribute); a miss is Undefined, an Undefined base raises.
Value get_attr(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
// Python's obj[start:stop:step] for str, list and tuple (null: omitted); jinja2 slices
// without its getitem, so other objects raise TypeError.
Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step);

// Binds a call's arguments to named parameters as Python does (positionally, then by
// keyword), refusing extra or unknown ones. get(i) is null where the caller gave nothing.
class ArgBinder {
 public:
  ArgBinder(std::string_view func, const CallArgs& args, std::initializer_list<const char*> names,
            size_t skip_positional = 0);
  const Value* get(size_t i) const { return slots_[i] ? &*slots_[i] : nullptr; }
  Value get_or(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : std::move(fallback); }

 private:
  std::vector<std::optional<Value>> slots_;
};

}  // namespace lumen::tpl

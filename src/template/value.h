// The values a chat template computes with, modelled on the Python objects jinja2 hands around:
// None, bool, int, float, str (optionally markupsafe.Markup), list/tuple (and the read-only
// sequences range() and dict views give), dict (insertion-ordered, like Python's), jinja2's
// lenient Undefined, single-use iterators (what jinja2's select/map filters return: generators
// have no len(), are always true and run dry once consumed), and objects (macros, bound
// methods, namespace(), the loop variable).
//
// Values are immutable once built, except namespace objects and iterators, which live only
// inside one render call; containers are shared by reference count, so copying a Value is
// cheap and renders on several threads never share anything mutable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace lumen::tpl {

class Interp;
class Value;
using ValueList = std::vector<Value>;

// Values nested deeper than this are refused (every algorithm over values recurses).
inline constexpr int kMaxValueDepth = 512;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Iterator, Object };

// Which Python sequence a list stands for: only printing and a few checks tell them apart.
enum class SeqKind : uint8_t { List, Tuple, Range, DictKeys, DictValues, DictItems };

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct ListObj;
struct DictObj;
struct IterObj;
struct Object;

class Value {
 public:
  Value() = default;  // Undefined without a name
  static Value undefined(std::string message);  // message: what an operation on it reports
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s, bool markup = false);
  static Value list(ValueList items, SeqKind kind = SeqKind::List);
  static Value range(int64_t start, int64_t stop, int64_t step, ValueList items);
  static Value dict(std::shared_ptr<DictObj> d);
  static Value iterator(ValueList items, std::string type_name);
  // A generator whose items are computed when first consumed (jinja2's filters are lazy:
  // an unconsumed `x|select(...)` never fails).
  static Value lazy_iterator(std::function<ValueList()> producer, std::string type_name, int depth);
  static Value object(std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_iterator() const { return kind_ == Kind::Iterator; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }  // Int or Bool
  double as_float() const;                                                     // any number
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const ListObj& list() const { return *static_cast<const ListObj*>(ptr_.get()); }
  const DictObj& dict() const { return *static_cast<const DictObj*>(ptr_.get()); }
  IterObj& iter() const { return *static_cast<IterObj*>(ptr_.get()); }
  Object& obj() const { return *static_cast<Object*>(ptr_.get()); }
  const std::string& undefined_message() const;
  const void* identity() const { return ptr_.get(); }
  int depth() const;  // nesting depth of containers (0 for scalars)

 private:
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

struct ListObj {
  ValueList items;
  SeqKind kind = SeqKind::List;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // SeqKind::Range, for repr
  int depth = 1;
};

// Insertion-ordered mapping with Python key equality (1 == 1.0 == True). Keys are looked up
// by a linear scan, or through an index once a dict with only string keys grows large.
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Builder: replaces the value of an equal key in place (Python keeps the first position).
  void set(Value key, Value value);
  void finish();  // after the last set(): computes depth and the index

 private:
  std::unordered_map<std::string_view, size_t> index_;
};

struct IterObj {
  ValueList items;
  size_t pos = 0;
  std::string type_name;
  int depth = 1;
  std::function<ValueList()> producer;  // pending items of a lazy generator

  ValueList& get();  // the items, produced on first use
};

// Heap objects with behaviour: callables, namespace(), loop, cycler, joiner.
struct Object {
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const { return fmt::format("<{} object>", type_name()); }
  virtual bool callable() const { return false; }
  virtual Value call(Interp& in, CallArgs& args);
  // Python attribute lookup; false: no such attribute.
  virtual bool get_attr(std::string_view name, Value& out) const { return false; }
};

// ---- Python semantics -------------------------------------------------------------------
std::string type_name(const Value& v);       // Python's type(v).__name__
bool truthy(const Value& v);                  // bool(v)
bool py_equal(const Value& a, const Value& b);  // a == b
// a < b; throws TypeError for unorderable pairs (and UndefinedError for undefined).
bool py_less(const Value& a, const Value& b);
// op: 0 <, 1 <=, 2 >, 3 >= (Python's rich comparison, list/tuple lexicographic).
bool py_compare(const Value& a, const Value& b, int op);
std::string py_str(const Value& v);   // str(v): what {{ v }} prints
std::string py_repr(const Value& v);  // repr(v): how v prints inside a container
void append_str_repr(std::string& out, std::string_view s);  // repr() of a str
std::string float_repr(double d);                             // repr() of a float
bool hashable(const Value& v);

// Items of an iterable, as Python's iter() yields them (str: code points; dict: keys;
// Undefined: none). Consumes an iterator. Throws TypeError for non-iterables.
ValueList iterate(const Value& v);
// len(v); throws TypeError where Python has no len().
int64_t py_len(const Value& v);

// Throws UndefinedError carrying the undefined's message.
[[noreturn]] void undefined_error(const Value& v);

// JSON (variables) -> values, nlohmann ordered_json keeps key order for tojson.
Value from_json(const nlohmann::ordered_json& j, int depth = 0);

}  // namespace lumen::tpl

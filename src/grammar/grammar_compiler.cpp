// ParsedGrammar -> Grammar: one epsilon-free byte automaton per rule.
//
// Characters become UTF-8 byte paths (a code point range splits into runs whose every byte
// position is one range: the classic UTF-8 range decomposition), so matching never decodes and
// a token may end between the bytes of a character. Rules that are not recursive and not large
// are inlined into their callers: a matcher's cached token masks are exact for a whole rule
// (grammar_matcher.h), so fewer rule boundaries mean fewer tokens whose fate depends on the
// stack below. Recursive rules stay calls (push the callee, continue at `ret` once it ends).
#include <algorithm>
#include <functional>
#include <unordered_set>

#include "grammar/grammar_ast.h"

namespace lumen {

using grammar_detail::CodeRanges;
using grammar_detail::Node;
using grammar_detail::ParsedGrammar;

namespace {

// A rule inlines a callee whose epsilon automaton has at most this many states.
constexpr size_t kInlineStates = 4096;
constexpr int kMaxInlineDepth = 16;

// The UTF-8 encoding of cp into b; returns its length.
int encode_utf8(uint32_t cp, uint8_t* b) {
  if (cp < 0x80) {
    b[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

using ByteRun = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

// Splits [lo, hi] into runs of equal encoded length whose bytes vary independently.
void utf8_runs(uint32_t lo, uint32_t hi, std::vector<ByteRun>& out) {
  if (lo > hi) return;
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      utf8_runs(lo, edge, out);
      utf8_runs(edge + 1, hi, out);
      return;
    }
  uint8_t a[4], b[4];
  const int n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  for (int i = 1; i < n; i++) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_runs(lo, lo | m, out);
        utf8_runs((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_runs(lo, (hi & ~m) - 1, out);
        utf8_runs(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteRun run;
  for (int i = 0; i < n; i++) run.emplace_back(a[i], b[i]);
  out.push_back(std::move(run));
}

// One rule's automaton with epsilon edges, as Thompson's construction builds it.
struct EpsAutomaton {
  struct State {
    std::vector<GrammarRuleAutomaton::ByteEdge> bytes;
    std::vector<GrammarRuleAutomaton::CallEdge> calls;
    std::vector<int32_t> eps;
  };
  std::vector<State> states;
};

class Compiler {
 public:
  Compiler(const ParsedGrammar& pg, const GrammarLimits& limits) : pg_(pg), limits_(limits) {}

  std::shared_ptr<Grammar> run(std::string_view root_name) {
    const size_t n = pg_.rules.size();
    int32_t root = -1;
    for (size_t r = 0; r < n; r++)
      if (pg_.rules[r].name == root_name) root = static_cast<int32_t>(r);
    if (root < 0) throw GrammarError(fmt::format("grammar: no rule '{}' to start from", root_name));
    find_recursive_rules();
    auto g = std::make_shared<Grammar>();
    g->root = root;
    g->rules.resize(n);
    sizes_.assign(n, 0);
    // Callees first, so a caller knows whether a callee is small enough to inline.
    std::vector<int> order = post_order();
    for (int r : order) {
      EpsAutomaton a;
      a.states.emplace_back();
      const int32_t end = build(a, *pg_.rules[static_cast<size_t>(r)].body, 0);
      sizes_[static_cast<size_t>(r)] = a.states.size();
      g->rules[static_cast<size_t>(r)] = eliminate_epsilon(a, end);
      g->rules[static_cast<size_t>(r)].name = pg_.rules[static_cast<size_t>(r)].name;
    }
    check_left_recursion(*g);
    mark_can_end(*g);
    return g;
  }

 private:
  // Rules on a cycle of references (Tarjan's strongly connected components) are recursive.
  void find_recursive_rules() {
    const size_t n = pg_.rules.size();
    refs_.assign(n, {});
    for (size_t r = 0; r < n; r++) collect_refs(*pg_.rules[r].body, refs_[r]);
    recursive_.assign(n, false);
    std::vector<int> index(n, -1), low(n, 0), stack;
    std::vector<bool> on(n, false);
    int counter = 0;
    // Iterative, so a long chain of rules cannot overflow the stack.
    for (size_t s = 0; s < n; s++) {
      if (index[s] >= 0) continue;
      std::vector<std::pair<int, size_t>> work{{static_cast<int>(s), 0}};
      index[s] = low[s] = counter++;
      stack.push_back(static_cast<int>(s));
      on[s] = true;
      while (!work.empty()) {
        auto& [v, k] = work.back();
        if (k < refs_[static_cast<size_t>(v)].size()) {
          const int w = refs_[static_cast<size_t>(v)][k++];
          if (index[static_cast<size_t>(w)] < 0) {
            index[static_cast<size_t>(w)] = low[static_cast<size_t>(w)] = counter++;
            stack.push_back(w);
            on[static_cast<size_t>(w)] = true;
            work.emplace_back(w, 0);
          } else if (on[static_cast<size_t>(w)]) {
            low[static_cast<size_t>(v)] = std::min(low[static_cast<size_t>(v)], index[static_cast<size_t>(w)]);
          }
          continue;
        }
        const int done = v;
        work.pop_back();
        if (!work.empty())
          low[static_cast<size_t>(work.back().first)] =
              std::min(low[static_cast<size_t>(work.back().first)], low[static_cast<size_t>(done)]);
        if (low[static_cast<size_t>(done)] == index[static_cast<size_t>(done)]) {
          std::vector<int> comp;
          for (;;) {
            const int w = stack.back();
            stack.pop_back();
            on[static_cast<size_t>(w)] = false;
            comp.push_back(w);
            if (w == done) break;
          }
          const bool self = std::find(refs_[static_cast<size_t>(done)].begin(), refs_[static_cast<size_t>(done)].end(),
                                      done) != refs_[static_cast<size_t>(done)].end();
          if (comp.size() > 1 || self)
            for (int w : comp) recursive_[static_cast<size_t>(w)] = true;
        }
      }
    }
  }

  static void collect_refs(const Node& node, std::vector<int>& out) {
    std::vector<const Node*> work{&node};
    while (!work.empty()) {
      const Node* x = work.back();
      work.pop_back();
      if (x->kind == Node::Kind::Ref) out.push_back(x->rule);
      for (const auto& c : x->children) work.push_back(c.get());
    }
  }

  // Every rule, each after the rules it references (cycles broken anywhere).
  std::vector<int> post_order() const {
    const size_t n = pg_.rules.size();
    std::vector<int> order;
    std::vector<char> state(n, 0);  // 0 new, 1 open, 2 done
    for (size_t s = 0; s < n; s++) {
      if (state[s]) continue;
      std::vector<std::pair<int, size_t>> work{{static_cast<int>(s), 0}};
      state[s] = 1;
      while (!work.empty()) {
        auto& [v, k] = work.back();
        if (k < refs_[static_cast<size_t>(v)].size()) {
          const int w = refs_[static_cast<size_t>(v)][k++];
          if (!state[static_cast<size_t>(w)]) {
            state[static_cast<size_t>(w)] = 1;
            work.emplace_back(w, 0);
          }
          continue;
        }
        state[static_cast<size_t>(v)] = 2;
        order.push_back(v);
        work.pop_back();
      }
    }
    return order;
  }

  int32_t add(EpsAutomaton& a) {
    if (a.states.size() + total_states_ >= limits_.max_states)
      throw GrammarError(fmt::format("grammar: more than {} automaton states once repetitions are expanded",
                                     limits_.max_states));
    a.states.emplace_back();
    return static_cast<int32_t>(a.states.size() - 1);
  }

  // Builds `node` from state `in` (which no fragment loops back to) and returns its end, a state
  // with no outgoing edges yet.
  // `inlined`: how many callers' bodies this one is inlined into (bounded, so a long chain of
  // small rules cannot make the recursion deep: past the bound they stay calls).
  int32_t build(EpsAutomaton& a, const Node& node, int32_t in, int inlined = 0) {
    switch (node.kind) {
      case Node::Kind::Chars: {
        const int32_t out = add(a);
        std::vector<ByteRun> runs;
        for (auto [lo, hi] : node.chars) utf8_runs(lo, hi, runs);
        for (const ByteRun& run : runs) {
          int32_t cur = in;
          for (size_t i = 0; i < run.size(); i++) {
            const int32_t next = i + 1 == run.size() ? out : add(a);
            a.states[static_cast<size_t>(cur)].bytes.push_back({run[i].first, run[i].second, next});
            cur = next;
          }
        }
        return out;
      }
      case Node::Kind::Seq: {
        int32_t cur = in;
        for (const auto& c : node.children) cur = build(a, *c, cur, inlined);
        if (node.children.empty()) {
          const int32_t out = add(a);
          a.states[static_cast<size_t>(in)].eps.push_back(out);
          return out;
        }
        return cur;
      }
      case Node::Kind::Alt: {
        const int32_t out = add(a);
        for (const auto& c : node.children) {
          const int32_t entry = add(a);
          a.states[static_cast<size_t>(in)].eps.push_back(entry);
          const int32_t e = build(a, *c, entry, inlined);
          a.states[static_cast<size_t>(e)].eps.push_back(out);
        }
        return out;
      }
      case Node::Kind::Ref: {
        const auto r = static_cast<size_t>(node.rule);
        if (!recursive_[r] && sizes_[r] > 0 && sizes_[r] <= kInlineStates && inlined < kMaxInlineDepth)
          return build(a, *pg_.rules[r].body, in, inlined + 1);
        const int32_t out = add(a);
        a.states[static_cast<size_t>(in)].calls.push_back({node.rule, out});
        return out;
      }
      case Node::Kind::Repeat: {
        const Node& child = *node.children[0];
        int32_t cur = in;
        for (int64_t i = 0; i < node.min; i++) cur = build(a, child, cur, inlined);
        if (node.max < 0) {
          const int32_t loop = add(a);
          a.states[static_cast<size_t>(cur)].eps.push_back(loop);
          const int32_t e = build(a, child, loop, inlined);
          a.states[static_cast<size_t>(e)].eps.push_back(loop);
          const int32_t out = add(a);
          a.states[static_cast<size_t>(loop)].eps.push_back(out);
          return out;
        }
        // (x (x (x)?)?)?: after each optional copy the match may stop, and which copy comes
        // next is always known, so the automaton's state sets stay small.
        const int32_t out = add(a);
        a.states[static_cast<size_t>(cur)].eps.push_back(out);
        for (int64_t i = node.min; i < node.max; i++) {
          cur = build(a, child, cur, inlined);
          a.states[static_cast<size_t>(cur)].eps.push_back(out);
        }
        return out;
      }
    }
    return in;
  }

  // The epsilon-free automaton of the states reachable from 0; `end` is where the rule ends.
  GrammarRuleAutomaton eliminate_epsilon(const EpsAutomaton& a, int32_t end) {
    const size_t n = a.states.size();
    std::vector<int32_t> id(n, -1), order;
    GrammarRuleAutomaton out;
    id[0] = 0;
    order.push_back(0);
    std::vector<int32_t> mark(n, -1), closure;
    for (size_t k = 0; k < order.size(); k++) {
      const int32_t s = order[k];
      // The epsilon closure of s.
      closure.clear();
      closure.push_back(s);
      mark[static_cast<size_t>(s)] = s;
      for (size_t c = 0; c < closure.size(); c++)
        for (int32_t t : a.states[static_cast<size_t>(closure[c])].eps)
          if (mark[static_cast<size_t>(t)] != s) {
            mark[static_cast<size_t>(t)] = s;
            closure.push_back(t);
          }
      GrammarRuleAutomaton::State st;
      auto target = [&](int32_t t) {
        if (id[static_cast<size_t>(t)] < 0) {
          id[static_cast<size_t>(t)] = static_cast<int32_t>(order.size());
          order.push_back(t);
        }
        return id[static_cast<size_t>(t)];
      };
      for (int32_t c : closure) {
        const auto& cs = a.states[static_cast<size_t>(c)];
        if (c == end) st.accepting = true;
        for (const auto& e : cs.bytes) st.bytes.push_back({e.lo, e.hi, target(e.target)});
        for (const auto& e : cs.calls) st.calls.push_back({e.rule, target(e.ret)});
      }
      std::sort(st.bytes.begin(), st.bytes.end(), [](const auto& x, const auto& y) {
        return std::tie(x.lo, x.hi, x.target) < std::tie(y.lo, y.hi, y.target);
      });
      st.bytes.erase(std::unique(st.bytes.begin(), st.bytes.end(),
                                 [](const auto& x, const auto& y) {
                                   return x.lo == y.lo && x.hi == y.hi && x.target == y.target;
                                 }),
                     st.bytes.end());
      out.states.push_back(std::move(st));
    }
    total_states_ += out.states.size();
    if (total_states_ > limits_.max_states)
      throw GrammarError(fmt::format("grammar: more than {} automaton states once repetitions are expanded",
                                     limits_.max_states));
    return out;
  }

  // A rule that can call itself (directly or through others) before consuming a byte would make
  // a pushdown matcher loop forever: refused, naming the rule.
  void check_left_recursion(const Grammar& g) {
    const size_t n = g.rules.size();
    // nullable[r]: rule r can end having consumed nothing.
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; r++) {
        if (nullable[r]) continue;
        if (reaches_end_without_bytes(g.rules[r], nullable)) {
          nullable[r] = true;
          changed = true;
        }
      }
    }
    // first_calls[r]: the rules r can call before consuming a byte.
    std::vector<std::vector<int32_t>> first_calls(n);
    for (size_t r = 0; r < n; r++) {
      const auto& rule = g.rules[r];
      std::vector<bool> seen(rule.states.size(), false);
      std::vector<int32_t> work{0};
      seen[0] = true;
      while (!work.empty()) {
        const int32_t s = work.back();
        work.pop_back();
        for (const auto& c : rule.states[static_cast<size_t>(s)].calls) {
          first_calls[r].push_back(c.rule);
          if (nullable[static_cast<size_t>(c.rule)] && !seen[static_cast<size_t>(c.ret)]) {
            seen[static_cast<size_t>(c.ret)] = true;
            work.push_back(c.ret);
          }
        }
      }
    }
    // A cycle in first_calls is left recursion.
    std::vector<char> state(n, 0);
    for (size_t s = 0; s < n; s++) {
      if (state[s]) continue;
      std::vector<std::pair<int32_t, size_t>> work{{static_cast<int32_t>(s), 0}};
      state[s] = 1;
      while (!work.empty()) {
        auto& [v, k] = work.back();
        if (k < first_calls[static_cast<size_t>(v)].size()) {
          const int32_t w = first_calls[static_cast<size_t>(v)][k++];
          if (state[static_cast<size_t>(w)] == 1) {
            const auto& pr = pg_.rules[static_cast<size_t>(w)];
            throw GrammarError(fmt::format(
                "grammar: line {}, column {}: rule '{}' is left-recursive (it can reach itself before "
                "matching a character); rewrite it with repetition, e.g. `list ::= item (\",\" item)*`",
                pr.line, pr.col, pr.name));
          }
          if (state[static_cast<size_t>(w)] == 0) {
            state[static_cast<size_t>(w)] = 1;
            work.emplace_back(w, 0);
          }
          continue;
        }
        state[static_cast<size_t>(v)] = 2;
        work.pop_back();
      }
    }
  }

  // State::can_end: accepting, or a call of a rule that can be empty returning to such a state
  // (a fixpoint over all rules, as a call's rule may itself end through calls).
  static void mark_can_end(Grammar& g) {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& rule : g.rules)
        for (auto& st : rule.states) {
          if (st.can_end) continue;
          bool e = st.accepting;
          for (const auto& c : st.calls)
            if (!e && g.rules[static_cast<size_t>(c.rule)].states[0].can_end &&
                rule.states[static_cast<size_t>(c.ret)].can_end)
              e = true;
          if (e) {
            st.can_end = true;
            changed = true;
          }
        }
    }
  }

  static bool reaches_end_without_bytes(const GrammarRuleAutomaton& rule, const std::vector<bool>& nullable) {
    std::vector<bool> seen(rule.states.size(), false);
    std::vector<int32_t> work{0};
    seen[0] = true;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      const auto& st = rule.states[static_cast<size_t>(s)];
      if (st.accepting) return true;
      for (const auto& c : st.calls)
        if (nullable[static_cast<size_t>(c.rule)] && !seen[static_cast<size_t>(c.ret)]) {
          seen[static_cast<size_t>(c.ret)] = true;
          work.push_back(c.ret);
        }
    }
    return false;
  }

  const ParsedGrammar& pg_;
  const GrammarLimits& limits_;
  std::vector<std::vector<int>> refs_;
  std::vector<bool> recursive_;
  std::vector<size_t> sizes_;
  size_t total_states_ = 0;
};

}  // namespace

std::shared_ptr<const Grammar> compile_grammar(std::string_view text, std::string_view root,
                                               const GrammarLimits& limits) {
  const ParsedGrammar pg = grammar_detail::parse_grammar(text, limits);
  auto g = Compiler(pg, limits).run(root);
  g->source = std::string(text);
  return g;
}

std::string grammar_literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
        else out += static_cast<char>(c);  // UTF-8 passes through as the text's own characters
    }
  }
  out += "\"";
  return out;
}

}  // namespace lumen

#include "grammar/grammar_matcher.h"

#include <algorithm>

namespace lumen {

// ---- StackPool ----

size_t StackPool::KeyHash::operator()(const Key& k) const {
  uint64_t h = static_cast<uint32_t>(k.parent) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.rule)) << 32 | static_cast<uint32_t>(k.state)) +
       0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h ^ (h >> 29));
}

int32_t StackPool::intern(int32_t parent, int32_t rule, int32_t state) {
  auto [it, fresh] = ids_.try_emplace(Key{parent, rule, state}, static_cast<int32_t>(frames_.size()));
  if (fresh) frames_.push_back({parent, rule, state});
  return it->second;
}

void StackPool::clear() {
  frames_.clear();
  ids_.clear();
}

// ---- StackStepper ----

template <class OnByteEdge>
bool StackStepper::expand(StackPool& pool, std::span<const int32_t> in, bool* to_context, OnByteEdge&& on_edge) {
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    std::fill(out_seen_.begin(), out_seen_.end(), 0);
    stamp_ = 1;
  }
  work_.assign(in.begin(), in.end());
  size_t expanded = 0;
  while (!work_.empty()) {
    if (++expanded > kMaxExpanded) return false;
    const int32_t x = work_.back();
    work_.pop_back();
    if (x < 0) {
      if (x == StackPool::kContext && to_context) *to_context = true;
      continue;  // kEnd: the sentence would end with a byte still to match
    }
    if (seen_.size() <= static_cast<size_t>(x)) seen_.resize(pool.size() * 2 + 64, 0);
    if (seen_[static_cast<size_t>(x)] == stamp_) continue;  // (also ends loops of empty calls)
    seen_[static_cast<size_t>(x)] = stamp_;
    work_done_++;
    const StackPool::Frame f = pool[x];  // a copy: intern() may grow the pool
    const auto& st = g_.rules[static_cast<size_t>(f.rule)].states[static_cast<size_t>(f.state)];
    for (const auto& e : st.bytes) on_edge(f, e);
    for (const auto& c : st.calls) {
      const int32_t ret = pool.intern(f.parent, f.rule, c.ret);
      work_.push_back(pool.intern(ret, c.rule, 0));
    }
    if (st.accepting) work_.push_back(f.parent);  // the rule ends: continue in its caller
  }
  return true;
}

void StackStepper::step(StackPool& pool, std::span<const int32_t> in, uint8_t byte, std::vector<int32_t>& out,
                        bool* to_context) {
  out.clear();
  const bool whole = expand(pool, in, to_context, [&](const StackPool::Frame& f, const GrammarRuleAutomaton::ByteEdge& e) {
    if (byte < e.lo || byte > e.hi) return;
    const int32_t id = pool.intern(f.parent, f.rule, e.target);
    if (out_seen_.size() <= static_cast<size_t>(id)) out_seen_.resize(pool.size() * 2 + 64, 0);
    if (out_seen_[static_cast<size_t>(id)] == stamp_) return;
    out_seen_[static_cast<size_t>(id)] = stamp_;
    out.push_back(id);
  });
  if (!whole)
    throw GrammarError(fmt::format("grammar: a step expands more than {} rule calls (a rule that calls itself "
                                   "before matching a byte, through a repetition or an alternative)",
                                   kMaxExpanded));
  if (out.size() > kMaxStacks)
    throw GrammarError(fmt::format("grammar: more than {} ways to match the output so far (the grammar is too "
                                   "ambiguous to follow: make its alternatives distinct)",
                                   kMaxStacks));
}

bool StackStepper::can_take_byte(StackPool& pool, std::span<const int32_t> in) {
  bool any = false;
  // Cut short, it says yes: the step that follows throws the GrammarError.
  const bool whole = expand(pool, in, nullptr, [&](const StackPool::Frame&, const GrammarRuleAutomaton::ByteEdge&) { any = true; });
  return any || !whole;
}

bool StackStepper::can_end(const StackPool& pool, int32_t stack) const {
  int32_t x = stack;
  while (x >= 0) {
    const StackPool::Frame& f = pool[x];
    if (!g_.rules[static_cast<size_t>(f.rule)].states[static_cast<size_t>(f.state)].can_end) return false;
    x = f.parent;
  }
  return x == StackPool::kEnd;
}

// ---- GrammarMaskCache ----

// Frames a classification may expand: a JSON grammar's string state over Qwen's 152k tokens
// takes ~3 M; a grammar needing 10x that per state is refused rather than stalling decode.
constexpr uint64_t kClassifyBudget = 40'000'000;

GrammarMaskCache::GrammarMaskCache(std::shared_ptr<const Grammar> g, std::shared_ptr<const GrammarVocab> v)
    : g_(std::move(g)), v_(std::move(v)) {}

size_t GrammarMaskCache::n_entries() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

const GrammarMaskCache::Entry& GrammarMaskCache::get(int32_t rule, int32_t state) {
  const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(rule)) << 32 | static_cast<uint32_t>(state);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return *it->second;
  }
  // Classified outside the lock (other sequences' frames are not held up); a racing thread's
  // equal result is dropped.
  std::unique_ptr<Entry> e = classify(rule, state);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = entries_.try_emplace(key, std::move(e));
  return *it->second;
}

std::unique_ptr<GrammarMaskCache::Entry> GrammarMaskCache::classify(int32_t rule, int32_t state) const {
  auto e = std::make_unique<Entry>();
  const auto& trie = v_->trie();
  const auto& sorted = v_->sorted();
  e->accepted.assign((static_cast<size_t>(v_->n_vocab()) + 63) / 64, 0);
  StackPool pool;
  StackStepper stepper(*g_);
  int32_t max_depth = 0;
  for (const auto& n : trie) max_depth = std::max(max_depth, n.depth);
  // level[d]: the stacks after the current node's prefix of length d; ends_by[d]: the frame
  // can end (the stack below deciding what follows) after some prefix of length <= d.
  std::vector<std::vector<int32_t>> level(static_cast<size_t>(max_depth) + 1);
  std::vector<char> ends_by(static_cast<size_t>(max_depth) + 1, 0);
  level[0] = {pool.intern(StackPool::kContext, rule, state)};
  size_t i = 1;
  while (i < trie.size()) {
    const GrammarVocab::TrieNode& node = trie[i];
    const auto d = static_cast<size_t>(node.depth);
    if (stepper.work() > kClassifyBudget)
      throw GrammarError(fmt::format("grammar: classifying the vocabulary at rule '{}' took more than {} steps "
                                     "(the grammar is too ambiguous to follow)",
                                     g_->rules[static_cast<size_t>(rule)].name, kClassifyBudget));
    bool ends = false;
    stepper.step(pool, level[d - 1], node.byte, level[d], &ends);
    ends_by[d - 1] = static_cast<char>((d >= 2 && ends_by[d - 2]) || ends);
    if (level[d].empty()) {
      // Nothing of this subtree matches inside the frame; past its end, the stack decides.
      if (ends_by[d - 1])
        for (int32_t k = node.tok_begin; k < node.sub_end; k++) e->uncertain.push_back(sorted[static_cast<size_t>(k)]);
      i = static_cast<size_t>(node.end);
      continue;
    }
    for (int32_t k = node.tok_begin; k < node.tok_end; k++) {
      const int32_t id = sorted[static_cast<size_t>(k)];
      e->accepted[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    }
    i++;
  }
  return e;
}

const std::vector<std::vector<int32_t>>& GrammarMaskCache::end_distances() {
  std::call_once(dist_once_, [&] {
    const Grammar& g = *g_;
    std::vector<std::vector<int32_t>> d(g.rules.size());
    for (size_t r = 0; r < g.rules.size(); r++) d[r].assign(g.rules[r].states.size(), kFar);
    // Relaxation to a fixpoint (distances only fall, and are bounded below): a few passes for
    // real grammars; one that does not settle within the bound gets no closing help.
    bool settled = false;
    for (int pass = 0; pass < 512 && !settled; pass++) {
      settled = true;
      for (size_t r = 0; r < g.rules.size(); r++)
        for (size_t s = 0; s < g.rules[r].states.size(); s++) {
          const auto& st = g.rules[r].states[s];
          int32_t best = st.accepting ? 0 : kFar;
          for (const auto& e : st.bytes) best = std::min(best, 1 + d[r][static_cast<size_t>(e.target)]);
          for (const auto& c : st.calls)
            best = std::min(best, d[static_cast<size_t>(c.rule)][0] + d[r][static_cast<size_t>(c.ret)]);
          best = std::min(best, kFar);
          if (best < d[r][s]) {
            d[r][s] = best;
            settled = false;
          }
        }
    }
    if (settled) dist_ = std::move(d);
  });
  return dist_;
}

// ---- GrammarMatcher ----

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarMaskCache> cache)
    : cache_(std::move(cache)), stepper_(cache_->grammar()) {
  stacks_ = {pool_.intern(StackPool::kEnd, cache_->grammar().root, 0)};
}

void GrammarMatcher::fill_next_token_mask(std::vector<uint64_t>& bits) {
  const GrammarVocab& v = cache_->vocab();
  bits.assign((static_cast<size_t>(v.n_vocab()) + 63) / 64, 0);
  for (int32_t s : stacks_) {
    const StackPool::Frame& f = pool_[s];
    const auto& e = cache_->get(f.rule, f.state);
    for (size_t w = 0; w < bits.size(); w++) bits[w] |= e.accepted[w];
  }
  // Uncertain tokens against the real stacks, each copied into the scratch pool.
  scratch_.clear();
  for (int32_t s : stacks_) {
    const StackPool::Frame top = pool_[s];
    const auto& e = cache_->get(top.rule, top.state);
    if (e.uncertain.empty()) continue;
    chain_.clear();
    for (int32_t x = s; x >= 0; x = pool_[x].parent) chain_.push_back(pool_[x]);
    int32_t copy = StackPool::kEnd;
    for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) copy = scratch_.intern(copy, it->rule, it->state);
    for (int32_t id : e.uncertain) {
      if (bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1) continue;
      tmp_.assign(1, copy);
      bool ok = true;
      for (const char c : v.bytes(id)) {
        stepper_.step(scratch_, tmp_, static_cast<uint8_t>(c), tmp2_);
        tmp_.swap(tmp2_);
        if (tmp_.empty()) {
          ok = false;
          break;
        }
      }
      if (ok) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    }
  }
  scratch_.clear();
  if (can_end())
    for (int32_t id : v.eog()) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  tmp_ = stacks_;
  for (const char c : bytes) {
    stepper_.step(pool_, tmp_, static_cast<uint8_t>(c), tmp2_);
    tmp_.swap(tmp2_);
    if (tmp_.empty()) return false;
  }
  history_.push_back(std::move(stacks_));
  stacks_ = tmp_;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const GrammarVocab& v = cache_->vocab();
  if (id < 0 || id >= v.n_vocab()) return false;
  if (std::find(v.eog().begin(), v.eog().end(), id) != v.eog().end()) {
    if (!can_end()) return false;
    history_.push_back(stacks_);
    return true;
  }
  const std::string& b = v.bytes(id);
  if (b.empty()) return false;
  return accept_bytes(b);
}

bool GrammarMatcher::can_end() {
  for (int32_t s : stacks_)
    if (stepper_.can_end(pool_, s)) return true;
  return false;
}

bool GrammarMatcher::can_continue() { return stepper_.can_take_byte(pool_, stacks_); }

namespace {

int64_t stack_distance(const StackPool& pool, const std::vector<std::vector<int32_t>>& d, int32_t s) {
  int64_t n = 0;
  for (int32_t x = s; x >= 0; x = pool[x].parent)
    n += d[static_cast<size_t>(pool[x].rule)][static_cast<size_t>(pool[x].state)];
  return n;
}

}  // namespace

int64_t GrammarMatcher::bytes_to_end() {
  const auto& d = cache_->end_distances();
  if (d.empty()) return GrammarMaskCache::kFar;
  int64_t best = GrammarMaskCache::kFar;
  for (int32_t s : stacks_) best = std::min(best, stack_distance(pool_, d, s));
  return best;
}

bool GrammarMatcher::restrict_to_shortest_completion(std::vector<uint64_t>& bits, bool longest_only) {
  const auto& d = cache_->end_distances();
  if (d.empty() || stacks_.empty()) return false;
  int32_t best = stacks_[0];
  for (int32_t s : stacks_)
    if (stack_distance(pool_, d, s) < stack_distance(pool_, d, best)) best = s;
  const int64_t total = stack_distance(pool_, d, best);
  if (total >= GrammarMaskCache::kFar) return false;
  // Spell one shortest completion: in each frame follow an edge that keeps to the distance
  // (a byte edge: its lowest byte; a call: the callee's own shortest spelling first).
  const Grammar& g = cache_->grammar();
  std::string text;
  struct F {
    int32_t rule, state;
  };
  std::vector<F> frames;  // bottom first
  for (int32_t x = best; x >= 0; x = pool_[x].parent) frames.push_back({pool_[x].rule, pool_[x].state});
  std::reverse(frames.begin(), frames.end());
  for (int64_t guard = 0; !frames.empty() && guard < 4 * total + 64; guard++) {
    F& f = frames.back();
    const auto& st = g.rules[static_cast<size_t>(f.rule)].states[static_cast<size_t>(f.state)];
    const int32_t here = d[static_cast<size_t>(f.rule)][static_cast<size_t>(f.state)];
    if (st.accepting && here == 0) {
      frames.pop_back();
      continue;
    }
    bool moved = false;
    for (const auto& e : st.bytes)
      if (1 + d[static_cast<size_t>(f.rule)][static_cast<size_t>(e.target)] == here) {
        text += static_cast<char>(e.lo);
        f.state = e.target;
        moved = true;
        break;
      }
    if (moved) continue;
    for (const auto& c : st.calls)
      if (d[static_cast<size_t>(c.rule)][0] + d[static_cast<size_t>(f.rule)][static_cast<size_t>(c.ret)] == here &&
          (d[static_cast<size_t>(c.rule)][0] > 0 || c.ret != f.state)) {
        f.state = c.ret;
        frames.push_back({c.rule, 0});
        moved = true;
        break;
      }
    if (!moved) return false;
  }
  if (!frames.empty()) return false;
  // Tokens that are prefixes of the completion: the trie along its bytes.
  const GrammarVocab& v = cache_->vocab();
  const auto& trie = v.trie();
  std::vector<uint64_t> keep(bits.size(), 0);
  bool any = false;
  size_t node = 0;
  for (const char ch : text) {
    // The child of `node` for this byte (children follow their parent in pre-order).
    size_t child = node + 1, found = 0;
    while (child < static_cast<size_t>(trie[node].end)) {
      if (trie[child].byte == static_cast<uint8_t>(ch)) {
        found = child;
        break;
      }
      child = static_cast<size_t>(trie[child].end);
    }
    if (!found) break;
    node = found;
    if (longest_only && trie[node].tok_end > trie[node].tok_begin) {
      bool longer = false;  // an allowed token of this length replaces the shorter ones
      for (int32_t k = trie[node].tok_begin; k < trie[node].tok_end; k++) {
        const int32_t id = v.sorted()[static_cast<size_t>(k)];
        longer = longer || (bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1);
      }
      if (longer) std::fill(keep.begin(), keep.end(), 0);
    }
    for (int32_t k = trie[node].tok_begin; k < trie[node].tok_end; k++) {
      const int32_t id = v.sorted()[static_cast<size_t>(k)];
      if (bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1) {
        keep[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
        any = true;
      }
    }
  }
  if (text.empty())
    for (int32_t id : v.eog()) {
      keep[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
      any = true;
    }
  if (!any) return false;
  bits = std::move(keep);
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  if (n == 0) return;
  LUMEN_ASSERT(n <= history_.size());
  stacks_ = history_[history_.size() - n];
  history_.resize(history_.size() - n);
}

void GrammarMatcher::restrict_by_budget(std::vector<uint64_t>& bits, int64_t left) {
  const auto& d = cache_->end_distances();
  if (d.empty()) return;
  int64_t need_after[256];
  std::vector<int32_t> next;
  for (int b = 0; b < 256; b++) {
    stepper_.step(pool_, stacks_, static_cast<uint8_t>(b), next);
    int64_t best = GrammarMaskCache::kFar;
    for (int32_t s : next) best = std::min(best, stack_distance(pool_, d, s));
    need_after[b] = best;
  }
  const GrammarVocab& v = cache_->vocab();
  std::vector<uint64_t> kept = bits;
  bool any = false;
  for (size_t w = 0; w < bits.size(); w++) {
    uint64_t word = bits[w];
    while (word) {
      const int bit = __builtin_ctzll(word);
      word &= word - 1;
      const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(bit));
      const GrammarVocab::Shape& shape = v.shape(id);
      if (shape.size == 0) continue;  // end of generation
      const int64_t floor = need_after[shape.first] - (shape.size - 1);
      bool ok = floor <= left - 1;
      // A token that may close one thing and open another (`",` `}, {`) is followed whole.
      if (ok && shape.reopens) {
        tmp_ = stacks_;
        for (const char ch : v.bytes(id)) {
          stepper_.step(pool_, tmp_, static_cast<uint8_t>(ch), tmp2_);
          tmp_.swap(tmp2_);
          if (tmp_.empty()) break;
        }
        int64_t exact = GrammarMaskCache::kFar;
        for (int32_t s : tmp_) exact = std::min(exact, stack_distance(pool_, d, s));
        ok = exact <= left - 1;
      }
      if (!ok) kept[w] &= ~(uint64_t{1} << bit);
      else any = true;
    }
  }
  // Past saving (the budget is already short of the need): every token stays, closing does
  // what it can.
  if (any) bits = std::move(kept);
}

void GrammarMatcher::restrict_to_ending_tokens(std::vector<uint64_t>& bits) {
  // The trie walked from the real stacks (copied into the scratch pool), prefixes shared.
  const GrammarVocab& v = cache_->vocab();
  const auto& trie = v.trie();
  const auto& sorted = v.sorted();
  scratch_.clear();
  std::vector<int32_t> start;
  for (int32_t s : stacks_) {
    std::vector<StackPool::Frame> chain;
    for (int32_t x = s; x >= 0; x = pool_[x].parent) chain.push_back(pool_[x]);
    int32_t copy = StackPool::kEnd;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) copy = scratch_.intern(copy, it->rule, it->state);
    start.push_back(copy);
  }
  int32_t max_depth = 0;
  for (const auto& n : trie) max_depth = std::max(max_depth, n.depth);
  std::vector<std::vector<int32_t>> level(static_cast<size_t>(max_depth) + 1);
  level[0] = start;
  std::vector<uint64_t> keep(bits.size(), 0);
  for (size_t i = 1; i < trie.size();) {
    const auto& node = trie[i];
    const auto d = static_cast<size_t>(node.depth);
    stepper_.step(scratch_, level[d - 1], node.byte, level[d]);
    if (level[d].empty()) {
      i = static_cast<size_t>(node.end);
      continue;
    }
    bool ends = false;
    for (int32_t s : level[d]) ends = ends || stepper_.can_end(scratch_, s);
    if (ends)
      for (int32_t k = node.tok_begin; k < node.tok_end; k++) {
        const int32_t id = sorted[static_cast<size_t>(k)];
        keep[static_cast<size_t>(id) / 64] |= bits[static_cast<size_t>(id) / 64] & (uint64_t{1} << (id % 64));
      }
    i++;
  }
  scratch_.clear();
  for (int32_t id : v.eog()) keep[static_cast<size_t>(id) / 64] |= bits[static_cast<size_t>(id) / 64] & (uint64_t{1} << (id % 64));
  bits = std::move(keep);
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  StackPool pool;
  StackStepper stepper(*g);
  std::vector<int32_t> cur{pool.intern(StackPool::kEnd, g->root, 0)}, next;
  for (const char c : text) {
    stepper.step(pool, cur, static_cast<uint8_t>(c), next);
    cur.swap(next);
    if (cur.empty()) return false;
  }
  for (int32_t s : cur)
    if (stepper.can_end(pool, s)) return true;
  return false;
}

}  // namespace lumen

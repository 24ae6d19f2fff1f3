// GrammarMatcher: where one sequence stands in a grammar, and which tokens may come next.
//
// The state is a set of stacks (a pushdown automaton's nondeterminism): each stack holds the
// frames of the rules entered and not yet ended, the top frame's state being where the match
// is. Stacks are interned in a pool (a frame is (parent, rule, state)), so equal stacks are one
// id, sets deduplicate by id, and pushing or popping copies nothing.
//
// The token mask (after xgrammar's adaptive token mask cache): for a top frame (rule, state)
// every token is classified once, by walking the vocabulary trie with that frame alone:
//   accepted  - the token's bytes are matched without ending the frame's rule: allowed whatever
//               lies below it on the stack;
//   rejected  - every path fails inside the rule;
//   uncertain - some path ends the rule with bytes left, so the stack below decides.
// The classification is cached per (rule, state) in a GrammarMaskCache shared by every
// sequence using the grammar; a step ORs its frames' accepted sets and checks only the
// uncertain tokens against the real stacks. Rules that are not recursive are inlined at
// compile time, so uncertain tokens appear only at recursive rules' ends (a JSON value inside
// an object, say).
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_vocab.h"

namespace lumen {

// Interned stacks. A frame's parent is another frame's id, kEnd (the grammar's bottom: the
// sentence ends when the root's frame ends) or kContext (used when classifying tokens for the
// cache: what lies below is unknown).
class StackPool {
 public:
  static constexpr int32_t kEnd = -1, kContext = -2;
  struct Frame {
    int32_t parent, rule, state;
  };
  int32_t intern(int32_t parent, int32_t rule, int32_t state);
  const Frame& operator[](int32_t id) const { return frames_[static_cast<size_t>(id)]; }
  size_t size() const { return frames_.size(); }
  void clear();

 private:
  struct Key {
    int32_t parent, rule, state;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  std::vector<Frame> frames_;
  std::unordered_map<Key, int32_t, KeyHash> ids_;
};

// Advancing stacks by a byte (the matcher's inner step), with the scratch it reuses.
class StackStepper {
 public:
  explicit StackStepper(const Grammar& g) : g_(g) {}
  // Every stack reachable from `in` by consuming `byte`, deduplicated, into out. Sets
  // *to_context when a stack could end its frames down to StackPool::kContext first.
  void step(StackPool& pool, std::span<const int32_t> in, uint8_t byte, std::vector<int32_t>& out,
            bool* to_context = nullptr);
  // Can any stack of `in` take another byte?
  bool can_take_byte(StackPool& pool, std::span<const int32_t> in);
  // Can the stack end here (every frame down to kEnd may end without another byte)?
  bool can_end(const StackPool& pool, int32_t stack) const;
  // Frames expanded so far: the work a hostile, highly ambiguous grammar would make explode.
  uint64_t work() const { return work_done_; }

  // A step that leaves more stacks than this throws GrammarError: a grammar that ambiguous
  // would make every token cost as much as thousands.
  static constexpr size_t kMaxStacks = 4096;
  // A step that expands more frames than this throws GrammarError too: a grammar whose rules
  // call themselves before a byte (fuzz_grammar found one through a {52,} repetition) makes
  // new, ever deeper stacks without end, each interned in the pool.
  static constexpr size_t kMaxExpanded = size_t{1} << 18;

 private:
  // False when cut short at kMaxExpanded frames.
  template <class OnByteEdge>
  bool expand(StackPool& pool, std::span<const int32_t> in, bool* to_context, OnByteEdge&& on_edge);
  const Grammar& g_;
  std::vector<uint32_t> seen_;  // stamp per stack id
  uint32_t stamp_ = 0;
  std::vector<int32_t> work_;
  std::vector<uint32_t> out_seen_;
  uint64_t work_done_ = 0;
};

// The cached classification of the vocabulary per top frame; thread-safe.
class GrammarMaskCache {
 public:
  GrammarMaskCache(std::shared_ptr<const Grammar> g, std::shared_ptr<const GrammarVocab> v);
  struct Entry {
    std::vector<uint64_t> accepted;  // n_vocab bits
    std::vector<int32_t> uncertain;  // ids
  };
  const Entry& get(int32_t rule, int32_t state);
  const Grammar& grammar() const { return *g_; }
  const GrammarVocab& vocab() const { return *v_; }
  // dist[rule][state]: the fewest bytes that end the rule from the state (kFar: never), made
  // once (a fixpoint over the grammar) at the first call; empty when it did not settle.
  static constexpr int32_t kFar = INT32_MAX / 4;
  const std::vector<std::vector<int32_t>>& end_distances();
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return g_; }
  size_t n_entries();

 private:
  std::unique_ptr<Entry> classify(int32_t rule, int32_t state) const;
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const GrammarVocab> v_;
  std::mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;
  std::once_flag dist_once_;
  std::vector<std::vector<int32_t>> dist_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<GrammarMaskCache> cache);

  // bits[t / 64] >> (t % 64) & 1: token t may come next (n_vocab bits; end-of-generation tokens
  // exactly when can_end()).
  void fill_next_token_mask(std::vector<uint64_t>& bits);
  // Advances by a token; false (and no change) when the grammar does not allow it. An
  // end-of-generation token is accepted when can_end() and changes nothing.
  bool accept_token(int32_t id);
  bool accept_bytes(std::string_view bytes);
  bool can_end();       // the output so far is a whole sentence of the grammar
  bool can_continue();  // some byte may still follow
  // Closing a sentence before the token budget runs out: the fewest bytes that complete the
  // output (kFar: none), and the mask restricted to tokens that are prefixes of one shortest
  // completion (false, bits unchanged, when no token is).
  int64_t bytes_to_end();
  // longest_only: just the longest such prefix (the budget cannot afford a byte a token).
  bool restrict_to_shortest_completion(std::vector<uint64_t>& bits, bool longest_only = false);
  // `left` tokens left: drops tokens whose first byte alone already commits the sentence to more
  // bytes than the rest of the budget could close (a new optional member's key, say): after
  // first byte b the sentence needs at least need(b) bytes, and a token's further bytes close at
  // most one each.
  void restrict_by_budget(std::vector<uint64_t>& bits, int64_t left);
  // A whole sentence near the budget: keeps only the tokens after which it is still whole (and
  // end-of-generation), so it cannot start what it could not finish (a second tool call).
  void restrict_to_ending_tokens(std::vector<uint64_t>& bits);
  // Undoes the last n accepted tokens (speculative drafts the verification rejected).
  void rollback(size_t n);
  size_t n_accepted() const { return history_.size(); }

 private:
  std::shared_ptr<GrammarMaskCache> cache_;
  StackPool pool_;
  StackStepper stepper_;
  std::vector<int32_t> stacks_;
  std::vector<std::vector<int32_t>> history_;  // the stacks before each accepted token
  std::vector<int32_t> tmp_, tmp2_;
  StackPool scratch_;  // uncertain tokens' checks, cleared after each mask
  std::vector<StackPool::Frame> chain_;  // a stack's frames, top first, while it is copied
};

// Whether the whole of `text` is a sentence of `g` (tests and tools).
bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text);

}  // namespace lumen

// EngineCore: the serving engine's one thread. It owns the scheduler, the KV cache (manager and
// storage) and drives the model (and with it the one thread pool): schedule -> build one Batch
// -> Model::forward -> sample every request that wants a token -> update, step after step.
// Callers on any thread submit requests and read each request's stream of events
// (RequestHandle); they never touch the model or the KV cache.
//
// Each request has its own sampler with its own seeded RNG, and the kernels are batch invariant,
// so a request's tokens do not depend on what else runs, on how its prompt was chunked, or on
// preemptions. A request with n > 1 computes its prompt once; its completions then share the
// prompt's blocks (the partly filled last block is copied on write).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "engine/prefill_pacer.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/spec/proposer.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"
#include "model/batch.h"

namespace lumen {

class GrammarMatcher;
class GrammarMaskCache;
class GrammarVocab;
struct Grammar;

class Model;
class Tokenizer;

// A full waiting queue: the caller should retry later (HTTP 429/503).
class QueueFullError : public Error {
 public:
  using Error::Error;
};

struct EngineConfig {
  int64_t n_ctx = 0;               // positions per sequence (prompt + generated); 0: the model's, at most 4096
  int64_t max_running = 16;        // --parallel: most sequences computed together
  int64_t max_batch_tokens = 512;  // token budget of one step (at most the model's n_batch)
  int64_t max_prefill_tokens_while_decoding = 0;  // --max-prefill-while-decoding; 0 = the budget
  // --decode-stall-factor: steps that carry decodes get prompt chunks sized (from measured step
  // times) to take about this many times a decode-only step; 0 = off. See PrefillPacer.
  double decode_stall_factor = 0;
  int64_t max_waiting = 1024;      // a full queue refuses new requests
  int32_t block_size = 16;         // --kv-block-size
  int64_t kv_memory = 0;           // --kv-memory bytes; 0: what n_ctx x max_running needs, capped by free RAM
  bool prefix_caching = true;
  GgmlType kv_type_k = GgmlType::F16;  // --kv-type-k / --kv-type-v
  GgmlType kv_type_v = GgmlType::F16;
  int max_n = 16;                  // most completions one request may ask for
  // Speculative decoding by n-gram prompt lookup (engine/spec/ngram_proposer.h): match the last
  // spec_ngram tokens (0 = off); propose up to spec_tokens drafts (each request adapts its own
  // k within [1, spec_tokens]: grows on full acceptance, shrinks on none).
  int32_t spec_ngram = 0;
  int32_t spec_tokens = 4;
  // Weigh drafts against their cost: from the measured step time (a + c x tokens, the pacer's
  // fit) and each sequence's acceptance rate, draft the k that maximises expected tokens per unit
  // of step time, none when no k beats a plain step (so speculation cannot make decoding much
  // slower; a sequence without drafts probes with one every 32 passes). Greedy requests only (their
  // output cannot change; a sampling request's k must not depend on timing, or its seed would not
  // reproduce it). Off: always the adapted k.
  bool spec_cost_model = true;
  // Any other proposer (tests; overrides spec_ngram). Called on the engine thread only.
  std::shared_ptr<Proposer> spec_proposer;
  // A draft model (--draft-model) with the target's vocabulary (the caller checks the pieces:
  // DraftModelProposer::check_vocabularies), on the same thread pool.
  Model* draft_model = nullptr;
};

struct GenerationParams {
  SamplingParams sampling;  // max_tokens -1: until end of generation or the context is full
  int n = 1;                // completions of the prompt; completion i samples with seed + i
  bool logprobs = false;    // report each token's log-probability
  int top_logprobs = 0;     // and the k most likely tokens at each step
  bool ignore_eos = false;  // end-of-generation tokens do not end the completion
};

// Speculative decoding's work, per request (RequestTimings::spec) and over the engine.
struct SpecStats {
  int64_t proposed = 0;      // draft tokens verified
  int64_t accepted = 0;      // of them kept
  int64_t passes = 0;        // target passes that decoded the request (with drafts or not)
  int64_t emitted = 0;       // tokens those passes emitted
  std::vector<int64_t> proposed_at, accepted_at;  // per draft position (0 = the first draft)
  double acceptance_rate() const { return proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0; }
  double tokens_per_pass() const { return passes > 0 ? static_cast<double>(emitted) / static_cast<double>(passes) : 0; }
};

struct EngineStats {
  // waiting: in the scheduler's queue (preempted ones too) or submitted and not yet taken in by
  // a step; a submission counts from the moment submit() returns.
  int64_t running = 0, waiting = 0;
  int64_t blocks_total = 0, blocks_used = 0, block_size = 0;
  int64_t kv_bytes_per_block = 0;  // K and V of one block: its group's layers
  int64_t kv_bytes_per_token = 0;  // K and V of one position in every layer (within any window)
  KvCacheStats cache;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t computed_tokens = 0;   // tokens evaluated by forward passes
  int64_t generated_tokens = 0;  // tokens sampled
  int64_t requests_finished = 0;
  int64_t blocks_used_peak = 0;
  SpecStats spec;
  // Where the engine thread's time goes, summed over steps (ms): scheduling and batch assembly,
  // the forward pass, sampling and emitting tokens.
  double schedule_ms = 0, forward_ms = 0, sample_ms = 0;
  // Sums over steps of the running requests' KV holdings (means over a run: divide two sums):
  // blocks held, of which holding no token yet; slots in those blocks, of which written.
  int64_t block_steps = 0, empty_block_steps = 0, slot_steps = 0, token_steps = 0;
};

class EngineCore {
 public:
  // Sizes the KV pool and starts the engine thread. Errors: a budget above the model's n_batch,
  // a pool that cannot hold one block, invalid sizes.
  EngineCore(Model& model, const Tokenizer& tokenizer, const EngineConfig& config);
  // Cancels whatever still runs, then stops the thread; reports leaked KV blocks on stderr.
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Queues a request for `prompt` (token ids). Refused with Error, naming the numbers, when the
  // prompt is empty or has an id outside the vocabulary, when it plus max_tokens cannot fit the
  // context or the prompt cannot fit the KV pool, or when a parameter is invalid; with
  // QueueFullError when the waiting queue is full. Never truncates.
  std::shared_ptr<RequestHandle> submit(std::vector<int32_t> prompt, const GenerationParams& params);
  // Queues all of `requests` at once, or none (the first refusal is thrown): the engine admits
  // them in the same step, so a batch starts together whatever the caller's thread is doing.
  std::vector<std::shared_ptr<RequestHandle>> submit_all(
      std::vector<std::pair<std::vector<int32_t>, GenerationParams>> requests);

  // Blocks until no request is queued or running.
  void wait_idle();
  // After wait_idle(): empty when every KV block is back in the pool, else who holds them.
  std::string leak_report();

  // As of the last finished step (after wait_idle(): of all work so far).
  EngineStats stats() const;
  const EngineConfig& config() const { return config_; }  // resolved (n_ctx, kv_memory)
  int64_t n_blocks() const { return n_blocks_; }
  // Tokens the pool can hold for one sequence (it may not use more than the whole pool).
  int64_t max_sequence_tokens() const { return std::min<int64_t>(config_.n_ctx, pool_tokens_); }

  void wake();  // the engine thread re-checks its inbox (submissions, cancellations)

 private:
  struct Sequence;
  struct Submission {
    std::shared_ptr<RequestHandle> handle;
    std::vector<int32_t> prompt;
    GenerationParams params;
    int64_t max_num_tokens;
    double submitted_at;
  };

  // submit()'s checks; the handle and time are set when queued.
  Submission validate(std::vector<int32_t> prompt, const GenerationParams& params) const;
  void loop();
  void step();
  void admit(Submission& s);
  std::vector<Sequence*> fork(Sequence& parent);
  struct Sample {
    Sequence* seq = nullptr;
    const float* logits = nullptr;
    StreamEvent event;  // the sampled token, its log-probabilities
    std::string error;  // sampling failed: why
    int64_t n_spec = 0;              // drafts verified against logits rows 0..n_spec
    std::vector<StreamEvent> extra;  // speculative: the tokens after `event`
    int64_t n_accepted = 0;
    bool grammar_done = false;  // the last token completes the request's grammar: it ends (stop)
  };
  void sample_token(Sample& s) noexcept;
  // false: the sequence finished (and is gone). grammar_done: the token completes its grammar.
  bool apply_token(Sequence& q, StreamEvent event, bool grammar_done = false);
  // The matcher of a request's grammar, sharing the mask cache of earlier requests with the
  // same grammar text (an LRU of kGrammarCaches).
  std::unique_ptr<GrammarMatcher> make_grammar_matcher(const std::shared_ptr<const Grammar>& g);
  void grammar_masks(Sequence& q, std::span<const int32_t> drafts, size_t* n_grammatical);
  void adapt_spec_k(Sequence& q, int64_t n_spec, int64_t n_accepted);
  void propose_drafts();
  int32_t spec_budget(Sequence& q);
  void finish(Sequence& q, FinishReason reason, StreamEvent event, const std::string& error = {});
  void cancel_all();
  void publish_stats();

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  int64_t n_vocab_;
  int64_t n_blocks_ = 0;
  int64_t pool_tokens_ = 0;  // the longest sequence the whole pool can hold
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<Scheduler> scheduler_;
  PrefillPacer pacer_{0, 1, 1};

  // Engine-thread state.
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  RequestId next_seq_id_ = 1;
  Batch batch_;
  std::vector<std::span<const BlockId>> group_tables_;  // one request's block tables, per group
  std::shared_ptr<Proposer> proposer_;  // null: no speculative decoding
  static constexpr size_t kGrammarCaches = 16;
  // Closing starts when the tokens left are within this many of the bytes the sentence needs
  // (a token adds a few bytes of structure to close at most, so the budget still suffices).
  static constexpr int64_t kGrammarClosingMargin = 16;
  // From this many tokens more than the sentence needs, tokens whose first byte already
  // commits it past the budget are dropped (GrammarMatcher::restrict_by_budget).
  static constexpr int64_t kGrammarBudgetWindow = 256;
  std::shared_ptr<const GrammarVocab> grammar_vocab_;  // made at the first grammar request
  std::list<std::shared_ptr<GrammarMaskCache>> grammar_caches_;  // most recently used first
  std::vector<RequestId> to_propose_;    // sequences that decoded this step
  std::vector<ProposalRequest> proposals_;
  double draft_ms_per_token_ = 0;  // the proposer's time per draft (running mean)
  std::vector<float> logits_;
  std::vector<Sample> samples_;
  EngineStats local_stats_;

  // Shared with callers.
  mutable std::mutex mu_;
  std::condition_variable cv_;       // inbox or stop
  std::condition_variable idle_cv_;  // idle
  std::vector<Submission> inbox_;
  bool stop_ = false;
  bool wake_ = false;
  bool idle_ = true;
  int64_t n_pending_ = 0;  // submitted, not yet admitted to the scheduler's queue or running
  std::string leak_report_;
  EngineStats stats_;
  RequestId next_request_id_ = 1;
  std::thread thread_;
};

}  // namespace lumen

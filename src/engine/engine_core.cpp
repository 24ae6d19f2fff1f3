#include "engine/engine_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "core/system_memory.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar_matcher.h"
#include "model/model.h"
#include "tokenizer/detokenizer.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/rejection_sampler.h"
#include "engine/stop_checker.h"
#include "tokenizer/tokenizer.h"

namespace lumen {

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// The prefix cache's salt: everything besides the tokens that changes a block's contents.
uint64_t cache_salt(const Model& model, const KvLayout& layout) {
  const ModelConfig& c = model.config();
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
  };
  for (uint64_t v : {static_cast<uint64_t>(c.n_layer), static_cast<uint64_t>(c.n_embd), static_cast<uint64_t>(c.n_vocab),
                     static_cast<uint64_t>(layout.k_type), static_cast<uint64_t>(layout.v_type),
                     static_cast<uint64_t>(layout.block_size), static_cast<uint64_t>(model.weight_bytes())})
    mix(v);
  for (char ch : model.file().path()) mix(static_cast<uint8_t>(ch));
  return h;
}

}  // namespace

// One completion: the scheduler's Request plus what turns its logits into tokens and text.
struct EngineCore::Sequence {
  Request req;
  std::shared_ptr<RequestHandle> handle;
  int index = 0;
  GenerationParams params;
  Sampler sampler;
  IncrementalDetokenizer detok;
  StopChecker stops;
  bool pending = true;   // counted in n_pending_ (not yet running)
  bool forked = false;   // n > 1: the other completions have been made
  double submitted_at = 0, first_scheduled_at = -1, last_token_at = -1;
  RequestTimings timings;
  int32_t spec_k = 0;  // drafts to propose next (adapts within [1, spec_tokens])
  double spec_alpha = 0.7;  // running acceptance rate of its drafts (optimistic start)
  int32_t spec_idle = 0;    // passes without drafts since the last probe
  std::vector<TokenDist> spec_dists;  // the proposer's distribution of each of req.spec_token_ids (or empty)
  std::unique_ptr<GrammarMatcher> grammar;   // structured output: where the output stands in its grammar
  std::vector<std::vector<uint64_t>> masks;  // its next-token masks, one per draft position and one more
  bool grammar_closing = false;  // the token budget forced the sentence closed: it ends with `length`

  Sequence(const GenerationParams& p, uint64_t seed, int n_vocab, const Tokenizer& tok)
      : params(p), sampler(with_seed(p.sampling, seed), n_vocab), detok(tok), stops(p.sampling.stop) {}
  static SamplingParams with_seed(SamplingParams s, uint64_t seed) {
    s.seed = seed;
    return s;
  }
};

EngineCore::EngineCore(Model& model, const Tokenizer& tokenizer, const EngineConfig& config)
    : model_(model), tokenizer_(tokenizer), config_(config), n_vocab_(model.config().n_vocab) {
  EngineConfig& c = config_;
  if (tokenizer.n_vocab() != n_vocab_)
    fail("the tokenizer has {} tokens but the model's output has {}", tokenizer.n_vocab(), n_vocab_);
  if (c.n_ctx < 0) fail("the context size must not be negative, got {}", c.n_ctx);
  if (c.n_ctx == 0) c.n_ctx = std::min<int64_t>(model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096, 4096);
  if (c.max_batch_tokens < 1) fail("--max-batch-tokens must be at least 1, got {}", c.max_batch_tokens);
  if (!(c.decode_stall_factor == 0 || c.decode_stall_factor >= 1))
    fail("--decode-stall-factor must be 0 (off) or at least 1, got {}", c.decode_stall_factor);
  if (c.max_prefill_tokens_while_decoding < 0)
    fail("--max-prefill-while-decoding must be >= 0 (0 = the whole budget), got {}", c.max_prefill_tokens_while_decoding);
  if (c.max_batch_tokens > model.n_batch())
    fail("--max-batch-tokens {} exceeds the model's batch size {} (-b)", c.max_batch_tokens, model.n_batch());
  if (c.max_running < 1) fail("--parallel must be at least 1, got {}", c.max_running);
  if (c.block_size < 1 || c.block_size > 1024) fail("--kv-block-size must be in [1, 1024], got {}", c.block_size);
  if (c.max_n < 1) fail("the most completions per request must be at least 1");
  if (c.spec_tokens < 0 || c.spec_tokens > 16) fail("--spec-tokens must be in [0, 16], got {}", c.spec_tokens);
  if (c.spec_ngram < 0) fail("--spec-ngram must not be negative, got {}", c.spec_ngram);
  if (c.draft_model && c.spec_ngram > 0) fail("--draft-model and --spec-ngram are two proposers: choose one");
  if (c.draft_model && c.draft_model->config().n_vocab != n_vocab_)
    fail("the draft model's output has {} tokens, the target's {}", c.draft_model->config().n_vocab, n_vocab_);
  if ((c.spec_ngram > 0 || c.spec_proposer || c.draft_model) && c.spec_tokens > 0) {
    if (c.spec_tokens >= c.max_batch_tokens)
      fail("--spec-tokens {} leaves no room in a step of --max-batch-tokens {}", c.spec_tokens, c.max_batch_tokens);
    if (c.spec_proposer) proposer_ = c.spec_proposer;
    else if (c.draft_model)
      proposer_ = std::make_shared<DraftModelProposer>(*c.draft_model, c.n_ctx, c.max_running * 2);
    else proposer_ = std::make_shared<NgramProposer>(c.spec_ngram);
  }
  const KvLayout layout = model.kv_layout(c.kv_type_k, c.kv_type_v, c.block_size);
  const int64_t block_bytes = static_cast<int64_t>(layout.block_bytes());
  if (c.kv_memory < 0) fail("--kv-memory must not be negative");
  if (c.kv_memory == 0) {
    // What n_ctx x max_running needs, capped by 90% of the memory available now.
    int64_t want = max_blocks_held(layout.groups().windows(), c.block_size, c.n_ctx, c.max_batch_tokens) * c.max_running * block_bytes;
    const int64_t avail = available_memory();
    if (avail > 0) want = std::min(want, avail / 10 * 9);
    c.kv_memory = std::max(want, block_bytes);
  } else if (const int64_t avail = available_memory(); avail > 0 && c.kv_memory > avail) {
    // Asked for, not there: the pool's pages would be taken as they are first written, and the
    // kernel would kill the process mid-run instead of this clear error now.
    fail("--kv-memory of {} bytes is more than the {} bytes of memory available now", c.kv_memory, avail);
  }
  const int64_t blocks = c.kv_memory / block_bytes;
  if (blocks < 1)
    fail("--kv-memory of {} bytes holds no KV block: one block of {} tokens needs {} bytes", c.kv_memory, c.block_size,
         block_bytes);
  n_blocks_ = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  KvCacheManager::Options ko;
  ko.n_blocks = static_cast<int32_t>(n_blocks_);
  ko.block_size = c.block_size;
  ko.prefix_caching = c.prefix_caching;
  ko.salt = cache_salt(model, layout);
  ko.group_windows = layout.groups().windows();

  kv_ = std::make_unique<KvCacheManager>(ko);
  // The longest sequence the whole pool holds: every block of each global group, a window and
  // a step of each windowed one (binary search: max_blocks_held grows with the length).
  {
    int64_t lo = 0, hi = std::numeric_limits<int32_t>::max();
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (kv_->max_blocks_held(mid, c.max_batch_tokens) <= n_blocks_) lo = mid;
      else hi = mid - 1;
    }
    pool_tokens_ = lo;
  }
  storage_ = std::make_unique<KvStorage>(layout, static_cast<int32_t>(n_blocks_));
  SchedulerConfig sc;
  sc.max_batch_tokens = c.max_batch_tokens;
  sc.max_prefill_tokens_while_decoding = c.max_prefill_tokens_while_decoding;
  pacer_ = PrefillPacer(c.decode_stall_factor, /*min_tokens=*/8, c.max_batch_tokens);
  sc.max_running = c.max_running;
  sc.max_waiting = std::numeric_limits<int64_t>::max();  // bounded here, in submit()
  scheduler_ = std::make_unique<Scheduler>(sc, *kv_);
  local_stats_.blocks_total = n_blocks_;
  local_stats_.block_size = c.block_size;
  local_stats_.kv_bytes_per_block = block_bytes;
  local_stats_.kv_bytes_per_token = static_cast<int64_t>(layout.n_layer) * static_cast<int64_t>(layout.row_bytes_k() + layout.row_bytes_v());
  stats_ = local_stats_;
  thread_ = std::thread([this] { loop(); });
}

EngineCore::~EngineCore() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (!leak_report_.empty()) fmt::print(stderr, "lumen engine: KV blocks leaked at shutdown: {}\n", leak_report_);
}

void EngineCore::wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

EngineCore::Submission EngineCore::validate(std::vector<int32_t> prompt, const GenerationParams& params) const {
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt == 0) fail("the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab_) fail("prompt token id {} is outside the vocabulary (0..{})", t, n_vocab_ - 1);
  params.sampling.validate(static_cast<int>(n_vocab_));
  if (params.sampling.max_tokens == 0) fail("max_tokens must be at least 1 (or -1: no limit)");
  if (params.n < 1 || params.n > config_.max_n) fail("n must be in [1, {}], got {}", config_.max_n, params.n);
  if (params.top_logprobs < 0 || params.top_logprobs > 20) fail("top_logprobs must be in [0, 20], got {}", params.top_logprobs);
  const int64_t n_ctx = config_.n_ctx;
  const int64_t pool_tokens = pool_tokens_;
  if (n_prompt >= n_ctx)
    fail("the prompt has {} tokens, which leaves no room for a generated token in the context of {} tokens", n_prompt, n_ctx);
  if (n_prompt >= pool_tokens)
    fail("the prompt has {} tokens but the whole KV cache holds {} for one sequence ({} blocks of {}); raise --kv-memory",
         n_prompt, pool_tokens, n_blocks_, config_.block_size);
  const int64_t max_tokens = params.sampling.max_tokens;
  if (max_tokens > 0 && n_prompt + max_tokens > n_ctx)
    fail("the prompt has {} tokens; with max_tokens {} that is {}, more than the context of {} tokens", n_prompt,
         max_tokens, n_prompt + max_tokens, n_ctx);
  if (max_tokens > 0 && n_prompt + max_tokens > pool_tokens)
    fail("the prompt has {} tokens; with max_tokens {} that is {}, more than the whole KV cache holds ({} tokens); raise --kv-memory",
         n_prompt, max_tokens, n_prompt + max_tokens, pool_tokens);
  const int64_t max_num_tokens = max_tokens > 0 ? n_prompt + max_tokens : max_sequence_tokens();
  return Submission{nullptr, std::move(prompt), params, max_num_tokens, 0.0};
}

std::shared_ptr<RequestHandle> EngineCore::submit(std::vector<int32_t> prompt, const GenerationParams& params) {
  std::vector<std::pair<std::vector<int32_t>, GenerationParams>> one;
  one.emplace_back(std::move(prompt), params);
  return submit_all(std::move(one)).front();
}

std::vector<std::shared_ptr<RequestHandle>> EngineCore::submit_all(
    std::vector<std::pair<std::vector<int32_t>, GenerationParams>> requests) {
  std::vector<Submission> subs;
  subs.reserve(requests.size());
  for (auto& [prompt, params] : requests) subs.push_back(validate(std::move(prompt), params));
  std::vector<std::shared_ptr<RequestHandle>> handles;
  handles.reserve(subs.size());
  std::lock_guard lock(mu_);
  if (stop_) fail("the engine is shutting down");
  if (n_pending_ + static_cast<int64_t>(subs.size()) > config_.max_waiting)
    throw QueueFullError(fmt::format("the waiting queue is full ({} requests); try again later", config_.max_waiting));
  const double now = now_ms();
  for (Submission& s : subs) {
    s.handle = std::make_shared<RequestHandle>(next_request_id_++, s.params.n, this);
    s.submitted_at = now;
    handles.push_back(s.handle);
    inbox_.push_back(std::move(s));
  }
  n_pending_ += static_cast<int64_t>(subs.size());
  // Counted as waiting at once: the engine publishes its counts at the end of a step, and a
  // reader between this and the next one (the metrics page, a client waiting for an idle
  // server) must not see the queue empty while a refusal would call it full.
  stats_.waiting += static_cast<int64_t>(subs.size());
  idle_ = false;
  cv_.notify_all();
  return handles;
}

void EngineCore::wait_idle() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return idle_; });
}

std::string EngineCore::leak_report() {
  wait_idle();
  std::lock_guard lock(mu_);
  return leak_report_;
}

EngineStats EngineCore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void EngineCore::publish_stats() {
  EngineStats& s = local_stats_;
  s.running = scheduler_->n_running();
  s.waiting = scheduler_->n_waiting();
  s.blocks_used = kv_->pool().n_used();
  s.cache = kv_->stats();
  s.preemptions = scheduler_->n_preemptions();
  s.blocks_used_peak = std::max(s.blocks_used_peak, s.blocks_used);
  std::lock_guard lock(mu_);
  stats_ = s;
  stats_.waiting += static_cast<int64_t>(inbox_.size());  // submitted since this step took its arrivals
}

void EngineCore::loop() {
  std::vector<Submission> arrivals;
  while (true) {
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      if (inbox_.empty() && !stop_ && !wake_ && seqs_.empty()) {
        leak_report_ = kv_->leak_report();
        idle_ = true;
        idle_cv_.notify_all();
        cv_.wait(lock, [&] { return !inbox_.empty() || stop_ || wake_; });
      }
      wake_ = false;
      arrivals.swap(inbox_);
      stopping = stop_;
      if (stopping) n_pending_ -= static_cast<int64_t>(arrivals.size());
    }
    // Handles are pushed to without holding mu_ (RequestHandle::cancel() takes the handle's
    // lock, then mu_: never the other way round).
    if (stopping) {
      for (Submission& s : arrivals) {
        StreamEvent e;
        e.finished = true;
        e.finish_reason = FinishReason::Cancelled;
        for (int i = 0; i < s.handle->n(); i++) {
          e.index = i;
          s.handle->push(e);
        }
      }
      cancel_all();
      std::lock_guard lock(mu_);
      leak_report_ = kv_->leak_report();
      idle_ = true;
      idle_cv_.notify_all();
      return;
    }
    for (Submission& s : arrivals) admit(s);
    arrivals.clear();
    // Cancellations (any state).
    std::vector<Sequence*> cancelled;
    for (auto& [id, q] : seqs_)
      if (q->handle->cancel_requested()) cancelled.push_back(q.get());
    for (Sequence* q : cancelled) finish(*q, FinishReason::Cancelled, StreamEvent{});
    if (scheduler_->has_work()) {
      try {
        step();
      } catch (const std::exception& e) {
        // A failure outside any one request (a bug): end what ran in the step, keep serving.
        std::vector<Sequence*> running;
        for (auto& [id, q] : seqs_)
          if (q->req.status == RequestStatus::Running) running.push_back(q.get());
        for (Sequence* q : running) finish(*q, FinishReason::Error, StreamEvent{}, e.what());
      }
    }
    publish_stats();
  }
}

void EngineCore::admit(Submission& s) {
  auto q = std::make_unique<Sequence>(s.params, s.params.sampling.seed, static_cast<int>(n_vocab_), tokenizer_);
  q->handle = s.handle;
  if (s.params.sampling.grammar) q->grammar = make_grammar_matcher(s.params.sampling.grammar);
  q->req.id = next_seq_id_++;
  q->req.num_prompt_tokens = static_cast<int64_t>(s.prompt.size());
  q->req.tokens = std::move(s.prompt);
  q->req.max_num_tokens = s.max_num_tokens;
  q->submitted_at = s.submitted_at;
  q->timings.prompt_tokens = q->req.num_prompt_tokens;
  Sequence& ref = *q;
  seqs_.emplace(q->req.id, std::move(q));
  if (!scheduler_->add_request(&ref.req)) finish(ref, FinishReason::Error, StreamEvent{}, "the waiting queue is full");
}

void EngineCore::step() {
  const double t_schedule = now_ms();
  if (config_.decode_stall_factor > 0) {
    const int64_t paced = pacer_.cap(scheduler_->num_decoding());
    const int64_t fixed = config_.max_prefill_tokens_while_decoding;
    scheduler_->set_max_prefill_tokens_while_decoding(paced > 0 && fixed > 0 ? std::min(fixed, paced) : std::max(fixed, paced));
  }
  SchedulerOutput out = scheduler_->schedule();
  for (const BlockCopy& c : out.copies) storage_->copy_rows(c.src, c.dst, c.n_rows);
  if (out.empty()) return;
  const double t_start = now_ms();

  // One batch: every scheduled request's new tokens; logits for the last token of each request
  // that has caught up with its tokens.
  batch_.clear();
  batch_.n_groups = kv_->n_groups();
  int64_t n_out = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    Request& r = *s.request;
    const int32_t seq_index = static_cast<int32_t>(batch_.seqs.size());
    // The request's own tokens, then its drafts (logits for each: the verification needs them).
    const int64_t end = r.num_computed_tokens + s.n_new_tokens - s.n_spec;
    group_tables_.clear();
    for (int32_t g = 0; g < kv_->n_groups(); g++) group_tables_.push_back(kv_->block_table(r.id, g));
    batch_.add_seq(group_tables_, end + s.n_spec);
    const bool wants = end == r.num_tokens();
    for (int64_t p = r.num_computed_tokens; p < end; p++)
      batch_.add(r.tokens[p], static_cast<int32_t>(p), seq_index, wants && p == end - 1);
    for (int64_t j = 0; j < s.n_spec; j++)
      batch_.add(r.spec_token_ids[j], static_cast<int32_t>(end + j), seq_index, true);
    n_out += wants ? 1 + s.n_spec : 0;
    Sequence& q = *seqs_.at(r.id);
    if (q.first_scheduled_at < 0) q.first_scheduled_at = t_start;
    if (q.pending) {
      q.pending = false;
      std::lock_guard lock(mu_);
      n_pending_--;
    }
  }
  if (logits_.size() < static_cast<size_t>(n_out * n_vocab_)) logits_.resize(static_cast<size_t>(n_out * n_vocab_));
  const double t_forward = now_ms();
  local_stats_.schedule_ms += t_forward - t_schedule;
  try {
    model_.forward(batch_, *storage_, logits_.data());
  } catch (const std::exception& e) {
    for (const ScheduledRequest& s : out.scheduled) finish(*seqs_.at(s.request->id), FinishReason::Error, StreamEvent{}, e.what());
    return;
  }
  const double t_sample = now_ms();
  local_stats_.forward_ms += t_sample - t_forward;
  pacer_.observe(out.n_tokens, t_sample - t_forward);
  scheduler_->update_from_output(out);
  local_stats_.steps++;
  local_stats_.computed_tokens += out.n_tokens;
  for (const ScheduledRequest& s : out.scheduled) {
    // Over all groups: blocks held, those not yet written into, and positions written.
    const int64_t written = s.request->num_computed_tokens;
    for (int32_t g = 0; g < kv_->n_groups(); g++) {
      const auto table = kv_->block_table(s.request->id, g);
      const int64_t released = std::count(table.begin(), table.end(), kNullBlock);
      const int64_t held = static_cast<int64_t>(table.size()) - released;
      local_stats_.block_steps += held;
      local_stats_.empty_block_steps += held - (kv_->blocks_for(written) - released);
      local_stats_.slot_steps += held * config_.block_size;
      local_stats_.token_steps += written - released * config_.block_size;
    }
  }

  // Which sequences sample now, from which logits row (forks first make their siblings, who
  // sample from the same row).
  samples_.clear();
  int64_t row = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    Request& r = *s.request;
    if (r.num_computed_tokens != r.num_tokens()) continue;  // a prompt chunk: no token yet
    const float* logits = &logits_[static_cast<size_t>(row * n_vocab_)];
    row += 1 + s.n_spec;
    Sequence& q = *seqs_.at(r.id);
    if (q.params.n > 1 && !q.forked)
      for (Sequence* other : fork(q)) {
        Sample& f = samples_.emplace_back();
        f.seq = other;
        f.logits = logits;
      }
    Sample& smp = samples_.emplace_back();
    smp.seq = &q;
    smp.logits = logits;
    smp.n_spec = s.n_spec;
  }
  // Sampling is per sequence (its own sampler and RNG), so the sequences sample in parallel;
  // what they emit is applied in order afterwards.
  model_.pool().parallel_for(static_cast<int64_t>(samples_.size()), 1, [&](int64_t b, int64_t e, int) noexcept {
    for (int64_t i = b; i < e; i++) sample_token(samples_[i]);
  });
  for (Sample& smp : samples_) {
    Sequence& q = *smp.seq;
    if (!smp.error.empty()) {
      finish(q, FinishReason::Error, StreamEvent{}, smp.error);
      continue;
    }
    const RequestId id = q.req.id;
    const int64_t n_spec = smp.n_spec;
    const int64_t n_emit = 1 + static_cast<int64_t>(smp.extra.size());
    if (proposer_) {
      q.timings.spec_passes++;
      q.timings.spec_emitted += n_emit;
      q.timings.spec_proposed += n_spec;
      q.timings.spec_accepted += smp.n_accepted;
      if (q.timings.spec_proposed_at.size() < static_cast<size_t>(n_spec)) {
        q.timings.spec_proposed_at.resize(static_cast<size_t>(n_spec), 0);
        q.timings.spec_accepted_at.resize(static_cast<size_t>(n_spec), 0);
      }
      for (int64_t j = 0; j < n_spec; j++) {
        q.timings.spec_proposed_at[j]++;
        q.timings.spec_accepted_at[j] += j < smp.n_accepted;
      }
    }
    bool alive = apply_token(q, std::move(smp.event), smp.grammar_done && smp.extra.empty());
    for (size_t i = 0; alive && i < smp.extra.size(); i++)
      alive = apply_token(q, std::move(smp.extra[i]), smp.grammar_done && i + 1 == smp.extra.size());
    if (proposer_) {
      local_stats_.spec.passes++;
      local_stats_.spec.emitted += n_emit;
      local_stats_.spec.proposed += n_spec;
      local_stats_.spec.accepted += smp.n_accepted;
      if (local_stats_.spec.proposed_at.size() < static_cast<size_t>(config_.spec_tokens)) {
        local_stats_.spec.proposed_at.resize(static_cast<size_t>(config_.spec_tokens), 0);
        local_stats_.spec.accepted_at.resize(static_cast<size_t>(config_.spec_tokens), 0);
      }
      for (int64_t j = 0; j < n_spec; j++) {
        local_stats_.spec.proposed_at[j]++;
        local_stats_.spec.accepted_at[j] += j < smp.n_accepted;
      }
    }
    if (!alive || seqs_.count(id) == 0) continue;  // finished (its blocks are free already)
    if (n_spec > 0) scheduler_->accept_spec_tokens(&q.req, smp.n_accepted);
    if (proposer_) adapt_spec_k(q, n_spec, smp.n_accepted);
  }
  if (proposer_) propose_drafts();
  local_stats_.sample_ms += now_ms() - t_sample;
}

// n > 1: the other n - 1 completions share every block of the computed prompt.
std::vector<EngineCore::Sequence*> EngineCore::fork(Sequence& parent) {
  std::vector<Sequence*> made;
  parent.forked = true;
  const Request* after = &parent.req;
  for (int i = 1; i < parent.params.n; i++) {
    auto q = std::make_unique<Sequence>(parent.params, parent.params.sampling.seed + static_cast<uint64_t>(i),
                                        static_cast<int>(n_vocab_), tokenizer_);
    q->handle = parent.handle;
    q->index = i;
    q->forked = true;
    q->pending = false;
    q->req = parent.req;
    q->req.id = next_seq_id_++;
    q->req.num_preemptions = 0;
    q->submitted_at = parent.submitted_at;
    q->first_scheduled_at = parent.first_scheduled_at;
    q->timings = parent.timings;
    if (parent.grammar) q->grammar = std::make_unique<GrammarMatcher>(*parent.grammar);
    kv_->fork(parent.req.id, q->req.id);
    scheduler_->add_running(&q->req, after);
    after = &q->req;
    made.push_back(q.get());
    seqs_.emplace(q->req.id, std::move(q));
  }
  return made;
}

// Pool thread: touches only this sequence's sampler and reads its tokens.
void EngineCore::sample_token(Sample& smp) noexcept {
  try {
    Sequence& q = *smp.seq;
    const float* logits = smp.logits;
    // Without drafts one token from one row; with drafts, verification keeps a prefix of them and
    // adds the target's own token, token i coming from logits row i.
    std::vector<int32_t> tokens;
    smp.n_accepted = 0;
    smp.grammar_done = false;
    auto drafts = std::span<const int32_t>(q.req.spec_token_ids).first(static_cast<size_t>(smp.n_spec));
    if (q.grammar) {
      // Drafts the grammar refuses are cut off: the target could never keep them.
      size_t n_ok = 0;
      grammar_masks(q, drafts, &n_ok);
      drafts = drafts.first(n_ok);
    }
    const std::span<const std::vector<uint64_t>> masks =
        q.grammar ? std::span<const std::vector<uint64_t>>(q.masks).first(drafts.size() + 1)
                  : std::span<const std::vector<uint64_t>>{};
    if (smp.n_spec > 0) {
      const std::span<const TokenDist> dists =
          q.spec_dists.size() >= drafts.size() ? std::span<const TokenDist>(q.spec_dists).first(drafts.size())
                                               : std::span<const TokenDist>{};
      Verification v = verify_drafts(q.sampler, q.req.tokens, drafts, logits, n_vocab_, dists, masks);
      tokens = std::move(v.tokens);
      smp.n_accepted = v.n_accepted;
    } else {
      if (q.grammar) q.sampler.set_allowed(masks[0].data());
      const int32_t t = q.sampler.sample(logits, q.req.tokens);
      q.sampler.set_allowed(nullptr);
      tokens.push_back(t);
    }
    if (q.grammar) {
      for (size_t i = 0; i < tokens.size(); i++) {
        if (!q.grammar->accept_token(tokens[i]))
          fail("internal error: the grammar refused token {} that its mask allowed", tokens[i]);
        if (!tokenizer_.is_eog(tokens[i]) && !q.grammar->can_continue()) {
          tokens.resize(i + 1);  // the sentence is complete and nothing may follow
          smp.grammar_done = true;
          break;
        }
      }
    }
    smp.extra.clear();
    for (size_t i = 0; i < tokens.size(); i++) {
      StreamEvent& e = i == 0 ? smp.event : smp.extra.emplace_back();
      e = StreamEvent{};
      e.index = q.index;
      e.token = tokens[i];
      if (q.params.logprobs || q.params.top_logprobs > 0) {
        // log softmax of the raw logits (the model's distribution, before sampling parameters)
        const float* row = logits + static_cast<int64_t>(i) * n_vocab_;
        float mx = row[0];
        for (int64_t j = 1; j < n_vocab_; j++) mx = std::max(mx, row[j]);
        double sum = 0.0;
        for (int64_t j = 0; j < n_vocab_; j++) sum += std::exp(static_cast<double>(row[j] - mx));
        e.logprob = static_cast<float>(static_cast<double>(row[e.token] - mx) - std::log(sum));
        if (q.params.top_logprobs > 0) e.top_logprobs = top_probs(row, static_cast<int>(n_vocab_), q.params.top_logprobs);
      }
    }
    smp.error.clear();
  } catch (const std::exception& ex) {
    smp.error = ex.what();
  } catch (...) {
    smp.error = "unknown error while sampling";
  }
}

bool EngineCore::apply_token(Sequence& q, StreamEvent e, bool grammar_done) {
  Request& r = q.req;
  const int32_t tok = e.token;
  const double t = now_ms();
  if (r.num_output_tokens() == 0) q.timings.ttft_ms = t - q.submitted_at;
  else q.timings.itl_ms.push_back(t - q.last_token_at);
  q.last_token_at = t;
  r.tokens.push_back(tok);
  local_stats_.generated_tokens++;

  if (tokenizer_.is_eog(tok) && !q.params.ignore_eos) return finish(q, FinishReason::Eog, std::move(e)), false;
  std::string text;
  try {
    text = q.detok.push(tok);
  } catch (const std::exception& ex) {
    return finish(q, FinishReason::Error, StreamEvent{}, ex.what()), false;
  }
  const StopChecker::Step st = q.stops.feed(text);
  e.text = st.emit;
  if (st.stopped || (grammar_done && !q.grammar_closing)) return finish(q, FinishReason::Stop, std::move(e)), false;
  if (grammar_done) return finish(q, FinishReason::Length, std::move(e)), false;  // closed for the budget
  if (r.num_tokens() >= r.max_num_tokens) return finish(q, FinishReason::Length, std::move(e)), false;
  q.handle->push(std::move(e));
  return true;
}

std::unique_ptr<GrammarMatcher> EngineCore::make_grammar_matcher(const std::shared_ptr<const Grammar>& g) {
  if (!grammar_vocab_) grammar_vocab_ = GrammarVocab::from_tokenizer(tokenizer_);
  auto it = std::find_if(grammar_caches_.begin(), grammar_caches_.end(),
                         [&](const auto& c) { return c->grammar().source == g->source; });
  if (it != grammar_caches_.end()) {
    grammar_caches_.splice(grammar_caches_.begin(), grammar_caches_, it);
  } else {
    grammar_caches_.push_front(std::make_shared<GrammarMaskCache>(g, grammar_vocab_));
    if (grammar_caches_.size() > kGrammarCaches) grammar_caches_.pop_back();
  }
  return std::make_unique<GrammarMatcher>(grammar_caches_.front());
}

// Pool thread. q.masks[i]: the next-token mask after the output plus drafts[0, i), for every i up
// to the first draft the grammar refuses (*n_grammatical of them pass) or the first position
// that closes the sentence; the matcher ends where it began.
// Closing: near the end of the token budget (max_tokens or the context) an unfinished sentence
// may continue only with prefixes of its shortest completion, so the output still parses
// (README "Grammars"). Checked per position, so drafts change nothing.
void EngineCore::grammar_masks(Sequence& q, std::span<const int32_t> drafts, size_t* n_grammatical) {
  GrammarMatcher& m = *q.grammar;
  if (q.masks.size() < drafts.size() + 1) q.masks.resize(drafts.size() + 1);
  const int64_t left = q.req.max_num_tokens - q.req.num_tokens();
  auto mask_at = [&](size_t j) {
    m.fill_next_token_mask(q.masks[j]);
    const int64_t need = m.bytes_to_end(), left_j = left - static_cast<int64_t>(j);
    if (need == 0 && left_j <= kGrammarClosingMargin) {
      // Whole already: it may go on only with tokens that keep it whole (for `.*` all of them).
      m.restrict_to_ending_tokens(q.masks[j]);
      return false;
    }
    if (need >= GrammarMaskCache::kFar) return false;
    if (left_j <= need + kGrammarBudgetWindow) m.restrict_by_budget(q.masks[j], left_j);
    return need > 0 && left_j <= need + kGrammarClosingMargin &&
           m.restrict_to_shortest_completion(q.masks[j], /*longest_only=*/left_j <= need);
  };
  size_t j = 0;
  bool closing = mask_at(0);
  while (!closing && j < drafts.size()) {
    const int32_t d = drafts[j];
    if (!(q.masks[j][static_cast<size_t>(d) / 64] >> (d % 64) & 1) || tokenizer_.is_eog(d) || !m.accept_token(d)) break;
    j++;
    closing = mask_at(j);
  }
  if (closing) q.grammar_closing = true;
  m.rollback(j);
  *n_grammatical = j;
}

// k adapts to how a sequence's last drafts fared: all accepted, one more (up to --spec-tokens);
// none, one fewer (at least 1); with the cost model, no more than pays for itself (see
// EngineConfig::spec_cost_model). Then the sequence wants drafts for its next step.
void EngineCore::adapt_spec_k(Sequence& q, int64_t n_spec, int64_t n_accepted) {
  if (q.spec_k == 0) q.spec_k = config_.spec_tokens;
  if (n_spec > 0 && n_accepted == n_spec) q.spec_k = std::min(config_.spec_tokens, q.spec_k + 1);
  else if (n_spec > 0 && n_accepted == 0) q.spec_k = std::max(1, q.spec_k - 1);
  if (n_spec > 0) q.spec_alpha = 0.8 * q.spec_alpha + 0.2 * static_cast<double>(n_accepted) / static_cast<double>(n_spec);
  to_propose_.push_back(q.req.id);
}

// Drafts worth proposing for a sequence: with the step time a + c x tokens, the proposer's time
// d per draft and an acceptance rate alpha, k drafts emit 1 + alpha + ... + alpha^k tokens for
// (a + c (1 + k) + d k) / (a + c) the time of a plain step; the best k of [0, spec_k] (0 when
// none gains 5%).
int32_t EngineCore::spec_budget(Sequence& q) {
  // Only for greedy requests: their output is the same with drafts or without, so a decision
  // from measured times changes nothing but speed. A sampling request's drafts change how its
  // seeded generator is consumed, so its k must depend on its own history alone.
  if (!config_.spec_cost_model || !q.sampler.params().greedy()) return q.spec_k;
  double a = 0, c = 0;
  if (!pacer_.fit(&a, &c) || c <= 0 || a + c <= 0) return q.spec_k;  // not measured yet: optimistic
  int32_t best = 0;
  double best_gain = 1.05, emitted = 1, term = 1;
  for (int32_t k = 1; k <= q.spec_k; k++) {
    term *= q.spec_alpha;
    emitted += term;
    const double gain = emitted * (a + c) / (a + c * (1 + k) + k * draft_ms_per_token_);
    if (gain > best_gain) best_gain = gain, best = k;
  }
  if (best == 0 && ++q.spec_idle >= 32) {  // probe now and then: alpha may have changed
    q.spec_idle = 0;
    return 1;
  }
  if (best > 0) q.spec_idle = 0;
  return best;
}

// The next step's drafts of every sequence that just decoded, in one call (a draft model batches
// them), never reaching past a sequence's last allowed token.
void EngineCore::propose_drafts() {
  proposals_.clear();
  for (const RequestId id : to_propose_) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    Sequence& q = *it->second;
    Request& r = q.req;
    const int64_t room = r.max_num_tokens - r.num_tokens() - 1;
    ProposalRequest p;
    p.id = r.id;
    p.tokens = r.tokens;
    p.k = static_cast<int32_t>(std::min<int64_t>(spec_budget(q), room));
    p.params = &q.sampler.params();
    p.drafts = &r.spec_token_ids;
    p.dists = &q.spec_dists;
    r.spec_token_ids.clear();
    q.spec_dists.clear();
    if (p.k > 0) proposals_.push_back(p);
  }
  to_propose_.clear();
  if (proposals_.empty()) return;
  const double t0 = now_ms();
  try {
    proposer_->propose_batch(proposals_);
    int64_t n = 0;
    for (const ProposalRequest& p : proposals_) n += p.k;
    // The proposer's time per draft asked for (a running mean): what a draft costs beside the
    // target's pass.
    if (n > 0) draft_ms_per_token_ = 0.9 * draft_ms_per_token_ + 0.1 * (now_ms() - t0) / static_cast<double>(n);
  } catch (const std::exception& e) {
    // A failing proposer costs speed, never a request: no drafts this step.
    for (ProposalRequest& p : proposals_) p.drafts->clear(), p.dists->clear();
    fmt::print(stderr, "lumen engine: speculative proposer failed: {}\n", e.what());
    return;
  }
  for (ProposalRequest& p : proposals_) {
    std::vector<int32_t>& d = *p.drafts;
    if (static_cast<int64_t>(d.size()) > p.k) d.resize(static_cast<size_t>(p.k));
    // A draft outside the vocabulary (a broken proposer) ends the drafts there.
    const auto bad = std::find_if(d.begin(), d.end(), [this](int32_t t) { return t < 0 || t >= n_vocab_; });
    d.erase(bad, d.end());
    if (!p.dists->empty() && p.dists->size() != d.size()) p.dists->resize(std::min(p.dists->size(), d.size()));
    if (!p.dists->empty() && p.dists->size() != d.size()) p.dists->clear();
  }
}

// Ends one completion: releases held-back text (unless a stop string ended it), frees its
// blocks, and pushes `event` as its last.
void EngineCore::finish(Sequence& q, FinishReason reason, StreamEvent event, const std::string& error) {
  Request& r = q.req;
  if (reason != FinishReason::Stop && reason != FinishReason::Error) {
    const StopChecker::Step st = q.stops.feed(q.detok.flush());
    event.text += st.emit;
    if (st.stopped) reason = FinishReason::Stop;
    else event.text += q.stops.finish();
  }
  scheduler_->finish_request(&r, reason);
  if (q.pending) {
    q.pending = false;
    std::lock_guard lock(mu_);
    n_pending_--;
  }
  q.timings.queue_ms = q.first_scheduled_at >= 0 ? q.first_scheduled_at - q.submitted_at : now_ms() - q.submitted_at;
  q.timings.total_ms = now_ms() - q.submitted_at;
  q.timings.cached_prompt_tokens = std::max<int64_t>(0, r.num_cached_tokens);
  q.timings.generated_tokens = r.num_output_tokens();
  q.timings.preemptions = r.num_preemptions;
  event.index = q.index;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.timings = q.timings;
  local_stats_.requests_finished++;
  if (proposer_) proposer_->release(r.id);
  auto handle = q.handle;
  seqs_.erase(r.id);  // q is gone from here on
  handle->push(std::move(event));
}

void EngineCore::cancel_all() {
  std::vector<Sequence*> all;
  for (auto& [id, q] : seqs_) all.push_back(q.get());
  for (Sequence* q : all) finish(*q, FinishReason::Cancelled, StreamEvent{});
}

}  // namespace lumen

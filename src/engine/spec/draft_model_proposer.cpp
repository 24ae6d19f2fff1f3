#include "engine/spec/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen {

void DraftModelProposer::check_vocabularies(const Tokenizer& target, const Tokenizer& draft) {
  const Vocab& a = target.vocab();
  const Vocab& b = draft.vocab();
  if (a.n_tokens() != b.n_tokens())
    fail("the draft model's vocabulary has {} tokens, the target's {}: speculative decoding needs the same vocabulary",
         b.n_tokens(), a.n_tokens());
  for (int32_t id = 0; id < a.n_tokens(); id++)
    if (a.token(id).text != b.token(id).text)
      fail("the draft model's vocabulary differs from the target's at token id {} ('{}' vs '{}')", id, b.token(id).text,
           a.token(id).text);
}

DraftModelProposer::DraftModelProposer(Model& draft, int64_t n_ctx, int64_t max_sequences) : draft_(draft), n_ctx_(n_ctx) {
  if (n_ctx < 1 || max_sequences < 1) fail("a draft model needs a context and at least one sequence");
  const KvLayout layout = draft.kv_layout(GgmlType::F16, GgmlType::F16, 16);
  const std::vector<int32_t> windows = layout.groups().windows();
  const int64_t per_seq = max_blocks_held(windows, layout.block_size, n_ctx + 16, draft.n_batch()) + 1;
  KvCacheManager::Options o;
  o.n_blocks = static_cast<int32_t>(std::min<int64_t>(per_seq * max_sequences, int64_t{1} << 30));
  o.block_size = layout.block_size;
  o.prefix_caching = false;
  o.group_windows = windows;
  kv_ = std::make_unique<KvCacheManager>(o);
  storage_ = std::make_unique<KvStorage>(layout, o.n_blocks);
}

DraftModelProposer::~DraftModelProposer() = default;

void DraftModelProposer::release(int64_t id) {
  kv_->free(id);
  seqs_.erase(id);
}

std::vector<int32_t> DraftModelProposer::propose(std::span<const int32_t> tokens, int32_t k) {
  // One sequence with no identity: a fresh cache each time (tools and tests).
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<int32_t> drafts;
  ProposalRequest r;
  r.id = next_anon_id_--;
  r.tokens = tokens;
  r.k = k;
  r.params = &greedy;
  r.drafts = &drafts;
  propose_batch(std::span<ProposalRequest>(&r, 1));
  release(r.id);
  return drafts;
}

void DraftModelProposer::propose_batch(std::span<ProposalRequest> requests) {
  const int64_t n_vocab = draft_.config().n_vocab;
  // Which sequences propose, and from which position their cache must catch up.
  std::vector<ProposalRequest*> active;
  std::vector<int64_t> from;
  for (ProposalRequest& r : requests) {
    r.drafts->clear();
    if (r.dists) r.dists->clear();
    const int64_t len = static_cast<int64_t>(r.tokens.size());
    if (r.k < 1 || len < 1 || len + r.k > n_ctx_) continue;
    SeqState& st = seqs_[r.id];
    if (!st.sampler) {
      SamplingParams p = *r.params;
      p.seed ^= 0x6472616674ULL;  // "draft": its own stream, fixed by the request's seed
      st.sampler = std::make_unique<Sampler>(p, static_cast<int>(n_vocab));
    }
    // Roll back to the prefix the cache shares with the sequence (rejected drafts drop out); the
    // last token is always computed again, for its logits.
    int64_t m = 0;
    const int64_t held = static_cast<int64_t>(st.cached.size());
    while (m < held && m < len - 1 && st.cached[m] == r.tokens[m]) m++;
    st.cached.resize(static_cast<size_t>(m));
    kv_->trim(r.id, m);
    if (!kv_->allocate_slots(r.id, m, len - m + r.k - 1)) {  // the draft pool is full: no drafts now
      release(r.id);
      continue;
    }
    active.push_back(&r);
    from.push_back(m);
  }
  if (active.empty()) return;
  const int64_t n_batch = draft_.n_batch();
  if (logits_.size() < static_cast<size_t>(n_batch * n_vocab)) logits_.resize(static_cast<size_t>(n_batch * n_vocab));
  std::vector<int32_t> prev;

  // A draft from the logits after `r`'s tokens and drafts so far.
  auto draw = [&](ProposalRequest& r, const float* logits) {
    SeqState& st = seqs_.at(r.id);
    // The tokens and drafts so far, as far back as the penalties read.
    const size_t need = st.sampler->history_needed();
    const size_t n_drafts = r.drafts->size(), from_drafts = std::min(need, n_drafts);
    const size_t from_tokens = std::min(need - from_drafts, r.tokens.size());
    prev.assign(r.tokens.end() - static_cast<std::ptrdiff_t>(from_tokens), r.tokens.end());
    prev.insert(prev.end(), r.drafts->end() - static_cast<std::ptrdiff_t>(from_drafts), r.drafts->end());
    if (r.params->greedy() || !r.dists) {
      r.drafts->push_back(st.sampler->sample(logits, prev));
      return;
    }
    TokenDist q;
    st.sampler->distribution(logits, prev, q);
    r.drafts->push_back(st.sampler->draw(q));
    r.dists->push_back(std::move(q));
  };
  // Adds positions [p0, p1) of sequence i (tokens: its tokens then drafts) to the batch.
  std::vector<int64_t> want_row;  // per batch output row: the active index
  auto add = [&](size_t i, int64_t p0, int64_t p1, bool logits) {
    ProposalRequest& r = *active[i];
    tables_.clear();
    for (int32_t g = 0; g < kv_->n_groups(); g++) tables_.push_back(kv_->block_table(r.id, g));
    const int32_t s = batch_.add_seq(tables_, p1);
    const int64_t len = static_cast<int64_t>(r.tokens.size());
    for (int64_t p = p0; p < p1; p++) {
      const int32_t t = p < len ? r.tokens[p] : (*r.drafts)[static_cast<size_t>(p - len)];
      batch_.add(t, static_cast<int32_t>(p), s, logits && p == p1 - 1);
    }
    if (logits) want_row.push_back(static_cast<int64_t>(i));
  };
  auto flush = [&] {
    if (batch_.size() == 0) return;
    draft_.forward(batch_, *storage_, logits_.data());
    for (size_t row = 0; row < want_row.size(); row++) draw(*active[want_row[row]], &logits_[row * n_vocab]);
    batch_.clear();
    batch_.n_groups = kv_->n_groups();
    want_row.clear();
  };
  batch_.clear();
  batch_.n_groups = kv_->n_groups();
  // The catch-up: every sequence's new tokens, in chunks that fill batches of n_batch.
  for (size_t i = 0; i < active.size(); i++) {
    const int64_t len = static_cast<int64_t>(active[i]->tokens.size());
    for (int64_t p = from[i]; p < len;) {
      if (batch_.size() == n_batch) flush();
      const int64_t n = std::min(len - p, n_batch - batch_.size());
      add(i, p, p + n, p + n == len);
      p += n;
    }
  }
  flush();
  // Then one draft per pass, for those that want more.
  int32_t k_max = 0;
  for (const ProposalRequest* r : active) k_max = std::max(k_max, r->k);
  for (int32_t j = 1; j < k_max; j++) {
    for (size_t i = 0; i < active.size(); i++) {
      const ProposalRequest& r = *active[i];
      if (r.k <= j || static_cast<int32_t>(r.drafts->size()) != j) continue;
      if (batch_.size() == n_batch) flush();
      const int64_t pos = static_cast<int64_t>(r.tokens.size()) + j - 1;  // the previous draft's
      add(i, pos, pos + 1, true);
    }
    flush();
  }
  // The cache now holds the tokens and every draft but the last.
  for (ProposalRequest* r : active) {
    SeqState& st = seqs_.at(r->id);
    st.cached.assign(r->tokens.begin(), r->tokens.end());
    st.cached.insert(st.cached.end(), r->drafts->begin(), r->drafts->end() - (r->drafts->empty() ? 0 : 1));
  }
}

}  // namespace lumen

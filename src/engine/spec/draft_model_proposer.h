// Draft-model proposals: a smaller model with the target's vocabulary guesses k tokens per
// sequence, autoregressively, batched across every decoding sequence of the step (one catch-up
// pass for the tokens the sequences gained since their last proposal, then k - 1 single-token
// passes). It keeps its own paged KV cache (a KvCacheManager over its own KvStorage) and runs on
// the engine's thread pool; after a verification the tokens its cache holds beyond what the
// sequence kept are rolled back (the common prefix stays). With a sampling request it samples
// its drafts from its own distribution q (the request's sampling parameters, a generator seeded
// from the request's seed) and reports q for the acceptance rule; greedy requests get its argmax.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/spec/proposer.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"
#include "model/batch.h"

namespace lumen {

class Model;
class Tokenizer;

class DraftModelProposer : public Proposer {
 public:
  // n_ctx: the longest sequence; max_sequences: sequences at once (its pool holds that many).
  DraftModelProposer(Model& draft, int64_t n_ctx, int64_t max_sequences);
  ~DraftModelProposer() override;

  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t k) override;
  void propose_batch(std::span<ProposalRequest> requests) override;
  void release(int64_t id) override;

  // Error naming the first token id whose piece differs, or the sizes, when the draft's
  // vocabulary is not the target's.
  static void check_vocabularies(const Tokenizer& target, const Tokenizer& draft);

 private:
  struct SeqState {
    std::vector<int32_t> cached;  // the tokens whose K/V the draft cache holds, in order
    std::unique_ptr<Sampler> sampler;
  };
  void run(std::span<ProposalRequest> reqs, std::vector<int64_t>& from, bool first_pass);

  Model& draft_;
  int64_t n_ctx_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<KvStorage> storage_;
  std::unordered_map<int64_t, SeqState> seqs_;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<std::span<const BlockId>> tables_;
  int64_t next_anon_id_ = -1;  // propose() without an id
};

}  // namespace lumen

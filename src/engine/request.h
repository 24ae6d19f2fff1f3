// Request: one sequence as the scheduler sees it, after vLLM v1. There is no prefill phase and
// no decode phase: a request has num_tokens() (prompt plus generated) and num_computed_tokens
// (those whose K/V are in the cache); each step computes some of the difference, under a token
// budget. When computed catches up with num_tokens, the step's last token gives logits and the
// engine samples the next token.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace lumen {

enum class RequestStatus { Waiting, Running, Preempted, Finished };
enum class FinishReason { None, Stop, Length, Eog, Cancelled, Error };

const char* request_status_name(RequestStatus s);
const char* finish_reason_name(FinishReason r);  // "stop", "length", "eog", "cancelled", "error"

struct Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;     // the prompt, then the generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t max_num_tokens = 0;      // the sequence ends (finish reason length) at this many tokens
  int64_t num_computed_tokens = 0;
  int64_t num_cached_tokens = -1;  // prompt tokens found in the prefix cache when first scheduled
  RequestStatus status = RequestStatus::Waiting;
  FinishReason finish_reason = FinishReason::None;
  int64_t num_preemptions = 0;
  // Speculative decoding: draft tokens proposed for the step after the last token (vLLM's
  // spec_token_ids). A decoding request computes its last token and these together; the
  // verification keeps a prefix of them (engine/spec/rejection_sampler.h).
  std::vector<int32_t> spec_token_ids;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool is_finished() const { return status == RequestStatus::Finished; }
};

}  // namespace lumen

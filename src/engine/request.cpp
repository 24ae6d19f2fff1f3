#include "engine/request.h"

namespace lumen {

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::Waiting: return "waiting";
    case RequestStatus::Running: return "running";
    case RequestStatus::Preempted: return "preempted";
    case RequestStatus::Finished: return "finished";
  }
  return "?";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Eog: return "eog";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}

}  // namespace lumen

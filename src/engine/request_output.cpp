#include "engine/request_output.h"

#include <algorithm>
#include <numeric>

#include "core/stats.h"
#include "engine/engine_core.h"

namespace lumen {

double RequestTimings::decode_ms() const { return std::accumulate(itl_ms.begin(), itl_ms.end(), 0.0); }

double RequestTimings::decode_tok_s() const {
  const double ms = decode_ms();
  return ms > 0 ? 1000.0 * static_cast<double>(itl_ms.size()) / ms : 0.0;
}

double RequestTimings::itl_mean() const {
  return itl_ms.empty() ? 0.0 : decode_ms() / static_cast<double>(itl_ms.size());
}

double RequestTimings::itl_percentile(double p) const { return percentile(itl_ms, p); }

std::optional<StreamEvent> RequestHandle::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || remaining_ == 0; });
  if (events_.empty()) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<StreamEvent> RequestHandle::try_next() {
  std::lock_guard lock(mu_);
  if (events_.empty()) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool RequestHandle::done() const {
  std::lock_guard lock(mu_);
  return remaining_ == 0 && events_.empty();
}

void RequestHandle::cancel() {
  if (cancelled_.exchange(true)) return;
  // Under our lock: while a completion is unfinished the engine is alive (it finishes every
  // request before it goes away, and needs this lock to do so).
  std::lock_guard lock(mu_);
  if (remaining_ > 0 && engine_) engine_->wake();
}

void RequestHandle::push(StreamEvent event) {
  {
    std::lock_guard lock(mu_);
    if (event.finished) remaining_--;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
  // Called under its own lock, so that once set_listener() returns the old listener is not
  // running and will not run (what it points to may then go away).
  std::lock_guard lock(listener_mu_);
  if (listener_) listener_();
}

void RequestHandle::set_listener(std::function<void()> listener) {
  std::lock_guard lock(listener_mu_);
  listener_ = std::move(listener);
  bool pending = false;
  {
    std::lock_guard events_lock(mu_);
    pending = !events_.empty();
  }
  if (pending && listener_) listener_();
}

}  // namespace lumen

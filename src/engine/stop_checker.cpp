#include "engine/stop_checker.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace lumen {

StopChecker::StopChecker(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); i++)
    if (stops_[i].empty()) fail("stop string #{} is empty", i);
}

namespace {

// Length of the longest proper prefix of `stop` that is a suffix of `text`.
size_t partial_match(std::string_view text, std::string_view stop) {
  for (size_t len = std::min(text.size(), stop.size() - 1); len > 0; len--)
    if (text.substr(text.size() - len) == stop.substr(0, len)) return len;
  return 0;
}

}  // namespace

StopChecker::Step StopChecker::feed(std::string_view text) {
  Step step;
  if (stopped_) return step;
  pending_.append(text);

  // Earliest full occurrence of any stop string.  pending_ is only the held-back tail (shorter
  // than the longest stop string) plus the new piece, so the search is short.
  size_t stop_pos = std::string::npos;
  const std::string* found = nullptr;
  for (const std::string& s : stops_) {
    const size_t pos = pending_.find(s);
    if (pos < stop_pos) {
      stop_pos = pos;
      found = &s;
    }
  }
  if (found != nullptr) {
    stopped_ = true;
    matched_ = *found;
    step.emit = pending_.substr(0, stop_pos);
    step.stopped = true;
    pending_.clear();
    return step;
  }

  size_t hold = 0;
  for (const std::string& s : stops_) hold = std::max(hold, partial_match(pending_, s));
  step.emit = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopChecker::finish() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace lumen

// StopChecker: finds stop strings in text generated piece by piece, and decides how much of the
// text can be shown to the user now.
//
// Text that might be the beginning of a stop string (a suffix of what has been fed that is a
// proper prefix of some stop string) is held back until the next piece settles it.  When a stop
// string appears, everything before its first occurrence is released, the stop string and
// everything after it are dropped, and the checker stays stopped.  A stop string may span any
// number of pieces.  Matching is on bytes; when the fed text is valid UTF-8 (and stop strings
// are), the held-back part starts at a character boundary, so released text never splits a
// character that the caller has completed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

class StopChecker {
 public:
  struct Step {
    std::string emit;      // text that is safe to show now (possibly empty)
    bool stopped = false;  // a stop string has been found: generation should end
  };

  // Throws lumen::Error if a stop string is empty.  No stop strings: everything passes through.
  explicit StopChecker(std::vector<std::string> stops);

  // Feeds the next piece of generated text.  After a stop, further pieces are ignored.
  Step feed(std::string_view text);

  // Generation ended for another reason (end-of-generation token, max_tokens, context full):
  // returns the held-back text, which can no longer become a stop string.
  std::string finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended generation (the earliest occurrence; on a tie, the first in the
  // list, like llama-server); empty while not stopped.
  const std::string& matched() const { return matched_; }
  // Bytes currently held back.
  size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // fed but not yet emitted; shorter than the longest stop string
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace lumen

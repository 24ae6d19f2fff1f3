// Compiled grammars by their text, least recently used out: clients resend the same schema (a
// response_format, a tool's parameters) with every request, and compiling is the costly part
// (the JSON-schema conversion is cheap beside it). Shared by the HTTP threads; a compile runs
// outside the lock, so one thread compiling does not hold up another's hit.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"

namespace lumen::server {

class GrammarCache {
 public:
  // At most `capacity` grammars and `max_bytes` of grammar text are kept (a text larger than
  // max_bytes is compiled and not kept).
  explicit GrammarCache(size_t capacity = 32, size_t max_bytes = 32u << 20) : capacity_(capacity), max_bytes_(max_bytes) {}

  // The compiled grammar of `text`: cached, or compiled now (a GrammarError propagates, and
  // nothing is kept for it).
  std::shared_ptr<const Grammar> get(const std::string& text);

  size_t size() const;
  size_t hits() const;
  size_t misses() const;

 private:
  struct Entry {
    std::shared_ptr<const Grammar> grammar;
    std::list<const std::string*>::iterator age;  // its place in lru_
  };
  void evict_locked();

  size_t capacity_, max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
  std::list<const std::string*> lru_;  // keys of map_ (stable addresses), most recent first
  size_t bytes_ = 0;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace lumen::server

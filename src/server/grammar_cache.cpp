#include "server/grammar_cache.h"

namespace lumen::server {

std::shared_ptr<const Grammar> GrammarCache::get(const std::string& text) {
  {
    std::lock_guard lock(mu_);
    if (auto it = map_.find(text); it != map_.end()) {
      hits_++;
      lru_.splice(lru_.begin(), lru_, it->second.age);
      return it->second.grammar;
    }
    misses_++;
  }
  std::shared_ptr<const Grammar> g = compile_grammar(text);
  if (capacity_ == 0 || text.size() > max_bytes_) return g;
  std::lock_guard lock(mu_);
  auto [it, fresh] = map_.try_emplace(text);
  if (!fresh) return it->second.grammar;  // another thread compiled it meanwhile
  lru_.push_front(&it->first);
  it->second = Entry{g, lru_.begin()};
  bytes_ += text.size();
  evict_locked();
  return g;
}

void GrammarCache::evict_locked() {
  while (map_.size() > capacity_ || bytes_ > max_bytes_) {
    const std::string* key = lru_.back();
    lru_.pop_back();
    bytes_ -= key->size();
    map_.erase(map_.find(*key));  // by iterator: the key argument must not be the erased node's own
  }
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}
size_t GrammarCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}
size_t GrammarCache::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

}  // namespace lumen::server

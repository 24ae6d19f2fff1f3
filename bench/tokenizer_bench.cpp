// Tokenizer throughput: encode a ~100 KB text with the SentencePiece-style (llama-spm, 32K) and
// byte-level BPE (llama-bpe, 128K; gpt-2) vocabularies of ../shared/vocab, plus a 100 KB
// "word" without spaces, the worst case for merging (one sequence of 100K symbols: linear
// rescans would take minutes, the priority queue takes milliseconds).
// Run: build/bench/lumen_bench_micro --benchmark_filter=Encode
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string shared_vocab(const std::string& name) {
  const char* env = std::getenv("LUMEN_SHARED");
  // Default: ../shared next to the repository (this file is <repo>/bench/tokenizer_bench.cpp).
  std::string repo = __FILE__;
  repo = repo.substr(0, repo.rfind("/bench/"));
  const std::string dir = env && *env ? env : repo + "/../shared";
  return dir + "/vocab/ggml-vocab-" + name + ".gguf";
}

const lumen::Tokenizer* tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<lumen::Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    try {
      slot = lumen::Tokenizer::from_gguf(*lumen::GgufFile::open(shared_vocab(name)));
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  return slot.get();
}

// ~100 KB of English-like prose with numbers, punctuation, some accents and CJK, from a fixed
// seed so every run encodes the same bytes.
const std::string& prose() {
  static const std::string text = [] {
    const char* words[] = {"the", "little", "dog", "ran", "to", "park", "and", "she", "said", "hello",
                           "tokenizer", "engine", "model", "2024", "3.14", "café", "naïve", "日本語", "über",
                           "don't", "we'll", "(quickly)", "data,", "end.", "new\nline", "  spaced", "tab\tbed"};
    std::mt19937 rng(1234);
    std::string s;
    while (s.size() < 100 * 1024) {
      s += words[rng() % (sizeof(words) / sizeof(words[0]))];
      s += rng() % 9 == 0 ? ". " : " ";
    }
    return s;
  }();
  return text;
}

const std::string& long_word() {
  static const std::string text = [] {
    std::mt19937 rng(99);
    std::string s(100 * 1024, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
  }();
  return text;
}

void encode(benchmark::State& state, const char* vocab, const std::string& text) {
  const lumen::Tokenizer* tok = tokenizer(vocab);
  if (!tok) {
    state.SkipWithError("vocabulary file not found (set LUMEN_SHARED)");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, false, true);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_EncodeSpm100KB(benchmark::State& s) { encode(s, "llama-spm", prose()); }
void BM_EncodeBpeLlama3_100KB(benchmark::State& s) { encode(s, "llama-bpe", prose()); }
void BM_EncodeBpeGpt2_100KB(benchmark::State& s) { encode(s, "gpt-2", prose()); }
void BM_EncodeSpmOneWord100KB(benchmark::State& s) { encode(s, "llama-spm", long_word()); }
void BM_EncodeBpeOneWord100KB(benchmark::State& s) { encode(s, "gpt-2", long_word()); }

BENCHMARK(BM_EncodeSpm100KB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeBpeLlama3_100KB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeBpeGpt2_100KB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeSpmOneWord100KB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeBpeOneWord100KB)->Unit(benchmark::kMillisecond);

}  // namespace

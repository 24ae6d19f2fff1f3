// Structured output's cost per token: the next-token mask plus advancing the matcher, along a
// JSON document (a schema-shaped grammar: an object of a string, an integer, an enum and an
// array of objects; SPM's first piece carries a space, so one may lead), with the 32k llama-spm and the 152k Qwen2 vocabularies of ../shared/vocab.
// Warm: the mask cache already holds the document's frames (every request after the first with
// a schema); cold: a fresh cache, so the first visit of each frame classifies the vocabulary.
// Compare with a decode step: TinyLlama-shape Q8_0 at -t 2 takes ~15 ms, so 5% is ~750 us.
// Run: build/bench/lumen_bench_micro --benchmark_filter=GrammarMask
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

const char* kGrammar = R"(
  root   ::= " "? "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws int ws "," ws
             "\"mood\"" ws ":" ws ( "\"happy\"" | "\"sad\"" | "\"curious\"" ) ws "," ws
             "\"friends\"" ws ":" ws "[" ws ( friend ws ( "," ws friend ws )* )? "]" ws "}"
  friend ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"since\"" ws ":" ws int ws "}"
  string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
  int    ::= "-"? ( "0" | [1-9] [0-9]* )
  ws     ::= ( " " | "\n" [ \t]{0,16} )?
)";

const char* kDocument =
    R"({"name": "Lily Rose, the baker's daughter", "age": 7, "mood": "curious", "friends": [)"
    R"({"name": "Tom", "since": 2021}, {"name": "Ben the big brown dog who likes to run", "since": 2019}, )"
    R"({"name": "Sue", "since": 2023}]})";

struct Setup {
  std::shared_ptr<const GrammarVocab> vocab;
  std::vector<int32_t> tokens;
  std::shared_ptr<const Grammar> grammar;
};

const Setup* setup(const std::string& vocab_name) {
  static std::map<std::string, std::unique_ptr<Setup>> cache;
  auto& slot = cache[vocab_name];
  if (!slot) {
    const char* env = std::getenv("LUMEN_SHARED");
    std::string repo = __FILE__;
    repo = repo.substr(0, repo.rfind("/bench/"));
    const std::string path = (env && *env ? std::string(env) : repo + "/../shared") + "/vocab/ggml-vocab-" + vocab_name + ".gguf";
    try {
      auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
      auto s = std::make_unique<Setup>();
      s->vocab = GrammarVocab::from_tokenizer(*tok);
      s->tokens = tok->encode(kDocument, false, false);
      s->grammar = compile_grammar(kGrammar);
      slot = std::move(s);
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  return slot.get();
}

// Args: vocabulary (0: llama-spm 32k, 1: qwen2 152k), warm (1) or cold (0) cache.
void BM_GrammarMask(benchmark::State& state) {
  const Setup* s = setup(state.range(0) == 0 ? "llama-spm" : "qwen2");
  if (!s) {
    state.SkipWithError("../shared/vocab is missing");
    return;
  }
  const bool warm = state.range(1) != 0;
  auto cache = std::make_shared<GrammarMaskCache>(s->grammar, s->vocab);
  std::vector<uint64_t> bits;
  auto run_document = [&](const std::shared_ptr<GrammarMaskCache>& c) {
    GrammarMatcher m(c);
    for (int32_t t : s->tokens) {
      m.fill_next_token_mask(bits);
      if (!(bits[static_cast<size_t>(t) / 64] >> (t % 64) & 1) || !m.accept_token(t)) return false;
    }
    return true;
  };
  if (!run_document(cache)) {
    state.SkipWithError("the document's tokens are not in the grammar");
    return;
  }
  for (auto _ : state) {
    if (!warm) cache = std::make_shared<GrammarMaskCache>(s->grammar, s->vocab);
    benchmark::DoNotOptimize(run_document(cache));
  }
  const double n = static_cast<double>(s->tokens.size());
  // Seconds per token (rate inverted): the mask and the advance, the whole document averaged.
  state.counters["s_per_token"] =
      benchmark::Counter(n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["tokens"] = n;
  state.counters["frames_cached"] = static_cast<double>(cache->n_entries());
}

BENCHMARK(BM_GrammarMask)
    ->ArgNames({"vocab", "warm"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lumen

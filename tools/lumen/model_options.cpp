#include "model_options.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "engine/spec/draft_model_proposer.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

void ModelArgs::add_to(CLI::App* cmd) {
  cmd->add_option("-m,--model", model_path, "GGUF model file (default: $LUMEN_MODEL, else ../shared/models/stories260K.gguf)");
  cmd->add_option("-t,--threads", n_threads, "threads (default: all cores)");
  cmd->add_option("-c,--ctx-size", n_ctx, "context size in tokens (default: the model's, at most 4096)");
  cmd->add_option("-b,--batch-size", n_batch, "most tokens per forward pass (default 512)");
  cmd->add_flag("--f16-as-bf16", f16_as_bf16,
                "compute F16 weights as BF16 (AVX-512 BF16 dot products): about 2x faster prefill, "
                "BF16 accuracy instead of F16");
}

std::string ModelArgs::resolved_model_path() const {
  if (!model_path.empty()) return model_path;
  if (const char* env = std::getenv("LUMEN_MODEL"); env && *env) return env;
  // The default model lives in the shared test data next to the repository.
  std::string shared = "../shared";
  if (const char* env = std::getenv("LUMEN_SHARED"); env && *env) shared = env;
  return shared + "/models/stories260K.gguf";
}

LoadedModel::~LoadedModel() = default;

std::unique_ptr<LoadedModel> load_model(const ModelArgs& args) {
  const std::string path = args.resolved_model_path();
  if (!std::filesystem::exists(path))
    fail("{}: no such model file (give one with -m or $LUMEN_MODEL)", path);
  if (args.n_batch < 1) fail("--batch-size must be at least 1");
  if (args.n_threads < 0) fail("--threads must not be negative");
  auto m = std::make_unique<LoadedModel>();
  m->file = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = args.n_threads;
  opt.n_batch = args.n_batch;
  opt.f16_as_bf16 = args.f16_as_bf16;
  m->model = Model::load(m->file, opt);
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  const int64_t train = m->model->config().n_ctx_train;
  if (args.n_ctx < 0) fail("--ctx-size must not be negative");
  m->n_ctx = args.n_ctx > 0 ? args.n_ctx : std::min<int64_t>(train, 4096);
  return m;
}

std::unique_ptr<LoadedModel> load_draft_model(const std::string& path, const LoadedModel& target) {
  if (!std::filesystem::exists(path)) fail("{}: no such draft model file (--draft-model)", path);
  auto m = std::make_unique<LoadedModel>();
  m->file = GgufFile::open(path);
  ModelOptions opt;
  opt.n_batch = target.model->n_batch();
  opt.pool = target.model->shared_pool();  // one pool: the draft must not spin a second on the same cores
  m->model = Model::load(m->file, opt);
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  DraftModelProposer::check_vocabularies(*target.tokenizer, *m->tokenizer);
  m->n_ctx = target.n_ctx;
  return m;
}

}  // namespace lumen::cli

#include "model_options.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "core/system_memory.h"
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
  cmd->add_flag("--mlock", mlock, "lock the model's mapped weights in RAM, so that they are never paged out (as llama.cpp's --mlock)");
}

namespace {

// The cores this process may run on (its affinity mask, e.g. under taskset or a container's
// cpuset), not the machine's count.
int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Locks the mapped weights (the tensor data of the file), not the whole process: mlockall would
// also pin every other mapping (and, under AddressSanitizer, its vast shadow).
void lock_model_in_memory(const GgufFile& file) {
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!t.data || t.n_bytes == 0) continue;
    if (!lo || t.data < lo) lo = t.data;
    if (!hi || t.data + t.n_bytes > hi) hi = t.data + t.n_bytes;
  }
  if (!lo) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(lo) & ~(page - 1);
  const size_t length = static_cast<size_t>(reinterpret_cast<uintptr_t>(hi) - begin);
  if (mlock(reinterpret_cast<const void*>(begin), length) == 0) return;
  const int err = errno;
  rlimit lim{};
  getrlimit(RLIMIT_MEMLOCK, &lim);
  // As llama.cpp does: the model still runs, and the user is told why it is not locked.
  fmt::print(stderr, "lumen: warning: --mlock of {} bytes failed: {} (the locked-memory limit is {}; raise it with 'ulimit -l')\n",
             length, std::strerror(err), lim.rlim_cur == RLIM_INFINITY ? "unlimited" : fmt::format("{} bytes", lim.rlim_cur));
}

}  // namespace

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
  if (args.n_batch < 1) usage_fail("-b/--batch-size must be at least 1");
  if (args.n_threads < 0) usage_fail("-t/--threads must not be negative");
  if (const int cores = available_cores(); args.n_threads > cores)
    fmt::print(stderr,
               "lumen: warning: -t {} is more threads than the {} cores available; the extra threads only take "
               "turns with the others (-t {} is usually fastest)\n",
               args.n_threads, cores, cores);
  auto m = std::make_unique<LoadedModel>();
  m->file = GgufFile::open(path);
  if (args.n_ctx < 0) usage_fail("-c/--ctx-size must not be negative");
  ModelOptions opt;
  opt.n_threads = args.n_threads;
  opt.n_batch = args.n_batch;
  opt.f16_as_bf16 = args.f16_as_bf16;
  opt.n_ctx_seq = args.n_ctx;
  try {
    m->model = Model::load(m->file, opt);
  } catch (const OutOfMemoryError& e) {
    // The forward pass's buffers grow with -b: say which number to lower, and both figures.
    fail("-b/--batch-size {} does not fit in memory: {} ({} bytes are available now, beside a model file of {} bytes); "
         "lower -b", args.n_batch, e.what(), available_memory(), m->file->file_size());
  } catch (const std::bad_alloc&) {
    fail("the model does not fit in memory: {} bytes are available now, for a model file of {} bytes",
         available_memory(), m->file->file_size());
  }
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  if (args.mlock) lock_model_in_memory(*m->file);
  m->n_ctx = args.n_ctx > 0 ? args.n_ctx : default_context_length(m->model->config().n_ctx_train);
  return m;
}

std::unique_ptr<LoadedModel> load_draft_model(const std::string& path, const LoadedModel& target) {
  if (!std::filesystem::exists(path)) fail("{}: no such draft model file (--draft-model)", path);
  auto m = std::make_unique<LoadedModel>();
  m->file = GgufFile::open(path);
  ModelOptions opt;
  opt.n_batch = target.model->n_batch();
  opt.pool = target.model->shared_pool();  // one pool: the draft must not spin a second on the same cores
  opt.n_ctx_seq = target.n_ctx;
  m->model = Model::load(m->file, opt);
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  DraftModelProposer::check_vocabularies(*target.tokenizer, *m->tokenizer);
  m->n_ctx = target.n_ctx;
  return m;
}

}  // namespace lumen::cli

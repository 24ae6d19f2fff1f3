// The Prometheus exposition: histogram buckets are cumulative and end at +Inf with the count,
// and the engine's gauges appear once the model is loaded.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace lumen::server {
namespace {

TEST(ServerMetrics, HistogramIsCumulative) {
  Histogram h({1, 2, 5});
  for (double x : {0.5, 1.0, 1.5, 3.0, 10.0}) h.observe(x);
  std::string out;
  h.render(out, "m", "a=\"b\"");
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"2\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"5\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"+Inf\"} 5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_sum{a=\"b\"} 16\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_count{a=\"b\"} 5\n"), std::string::npos) << out;
}

TEST(ServerMetrics, CompletionsFeedCountersAndHistograms) {
  ServerMetrics m;
  RequestTimings t;
  t.prompt_tokens = 10;
  t.cached_prompt_tokens = 4;
  t.generated_tokens = 3;
  t.ttft_ms = 20;
  t.itl_ms = {5, 6};
  t.total_ms = 31;
  m.record_completion(t, "stop", true);
  m.record_completion(t, "length", false);  // the second completion of the same request
  m.record_aborted(2);  // counted, but not in the histograms
  m.record_http_status(200);
  m.record_http_status(400);
  EngineStats e;
  e.blocks_total = 100;
  e.blocks_used = 25;
  e.block_size = 16;
  e.kv_bytes_per_block = 16 * 640;
  e.kv_bytes_per_token = 640;
  const std::string out = m.render(&e, "tiny");
  EXPECT_NE(out.find("lumen_prompt_tokens_total{model_name=\"tiny\"} 10\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lumen_generation_tokens_total{model_name=\"tiny\"} 6\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_cached_prompt_tokens_total{model_name=\"tiny\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_request_success_total{model_name=\"tiny\",finished_reason=\"stop\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_http_requests_total{status=\"400\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_request_success_total{model_name=\"tiny\",finished_reason=\"abort\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_e2e_request_latency_seconds_count{model_name=\"tiny\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_kv_cache_blocks_used{model_name=\"tiny\"} 25\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_kv_cache_usage_perc{model_name=\"tiny\"} 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_kv_cache_bytes_per_token{model_name=\"tiny\"} 640\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lumen_kv_cache_memory_used_bytes{model_name=\"tiny\"} 256000\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_kv_cache_memory_bytes{model_name=\"tiny\"} 1024000\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_inter_token_latency_seconds_count{model_name=\"tiny\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("lumen_time_to_first_token_seconds_count{model_name=\"tiny\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("# TYPE lumen_time_to_first_token_seconds histogram\n"), std::string::npos);
  // Loading: no engine gauges, the rest still renders.
  EXPECT_EQ(m.render(nullptr, "tiny").find("lumen_kv_cache_blocks_used"), std::string::npos);
}

}  // namespace
}  // namespace lumen::server

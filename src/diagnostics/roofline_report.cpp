#include "diagnostics/roofline_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "gguf/gguf_file.h"
#include "kernels/roofline.h"
#include "kv/kv_storage.h"
#include "model/model_config.h"

namespace lumen {

namespace {

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

// The activation format a weight type's dot product runs on decides the compute ceiling. F16
// weights are widened to F32 for FP32 FMAs (exact products, as llama.cpp), unless computed as
// BF16 (ModelOptions::f16_as_bf16).
std::string compute_kind_of(GgmlType t, bool f16_as_bf16) {
  if (t == GgmlType::F32) return "fp32";
  if (t == GgmlType::BF16 || (t == GgmlType::F16 && f16_as_bf16)) return "bf16";
  if (t == GgmlType::F16) return "fp32";
  const GgmlType a = type_traits(t).vec_dot_type;
  if (a == GgmlType::Q8_0 || a == GgmlType::Q8_1 || a == GgmlType::Q8_K) return "int8";
  return "fp32";
}

}  // namespace

std::string format_3sig(double v) {
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  if (a == 0) return "0";
  return fmt::format("{:.3g}", v);
}

std::string ModelCost::type_mix_string() const {
  std::string s;
  for (const TypeShare& t : type_mix)
    s += fmt::format("{}{} x{} ({})", s.empty() ? "" : ", ", type_name(t.type), t.n_tensors,
                     human_bytes(static_cast<double>(t.bytes)));
  return s;
}

ModelCost model_cost(const GgufFile& f, const ModelConfig& c, size_t model_weight_bytes, GgmlType k_type,
                     GgmlType v_type, bool f16_as_bf16) {
  ModelCost m;
  m.n_layer = c.n_layer;
  m.n_head = c.n_head;
  m.n_head_kv = c.n_head_kv;
  m.head_dim_k = c.head_dim_k;
  m.head_dim_v = c.head_dim_v;
  // The bytes KvStorage keeps per position (block types padded to whole blocks), averaged over
  // the K and V elements.
  const double kv_row = static_cast<double>(c.n_head_kv) *
                        static_cast<double>(kv_row_bytes(k_type, c.head_dim_k) + kv_row_bytes(v_type, c.head_dim_v));
  m.kv_elem_bytes = kv_row / static_cast<double>(c.kv_dim_k() + c.kv_dim_v());
  m.tied_output = f.find_tensor("output.weight") == nullptr;
  m.weight_bytes_per_token = static_cast<double>(model_weight_bytes);

  std::map<GgmlType, TypeShare> mix;
  std::map<std::string, double> matmul_bytes_by_kind;
  for (const GgufTensorInfo& t : f.tensors()) {
    TypeShare& s = mix[t.type];
    s.type = t.type;
    s.n_tensors++;
    s.bytes += t.n_bytes;
    if (t.n_dims < 2) continue;
    const double n = static_cast<double>(t.n_elements());
    if (t.name == "token_embd.weight") {
      if (m.tied_output) {
        m.output_params = n;
        matmul_bytes_by_kind[compute_kind_of(t.type, f16_as_bf16)] += static_cast<double>(t.n_bytes);
      } else {
        // One row looked up per token, not counted by Model::weight_bytes().
        m.weight_bytes_per_token += static_cast<double>(row_size(t.type, t.ne[0]));
      }
      continue;
    }
    // A mixture of experts multiplies a token by the n_expert_used experts it is routed to.
    if (t.name == "output.weight") m.output_params = n;
    else if (is_expert_tensor(c, t)) m.matmul_params += n * static_cast<double>(c.n_expert_used) / static_cast<double>(c.n_expert);
    else m.matmul_params += n;
    matmul_bytes_by_kind[compute_kind_of(t.type, f16_as_bf16)] += static_cast<double>(t.n_bytes);
  }
  for (const auto& [type, share] : mix) m.type_mix.push_back(share);
  std::stable_sort(m.type_mix.begin(), m.type_mix.end(), [](const TypeShare& a, const TypeShare& b) { return a.bytes > b.bytes; });
  m.compute_kind = "fp32";
  double best = -1;
  for (const auto& [kind, bytes] : matmul_bytes_by_kind)
    if (bytes > best) best = bytes, m.compute_kind = kind;
  return m;
}

namespace {

// working_set: the bytes one step of the phase reads (weights and K/V); cache_bytes: what the
// caches hold (RooflineMeasurement::cache_bytes, 0 = unknown).
void judge(PhasePoint& p, double bw_gb_s, double peak_gflops, const std::string& peak_label, double working_set,
           size_t cache_bytes) {
  p.intensity = p.bytes > 0 ? p.flops / p.bytes : 0.0;
  p.bandwidth_bound = bw_gb_s * p.intensity < peak_gflops;
  if (p.bandwidth_bound) {
    p.ceiling = bw_gb_s;
    p.frac = bw_gb_s > 0 ? p.gb_s / bw_gb_s : 0.0;
    p.verdict = fmt::format("{}: bandwidth-bound, {:.0f}% of {} GB/s", p.name, 100 * p.frac, format_3sig(bw_gb_s));
  } else {
    p.ceiling = peak_gflops;
    p.frac = peak_gflops > 0 ? p.gflop_s / peak_gflops : 0.0;
    p.verdict = fmt::format("{}: compute-bound, {:.0f}% of {} GFLOP/s {}", p.name, 100 * p.frac,
                            format_3sig(peak_gflops), peak_label);
  }
  // A phase far under its roof is limited by something else (kernels, overheads, the thread
  // pool), not by the ceiling the model predicts: say so rather than imply it is at the roof.
  if (p.frac < 0.3 && p.gflop_s > 0) p.verdict += " (well under the roof)";
  // Above the DRAM roof: the bytes came from the CPU caches (a model small enough to fit), or,
  // where the step reads more than the caches hold, the bandwidth measured for the test was
  // lower than what the machine gave while it ran (a shared machine's bandwidth moves).
  if (p.bandwidth_bound && p.frac > 1.0) {
    if (cache_bytes > 0 && working_set > static_cast<double>(cache_bytes))
      p.verdict += fmt::format(" (above the DRAM read measured for it, reading {} a step, more than the {} of "
                               "caches: the machine's bandwidth moved while it ran)",
                               human_bytes(working_set), human_bytes(static_cast<double>(cache_bytes)));
    else if (cache_bytes > 0)
      p.verdict += " (above DRAM speed: the working set fits in the caches)";
    else
      p.verdict += " (above the DRAM read measured for it: served by the caches, or the bandwidth moved while it ran)";
  }
}

}  // namespace

RooflineReport analyze_roofline(const ModelCost& cost, const BenchShape& shape, double prefill_tok_s, double decode_tok_s,
                                const RooflineMeasurement& machine) {
  RooflineReport r;
  r.dram_gb_s = machine.dram_read_gbps;
  r.ceilings.push_back({"FP32 FMA", machine.fp32_gflops});
  const bool has_bf16 = machine.isa == Isa::Avx512;
  if (has_bf16 && cost.compute_kind == "bf16") r.ceilings.push_back({"BF16 (est. 2x FP32)", 2 * machine.fp32_gflops});
  if (machine.int8_gops > 0) r.ceilings.push_back({"int8 VNNI", machine.int8_gops});
  // The ceiling prefill is judged against; a kind the machine lacks falls back to FP32.
  r.compute_kind = "fp32";
  r.compute_peak = machine.fp32_gflops;
  if (cost.compute_kind == "int8" && machine.int8_gops > 0) {
    r.compute_kind = "int8";
    r.compute_peak = machine.int8_gops;
  } else if (cost.compute_kind == "bf16" && has_bf16) {
    r.compute_kind = "bf16";
    r.compute_peak = 2 * machine.fp32_gflops;
  }

  const double attn_per_pos = 2.0 * static_cast<double>(cost.n_layer * cost.n_head * (cost.head_dim_k + cost.head_dim_v));
  const double kv_per_pos =
      static_cast<double>(cost.n_layer * cost.n_head_kv * (cost.head_dim_k + cost.head_dim_v)) * cost.kv_elem_bytes;
  const double p = static_cast<double>(shape.n_prompt);
  const double n = static_cast<double>(shape.n_gen);
  const double dep = static_cast<double>(shape.n_depth);

  // Decode step i (position d + p + i) attends over d + p + i + 1 positions: mean d + p + (n + 1) / 2.
  r.decode_mean_ctx = n > 0 ? dep + p + (n + 1) / 2 : 0.0;
  r.decode_kv_bytes_per_token = kv_per_pos * r.decode_mean_ctx;
  PhasePoint& d = r.decode;
  d.name = "decode";
  d.bytes = cost.weight_bytes_per_token + r.decode_kv_bytes_per_token;
  d.flops = 2.0 * (cost.matmul_params + cost.output_params) + attn_per_pos * r.decode_mean_ctx;
  d.gb_s = d.bytes * decode_tok_s / 1e9;
  d.gflop_s = d.flops * decode_tok_s / 1e9;
  judge(d, r.dram_gb_s, r.compute_peak, r.compute_kind, d.bytes, machine.cache_bytes);

  PhasePoint& f = r.prefill;
  f.name = "prefill";
  r.prefill_attn_flops = attn_per_pos * p * (dep + p / 2);
  f.flops = p > 0 ? 2.0 * cost.matmul_params * p + 2.0 * cost.output_params + r.prefill_attn_flops : 0.0;
  const double n_batches = std::ceil(p / static_cast<double>(std::max<int64_t>(shape.n_batch, 1)));
  f.bytes = (cost.weight_bytes_per_token + kv_per_pos * dep) * n_batches + kv_per_pos * p;
  const double prefill_s = prefill_tok_s > 0 ? p / prefill_tok_s : 0.0;
  f.gflop_s = prefill_s > 0 ? f.flops / prefill_s / 1e9 : 0.0;
  f.gb_s = prefill_s > 0 ? f.bytes / prefill_s / 1e9 : 0.0;
  judge(f, r.dram_gb_s, r.compute_peak, r.compute_kind, cost.weight_bytes_per_token + kv_per_pos * (dep + p),
        machine.cache_bytes);
  return r;
}

// ---- SVG ----

namespace {

std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string decade_label(int e) {
  if (e >= 0 && e <= 5) return fmt::format("{:.0f}", std::pow(10.0, e));
  if (e < 0 && e >= -3) return fmt::format("{:.{}f}", std::pow(10.0, e), -e);
  return fmt::format("1e{}", e);
}

}  // namespace

std::string roofline_svg(const RooflineReport& r, const std::string& title, const std::string& subtitle) {
  constexpr double W = 960, H = 660, L = 100, R = 40, T = 110, B = 80;
  const double pw = W - L - R, ph = H - T - B;
  const double bw = std::max(r.dram_gb_s, 1e-3);
  double top_peak = 1e-3;
  for (const Ceiling& c : r.ceilings) top_peak = std::max(top_peak, c.gflop_s);

  // Axis ranges in whole decades around the ridge points and the phases.
  double x_lo = top_peak / bw, x_hi = x_lo;
  for (const Ceiling& c : r.ceilings)
    if (c.gflop_s > 0) x_lo = std::min(x_lo, c.gflop_s / bw);
  double y_lo = top_peak, y_hi = top_peak;
  for (const PhasePoint* p : {&r.decode, &r.prefill}) {
    if (p->intensity > 0) x_lo = std::min(x_lo, p->intensity), x_hi = std::max(x_hi, p->intensity);
    if (p->gflop_s > 0) y_lo = std::min(y_lo, p->gflop_s);
  }
  int xe0 = static_cast<int>(std::floor(std::log10(x_lo / 3)));
  int xe1 = static_cast<int>(std::ceil(std::log10(x_hi * 3)));
  if (xe1 - xe0 < 3) xe1 = xe0 + 3;
  y_lo = std::min(y_lo, bw * std::pow(10.0, xe0));
  int ye0 = static_cast<int>(std::floor(std::log10(y_lo / 2)));
  int ye1 = static_cast<int>(std::ceil(std::log10(y_hi * 2.5)));
  if (ye1 - ye0 < 3) ye0 = ye1 - 3;
  auto px = [&](double x) { return L + (std::log10(x) - xe0) / (xe1 - xe0) * pw; };
  auto py = [&](double y) { return T + ph - (std::log10(y) - ye0) / (ye1 - ye0) * ph; };
  const double x_min = std::pow(10.0, xe0);
  const double y_min = std::pow(10.0, ye0);

  std::string s;
  s += fmt::format(R"~(<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" font-family="DejaVu Sans, Arial, Helvetica, sans-serif">
<rect x="0" y="0" width="{0}" height="{1}" fill="white"/>
)~", W, H);
  s += fmt::format(R"~(<text x="{}" y="36" font-size="20" font-weight="bold" text-anchor="middle">{}</text>
)~", W / 2, xml_escape(title));
  {
    // The subtitle may hold several lines ('\n').
    size_t b = 0;
    for (int line = 0; b <= subtitle.size() && line < 3; line++) {
      size_t e = subtitle.find('\n', b);
      if (e == std::string::npos) e = subtitle.size();
      s += fmt::format(R"~(<text x="{}" y="{}" font-size="13" fill="#444" text-anchor="middle">{}</text>
)~", W / 2, 62 + 18 * line, xml_escape(subtitle.substr(b, e - b)));
      b = e + 1;
    }
  }

  // Grid and ticks.
  s += fmt::format("<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
  for (int e = xe0; e < xe1; e++)
    for (int k = 2; k <= 9; k++) {
      const double x = px(k * std::pow(10.0, e));
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", x, T, x, T + ph);
    }
  for (int e = ye0; e < ye1; e++)
    for (int k = 2; k <= 9; k++) {
      const double y = py(k * std::pow(10.0, e));
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", L, y, L + pw, y);
    }
  s += fmt::format("</g>\n<g stroke=\"#bbbbbb\" stroke-width=\"1\">\n");
  for (int e = xe0; e <= xe1; e++)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n", px(std::pow(10.0, e)), T, T + ph);
  for (int e = ye0; e <= ye1; e++)
    s += fmt::format("<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\"/>\n", py(std::pow(10.0, e)), L, L + pw);
  s += fmt::format("</g>\n<g font-size=\"13\" fill=\"#222\">\n");
  for (int e = xe0; e <= xe1; e++)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(std::pow(10.0, e)), T + ph + 20, decade_label(e));
  for (int e = ye0; e <= ye1; e++)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", L - 8, py(std::pow(10.0, e)) + 4, decade_label(e));
  s += fmt::format("</g>\n");
  s += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333" stroke-width="1.2"/>
)~", L, T, pw, ph);
  s += fmt::format(R"~(<text x="{}" y="{}" font-size="15" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>
)~", L + pw / 2, H - 28);
  s += fmt::format(R"~(<text x="{0}" y="{1}" font-size="15" text-anchor="middle" transform="rotate(-90 {0} {1})">performance (GFLOP/s; int8: GOP/s)</text>
)~", 30, T + ph / 2);

  // The roof: bandwidth slope up to the highest ceiling, then each ceiling from its ridge on.
    const double ridge_top = top_peak / bw;
  const double x_start = std::max(x_min, y_min / bw);
  s += fmt::format(R"~(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#1f4e9c" stroke-width="2.5"/>
)~", px(x_start), py(bw * x_start), px(ridge_top), py(top_peak));
  {
    // Label along the slope where it is farthest from the phase points; its angle on screen
    // follows the decades' aspect ratio.
    double xl = x_start, best = -1;
    for (double t : {0.12, 0.25, 0.4, 0.55, 0.7}) {
      const double x = std::exp(std::log(x_start) + (std::log(ridge_top) - std::log(x_start)) * t);
      double d = 1e9;
      for (const PhasePoint* p : {&r.decode, &r.prefill})
        if (p->intensity > 0 && p->gflop_s > 0)
          d = std::min(d, std::hypot(px(x) - px(p->intensity), py(bw * x) - py(std::max(p->gflop_s, y_min))));
      if (d > best) best = d, xl = x;
    }
    const double ang = -std::atan((ph / (ye1 - ye0)) / (pw / (xe1 - xe0))) * 180 / M_PI;
    s += fmt::format(R"~(<text x="{0:.1f}" y="{1:.1f}" font-size="13" fill="#1f4e9c" stroke="white" stroke-width="4" stroke-linejoin="round" paint-order="stroke" transform="rotate({2:.1f} {0:.1f} {1:.1f})">DRAM read {3} GB/s</text>
)~", px(xl) - 6, py(bw * xl) - 8, ang, format_3sig(bw));
  }
  // Labels are placed where they overlap nothing drawn so far (boxes in pixels, estimated
  // from the text length): the phase labels first, then the ceiling labels around them.
  struct Box {
    double x0, y0, x1, y1;
    bool hits(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  auto text_box = [](double x, double baseline, const std::string& text, double size, const char* anchor) {
    const double w = 0.6 * size * static_cast<double>(text.size());
    const double x0 = std::string_view(anchor) == "end" ? x - w : x;
    return Box{x0, baseline - size, x0 + w, baseline + 0.3 * size};
  };
  std::vector<Box> taken;
  std::vector<Box> ceiling_lines;
  for (const Ceiling& c : r.ceilings)
    if (c.gflop_s > 0) ceiling_lines.push_back({px(c.gflop_s / bw), py(c.gflop_s) - 2, L + pw, py(c.gflop_s) + 2});
  const char* halo = R"~(stroke="white" stroke-width="4" stroke-linejoin="round" paint-order="stroke")~";

  // The phases: markers, a dotted drop from the roof, two-line labels.
  std::string phases;
  const char* pcolors[] = {"#0b63c4", "#d9480f"};
  int k = 0;
  for (const PhasePoint* p : {&r.decode, &r.prefill}) {
    const char* col = pcolors[k++];
    if (p->intensity <= 0 || p->gflop_s <= 0) continue;
    const double x = px(p->intensity), y = py(std::max(p->gflop_s, y_min));
    taken.push_back({x - 8, y - 8, x + 8, y + 8});
    const double roof = std::min(bw * p->intensity, r.compute_peak);
    phases += fmt::format(R"~(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="{3}" stroke-width="1.2" stroke-dasharray="3 3"/>
<circle cx="{0:.1f}" cy="{1:.1f}" r="6.5" fill="{3}" stroke="white" stroke-width="1.5"/>
)~", x, y, py(roof), col);
    const std::string l1 = fmt::format("{} {} GFLOP/s at {} FLOP/B", p->name, format_3sig(p->gflop_s), format_3sig(p->intensity));
    const std::string l2 = p->bandwidth_bound ? fmt::format("{} GB/s, {:.0f}% of bandwidth", format_3sig(p->gb_s), 100 * p->frac)
                                              : fmt::format("{:.0f}% of the {} peak", 100 * p->frac, r.compute_kind);
    // Right of the point if there is room, else left; level with it, else below, else above.
    const bool right = x < L + pw * 0.6;
    const char* anchor = right ? "start" : "end";
    const double tx = right ? x + 12 : x - 12;
    double dy = 0;
    int fewest = 1 << 30;
    for (double cand : {0.0, 24.0, 48.0, -30.0, -54.0, 72.0}) {
      const Box b1 = text_box(tx, y - 2 + cand, l1, 13, anchor), b2 = text_box(tx, y + 14 + cand, l2, 12, anchor);
      int n_hits = 0;
      for (const Box& o : ceiling_lines) n_hits += b1.hits(o) + b2.hits(o);
      for (const Box& o : taken) n_hits += b1.hits(o) + b2.hits(o);
      if (n_hits < fewest) fewest = n_hits, dy = cand;
      if (n_hits == 0) break;
    }
    taken.push_back(text_box(tx, y - 2 + dy, l1, 13, anchor));
    taken.push_back(text_box(tx, y + 14 + dy, l2, 12, anchor));
    phases += fmt::format(R"~(<text x="{0:.1f}" y="{1:.1f}" font-size="13" fill="{2}" font-weight="bold" text-anchor="{3}" {7}>{4}</text>
<text x="{0:.1f}" y="{5:.1f}" font-size="12" fill="{2}" text-anchor="{3}" {7}>{6}</text>
)~", tx, y - 2 + dy, col, anchor, xml_escape(l1), y + 14 + dy, xml_escape(l2), halo);
  }

  // The compute ceilings, each from its ridge point on; the one prefill is judged by is solid.
  const char* colors[] = {"#b5451b", "#2e7d32", "#6a1b9a", "#555555"};
  for (size_t i = 0; i < r.ceilings.size(); i++) {
    const Ceiling& c = r.ceilings[i];
    if (c.gflop_s <= 0) continue;
    const char* col = colors[std::min<size_t>(i, 3)];
    const bool judged = (r.compute_kind == "int8" && c.label.rfind("int8", 0) == 0) ||
                        (r.compute_kind == "fp32" && c.label.rfind("FP32", 0) == 0) ||
                        (r.compute_kind == "bf16" && c.label.rfind("BF16", 0) == 0);
    const double xr = px(c.gflop_s / bw), yc = py(c.gflop_s);
    s += fmt::format(R"~(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"{}/>
)~", xr, yc, L + pw, yc, col, judged ? 2.5 : 1.8, judged ? "" : " stroke-dasharray=\"7 4\"");
    const std::string label = fmt::format("{} peak {} {}", c.label, format_3sig(c.gflop_s),
                                          c.label.rfind("int8", 0) == 0 ? "GOP/s" : "GFLOP/s");
    // Above the line at its right end, else at its left end, else below the line.
    struct Spot { double x, y; const char* anchor; };
    const Spot spots[] = {{L + pw - 6, yc - 7, "end"}, {xr + 10, yc - 7, "start"}, {L + pw - 6, yc + 17, "end"},
                          {xr + 10, yc + 17, "start"}};
    Spot at = spots[0];
    for (const Spot& sp : spots) {
      const Box b = text_box(sp.x, sp.y, label, 13, sp.anchor);
      bool clear = true;
      for (const Box& o : taken) clear = clear && !b.hits(o);
      if (clear) {
        at = sp;
        break;
      }
    }
    taken.push_back(text_box(at.x, at.y, label, 13, at.anchor));
    s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="13" fill="{}" text-anchor="{}" {}>{}</text>
)~", at.x, at.y, col, at.anchor, halo, xml_escape(label));
  }
  s += phases;
  s += fmt::format("</svg>\n");
  return s;
}

}  // namespace lumen

// The engine view: /metrics polled every 2 s (while the page is visible) into cards and charts.
import { apiFetch, errorMessage } from './api.js';
import { barChart, lineChart } from './charts.js';
import { bucketCounts, histogram, histogramQuantile, metricValue, parsePrometheus } from './metrics.js';
import { formatCount, formatMs, formatRate } from './verdict.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;

export class EngineView {
  constructor() {
    this.rate = [];  // { t, v }: generated tok/s between polls
    this.last = null;  // { t, generated }
    this.timer = 0;
    this.visible = false;
  }

  start() {
    const tick = async () => {
      if (!document.hidden) await this.poll();
      this.timer = setTimeout(tick, POLL_MS);
    };
    tick();
  }

  show(on) {
    this.visible = on;
    if (on && this.parsed) this.draw();
  }

  async poll() {
    let text;
    try {
      const res = await apiFetch('/metrics');
      if (!res.ok) throw new Error(await errorMessage(res));
      text = await res.text();
    } catch (e) {
      $('engine-status').textContent = `Cannot read /metrics: ${e.message || e}`;
      return;
    }
    const parsed = parsePrometheus(text);
    const now = Date.now();
    const generated = metricValue(parsed, 'lumen_engine_generated_tokens_total');
    if (this.last && generated >= this.last.generated) {
      this.rate.push({ t: now, v: (1000 * (generated - this.last.generated)) / (now - this.last.t) });
    }
    this.last = { t: now, generated };
    while (this.rate.length && now - this.rate[0].t > WINDOW_MS) this.rate.shift();
    this.parsed = parsed;
    $('engine-status').textContent = `Updated ${new Date(now).toLocaleTimeString()} from /metrics, every ${POLL_MS / 1000} s.`;
    if (this.visible) this.draw();
  }

  draw() {
    const p = this.parsed;
    const v = (name, match) => metricValue(p, name, match);
    $('m-running').textContent = formatCount(v('lumen_num_requests_running'));
    $('m-waiting').textContent = formatCount(v('lumen_num_requests_waiting'));
    const used = v('lumen_kv_cache_blocks_used'), total = v('lumen_kv_cache_num_blocks');
    $('m-kv').textContent = `${formatCount(used)} / ${formatCount(total)}`;
    $('m-kv-bar').style.width = `${total > 0 ? Math.min(100, (100 * used) / total) : 0}%`;
    const queries = v('lumen_prefix_cache_queries_total'), hits = v('lumen_prefix_cache_hits_total');
    $('m-prefix').textContent = queries > 0 ? `${((100 * hits) / queries).toFixed(1)}%` : '–';
    $('m-generated').textContent = formatCount(v('lumen_engine_generated_tokens_total'));
    const r = this.rate.length ? this.rate[this.rate.length - 1].v : NaN;
    $('m-rate').textContent = Number.isFinite(r) ? `${formatRate(r) === '–' ? '0' : formatRate(r)} tok/s` : '–';
    $('m-preempt').textContent = formatCount(v('lumen_num_preemptions_total'));
    $('m-finished').textContent = formatCount(v('lumen_request_success_total'));
    lineChart($('c-rate'), this.rate, { windowMs: WINDOW_MS, unit: 'tokens per second' });
    this.drawHistogram('lumen_time_to_first_token_seconds', 'c-ttft', 'c-ttft-q', 'time to first token');
    this.drawHistogram('lumen_inter_token_latency_seconds', 'c-itl', 'c-itl-q', 'inter-token latency');
  }

  drawHistogram(name, chartId, quantileId, label) {
    const h = histogram(this.parsed, name);
    if (!h) {
      $(chartId).replaceChildren();
      $(quantileId).textContent = '';
      return;
    }
    barChart($(chartId), bucketCounts(h), { label: `${label} histogram` });
    const q = (x) => formatMs(1000 * histogramQuantile(x, h));
    $(quantileId).textContent = h.count > 0 ? `(${formatCount(h.count)} observed; p50 ≈ ${q(0.5)}, p99 ≈ ${q(0.99)})` : '';
  }
}

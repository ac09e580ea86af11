/**
 * A small Prometheus registry: counters, gauges and histograms with labels, rendered in the text exposition
 * format for GET /metrics. Gauges may be computed at scrape time (`collect`).
 */
type Labels = Record<string, string>;

/** A label value as the exposition format quotes it; most need no escape, and skip the replacing. */
function labelValue(value: unknown): string {
  const text = String(value);
  return /[\\"\n]/.test(text) ? text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : text;
}

function labelKey(labels: Labels): string {
  const parts = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labelValue(labels[k])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

interface Metric {
  render(): string[];
}

export class Counter implements Metric {
  /** By label key: a cell, so that a `labelled` series counts without a lookup. */
  private readonly values = new Map<string, { value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    this.cell(labelKey(labels)).value += by;
  }
  /** The series of `labels`, for a caller that counts into it often: found once, here (and shown from now on, at 0). */
  labelled(labels: Labels): (by?: number) => void {
    const cell = this.cell(labelKey(labels));
    return (by = 1) => void (cell.value += by);
  }
  private cell(key: string): { value: number } {
    let cell = this.values.get(key);
    if (!cell) {
      cell = { value: 0 };
      this.values.set(key, cell);
    }
    return cell;
  }
  render(): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`, ...[...this.values].map(([k, { value }]) => `${this.name}${k} ${value}`)];
  }
}

export class Gauge implements Metric {
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly collect?: () => { labels?: Labels; value: number }[],
  ) {}
  set(labels: Labels, value: number): void {
    this.values.set(labelKey(labels), value);
  }
  render(): string[] {
    const rows = this.collect ? this.collect().map((r) => [labelKey(r.labels ?? {}), r.value] as const) : [...this.values];
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`, ...rows.map(([k, v]) => `${this.name}${k} ${v}`)];
  }
}

interface HistogramSeries {
  labels: Labels;
  /** `counts[i]`: observations whose smallest bucket is `buckets[i]` (render adds them up, as the format wants). */
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram implements Metric {
  private readonly series = new Map<string, HistogramSeries>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {
    if (buckets.some((b, i) => i > 0 && b <= (buckets[i - 1] as number))) throw new Error(`histogram ${name}: buckets must ascend`);
  }
  observe(labels: Labels, value: number): void {
    this.observeInto(this.seriesOf(labels), value);
  }
  /** The series of `labels`, for a caller that observes into it often: found once, here (and shown from now on, empty). */
  labelled(labels: Labels): (value: number) => void {
    const series = this.seriesOf(labels);
    return (value) => this.observeInto(series, value);
  }
  private seriesOf(labels: Labels): HistogramSeries {
    const key = labelKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    return s;
  }
  private observeInto(s: HistogramSeries, value: number): void {
    const { buckets } = this;
    let i = 0;
    while (i < buckets.length && !(value <= (buckets[i] as number))) i++;
    if (i < buckets.length) s.counts[i] = (s.counts[i] as number) + 1;
    s.sum += value;
    s.count += 1;
  }
  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i] as number;
        lines.push(`${this.name}_bucket${labelKey({ ...s.labels, le: String(b) })} ${cumulative}`);
      });
      lines.push(`${this.name}_bucket${labelKey({ ...s.labels, le: '+Inf' })} ${s.count}`);
      lines.push(`${this.name}_sum${labelKey(s.labels)} ${s.sum}`, `${this.name}_count${labelKey(s.labels)} ${s.count}`);
    }
    return lines;
  }
}

const LATENCY_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const RTF_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10];

/** Every metric voxd exports. Services record into it; GET /metrics renders it. */
export class Metrics {
  private readonly all: Metric[] = [];
  readonly httpRequests = this.add(new Counter('voxd_http_requests_total', 'HTTP requests by route, method and status'));
  readonly httpLatency = this.add(new Histogram('voxd_http_request_duration_seconds', 'HTTP request latency', LATENCY_BUCKETS_S));
  readonly queueWait = this.add(new Histogram('voxd_queue_wait_seconds', 'Time a job waited in its model queue', LATENCY_BUCKETS_S));
  readonly jobs = this.add(new Counter('voxd_jobs_total', 'Scheduled jobs by model and outcome'));
  readonly batchSize = this.add(
    new Histogram('voxd_tts_batch_size', 'Requests per TTS batch by model and path (fixed-window call, continuous step)', [1, 2, 4, 8, 16, 32, 64, 128, 256]),
  );
  readonly batchJoinWait = this.add(
    new Histogram('voxd_tts_batch_join_wait_seconds', 'Time a request waited to join a continuous batch session', LATENCY_BUCKETS_S),
  );
  readonly rejected = this.add(new Counter('voxd_queue_rejected_total', 'Jobs refused because the model queue was full'));
  readonly modelLoads = this.add(new Counter('voxd_model_loads_total', 'Model loads by outcome'));
  readonly downloads = this.add(new Counter('voxd_model_downloads_total', 'Hub downloads by outcome'));
  readonly realTimeFactor = this.add(
    new Histogram('voxd_real_time_factor', 'Seconds a request took (queue included) per second of audio, by model and task', RTF_BUCKETS),
  );
  readonly residentMemory = this.add(
    new Gauge('process_resident_memory_bytes', 'Resident memory of the server process', () => [{ value: process.memoryUsage.rss() }]),
  );

  /** The series of each route, method and status seen, so that a request's metrics build no label keys. */
  private readonly httpSeries = new Map<string, { latency: (seconds: number) => void; requests: Map<string, Map<number, (by?: number) => void>> }>();

  /** A served HTTP request: `voxd_http_requests_total` by route, method and status, its latency by route. */
  observeHttp(route: string, method: string, status: number, seconds: number): void {
    let byRoute = this.httpSeries.get(route);
    if (!byRoute) {
      byRoute = { latency: this.httpLatency.labelled({ route }), requests: new Map() };
      this.httpSeries.set(route, byRoute);
    }
    let byMethod = byRoute.requests.get(method);
    if (!byMethod) {
      byMethod = new Map();
      byRoute.requests.set(method, byMethod);
    }
    let count = byMethod.get(status);
    if (!count) {
      count = this.httpRequests.labelled({ route, method, status: String(status) });
      byMethod.set(status, count);
    }
    count();
    byRoute.latency(seconds);
  }

  add<M extends Metric>(metric: M): M {
    this.all.push(metric);
    return metric;
  }

  render(): string {
    return this.all.flatMap((m) => m.render()).join('\n') + '\n';
  }
}

/** Records a request's real-time factor: `elapsedMs` of wall time for `audioSeconds` of audio (none for no audio). */
export function observeRealTimeFactor(metrics: Metrics, model: string, task: 'stt' | 'tts', elapsedMs: number, audioSeconds: number): void {
  if (audioSeconds > 0) metrics.realTimeFactor.observe({ model, task }, elapsedMs / 1000 / audioSeconds);
}

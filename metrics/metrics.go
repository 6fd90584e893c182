// Package metrics holds opsbot's Prometheus collectors. Labels are bounded:
// event names from a fixed list, outcomes, routes, and for the time the
// skips saved the repository (one of those configured); never a PR.
package metrics

import (
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is every collector opsbot exports, registered on one registry.
type Metrics struct {
	Registry *prometheus.Registry
	// own are opsbot's own collectors (not Go's nor the process's).
	own []prometheus.Collector

	Webhooks   *prometheus.CounterVec   // event, outcome
	Processed  *prometheus.CounterVec   // event, outcome
	Processing *prometheus.HistogramVec // event
	APIReqs    *prometheus.CounterVec   // service, route, status
	RateLeft   *KnownGauge              // absent until GitHub's first answer
	Notices    *prometheus.CounterVec   // channel, outcome (sent, retried, failed, dropped)
	Decisions  *prometheus.CounterVec   // decision
	GateAsks   *prometheus.CounterVec   // outcome
	SlackUp    *KnownGauge              // absent until auth.test or the first Slack call
	Commit     prometheus.Histogram     // seconds per group commit
	GroupSize  prometheus.Histogram     // writes per group commit
	// SeqDue is how many sequences were due at the ticker's last pass (one
	// that stays due is stuck: its wake-ups fail).
	SeqDue prometheus.Gauge
	// RunnerSaved and GPUSaved are the runner and GPU seconds the skips
	// saved (the reused runs' time), by repository.
	RunnerSaved *prometheus.CounterVec
	GPUSaved    *prometheus.CounterVec
	// used are the events opsbot uses (Events), labelled by name beside
	// knownEvents; set once, before the server serves.
	used map[string]bool
}

// InboxReader reports the inbox for the gauges read at scrape time.
type InboxReader func() (depth int, oldest time.Time, dead int, err error)

// OutboxReader reports the outbox for the gauges read at scrape time.
type OutboxReader func() (depth int, oldest time.Time, err error)

// New makes and registers the collectors. inbox and outbox are read on each scrape.
func New(inbox InboxReader, outbox OutboxReader, now func() time.Time) *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: r,
		SeqDue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "opsbot_sequences_due",
			Help: "Sequences due at the last pass of the ticker that wakes them (one that stays due is stuck)."}),
		Webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_webhook_deliveries_total", Help: "Webhook deliveries received, by event and how they were answered.",
		}, []string{"event", "outcome"}),
		Processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_deliveries_processed_total", Help: "Deliveries processed by the workers, by event and outcome.",
		}, []string{"event", "outcome"}),
		Processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "opsbot_processing_seconds", Help: "Time to process one delivery.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"event"}),
		APIReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_api_requests_total", Help: "Requests to GitHub and Slack, by route template and status.",
		}, []string{"service", "route", "status"}),
		RateLeft: NewKnownGauge("opsbot_github_rate_limit_remaining",
			"GitHub's x-ratelimit-remaining on the last answer (absent before the first answer)."),
		Notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_notices_total", Help: "Notices from the outbox, by channel and outcome (sent, logged: a dry run, retried, failed, dropped).",
		}, []string{"channel", "outcome"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_decisions_total", Help: "Sweep gate decisions, by decision.",
		}, []string{"decision"}),
		RunnerSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_sweep_runner_seconds_saved_total", Help: "Runner seconds the skipped sweeps would have taken (the reused runs' jobs), by repository.",
		}, []string{"repo"}),
		GPUSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_sweep_gpu_seconds_saved_total", Help: "GPU seconds the skipped sweeps would have taken (runner time weighed by repos[].gpus_per_runner), by repository.",
		}, []string{"repo"}),
		GateAsks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsbot_gate_asks_total", Help: "Asks of POST /api/v1/gate, by outcome (skip, sweep, not_head, reuse, no_reuse, or the refusal).",
		}, []string{"outcome"}),
		SlackUp: NewKnownGauge("opsbot_slack_healthy",
			"1 when the last Slack call worked, 0 when Slack is degraded (absent before the first call)."),
	}
	m.Commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "opsbot_commit_seconds",
		Help: "Time of one group commit (all the writes queued together, one fsync).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)})
	m.GroupSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "opsbot_commit_writes",
		Help: "Writes sharing one group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	m.register(m.Commit, m.GroupSize)
	m.register(m.Webhooks, m.Processed, m.Processing, m.APIReqs, m.RateLeft, m.Notices, m.Decisions, m.GateAsks, m.SlackUp, m.SeqDue,
		m.RunnerSaved, m.GPUSaved)
	if inbox != nil {
		m.register(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsbot_inbox_depth", Help: "Deliveries stored and not yet processed."},
				func() float64 { d, _, _, _ := inbox(); return float64(d) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsbot_inbox_oldest_age_seconds", Help: "Age of the oldest unprocessed delivery (0 when none)."},
				func() float64 {
					_, o, _, err := inbox()
					if err != nil || o.IsZero() {
						return 0
					}
					return now().Sub(o).Seconds()
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsbot_dead_letters", Help: "Deliveries in the dead-letter bucket."},
				func() float64 { _, _, d, _ := inbox(); return float64(d) }),
		)
	}
	if outbox != nil {
		m.register(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsbot_outbox_depth", Help: "Notices waiting to be sent."},
				func() float64 { d, _, _ := outbox(); return float64(d) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsbot_outbox_oldest_age_seconds", Help: "Age of the oldest unsent notice (0 when none)."},
				func() float64 {
					_, o, err := outbox()
					if err != nil || o.IsZero() {
						return 0
					}
					return now().Sub(o).Seconds()
				}),
		)
	}
	// Present at zero from the start, so a rate or an alert over them works
	// before the first delivery or decision.
	for _, d := range []string{"skip", "sweep"} {
		m.Decisions.WithLabelValues(d)
	}
	return m
}

// Events makes the webhook counts of the events opsbot uses
// (events.Routes.Used) present at zero from the start, and labels each by
// its name: a kind's route of a new event is counted as itself. Call it
// once, before the server serves.
func (m *Metrics) Events(names []string) {
	m.used = map[string]bool{}
	for _, e := range names {
		m.used[e] = true
		for _, o := range []string{"stored", "duplicate", "ignored", "bad_signature"} {
			m.Webhooks.WithLabelValues(m.EventLabel(e), o)
		}
	}
}

// BuildInfo registers opsbot_build_info: 1, labelled with opsbot's version,
// the commit it was built from and the Go version. Call it once.
func (m *Metrics) BuildInfo(version, commit string) {
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "opsbot_build_info",
		Help: "1, labelled with the version of opsbot, its commit and the Go version it was built with."}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(version, commit, runtime.Version()).Set(1)
	m.register(build)
}

func (m *Metrics) register(cs ...prometheus.Collector) {
	m.Registry.MustRegister(cs...)
	m.own = append(m.own, cs...)
}

// descRE reads a Desc's name and variable labels from its String (the
// labels come last, after the help text, which may hold anything).
var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^{}]*)\}\}$`)

// Series are the series opsbot's own collectors can export, each with its
// labels in order, whether or not one has a value yet: what the metrics
// reference (docs/operations.md) lists.
func (m *Metrics) Series() map[string][]string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.own {
			c.Describe(ch)
		}
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		if g := descRE.FindStringSubmatch(d.String()); g != nil {
			var labels []string
			if g[2] != "" {
				labels = strings.Split(g[2], ",")
			}
			out[g[1]] = labels
		}
	}
	return out
}

// Processed implements worker.Observer.
func (m *Metrics) ObserveProcessed(event, outcome string, took time.Duration) {
	// The time first: a scrape that sees the count sees the time too.
	if took > 0 {
		m.Processing.WithLabelValues(m.EventLabel(event)).Observe(took.Seconds())
	}
	m.Processed.WithLabelValues(m.EventLabel(event), outcome).Inc()
}

var knownEvents = map[string]bool{
	"issue_comment": true, "pull_request": true, "repository_dispatch": true, "ping": true, "push": true,
	"check_run": true, "check_suite": true, "workflow_run": true, "workflow_job": true, "status": true,
	"pull_request_review_comment": true, "installation": true, "merge_group": true,
	"opsbot_wakeup": true, // opsbot's own: a due sequence woken
	"opsbot_click":  true, // opsbot's own: a click on one of its Slack buttons
}

// EventLabel bounds an X-GitHub-Event value for use as a label: an event
// opsbot uses or knows is its own label, any other "other".
func (m *Metrics) EventLabel(e string) string {
	if knownEvents[e] || m.used[e] {
		return e
	}
	return "other"
}

// KnownGauge is a gauge that is absent from scrapes until it is first set:
// a value nobody has seen yet is unknown, not 0 (an alert on "== 0" must
// not fire before the first answer).
type KnownGauge struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	v    float64
	set  bool
}

// NewKnownGauge makes an unset gauge; register it like any collector.
func NewKnownGauge(name, help string) *KnownGauge {
	return &KnownGauge{desc: prometheus.NewDesc(name, help, nil, nil)}
}

// Set records a value; from then on scrapes report it.
func (g *KnownGauge) Set(v float64) {
	g.mu.Lock()
	g.v, g.set = v, true
	g.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (g *KnownGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector: nothing until Set.
func (g *KnownGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	v, set := g.v, g.set
	g.mu.Unlock()
	if set {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
	}
}

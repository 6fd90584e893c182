// Package loadgen is opsbot's load generator (`opsbot bench`): it starts a
// fake GitHub and a real opsbot server process on this machine, sends it
// varied, signed real payloads at a set concurrency or rate for a set time,
// and reports throughput, latency percentiles, inbox depth and memory. It
// also measures the machine's own limit: fsync'd appends per second.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	opsserver "github.com/SemiAnalysisAI/opsbot/server"
)

// Options configure a run.
type Options struct {
	Scenario    string        // ingest, commands, gate, mixed, scale, fsync
	Concurrency int           // closed-loop workers (ingest, gate reads)
	Rate        float64       // open-loop requests per second (commands, synchronize); 0: as fast as possible
	Duration    time.Duration // how long to send
	BodySize    int           // bytes of an ingest comment delivery
	PRs         int           // PRs in the fake repository
	Exe         string        // the opsbot binary to start as the server
	Dir         string        // working directory (state, config)
	Log         io.Writer     // progress lines
	ScalePRs    int           // scale: PRs in the prebuilt state
	ScaleAudit  int           // scale: audit records in the prebuilt state
	CPUProfile  string        // the server writes a CPU profile here
	// Content-creating requests per installation the server may make (and
	// the fake GitHub accepts) in any minute and any hour; TimeScale
	// shortens both windows by that factor (60: a minute lasts a second).
	// Zero values take the scenario's defaults: GitHub's limits (80 and
	// 500) for commands and burst (burst at TimeScale 60), none for gate
	// and mixed, whose 100 pushes a second measure opsbot's own latency.
	ContentPerMinute int
	ContentPerHour   int
	TimeScale        float64
	Burst            int // burst: commands on one PR (default 500)
	// FloorCommand starts the reference receiver (ServeFloor) as its own
	// process: ingest then measures it first, for the same time at the
	// same concurrency, and reports opsbot's rate and p99 against it. Nil:
	// no reference.
	FloorCommand []string
}

// contentRate fills in the scenario's defaults for the content limits; a
// negative per-minute value means none.
func (o *Options) contentRate() {
	if o.TimeScale <= 0 {
		o.TimeScale = 1
		if o.Scenario == "burst" {
			o.TimeScale = 60
		}
	}
	if o.ContentPerMinute == 0 && o.ContentPerHour == 0 {
		switch o.Scenario {
		case "commands", "burst":
			o.ContentPerMinute, o.ContentPerHour = 80, 500
		default:
			o.ContentPerMinute, o.ContentPerHour = -1, -1
		}
	}
}

func (o *Options) windows() (time.Duration, time.Duration) {
	return time.Duration(float64(time.Minute) / o.TimeScale), time.Duration(float64(time.Hour) / o.TimeScale)
}

// Result is one measured scenario.
type Result struct {
	Scenario   string             `json:"scenario"`
	Requests   int                `json:"requests"`
	Errors     int                `json:"errors"`
	Seconds    float64            `json:"seconds"`
	Throughput float64            `json:"throughput_per_s"`
	P50ms      float64            `json:"p50_ms"`
	P90ms      float64            `json:"p90_ms"`
	P99ms      float64            `json:"p99_ms"`
	MaxMs      float64            `json:"max_ms"`
	Extra      map[string]float64 `json:"extra,omitempty"`
}

const (
	repo     = "SemiAnalysisAI/InferenceX"
	secret   = "bench-webhook-secret"
	apiToken = "bench-api-token-0123"
	baseRun  = int64(31000000000)
)

type cleanup struct{ fns []func() }

func (c *cleanup) Cleanup(f func()) { c.fns = append(c.fns, f) }
func (c *cleanup) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
}

// Run runs the chosen scenario ("mixed" also reports its parts).
func Run(ctx context.Context, opt Options) ([]Result, error) {
	if opt.Concurrency <= 0 {
		opt.Concurrency = 64
	}
	if opt.Duration <= 0 {
		opt.Duration = 30 * time.Second
	}
	if opt.BodySize <= 0 {
		opt.BodySize = 15 << 10
	}
	if opt.PRs <= 0 {
		opt.PRs = 1000
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.Burst <= 0 {
		opt.Burst = 500
	}
	opt.contentRate()
	if opt.Scenario == "fsync" {
		r, err := FsyncRate(opt.Dir, opt.BodySize, min(opt.Duration, 10*time.Second))
		return []Result{r}, err
	}
	cl := &cleanup{}
	defer cl.run()
	env, err := start(ctx, opt, cl)
	if err != nil {
		return nil, err
	}
	switch opt.Scenario {
	case "ingest":
		fs, err := FsyncRate(opt.Dir, opt.BodySize, 5*time.Second)
		if err != nil {
			return nil, err
		}
		var floor *Result
		if len(opt.FloorCommand) > 0 {
			url, err := startFloor(ctx, opt.FloorCommand, cl)
			if err != nil {
				return nil, err
			}
			lat, errs, took := env.ingestLoad(ctx, opt, url)
			f := summarize("ingest-floor", lat, errs, took)
			fmt.Fprintf(opt.Log, "ingest-floor: %d requests in %.1fs\n", f.Requests, f.Seconds)
			floor = &f
		}
		r, err := env.ingest(ctx, opt)
		r.Extra["fsync_per_s"] = fs.Throughput
		r.Extra["vs_fsync_limit"] = r.Throughput / fs.Throughput
		if floor == nil {
			return []Result{r}, err
		}
		if floor.Throughput > 0 && floor.P99ms > 0 {
			r.Extra["floor_per_s"] = floor.Throughput
			r.Extra["floor_p99_ms"] = floor.P99ms
			r.Extra["rate_vs_floor"] = r.Throughput / floor.Throughput
			r.Extra["p99_vs_floor"] = r.P99ms / floor.P99ms
		}
		return []Result{*floor, r}, err
	case "commands":
		r, err := env.commands(ctx, opt)
		return []Result{r}, err
	case "gate":
		s, err := env.synchronize(ctx, opt)
		if err != nil {
			return nil, err
		}
		g, err := env.gateReads(ctx, opt)
		return []Result{s, g}, err
	case "mixed":
		return env.mixed(ctx, opt)
	case "scale":
		r, err := env.scale(ctx, opt)
		return []Result{r}, err
	case "burst":
		return env.burst(ctx, opt)
	}
	return nil, fmt.Errorf("unknown scenario %q (ingest, commands, gate, mixed, scale, burst, fsync)", opt.Scenario)
}

// FsyncRate measures this machine's limit: appends of a delivery-sized
// record, one fsync each.
func FsyncRate(dir string, size int, d time.Duration) (Result, error) {
	f, err := os.CreateTemp(dir, "fsync-*.bin")
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := bytes.Repeat([]byte("x"), size)
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t := time.Now()
		if _, err := f.Write(rec); err != nil {
			return Result{}, err
		}
		if err := f.Sync(); err != nil {
			return Result{}, err
		}
		lat = append(lat, time.Since(t))
	}
	return summarize("fsync", lat, 0, time.Since(start)), nil
}

type server struct {
	url     string
	pid     int
	reads   atomic.Int64 // GitHub reads that count against the rate limit
	content atomic.Int64 // content-creating requests GitHub accepted
	gh      *githubtest.Fake
	cl      *http.Client
	dir     string
	next    atomic.Int64

	mu      sync.Mutex
	waiters map[string]chan time.Time // "comment:PR" or "status:SHA" -> when GitHub got it
}

func sha(pr, n int) string { return fmt.Sprintf("%08x%032x", pr, n) }

func start(ctx context.Context, opt Options, cl *cleanup) (*server, error) {
	gh := githubtest.New(cl)
	gh.AddRepo(repo, "run-sweep.yml", 77)
	gh.AddUser("maintainer", 5001, "User")
	gh.AddUser("author", 5000, "User")
	gh.SetRole(repo, "maintainer", "write")
	for pr := 1; pr <= opt.PRs; pr++ {
		gh.AddPR(repo, pr, "author", fmt.Sprintf("branch-%d", pr), sha(0, 0), []string{sha(pr, 1)})
		gh.AddRun(repo, githubtest.Run{ID: baseRun + int64(pr), WorkflowID: 77, Event: "pull_request", Status: "completed",
			Conclusion: "success", HeadSHA: sha(pr, 1), HeadBranch: fmt.Sprintf("branch-%d", pr),
			Artifacts: []githubtest.Artifact{{Name: "results_bmk"}, {Name: "changelog-metadata"}}, CreatedAt: time.Now().Add(-time.Hour)})
	}
	s := &server{gh: gh, dir: opt.Dir, waiters: map[string]chan time.Time{},
		cl: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}}
	s.next.Store(int64(rand.Uint32()))
	gh.Watch(s.watch)
	rate := "  content_rate: {per_minute: 1000000000, per_hour: 1000000000}"
	if opt.ContentPerMinute > 0 {
		minute, hour := opt.windows()
		rate = fmt.Sprintf("  content_rate: {per_minute: %d, per_hour: %d, minute: %s, hour: %s}",
			opt.ContentPerMinute, opt.ContentPerHour, minute, hour)
		gh.LimitContent(githubtest.ContentLimits{PerMinute: opt.ContentPerMinute, PerHour: opt.ContentPerHour, Minute: minute, Hour: hour})
	}
	// One token asks for every simulated push: measure the gate, not its
	// limit. Only the scenarios that ask set it, so ingest runs against
	// builds that predate the limit too.
	gateRate := ""
	if opt.Scenario == "gate" || opt.Scenario == "mixed" {
		gateRate = "  gate_rate: {burst: 100000000, per_minute: 100000000}"
	}
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
state_path: %q
workers: 64
github:
  api_url: %q
  token_env: "BENCH_GITHUB_TOKEN"
  webhook_secret_env: "BENCH_WEBHOOK_SECRET"
  bot_login: %q
%s
api:
  tokens_env: "BENCH_API_TOKENS"
%s
notices:
  max_replies_per_user_per_hour: 1000000   # one maintainer sends every command: measure replies, not the limit
http:
  max_connections_per_ip: 4096             # every simulated client is this one address
repos:
  - name: %q
    sweep_workflow: ".github/workflows/run-sweep.yml"
`, filepath.Join(opt.Dir, "bench.db"), gh.URL, githubtest.BotLogin, rate, gateRate, repo)
	path := filepath.Join(opt.Dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if opt.Scenario == "scale" {
		if err := buildScaleState(filepath.Join(opt.Dir, "bench.db"), opt.ScalePRs, opt.ScaleAudit, opt.Log); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--config", path, "--log-level", "error"}
	if opt.CPUProfile != "" {
		args = append(args, "--cpuprofile", opt.CPUProfile)
	}
	cmd := exec.CommandContext(ctx, opt.Exe, args...)
	cmd.Env = append(os.Environ(), "BENCH_GITHUB_TOKEN=ghs_bench", "BENCH_WEBHOOK_SECRET="+secret, "BENCH_API_TOKENS="+apiToken)
	began := time.Now()
	u, err := startServing(cmd, "opsbot serving on ", 20*time.Second, cl)
	if err != nil {
		return nil, fmt.Errorf("the server %s: %w", opt.Exe, err)
	}
	s.url = u
	if err := opsserver.WaitReady(ctx, s.url, 30*time.Second); err != nil {
		return nil, err
	}
	s.pid = cmd.Process.Pid
	fmt.Fprintf(opt.Log, "server pid %d on %s, up in %s\n", s.pid, s.url, time.Since(began).Round(time.Millisecond))
	return s, nil
}

func (s *server) watch(r githubtest.Request) {
	if r.Method == http.MethodGet && r.Status != http.StatusNotModified {
		s.reads.Add(1)
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodPatch) && r.Status < 400 && !strings.HasPrefix(r.Route, "POST /app/") {
		s.content.Add(1)
	}
	var key string
	switch r.Route {
	case "POST /repos/{owner}/{repo}/issues/{n}/comments":
		parts := strings.Split(r.Path, "/")
		key = "comment:" + parts[len(parts)-2]
	case "POST /repos/{owner}/{repo}/statuses/{sha}":
		key = "status:" + r.Path[strings.LastIndexByte(r.Path, '/')+1:]
	default:
		return
	}
	now := time.Now()
	s.mu.Lock()
	ch := s.waiters[key]
	delete(s.waiters, key)
	s.mu.Unlock()
	if ch != nil {
		ch <- now
	}
}

// expect registers interest in the next comment on a PR or status on a SHA.
func (s *server) expect(key string) chan time.Time {
	ch := make(chan time.Time, 1)
	s.mu.Lock()
	s.waiters[key] = ch
	s.mu.Unlock()
	return ch
}

func (s *server) post(ctx context.Context, event string, body []byte) (int, error) {
	return s.postTo(ctx, s.url, event, body)
}

// postTo sends a signed delivery to the webhook of the server at url.
func (s *server) postTo(ctx context.Context, url, event string, body []byte) (int, error) {
	id := strconv.FormatInt(s.next.Add(1), 16)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/webhook", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", auth.Sign(body, secret))
	return s.status(req)
}

// status sends req and returns the answer's status, its body read and
// dropped so the connection is reused.
func (s *server) status(req *http.Request) (int, error) {
	resp, err := s.cl.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *server) commentBody(pr int, id int64, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"action": "created",
		"issue": map[string]any{"number": pr, "state": "open", "title": fmt.Sprintf("PR %d", pr),
			"pull_request": map[string]any{"url": "https://api.github.com/repos/" + repo + "/pulls/" + strconv.Itoa(pr)},
			"user":         map[string]any{"login": "author"}},
		"comment": map[string]any{"id": id, "body": text, "html_url": fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", repo, pr, id),
			"user": map[string]any{"login": "maintainer", "id": 5001, "type": "User"}},
		"repository": map[string]any{"full_name": repo},
		"sender":     map[string]any{"login": "maintainer", "id": 5001, "type": "User"},
	})
	return b
}

func (s *server) syncBody(pr int, head string) []byte {
	b, _ := json.Marshal(map[string]any{
		"action": "synchronize", "number": pr,
		"pull_request": map[string]any{"number": pr, "title": fmt.Sprintf("PR %d", pr), "state": "open",
			"head": map[string]any{"sha": head, "ref": fmt.Sprintf("branch-%d", pr)}, "user": map[string]any{"login": "author"}},
		"repository": map[string]any{"full_name": repo},
		"sender":     map[string]any{"login": "author", "id": 5000, "type": "User"},
	})
	return b
}

// metric reads one value from /metrics.
func (s *server) metric(name string) float64 {
	resp, err := s.cl.Get(s.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// rssMB reads the server process's resident memory.
func (s *server) rssMB() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

// sampler records the peak inbox depth and RSS while load runs.
type sampler struct {
	stop     chan struct{}
	done     chan struct{}
	maxDepth float64
	maxRSS   float64
}

func (s *server) sample() *sampler {
	sm := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			sm.maxDepth = max(sm.maxDepth, s.metric("opsbot_inbox_depth"))
			sm.maxRSS = max(sm.maxRSS, s.rssMB())
			select {
			case <-sm.stop:
				return
			case <-t.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) end() { close(sm.stop); <-sm.done }

// drain waits for the inbox to empty and says how long it took.
func (s *server) drain(limit time.Duration) float64 {
	start := time.Now()
	for time.Since(start) < limit {
		if s.metric("opsbot_inbox_depth") == 0 && s.metric("opsbot_outbox_depth") == 0 {
			return time.Since(start).Seconds()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

// closedLoop runs fn from n workers until d passes, collecting latencies.
func closedLoop(ctx context.Context, n int, d time.Duration, fn func(ctx context.Context, worker, i int) error) ([]time.Duration, int, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			e := 0
			for i := 0; ctx.Err() == nil; i++ {
				t := time.Now()
				if err := fn(ctx, w, i); err != nil {
					if ctx.Err() == nil {
						e++
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, errs, time.Since(start)
}

// openLoop starts fn at rate per second for d, each in its own goroutine.
func openLoop(ctx context.Context, rate float64, d time.Duration, fn func(ctx context.Context, i int) (time.Duration, error)) ([]time.Duration, int, time.Duration) {
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := fn(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			all = append(all, l)
		}()
	}
	wg.Wait()
	return all, errs, time.Since(start)
}

func summarize(name string, lat []time.Duration, errs int, took time.Duration) Result {
	r := Result{Scenario: name, Requests: len(lat), Errors: errs, Seconds: took.Seconds(), Extra: map[string]float64{}}
	if len(lat) == 0 {
		return r
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	r.Throughput = float64(len(lat)) / took.Seconds()
	r.P50ms, r.P90ms, r.P99ms, r.MaxMs = q(0.50), q(0.90), q(0.99), float64(lat[len(lat)-1].Microseconds())/1000
	return r
}

func (s *server) ingest(ctx context.Context, opt Options) (Result, error) {
	idle := s.rssMB()
	srvCPU, selfCPU := s.cpuSeconds(), selfCPUSeconds()
	sm := s.sample()
	lat, errs, took := s.ingestLoad(ctx, opt, s.url)
	sm.end()
	r := summarize("ingest", lat, errs, took)
	r.Extra["server_cores"] = (s.cpuSeconds() - srvCPU) / took.Seconds()
	if n := s.metric("opsbot_commit_seconds_count"); n > 0 {
		r.Extra["commit_avg_ms"] = s.metric("opsbot_commit_seconds_sum") / n * 1000
		r.Extra["writes_per_commit"] = s.metric("opsbot_commit_writes_sum") / n
	}
	r.Extra["loadgen_cores"] = (selfCPUSeconds() - selfCPU) / took.Seconds()
	r.Extra["max_inbox_depth"] = sm.maxDepth
	r.Extra["drain_s"] = s.drain(60 * time.Second)
	r.Extra["rss_idle_mb"] = idle
	r.Extra["rss_max_mb"] = sm.maxRSS
	fmt.Fprintf(opt.Log, "ingest: %d deliveries in %.1fs\n", r.Requests, r.Seconds)
	return r, nil
}

// ingestLoad sends comment deliveries to the webhook at url from
// opt.Concurrency connections for opt.Duration, each answered 202.
func (s *server) ingestLoad(ctx context.Context, opt Options, url string) ([]time.Duration, int, time.Duration) {
	// Real comments hold links, so the body has slashes: each delivery is
	// decoded and parsed, as a comment without a command would be.
	pad := strings.Repeat("Benchmark notes, see https://github.com/o/r/actions/runs/1 for the sweep. ", opt.BodySize/70+1)[:opt.BodySize-600]
	// The body is built from parts once; each delivery varies the PR and the
	// comment id without encoding the whole payload again.
	tmpl := newTemplate(string(s.commentBody(424242, 171717171717, pad)), "424242", "171717171717")
	return closedLoop(ctx, opt.Concurrency, opt.Duration, func(ctx context.Context, w, i int) error {
		id := s.next.Add(1)
		body := tmpl.fill(strconv.Itoa(1+int(id)%opt.PRs), strconv.FormatInt(id, 10))
		code, err := s.postTo(ctx, url, "issue_comment", body)
		if err != nil {
			return err
		}
		if code != http.StatusAccepted {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
}

func (s *server) commands(ctx context.Context, opt Options) (Result, error) {
	rate := opt.Rate
	if rate <= 0 {
		rate = 100
	}
	var prs sync.Map // PRs with a command in flight
	before := s.reads.Load()
	lat, errs, took := openLoop(ctx, rate, opt.Duration, func(ctx context.Context, i int) (time.Duration, error) {
		pr := 1 + i%opt.PRs
		if _, busy := prs.LoadOrStore(pr, true); busy {
			return 0, errors.New("PR busy")
		}
		defer prs.Delete(pr)
		c := s.gh.AddComment(repo, pr, "maintainer", "/reuse-sweep-run "+strconv.FormatInt(baseRun+int64(pr), 10))
		return s.timed(ctx, "comment:"+strconv.Itoa(pr), "issue_comment", s.commentBody(pr, c.ID, c.Body))
	})
	r := summarize("commands", lat, errs, took)
	r.Extra["github_reads"] = float64(s.reads.Load() - before)
	r.Extra["reads_per_command"] = r.Extra["github_reads"] / max(float64(r.Requests), 1)
	return r, nil
}

// burst posts opt.Burst command comments on PR 1 at once, as a spammer with
// write access would, and pushes to other PRs every two seconds while the
// burst is answered. It reports the time until every command is answered
// (the inbox and outbox empty), that time at GitHub's real windows, the
// other PRs' commit status latency, and the secondary-limit refusals at the
// fake GitHub, which enforces the same limits.
func (s *server) burst(ctx context.Context, opt Options) ([]Result, error) {
	run := strconv.FormatInt(baseRun+1, 10)
	before := s.content.Load()
	start := time.Now()
	for i := 0; i < opt.Burst; i++ {
		c := s.gh.AddComment(repo, 1, "maintainer", "/reuse-sweep-run "+run)
		if code, err := s.post(ctx, "issue_comment", s.commentBody(1, c.ID, c.Body)); err != nil || code != http.StatusAccepted {
			return nil, fmt.Errorf("posting command %d: %d %v", i, code, err)
		}
	}
	posted := time.Since(start)
	fmt.Fprintf(opt.Log, "burst: %d commands posted in %s\n", opt.Burst, posted.Round(time.Millisecond))
	done := make(chan float64, 1)
	_, hour := opt.windows()
	go func() { done <- s.drain(3 * hour) }()
	var lat []time.Duration
	errs := 0
	pushes := 0
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var took float64
wait:
	for {
		select {
		case took = <-done:
			break wait
		case <-tick.C:
			pushes++
			pr := 2 + pushes%max(opt.PRs-1, 1)
			head := sha(pr, pushes+1)
			d, err := s.timed(ctx, "status:"+head, "pull_request", s.syncBody(pr, head))
			if err != nil {
				errs++
				fmt.Fprintf(opt.Log, "burst: push %d: %v\n", pushes, err)
				continue
			}
			lat = append(lat, d)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if took < 0 {
		return nil, fmt.Errorf("the burst was not answered within %s", 3*hour)
	}
	answered := time.Since(start)
	r := summarize("burst/other-pr-status", lat, errs, answered)
	r.Extra["commands"] = float64(opt.Burst)
	r.Extra["answered_s"] = answered.Seconds()
	r.Extra["answered_at_real_windows_s"] = answered.Seconds() * opt.TimeScale
	r.Extra["time_scale"] = opt.TimeScale
	r.Extra["content_requests"] = float64(s.content.Load() - before)
	r.Extra["secondary_refusals"] = float64(s.gh.SecondaryRefusals())
	fmt.Fprintf(opt.Log, "burst: answered in %s (%d content requests); %d pushes meanwhile\n",
		answered.Round(time.Millisecond), s.content.Load()-before, len(lat))
	return []Result{r}, nil
}

// timed sends a delivery and measures until the fake GitHub receives what
// it causes (the write named by key).
func (s *server) timed(ctx context.Context, key, event string, body []byte) (time.Duration, error) {
	got := s.expect(key)
	t := time.Now()
	if code, err := s.post(ctx, event, body); err != nil || code != http.StatusAccepted {
		return 0, fmt.Errorf("post: %d %v", code, err)
	}
	select {
	case at := <-got:
		return at.Sub(t), nil
	case <-time.After(10 * time.Second):
		return 0, errors.New("nothing reached GitHub in 10s: " + key)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s *server) synchronize(ctx context.Context, opt Options) (Result, error) {
	rate := opt.Rate
	if rate <= 0 {
		rate = 100
	}
	var n atomic.Int64
	before := s.reads.Load()
	lat, errs, took := openLoop(ctx, rate, opt.Duration, func(ctx context.Context, i int) (time.Duration, error) {
		pr := 1 + i%opt.PRs
		head := sha(pr, int(n.Add(1))+1)
		return s.timed(ctx, "status:"+head, "pull_request", s.syncBody(pr, head))
	})
	r := summarize("synchronize", lat, errs, took)
	r.Extra["github_reads"] = float64(s.reads.Load() - before)
	return r, nil
}

func (s *server) gateReads(ctx context.Context, opt Options) (Result, error) {
	// Heads decided by the synchronize phase (or decided here on first ask).
	body := func(pr int) []byte {
		b, _ := json.Marshal(map[string]any{"repo": repo, "pr": pr, "sha": sha(pr, 1), "event": "pull_request", "action": "synchronize"})
		return b
	}
	for pr := 1; pr <= min(opt.PRs, 200); pr++ {
		if _, err := s.ask(ctx, body(pr)); err != nil {
			return Result{}, err
		}
	}
	lat, errs, took := closedLoop(ctx, opt.Concurrency, min(opt.Duration, 10*time.Second), func(ctx context.Context, w, i int) error {
		code, err := s.ask(ctx, body(1+(w*7919+i)%min(opt.PRs, 200)))
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	})
	return summarize("gate-api-read", lat, errs, took), nil
}

func (s *server) ask(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/api/v1/gate", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	return s.status(req)
}

func (s *server) mixed(ctx context.Context, opt Options) ([]Result, error) {
	var wg sync.WaitGroup
	var ing, cmd, syn Result
	var e1, e2, e3 error
	o := opt
	o.Concurrency = max(opt.Concurrency/4, 1)
	wg.Add(3)
	go func() { defer wg.Done(); ing, e1 = s.ingest(ctx, o) }()
	go func() { defer wg.Done(); cmd, e2 = s.commands(ctx, o) }()
	go func() {
		defer wg.Done()
		o2 := o
		o2.PRs = opt.PRs / 2 // a share of PRs, so pins and pushes meet
		syn, e3 = s.synchronize(ctx, o2)
	}()
	wg.Wait()
	for _, r := range []*Result{&ing, &cmd, &syn} {
		r.Scenario = "mixed/" + r.Scenario
	}
	return []Result{ing, cmd, syn}, errors.Join(e1, e2, e3)
}

// template is a payload split at its placeholders, filled per request
// without encoding the payload again.
type template struct {
	parts []string // text between placeholders
	which []int    // placeholder index after each part
	size  int
}

func newTemplate(s string, placeholders ...string) *template {
	t := &template{size: len(s)}
	for {
		at, which := -1, -1
		for i, p := range placeholders {
			if j := strings.Index(s, p); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			t.parts = append(t.parts, s)
			return t
		}
		t.parts = append(t.parts, s[:at])
		t.which = append(t.which, which)
		s = s[at+len(placeholders[which]):]
	}
}

func (t *template) fill(values ...string) []byte {
	b := make([]byte, 0, t.size+32)
	for i, p := range t.parts {
		b = append(b, p...)
		if i < len(t.which) {
			b = append(b, values[t.which[i]]...)
		}
	}
	return b
}

// cpuSeconds is the server process's CPU time so far (user and system).
func (s *server) cpuSeconds() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks; Linux uses 100 a second
}

// selfCPUSeconds is the load generator's own CPU time so far.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

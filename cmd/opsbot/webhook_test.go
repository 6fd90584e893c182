package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state"
)

func post(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body
}

func openStore(t *testing.T, path string) *state.Store {
	t.Helper()
	st, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatalf("opening the state after the server stopped: %v", err)
	}
	t.Cleanup(func() {
		if errs := st.Check(); len(errs) > 0 {
			t.Errorf("bbolt check: %v", errs)
		}
		st.Close()
	})
	return st
}

// Every real payload, signed, is answered 2xx; only the events opsbot acts
// on, for the repositories it serves, are stored; all of them are processed
// and none ends in the dead letters.
func TestEveryFixturePayloadIsAcceptedOrIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, writeConfig(t, dir, ""), testEnv(nil))
	stored := map[string]string{}
	for i, p := range fixtures.Webhooks(t) {
		id := fmt.Sprintf("fixture-%d", i)
		code, body := post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", p.Event, id, p.Body, testSecret))
		if code != http.StatusAccepted {
			t.Errorf("%s/%s: status %d %v, want 202", p.Event, p.Name, code, body)
			continue
		}
		if body["status"] == "stored" {
			stored[id] = p.Event + "/" + p.Name
			if p.Event != "pull_request" && p.Event != "issue_comment" && p.Event != "repository_dispatch" && p.Event != "merge_group" {
				t.Errorf("%s/%s stored, but opsbot does not use %s", p.Event, p.Name, p.Event)
			}
		}
	}
	if len(stored) == 0 {
		t.Fatal("no fixture was stored: pull_request payloads of a served repository must be")
	}
	// Processing takes its time on a loaded machine; a delivery still queued at
	// a stop is kept for the next start, which is not what this test looks at.
	testkit.Eventually(t, "the inbox drains", func() bool {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return strings.Contains("\n"+string(raw), "\nopsbot_inbox_depth 0\n")
	})
	ts.Stop(t)

	st := openStore(t, ts.DB)
	pending, err := st.Pending()
	if err != nil || len(pending) != 0 {
		t.Fatalf("inbox after drain: %d pending (%v)", len(pending), err)
	}
	dead, _ := st.DeadLetters()
	for _, d := range dead {
		t.Errorf("dead letter: %s %s: %s", d.Delivery.Event, d.Delivery.ID, d.Reason)
	}
	for id, name := range stored {
		s, err := st.DeliveryStatus(id)
		if err != nil || s.Processed != 1 {
			t.Errorf("%s (%s): processed %d times (%v), want once", id, name, s.Processed, err)
		}
	}
}

func TestWebhookRejectsBadRequestsAndStoresNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, writeConfig(t, dir, "webhook:\n  max_body_bytes: 8192\n"), testEnv(nil))
	good := fixtures.Webhook(t, "pull_request", "synchronize")
	small := []byte(`{"action":"synchronize","number":2,"repository":{"full_name":"Codertocat/Hello-World"}}`)
	big := append([]byte(`{"pad":"`), append(bytes.Repeat([]byte("x"), 9000), `"}`...)...)

	cases := []struct {
		name   string
		mutate func(r *http.Request)
		body   []byte
		method string
		want   int
	}{
		{"unsigned", func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") }, small, "", 401},
		{"wrong secret", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", auth.Sign(small, "other")) }, small, "", 401},
		{"sha1 only", func(r *http.Request) {
			r.Header.Del("X-Hub-Signature-256")
			r.Header.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")
		}, small, "", 401},
		{"not hex", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=zz") }, small, "", 401},
		{"no event header", func(r *http.Request) { r.Header.Del("X-GitHub-Event") }, small, "", 400},
		{"no delivery header", func(r *http.Request) { r.Header.Del("X-GitHub-Delivery") }, small, "", 400},
		{"form encoded without a payload field", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, small, "", 400},
		{"no content type", func(r *http.Request) { r.Header.Del("Content-Type") }, small, "", 400},
		{"not JSON", nil, []byte("payload=%7B%7D"), "", 400},
		{"truncated JSON", nil, good[:len(good)/2], "", 413},
		{"truncated small JSON", nil, small[:40], "", 400},
		{"too large", nil, big, "", 413},
		{"GET", nil, small, http.MethodGet, 405},
		{"PUT", nil, small, http.MethodPut, 405},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%d", i)
			req := fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", id, c.body, testSecret)
			if c.method != "" {
				req.Method = c.method
			}
			if c.mutate != nil {
				c.mutate(req)
			}
			if code, body := post(t, req); code != c.want {
				t.Fatalf("status %d %v, want %d", code, body, c.want)
			}
		})
	}
	ts.Stop(t)
	st := openStore(t, ts.DB)
	for i := range cases {
		if _, err := st.DeliveryStatus(fmt.Sprintf("bad-%d", i)); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("case %q left a delivery behind (%v)", cases[i].name, err)
		}
	}
}

func TestWebhookDuplicateDeliveryAndSecretRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := testEnv(map[string]string{"TEST_WEBHOOK_SECRET": "new-secret-0123456, " + testSecret})
	ts := startServer(t, writeConfig(t, dir, ""), env)
	body := fixtures.Webhook(t, "pull_request", "synchronize")

	code, _ := post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", "dup-1", body, "new-secret-0123456"))
	if code != http.StatusAccepted {
		t.Fatalf("first delivery: %d, want 202", code)
	}
	// GitHub redelivers with the same id; an older secret still verifies during rotation.
	code, rep := post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", "dup-1", body, testSecret))
	if code != http.StatusOK || rep["status"] != "duplicate" {
		t.Fatalf("redelivery: %d %v, want 200 duplicate", code, rep)
	}
	ts.Stop(t)
	st := openStore(t, ts.DB)
	if s, err := st.DeliveryStatus("dup-1"); err != nil || s.Processed != 1 {
		t.Fatalf("dup-1 processed %d times (%v), want once", s.Processed, err)
	}
}

func TestServeRefusesToStartWithoutWebhookSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--config", writeConfig(t, dir, "")},
		func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "TEST_WEBHOOK_SECRET") {
		t.Fatalf("run = %v, want an error naming TEST_WEBHOOK_SECRET", err)
	}
}

func TestSecondServerOnSameDatabaseFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "")
	startServer(t, cfg, testEnv(nil))
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--config", cfg}, testEnv(nil), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "another opsbot holds "+dir) {
		t.Fatalf("second server: %v, want 'another opsbot holds %s/opsbot.db'", err, dir)
	}
}

func TestHealthReadyAndMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, writeConfig(t, dir, ""), testEnv(nil))
	body := fixtures.Webhook(t, "pull_request", "synchronize")
	if code, _ := post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", "m-1", body, testSecret)); code != 202 {
		t.Fatalf("delivery: %d", code)
	}
	post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", "m-2", body, "wrong"))
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// Without GitHub credentials it runs, and says it is not ready: it can
	// do nothing it is for.
	resp, err = http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(ready), "github: no credentials") {
		t.Fatalf("/readyz without credentials: %d %s", resp.StatusCode, ready)
	}
	var text string
	testkit.Eventually(t, "the delivery is processed", func() bool {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(raw)
		return strings.Contains(text, `opsbot_deliveries_processed_total{event="pull_request"`)
	})
	for _, want := range []string{
		`opsbot_webhook_deliveries_total{event="pull_request",outcome="stored"} 1`,
		`opsbot_webhook_deliveries_total{event="pull_request",outcome="bad_signature"} 1`,
		"opsbot_inbox_depth", "opsbot_inbox_oldest_age_seconds", "opsbot_processing_seconds", "opsbot_dead_letters",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "Hello-World") {
		t.Error("/metrics names a repository; labels must be bounded")
	}
}

// A dry run without GitHub credentials asks GitHub nothing (not even
// without credentials), answers /readyz 503 saying why, and counts what it
// would have posted as logged, not sent.
func TestDryRunWithoutCredentialsAsksGitHubNothing(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "", "", map[string]string{"TEST_GITHUB_TOKEN": ""})
	before := w.GH.Count("")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	if n := w.GH.Count("") - before; n != 0 {
		t.Fatalf("a dry run without credentials sent GitHub %d requests: %v", n, w.GH.Requests()[before:])
	}
	m := w.Metrics()
	if m[`opsbot_notices_total{channel="github",outcome="sent"}`] != "" && m[`opsbot_notices_total{channel="github",outcome="sent"}`] != "0" {
		t.Errorf("notices counted sent in a dry run: %s", m[`opsbot_notices_total{channel="github",outcome="sent"}`])
	}
	if n, _ := strconv.Atoi(m[`opsbot_notices_total{channel="github",outcome="logged"}`]); n == 0 {
		t.Errorf("no notice counted logged in a dry run: %v", m)
	}
	resp, err := http.Get(w.Srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz of a dry run without credentials = %d, want 503", resp.StatusCode)
	}
	// The audit says why the command was not run: no credentials, not a
	// GitHub that did not answer.
	var said bool
	for _, r := range w.audit() {
		if r["kind"] == "command" {
			reason := fmt.Sprint(r["reason"])
			if strings.Contains(reason, "GitHub did not answer") || !strings.Contains(reason, "opsbot has no GitHub credentials") {
				t.Errorf("the command's audit reason: %q", reason)
			}
			said = true
		}
	}
	if !said {
		t.Fatalf("the command is not audited: %v", w.audit())
	}
}

// A typo in repos[].name must not look like a working setup: a webhook of
// a repository opsbot does not serve is answered 202 ignored with the
// reason and the repository, logged at info once, and opsbot audit --repo
// of it fails through the server (which knows what it serves) and says so
// on a database, where a served repository's empty audit is an empty table.
func TestAnUnservedRepositoryIsNamed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	p := payload(t, "pull_request", "synchronize")
	setPath(p, "repository.full_name", "Nope/Nope")
	raw, _ := json.Marshal(p)
	for i := range 2 {
		code, body := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", fmt.Sprintf("unserved-%d", i), raw, testSecret))
		if code != http.StatusAccepted || body["status"] != "ignored" ||
			body["reason"] != `repository not served: "Nope/Nope" is not one of this opsbot's repos[]` {
			t.Fatalf("a webhook of a repository not served: %d %v", code, body)
		}
	}
	log := w.Srv.Stderr.String()
	if n := strings.Count(log, "webhook ignored: its repository is not served"); n != 1 || !strings.Contains(log, `"level":"INFO","msg":"webhook ignored: its repository is not served`) ||
		!strings.Contains(log, `Nope/Nope`) {
		t.Fatalf("the log says the repository %d times (want once, at info, naming it):\n%s", n, log)
	}
	env := map[string]string{"OPSBOT_API_TOKEN": apiToken}
	_, errOut, err := runCLI(t, env, "audit", "--server", w.Srv.URL, "--repo", "Nope/Nope")
	if err == nil || !strings.Contains(fmt.Sprint(err)+errOut, "opsbot does not serve Nope/Nope and its audit holds nothing of it; it serves "+theRepo) {
		t.Fatalf("audit --repo of a repository not served: %v\n%s", err, errOut)
	}
	if out, errOut, err := runCLI(t, env, "audit", "--server", w.Srv.URL, "--repo", theRepo); err != nil {
		t.Fatalf("audit of a served repository with no records: %v\n%s%s", err, out, errOut)
	}
	w.Srv.Stop(t)
	// The database alone cannot tell a typo from a repository still quiet:
	// it says so, and the (empty) table is printed.
	_, errOut, err = runCLI(t, nil, "audit", "--db", w.Srv.DB, "--repo", "Nope/Nope")
	if err != nil || !strings.Contains(errOut, "the database holds nothing of Nope/Nope: check the name") {
		t.Fatalf("audit --db --repo of a repository it holds nothing of: %v\n%s", err, errOut)
	}
}

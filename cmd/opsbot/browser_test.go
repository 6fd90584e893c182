package main

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browser starts Debian's headless Chromium for a test. Without chromium
// the test is skipped, unless OPSBOT_REQUIRE_BROWSER is set (CI sets it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("OPSBOT_REQUIRE_BROWSER") != "" {
			t.Fatal("chromium is not installed (apt-get install chromium)")
		}
		t.Skip("chromium is not installed; .ci/run installs it")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The whole test gets a minute; a screenshot on failure still works, on the tab's own context.
	tctx, cancel3 := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel3)
	t.Cleanup(func() { shotOnFailure(t, ctx) })
	return tctx
}

// shotOnFailure keeps a screenshot under testdata/output when the test failed.
func shotOnFailure(t *testing.T, ctx context.Context) {
	if !t.Failed() {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	dir := filepath.Join("testdata", "output")
	os.MkdirAll(dir, 0o755)
	p := filepath.Join(dir, t.Name()+".png")
	if err := os.WriteFile(p, png, 0o644); err == nil {
		t.Logf("screenshot of the failure: %s", p)
	}
}

// A maintainer opens the audit page and finds which run stood in for each head.
func TestAuditPageInBrowser(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "audit_web:\n  enabled: true\n  user_env: TEST_AUDIT_USER\n  password_env: TEST_AUDIT_PASSWORD\n", "",
		map[string]string{"TEST_AUDIT_USER": "maint", "TEST_AUDIT_PASSWORD": "s3cret-page-0123456"})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml")
	w.Push("c3")

	ctx := browser(t)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("maint:s3cret-page-0123456"))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": basic}}); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return v
	}
	step := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browsing the audit page: %v", err)
		}
	}
	step(chromedp.Navigate(w.Srv.URL + "/audit"))
	repos := text("table")
	step(chromedp.Click(chromedp.CSS(`a[href="/audit/SemiAnalysisAI/InferenceX"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/audit/SemiAnalysisAI/InferenceX/2512"]`)))
	prs := text("table")
	step(chromedp.Click(chromedp.CSS(`a[href="/audit/SemiAnalysisAI/InferenceX/2512"]`)), chromedp.WaitVisible(chromedp.CSS("#heads")))
	heads, pins := text("#heads"), text("#pins")
	mustContain(t, "repositories", repos, "SemiAnalysisAI/InferenceX", ".github/workflows/run-sweep.yml")
	mustContain(t, "PR list", prs, "#2512", "sweep", "c3c3c3c")
	mustContain(t, "heads", heads, "c2c2c2c", "skip", "31147925932", "@maintainer", "c3c3c3c", "its own sweep")
	mustContain(t, "pins", pins, "31147925932", "consumed", "@maintainer")

	href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#heads a[href*="/actions/runs/"]`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	if href.Value != "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932" {
		t.Fatalf("the head's run links to %q", href.Value)
	}

	// Every page, at a laptop's width and a phone's: nothing scrolls
	// sideways, and no identifier (a SHA, a run, a login, a PR, a time) is
	// split over two lines: an inline box that wraps has more than one
	// client rectangle.
	pages := []string{"/audit", "/audit/SemiAnalysisAI/InferenceX", "/audit/SemiAnalysisAI/InferenceX/2512",
		"/audit/-/run/31147925932", "/audit/records?repo=SemiAnalysisAI/InferenceX&user=maintainer"}
	for _, width := range []int64{1280, 390} {
		step(chromedp.EmulateViewport(width, 800))
		for _, page := range pages {
			step(chromedp.Navigate(w.Srv.URL+page), chromedp.WaitVisible(chromedp.CSS("header h1")))
			overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
			if err != nil {
				t.Fatal(err)
			}
			if overflow {
				t.Errorf("%s scrolls sideways at %d px", page, width)
			}
			split, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.id')).filter(e => e.getClientRects().length > 1).map(e => e.textContent)`))
			if err != nil {
				t.Fatal(err)
			}
			if len(split) > 0 {
				t.Errorf("%s at %d px splits identifiers over lines: %q", page, width, split)
			}
			ids, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.id').length`))
			if err != nil {
				t.Fatal(err)
			}
			if page != "/audit" && ids == 0 {
				t.Errorf("%s shows no identifier", page)
			}
		}
	}
	step(chromedp.Navigate(w.Srv.URL+"/audit/SemiAnalysisAI/InferenceX"), chromedp.WaitVisible(chromedp.CSS("#totals")))
	mustContain(t, "totals", text("#totals"), "skips 1", "runner hours saved 6.1", "active pins 0")
	step(chromedp.Navigate(w.Srv.URL+"/audit/-/run/31147925932"), chromedp.WaitVisible(chromedp.CSS("#uses")))
	mustContain(t, "run page", text("#uses"), "c2c2c2c", "#2512", "@maintainer", "6.1 runner h")
	step(chromedp.Navigate(w.Srv.URL+"/audit/records?repo=SemiAnalysisAI/InferenceX&outcome=skip"), chromedp.WaitVisible(chromedp.CSS("#trail")))
	trail := text("#trail")
	mustContain(t, "filtered records", trail, "skip", "c2c2c2c")
	if strings.Contains(trail, "c3c3c3c") {
		t.Errorf("outcome=skip shows the sweep of c3:\n%s", trail)
	}
}

func TestAuditPageNeedsCredentials(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "audit_web:\n  enabled: true\n  user_env: TEST_AUDIT_USER\n  password_env: TEST_AUDIT_PASSWORD\n", "",
		map[string]string{"TEST_AUDIT_USER": "maint", "TEST_AUDIT_PASSWORD": "s3cret-page-0123456"})
	for _, cred := range []string{"", "maint:wrong", "other:s3cret-page-0123456"} {
		req, _ := newGet(w.Srv.URL + "/audit")
		if cred != "" {
			u, p, _ := strings.Cut(cred, ":")
			req.SetBasicAuth(u, p)
		}
		resp, err := doReq(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 401 {
			t.Errorf("credentials %q: %d, want 401", cred, resp.StatusCode)
		}
	}
}

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
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	w.push("c2", "perf-changelog.yaml")
	w.push("c3")

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
	step(chromedp.Navigate(w.srv.URL + "/audit"))
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

	// Readable on a phone: nothing wider than the screen.
	step(chromedp.EmulateViewport(375, 740))
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow {
		t.Error("the PR page scrolls sideways on a 375 px screen")
	}
}

func TestAuditPageNeedsCredentials(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "audit_web:\n  enabled: true\n  user_env: TEST_AUDIT_USER\n  password_env: TEST_AUDIT_PASSWORD\n", "",
		map[string]string{"TEST_AUDIT_USER": "maint", "TEST_AUDIT_PASSWORD": "s3cret-page-0123456"})
	for _, cred := range []string{"", "maint:wrong", "other:s3cret-page-0123456"} {
		req, _ := newGet(w.srv.URL + "/audit")
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

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The real opsbot binary, built once for the package's tests that run it as
// a process (see TestMain, which removes it).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	app.RegisterSections() // as the program does before it reads a configuration
	testkit.WaitingTests(8)
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinary returns the path of the real opsbot binary, building it on the
// package's first call.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "opsbot-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "opsbot")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Stderr = os.Stderr
		binErr = cmd.Run()
	})
	if binErr != nil {
		t.Fatalf("building opsbot: %v", binErr)
	}
	return binPath
}

type proc struct {
	cmd *exec.Cmd
	url string
}

func startBinary(t *testing.T, bin, config string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", config)
	cmd.Env = append(os.Environ(), "TEST_WEBHOOK_SECRET="+testSecret)
	return startCmd(t, cmd, filepath.Dir(config))
}

// startCmd starts the binary's serve command and waits until it serves;
// its stderr goes to a file in dir.
func startCmd(t *testing.T, cmd *exec.Cmd, dir string) *proc {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("stderr-%d.log", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logFile.Close() })
	sc := bufio.NewScanner(out)
	urlc := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "opsbot serving on "); ok {
				urlc <- u
			}
		}
	}()
	select {
	case u := <-urlc:
		return &proc{cmd: cmd, url: u}
	case <-testkit.Expired(t):
		t.Fatalf("opsbot did not start; see %s", logFile.Name())
	}
	return nil
}

// After kill -9 in the middle of a stream of deliveries, a restart
// processes every delivery that got a 2xx exactly once.
func TestCrashKill9LosesNoAcceptedDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// Not parallel: it rebinds a port it freed, and kills by a count of
	// answers that a busy machine may not reach.
	bin := buildBinary(t)
	dir := t.TempDir()
	config := writeConfig(t, dir, "")
	p := startBinary(t, bin, config)

	base := fixtures.Webhook(t, "pull_request", "synchronize")
	const total, conc, killAfter = 3000, 32, 800
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		answered int
		killOnce sync.Once
	)
	ids := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				// Vary the PR so deliveries spread across workers.
				// Each body is its own: the same body under another id is a duplicate.
				body := []byte(strings.Replace(string(base), `"number": 2,`, fmt.Sprintf(`"number": %d, "crash_seq": %d,`, 1+i%50, i), 1))
				id := fmt.Sprintf("crash-%05d", i)
				resp, err := client.Do(fixtures.SignedRequest(t, p.url+"/webhook", "pull_request", id, body, testSecret))
				if err != nil {
					continue // the server died mid-request: no 2xx, no promise
				}
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode/100 == 2 {
					accepted[id] = true
				}
				answered++
				n := answered
				mu.Unlock()
				if n == killAfter {
					killOnce.Do(func() { p.cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
		}()
	}
	for i := 0; i < total; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	p.cmd.Wait()
	if len(accepted) < killAfter/2 {
		t.Fatalf("only %d deliveries accepted before the kill", len(accepted))
	}

	// Restart: the inbox left by the kill is processed, then a clean stop.
	p2 := startBinary(t, bin, config)
	deadline := testkit.Deadline(t)
	for {
		resp, err := http.Get(p2.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		depth := "?"
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "opsbot_inbox_depth "); ok {
				depth = v
			}
		}
		resp.Body.Close()
		if depth == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbox not drained after restart (depth %s)", depth)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p2.cmd.Process.Signal(syscall.SIGTERM)
	if err := p2.cmd.Wait(); err != nil {
		t.Fatalf("clean stop after SIGTERM: %v", err)
	}

	st := openStore(t, filepath.Join(dir, "opsbot.db"))
	for id := range accepted {
		s, err := st.DeliveryStatus(id)
		if err != nil {
			t.Errorf("%s got a 2xx but is not in the state: %v", id, err)
			continue
		}
		if s.Processed != 1 || s.Outcome == "" {
			t.Errorf("%s processed %d times (outcome %q), want exactly once", id, s.Processed, s.Outcome)
		}
	}
	dead, _ := st.DeadLetters()
	if len(dead) > 0 {
		t.Errorf("%d deliveries dead-lettered, first: %s", len(dead), dead[0].Reason)
	}
	t.Logf("%d of %d deliveries accepted around the kill; all processed exactly once", len(accepted), total)
}

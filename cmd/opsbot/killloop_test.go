package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The kill loop: while pins and pushes stream in, the real binary is
// killed with SIGKILL at random moments and restarted. At the end every
// accepted delivery was processed once, every PR comment was posted once
// (its hidden marker appears once), and every push was decided as it would
// have been without the kills. OPSBOT_KILL_LOOP=N sets the number of kills
// (default 5; the long run uses 20).
func TestKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// Not parallel: it rebinds a port it freed, and kills by a count of
	// answers that a busy machine may not reach.
	kills := 5
	if v, err := strconv.Atoi(os.Getenv("OPSBOT_KILL_LOOP")); err == nil && v > 0 {
		kills = v
	}
	const prs = 24
	gh := githubtest.New(t)
	gh.AddRepo(theRepo, "run-sweep.yml", 77)
	gh.AddUser("author", 5000, "User")
	gh.AddUser(maintLog, maintID, "User")
	gh.SetRole(theRepo, maintLog, "write")
	head := func(pr, n int) string { return fmt.Sprintf("%08x%032x", pr, n) }
	for pr := 1; pr <= prs; pr++ {
		gh.AddPR(theRepo, pr, "author", fmt.Sprintf("b%d", pr), head(0, 0), []string{head(pr, 1)})
		gh.AddRun(theRepo, githubtest.Run{ID: int64(1000 + pr), WorkflowID: 77, Event: "pull_request", Status: "completed",
			Conclusion: "success", HeadSHA: head(pr, 1), HeadBranch: fmt.Sprintf("b%d", pr), Artifacts: resultArtifacts})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "opsbot.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: %q
state_path: %q
github: {api_url: %q, token_env: T_TOKEN, webhook_secret_env: T_SECRET, bot_login: %q}
notices: {max_replies_per_user_per_hour: 1000000}
repos: [{name: %q, sweep_workflow: .github/workflows/run-sweep.yml}]
`, addr, filepath.Join(dir, "opsbot.db"), gh.URL, githubtest.BotLogin, theRepo)), 0o600)
	bin := buildBinary(t)
	url := "http://" + addr

	var pmu sync.Mutex
	var cur *exec.Cmd
	startProc := func() {
		cmd := exec.Command(bin, "serve", "--config", cfg, "--log-level", "error")
		cmd.Env = append(os.Environ(), "T_TOKEN=ghs_x", "T_SECRET="+testSecret)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pmu.Lock()
		cur = cmd
		pmu.Unlock()
		deadline := testkit.Deadline(t)
		for {
			if resp, err := http.Get(url + "/healthz"); err == nil {
				resp.Body.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("opsbot did not come up")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	startProc()
	t.Cleanup(func() {
		pmu.Lock()
		defer pmu.Unlock()
		cur.Process.Kill()
		cur.Wait()
	})

	// deliver posts until it gets a 2xx, as an operator redelivers, keeping the delivery id.
	var amu sync.Mutex
	accepted := map[string]bool{}
	deliver := func(event, id string, body []byte) {
		for {
			resp, err := http.DefaultClient.Do(fixtures.SignedRequest(t, url+"/webhook", event, id, body, testSecret))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					amu.Lock()
					accepted[id] = true
					amu.Unlock()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	replies := func(pr int, text string) int {
		n := 0
		for _, c := range gh.Comments(theRepo, pr) {
			if c.Login == githubtest.BotLogin && strings.Contains(c.Body, text) {
				n++
			}
		}
		return n
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for pr := 1; pr <= prs; pr++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := gh.AddComment(theRepo, pr, maintLog, fmt.Sprintf("/reuse-sweep-run %d", 1000+pr))
			p := map[string]any{"action": "created", "repository": map[string]any{"full_name": theRepo},
				"issue": map[string]any{"number": pr, "state": "open", "pull_request": map[string]any{"url": "x"}},
				"comment": map[string]any{"id": c.ID, "body": c.Body, "user": maintainer.JSON(),
					"html_url": fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", theRepo, pr, c.ID)},
				"sender": maintainer.JSON()}
			body, _ := json.Marshal(p)
			deliver("issue_comment", fmt.Sprintf("kill-c-%d", pr), body)
			// The push comes after the pin is recorded (its reply is posted).
			for replies(pr, "pinned run") == 0 {
				time.Sleep(20 * time.Millisecond)
			}
			gh.Push(theRepo, pr, []string{head(pr, 2)})
			s := map[string]any{"action": "synchronize", "number": pr, "repository": map[string]any{"full_name": theRepo},
				"pull_request": map[string]any{"number": pr, "head": map[string]any{"sha": head(pr, 2), "ref": fmt.Sprintf("b%d", pr)}}}
			body, _ = json.Marshal(s)
			deliver("pull_request", fmt.Sprintf("kill-s-%d", pr), body)
		}()
	}
	go func() { wg.Wait(); close(done) }()

	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		pmu.Lock()
		c := cur
		pmu.Unlock()
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		startProc()
	}
	select {
	case <-done:
	case <-testkit.Expired(t):
		t.Fatal("the deliveries did not all get through")
	}
	testkit.Eventually(t, "every PR's skip is announced", func() bool {
		for pr := 1; pr <= prs; pr++ {
			if replies(pr, "Sweep skipped") == 0 {
				return false
			}
		}
		return true
	})
	// The last notices of each PR (its push's status) are sent before the clean stop.
	testkit.Eventually(t, "every PR's push has its commit status", func() bool {
		for pr := 1; pr <= prs; pr++ {
			if len(gh.Statuses(theRepo, head(pr, 2))) == 0 {
				return false
			}
		}
		return true
	})
	pmu.Lock()
	cur.Process.Signal(syscall.SIGTERM)
	if err := cur.Wait(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	pmu.Unlock()

	marker := regexp.MustCompile(`<!-- opsbot:notice=(\d+)\.[0-9a-f]+ -->`)
	seen := map[string]int{}
	for pr := 1; pr <= prs; pr++ {
		if n := replies(pr, "pinned run"); n != 1 {
			t.Errorf("PR %d: %d pin replies, want 1", pr, n)
		}
		if n := replies(pr, "Sweep skipped"); n != 1 {
			t.Errorf("PR %d: %d skip comments, want 1", pr, n)
		}
		for _, c := range gh.Comments(theRepo, pr) {
			for _, m := range marker.FindAllStringSubmatch(c.Body, -1) {
				seen[m[1]]++
			}
		}
		for _, st := range gh.Statuses(theRepo, head(pr, 2)) {
			if st.Description != fmt.Sprintf("skip: reusing run %d, authorized by @maintainer", 1000+pr) {
				t.Errorf("PR %d: status %q", pr, st.Description)
			}
		}
		if n := len(gh.Statuses(theRepo, head(pr, 2))); n != 1 {
			t.Errorf("PR %d: %d statuses on its push, want 1", pr, n)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("notice %s posted %d times", id, n)
		}
	}
	st := openStore(t, filepath.Join(dir, "opsbot.db"))
	for id := range accepted {
		s, err := st.DeliveryStatus(id)
		if err != nil || s.Processed != 1 {
			t.Errorf("delivery %s: processed %d times (%v)", id, s.Processed, err)
		}
	}
	t.Logf("%d kills; %d deliveries, %d notices with markers, each once", kills, len(accepted), len(seen))
}
